"""Build the curated solutions and the bench libraries from one set of kernel sources.

    python3 benchmarks/solutions/gen.py solutions   # write problems/<id>/solutions/<name>.py
    python3 benchmarks/solutions/gen.py libs        # nvcc each variant into benchmarks/solutions/build/<v>.so
    python3 benchmarks/solutions/gen.py verify RESULTS.jsonl  # solution files vs the code an evalkit run judged

A solution file is: a header (idea, measured time, bound, precision, error), imports, the CUDA source
(kernels/common.cuh + kernels/<variant>.cu + a torch wrapper, inlined), load_inline, and ModelNew.
The bench library is the same kernels/<variant>.cu behind a C ABI (kernels/cexport.cu) for ctypes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
BUILD = HERE / "build"
ROOT = HERE.parent.parent

VARIANTS = sorted(p.stem for p in KERNELS.glob("*.cu") if p.stem not in ("cexport", "test_mma"))

TORCH_WRAPPER = r'''
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

static const float* opt_ptr(const torch::Tensor& t, const char* name) {
  if (t.numel() == 0) return nullptr;
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.is_contiguous(), name,
              " must be a contiguous float32 CUDA tensor");
  return t.data_ptr<float>();
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, torch::Tensor beta) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "x must be a float32 CUDA tensor");
  TORCH_CHECK(x.dim() == 4, "x must be 4-D");
  for (int i = 0; i < 4; ++i)
    TORCH_CHECK(x.size(i) == sol::IN_SHAPE[i], "these kernels are specialised to the problem's input shape; dim ", i,
                " is ", x.size(i), ", expected ", sol::IN_SHAPE[i]);
  const c10::cuda::CUDAGuard guard(x.device());
  if (!x.is_contiguous()) x = x.contiguous();
  w = w.contiguous(); b = b.contiguous(); gamma = gamma.contiguous(); beta = beta.contiguous();
  std::vector<int64_t> shape(sol::OUT_SHAPE, sol::OUT_SHAPE + sol::OUT_NDIM);
  torch::Tensor out = sol::IN_PLACE ? x : torch::empty(shape, x.options());
  torch::Tensor ws = torch::empty({(int64_t)sol::ws_bytes()}, x.options().dtype(at::kByte));
  cudaError_t e = sol::launch(x.data_ptr<float>(), opt_ptr(w, "w"), opt_ptr(b, "bias"), opt_ptr(gamma, "gamma"),
                              opt_ptr(beta, "beta"), out.data_ptr<float>(), ws.data_ptr(),
                              c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(e == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(e));
  return out;
}
'''

CPP_DECL = ("torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor gamma, "
            "torch::Tensor beta);")

# problem id -> list of (solution file stem, variant, python body)
MODELS = {
    "conv2d_square_input_square_kernel": '''
class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        if (in_channels, out_channels, kernel_size, stride, padding, dilation, groups) != (16, 128, 3, 1, 0, 1, 1):
            raise ValueError("this solution is specialised to Conv2d(16, 128, 3) with stride 1, no padding")
        self.conv2d = nn.Conv2d(in_channels, out_channels, (kernel_size, kernel_size), stride=stride,
                                padding=padding, dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            empty = x.new_empty(0)
            bias = self.conv2d.bias if self.conv2d.bias is not None else empty
            return _ext.forward(x, self.conv2d.weight, bias, empty, empty)
''',
    "conv2d_asymmetric_input_asymmetric_kernel": '''
class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: tuple = (1, 1),
                 padding: tuple = (0, 0), dilation: tuple = (1, 1), groups: int = 1, bias: bool = False):
        super().__init__()
        if (in_channels, out_channels, tuple(kernel_size), tuple(stride), tuple(padding), tuple(dilation),
                groups) != (64, 128, (5, 7), (1, 1), (0, 0), (1, 1), 1):
            raise ValueError("this solution is specialised to Conv2d(64, 128, (5, 7)) with stride 1, no padding")
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                dilation=dilation, groups=groups, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            empty = x.new_empty(0)
            bias = self.conv2d.bias if self.conv2d.bias is not None else empty
            return _ext.forward(x, self.conv2d.weight, bias, empty, empty)
''',
    "convtranspose2d_gelu_groupnorm": '''
class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super().__init__()
        if (in_channels, out_channels, kernel_size, stride, num_groups) != (64, 64, 3, 1, 8):
            raise ValueError("this solution is specialised to ConvTranspose2d(64, 64, 3, stride=1), GroupNorm(8, 64)")
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        with torch.no_grad():
            assert self.group_norm.eps == 1e-5
            return _ext.forward(x, self.conv_transpose.weight, self.conv_transpose.bias, self.group_norm.weight,
                                self.group_norm.bias)
''',
    "convtranspose2d_gelu_groupnorm/cudnn": '''
class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super().__init__()
        if (in_channels, out_channels, kernel_size, stride, num_groups) != (64, 64, 3, 1, 8):
            raise ValueError("this solution is specialised to ConvTranspose2d(64, 64, 3, stride=1), GroupNorm(8, 64)")
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        with torch.no_grad():
            assert self.group_norm.eps == 1e-5
            y = self.conv_transpose(x)  # cuDNN (PyTorch defaults: TF32)
            empty = x.new_empty(0)
            return _ext.forward(y, empty, empty, self.group_norm.weight, self.group_norm.bias)  # in place on y
''',
    "conv2d_gelu_globalavgpool": '''
class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        if (in_channels, out_channels, kernel_size) != (8, 64, 3):
            raise ValueError("this solution is specialised to Conv2d(8, 64, 3)")
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        with torch.no_grad():
            empty = x.new_empty(0)
            return _ext.forward(x, self.conv.weight, self.conv.bias, empty, empty)
''',
    "alexnet_conv1": '''
class ModelNew(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=96, kernel_size=11, stride=4, padding=2)

    def forward(self, x):
        with torch.no_grad():
            empty = x.new_empty(0)
            return _ext.forward(x, self.conv1.weight, self.conv1.bias, empty, empty)
''',
}

# solution file -> (problem id, variant, model key, header)
SOLUTIONS = {
    "conv2d_square_input_square_kernel/tf32_implicit_gemm.py":
        ("conv63_tf32_defer", "conv2d_square_input_square_kernel"),
    "conv2d_square_input_square_kernel/fp16_implicit_gemm.py":
        ("conv63_f16_stg", "conv2d_square_input_square_kernel"),
    "conv2d_asymmetric_input_asymmetric_kernel/fp16_implicit_gemm.py":
        ("conv56_f16_stg", "conv2d_asymmetric_input_asymmetric_kernel"),
    "convtranspose2d_gelu_groupnorm/tf32_fused_gelu_groupnorm.py":
        ("convT19_tf32_2b", "convtranspose2d_gelu_groupnorm"),
    "convtranspose2d_gelu_groupnorm/tf32_fused_fastgelu_groupnorm.py":
        ("convT19_tf32_2b_fg", "convtranspose2d_gelu_groupnorm"),
    "convtranspose2d_gelu_groupnorm/cudnn_convT_fused_gelu_groupnorm.py":
        ("gn19_cudnn", "convtranspose2d_gelu_groupnorm/cudnn"),
    "conv2d_gelu_globalavgpool/tf32_fused_conv_fastgelu_mean.py": ("conv67_tf32_fg", "conv2d_gelu_globalavgpool"),
    "alexnet_conv1/tf32_implicit_gemm.py": ("conv50_tf32", "alexnet_conv1"),
}

HEADERS_FILE = HERE / "headers.py"  # per solution: the header text (filled in from measurements)


def inline_source(path: Path, seen: set[Path] | None = None) -> str:
    """The file with its local #include "..." lines replaced by the files' text (each once)."""
    seen = set() if seen is None else seen
    out = []
    for line in path.read_text().splitlines():
        m = re.match(r'\s*#include\s+"([^"]+)"', line)
        if m:
            inc = (path.parent / m.group(1)).resolve()
            if inc not in seen:
                seen.add(inc)
                out.append(inline_source(inc, seen))
            continue
        if line.strip() == "#pragma once":
            continue
        out.append(line)
    return "\n".join(out)


