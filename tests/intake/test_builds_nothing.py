"""Which answers skip the build sandbox: those whose code can build or load nothing native at import; anything that
names a compiler, an extension loader, a native library or dynamic code still gets it."""

from __future__ import annotations

import pytest

from evalkit.intake.static_scan import builds_nothing

PLAIN = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n{body}\n"


@pytest.mark.parametrize("body", [
    "        return torch.relu(x)",
    "        import triton  # a JIT compiles at the first call, under the judge's first-call limit\n"
    "        return x",
])
def test_plain_pytorch_and_first_call_jits_build_nothing(body):
    assert builds_nothing(PLAIN.format(body=body))


@pytest.mark.parametrize("body", [
    "        from torch.utils.cpp_extension import load_inline",
    "        torch.utils.cpp_extension.load(name='x', sources=['x.cu'])",
    "        import ctypes; ctypes.CDLL('libx.so')",
    "        import subprocess; subprocess.run(['nvcc', 'x.cu'])",
    "        import os; os.system('make')",
    "        __import__('torch.utils.cpp_' + 'extension')",
    "        exec(open('hidden.py').read())",
    "        import cupy",
    "        return torch.compile(torch.relu)(x)",
])
def test_anything_that_may_build_or_hide_a_build_gets_the_sandbox(body):
    assert not builds_nothing(PLAIN.format(body=body))
