"""Trusted side: which kernels an answer's own sources define, read from its text before it runs. Pure functions.

A launched kernel is the answer's own when its sources define it, whatever it is called: a CUDA ``__global__``
function in any string of the code (``load_inline``, a raw module), a Python function compiled for the GPU by Triton
(``@triton.jit``), CuTe DSL (``@cute.kernel``) or TileLang (``@T.prim_func``). A kernel the sources do not define
is a library's: PyTorch's, cuBLAS's, cuDNN's, or Inductor's (``torch.compile``, and Inductor's own generated code
pasted into an answer: functions under ``triton_heuristics`` decorators or inside ``async_compile`` strings are
Inductor's, not the answer's). How each language names what it launches:

- CUDA: the function's name, demangled with its parameters (``relu_kernel(float const*, float*, long)``), a template
  (``void relu_kernel<float>(...)``) or a namespace (``ops::relu_kernel(...)``; PyTorch's ``at::native::...``
  never matches an answer's function of the same last name unless the answer declares that namespace);
- Triton: the function's name;
- CuTe DSL: ``kernel_cutlass_<...>_<name>_<...>``;
- TileLang: ``<name>_kernel`` (``main_kernel`` for ``def main``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_GLOBAL = re.compile(r"__global__\s+[\w:<>,\s\*&]*?\b([A-Za-z_]\w*)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_NAMESPACE = re.compile(r"\bnamespace\s+([A-Za-z_]\w*)\s*\{")
_ANONYMOUS, _ANONYMOUS_WORD = "(anonymous namespace)", "anonymous-namespace"
_INDUCTOR_DECORATOR = re.compile(r"triton_heuristics|torch\._inductor")
# The decorators that compile a Python function into a GPU kernel, by language: the last name of the decorator.
_DECORATORS = {"triton": ("jit",), "cute": ("kernel",), "tilelang": ("prim_func",)}


@dataclass(frozen=True)
class OwnKernels:
    """The kernel names an answer's sources define, per language."""

    cuda: frozenset[str] = field(default_factory=frozenset)
    cuda_namespaces: frozenset[str] = field(default_factory=frozenset)
    triton: frozenset[str] = field(default_factory=frozenset)
    cute: frozenset[str] = field(default_factory=frozenset)
    tilelang: frozenset[str] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.cuda or self.triton or self.cute or self.tilelang)

    def defines(self, kernel: str) -> bool:
        """Whether the profiler's kernel name ``kernel`` is one these sources define."""
        qualified = _qualified_name(kernel)
        *namespaces, name = qualified.split("::")
        if name in self.cuda and all(n in self.cuda_namespaces or n == _ANONYMOUS_WORD for n in namespaces):
            return True
        if namespaces:
            return False
        if name in self.triton or name.removesuffix("_kernel") in self.tilelang:
            return True
        return name.startswith("kernel_cutlass_") and any(f"_{own}_" in f"{name}_" for own in self.cute)


def own_kernels(code: str) -> OwnKernels:
    """The kernels ``code`` (an answer's Python) defines; nothing for code that does not parse."""
    cuda = frozenset(_GLOBAL.findall(_LAUNCH_BOUNDS.sub(" ", code)))
    namespaces = frozenset(_NAMESPACE.findall(code))
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return OwnKernels(cuda=cuda, cuda_namespaces=namespaces)
    found: dict[str, set[str]] = {language: set() for language in _DECORATORS}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            language = _gpu_language(node)
            if language:
                found[language].add(node.name)
    return OwnKernels(cuda=cuda, cuda_namespaces=namespaces, triton=frozenset(found["triton"]),
                      cute=frozenset(found["cute"]), tilelang=frozenset(found["tilelang"]))


def _gpu_language(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The language whose decorator compiles ``function`` for the GPU; None for a plain function or Inductor's."""
    texts = [ast.unparse(decorator) for decorator in function.decorator_list]
    if any(_INDUCTOR_DECORATOR.search(text) for text in texts):
        return None
    for text in texts:
        last = re.sub(r"\(.*", "", text, flags=re.DOTALL).rsplit(".", 1)[-1]
        for language, names in _DECORATORS.items():
            if last in names and (language != "cute" or "cute" in text) and (language != "tilelang" or "T." in text
                                                                             or "tilelang" in text):
                return language
    return None


def _qualified_name(kernel: str) -> str:
    """``void ops::relu_kernel<float>(float const*, ...)`` -> ``ops::relu_kernel``."""
    head = kernel.replace(_ANONYMOUS, _ANONYMOUS_WORD).split("(", 1)[0]
    depth, kept = 0, []
    for char in head:  # drop template arguments, however nested
        depth += char == "<"
        if depth == 0:
            kept.append(char)
        depth -= char == ">" and depth > 0
    words = "".join(kept).split()
    return words[-1] if words else kernel