def solution_text(stem: str, variant: str, model_key: str, header: str) -> str:
    cuda = "#include <torch/extension.h>\n" + inline_source(KERNELS / f"{variant}.cu") + "\n" + TORCH_WRAPPER
    assert '"""' not in cuda and "```" not in cuda
    ext_name = f"evalkit_curated_{variant}"
    return (f'{header.rstrip()}\n\nimport torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n'
            f'CUDA_SRC = r"""{cuda}"""\n\nCPP_SRC = "{CPP_DECL}"\n\n'
            f'_ext = load_inline(name="{ext_name}", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["forward"],\n'
            f'                   extra_cuda_cflags=["-O3"], verbose=False)\n'
            f'{MODELS[model_key]}')


def write_solutions() -> None:
    sys.path.insert(0, str(HERE))
    from headers import HEADERS  # noqa: E402

    for rel, (variant, model_key) in SOLUTIONS.items():
        problem, name = rel.split("/")
        path = ROOT / "problems" / problem / "solutions" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        header = HEADERS.get(rel, f"# Curated solution candidate ({variant}); header pending measurement.\n")
        path.write_text(solution_text(path.stem, variant, model_key, header))
        print("wrote", path.relative_to(ROOT))


def build_lib(variant: str) -> str:
    BUILD.mkdir(exist_ok=True)
    cmd = ["nvcc", "-std=c++17", "-O3", "-arch=sm_90", "-Xptxas", "-v", "-shared", "-Xcompiler", "-fPIC",
           "-cudart", "static", f'-DSOL_FILE="{variant}.cu"', "-o", str(BUILD / f"{variant}.so"),
           str(KERNELS / "cexport.cu")]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=KERNELS)
    (BUILD / f"{variant}.log").write_text(res.stdout + res.stderr)
    return f"{variant}: {'ok' if res.returncode == 0 else 'FAILED'}"


