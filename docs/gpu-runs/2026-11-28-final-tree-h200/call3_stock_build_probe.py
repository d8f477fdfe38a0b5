"""Does stock torch build a load_inline answer whose C++ source includes cuda_runtime.h (as a seed does)?"""
import os, shutil, sys, tempfile, time
from torch.utils import cpp_extension as ce
print("CUDA_HOME", ce.CUDA_HOME, "env CUDA_HOME", os.environ.get("CUDA_HOME"), "nvcc", shutil.which("nvcc"))
inc = os.path.join(ce.CUDA_HOME or "", "include", "cuda_runtime.h")
print("exists", inc, os.path.exists(inc))
print("include_paths(cuda)", ce.include_paths("cuda"))
cpp = "#include <torch/extension.h>\n#include <cuda_runtime.h>\ntorch::Tensor twice(torch::Tensor x);\n"
cu = ("#include <torch/extension.h>\n__global__ void k(float* y, const float* x, int n){int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) y[i]=2*x[i];}\n"
      "torch::Tensor twice(torch::Tensor x){auto y=torch::empty_like(x); int n=x.numel(); k<<<(n+255)/256,256>>>(y.data_ptr<float>(), x.data_ptr<float>(), n); return y;}\n")
d = tempfile.mkdtemp()
t = time.time()
try:
    m = ce.load_inline("twice_probe", cpp_sources=cpp, cuda_sources=cu, functions=["twice"], build_directory=d, verbose=False)
    import torch
    x = torch.arange(4., device="cuda"); print("built in %.1f s" % (time.time() - t), m.twice(x).tolist())
except Exception as err:
    print("FAILED", type(err).__name__, str(err)[-600:])
