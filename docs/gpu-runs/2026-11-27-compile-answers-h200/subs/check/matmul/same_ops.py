import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a @ b  # PyTorch's own matmul: no custom kernel