def build_libs(variants: list[str]) -> None:
    with ThreadPoolExecutor(2) as pool:
        for line in pool.map(build_lib, variants):
            print(line)
    subprocess.run(["nvcc", "-std=c++17", "-O3", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-cudart", "static",
                    "-o", str(BUILD / "test_mma.so"), str(KERNELS / "test_mma.cu")], check=True)


def verify(results: str) -> None:
    """For each solution file: was this exact code (ignoring the leading header comment) judged in RESULTS?"""
    import hashlib
    import json

    def body(text: str) -> str:
        lines = text.splitlines()
        i = 0
        while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
            i += 1
        return "\n".join(lines[i:])

    judged = {}
    for line in Path(results).read_text().splitlines():
        row = json.loads(line)
        judged[row["path"]] = row
    for path in sorted((ROOT / "problems").glob("*/solutions/*.py")):
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        row = judged.get(rel)
        if row is None:
            print(f"{rel}: not in {results}")
            continue
        same_file = hashlib.sha256(text.encode()).hexdigest() == row["sha256"]
        same_code = body(text) == body(row["extraction"]["code"])
        print(f"{rel}: {row['verdict']}; file {'identical' if same_file else 'differs'}; "
              f"code below the header {'identical' if same_code else 'DIFFERS'}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "solutions"
    if what == "solutions":
        write_solutions()
    elif what == "libs":
        build_libs(sys.argv[2:] or VARIANTS)
    elif what == "verify":
        verify(sys.argv[2])
    else:
        raise SystemExit(__doc__)
