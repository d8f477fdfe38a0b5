"""Trusted side: which kernels an answer's own code defines, read from its text before it runs. Pure functions.

A launched kernel is the answer's own when its code defines it, whatever it is called, and only its code: comments,
docstrings and strings that no compiler is given count for nothing. So a kernel is the answer's when it is

- CUDA: a ``__global__`` function in source text the answer hands a compiler (``load_inline``'s ``cuda_sources`` and
  ``cpp_sources``, CuPy's ``RawKernel`` and ``RawModule``, NVRTC, ...: ``COMPILERS``), whether the text is written in
  the call or reaches it through names, concatenations, f-strings, lists, ``.format`` or a function's return; within
  that text, C and C++ comments, string literals and ``#if 0`` blocks are left out;
- a Python function compiled for the GPU by Triton (``@triton.jit``), CuTe DSL (``@cute.kernel``) or TileLang
  (``@T.prim_func``) that the code refers to somewhere outside its own definition (launches it, or passes it on):
  a decorated stub nothing uses is no kernel of the answer's.

A kernel the code does not define is a library's: PyTorch's, cuBLAS's, cuDNN's, or Inductor's (``torch.compile``, and
Inductor's own generated code pasted into an answer: functions under ``triton_heuristics`` decorators, or inside
``async_compile`` strings, are Inductor's). The profiler's list decides which kernels ran (``plausibility``): a kernel
counts only if it was launched and its name is one of these. How each language names what it launches:

- CUDA: the function's name, demangled with its parameters (``relu_kernel(float const*, float*, long)``), a template
  (``void relu_kernel<float>(...)``) or a namespace (``ops::relu_kernel(...)``; PyTorch's ``at::native::...``
  never matches an answer's function of the same last name unless the answer's compiled source declares that
  namespace);
- Triton: the function's name;
- CuTe DSL: ``kernel_cutlass_<...>_<name>_<...>``;
- TileLang: ``<name>_kernel`` (``main_kernel`` for ``def main``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_GLOBAL = re.compile(r"\b__global__\b")
_DECLARATION = re.compile(r"[\w:<>,\s\*&]*")  # what may stand between __global__ and the kernel's name and "("
DECLARATION_CHARS = 1024  # how far after __global__ its declaration's "(" is looked for
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_NAMESPACE = re.compile(r"\bnamespace\s+([A-Za-z_]\w*)\s*\{")
_ANONYMOUS, _ANONYMOUS_WORD = "(anonymous namespace)", "anonymous-namespace"
_INDUCTOR_DECORATOR = re.compile(r"triton_heuristics|torch\._inductor")
# Calls that compile source text into GPU (or CPU) code, by the last name of what is called: every string argument
# of theirs is source (``load_inline``'s ``name`` and ``functions`` hold no ``__global__``, so they add nothing).
COMPILERS = frozenset({"load_inline", "RawKernel", "RawModule", "ElementwiseKernel", "ReductionKernel", "SourceModule",
                       "nvrtcCreateProgram", "Program", "compile_kernel", "_compile_kernel", "create_jit_fn",
                       "_create_jit_fn"})
# Calls whose result is made of their receiver's or first argument's strings.
_STRING_CALLS = frozenset({"format", "replace", "strip", "lstrip", "rstrip", "join", "dedent", "str", "format_map",
                           "encode", "decode", "upper", "lower"})
_GROWERS = frozenset({"append", "extend", "insert"})  # list methods that add strings to the list they are called on
# Comments, string and character literals in C: each alternative's characters exclude the next one's start, so a
# match never backtracks (linear in the text).
_C_NOISE = re.compile(r"//[^\n]*|/\*(?:[^*]|\*+[^*/])*\*+/|/\*.*|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?",
                      re.DOTALL)
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w+)")
_IF_ZERO = re.compile(r"[ \t]*#[ \t]*if[ \t]+0+[ \t]*(?:$|//|/\*)")
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
    """The kernels ``code`` (an answer's Python) defines; nothing for code that does not parse, or nests deeper than
    Python's own recursion allows to read."""
    try:
        return _own_kernels(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        return OwnKernels()


def _own_kernels(tree: ast.Module) -> OwnKernels:
    cuda_code = "\n".join(_c_code(text) for text in compiled_sources(tree))
    found: dict[str, set[str]] = {language: set() for language in _DECORATORS}
    for function, language in _gpu_functions(tree):
        found[language].add(function.name)
    return OwnKernels(cuda=frozenset(_global_functions(_LAUNCH_BOUNDS.sub(" ", cuda_code))),
                      cuda_namespaces=frozenset(_NAMESPACE.findall(cuda_code)), triton=frozenset(found["triton"]),
                      cute=frozenset(found["cute"]), tilelang=frozenset(found["tilelang"]))


def compiled_sources(tree: ast.Module) -> list[str]:
    """The text of every string the code hands a compiler (``COMPILERS``), as far as it can be read without running
    it: written in the call, or reaching it through names (assigned, appended, ``+=``), attributes, concatenations,
    ``%``, f-strings (their substitutions blank), lists, tuples, dicts, ``.format``, ``.join``, ``dedent`` and the
    like, conditional expressions and the returns of the code's own functions."""
    strings = _Strings(tree)
    texts: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called_name(node.func) in COMPILERS:
            for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                texts |= strings.of(argument)
    return sorted(texts)


class _Strings:
    """What each name, attribute and function of a module may hold or return, for ``compiled_sources``."""

    def __init__(self, tree: ast.Module) -> None:
        self.values: dict[str, list[ast.expr]] = {}  # "name", ".attribute" or "name()": every expression given it
        self._known: dict[str, set[str]] = {}  # what ``of`` found each of them holds
        functions = {node.name: node.args for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    self._bind(target, node.value)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returned = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None]
                self.values.setdefault(f"{node.name}()", []).extend(returned)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GROWERS:
                self._bind(node.func.value, *node.args)
            if isinstance(node, ast.Call) and _called_name(node.func) in functions:  # its arguments, to its parameters
                self._bind_arguments(functions[_called_name(node.func)], node)

    def _bind_arguments(self, parameters: ast.arguments, call: ast.Call) -> None:
        names = [a.arg for a in [*parameters.posonlyargs, *parameters.args]]
        if names[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute):
            names = names[1:]
        for name, value in zip(names, call.args):
            self.values.setdefault(name, []).append(value)
        for keyword in call.keywords:
            if keyword.arg is not None:
                self.values.setdefault(keyword.arg, []).append(keyword.value)

    def _bind(self, target: ast.expr, *values: ast.expr) -> None:
        pairs = isinstance(target, (ast.Tuple, ast.List)) and len(values) == 1 \
            and isinstance(values[0], (ast.Tuple, ast.List)) and len(values[0].elts) == len(target.elts)
        if pairs:
            for element, value in zip(target.elts, values[0].elts):
                self._bind(element, value)
        elif isinstance(target, ast.Name):
            self.values.setdefault(target.id, []).extend(values)
        elif isinstance(target, ast.Attribute):
            self.values.setdefault(f".{target.attr}", []).extend(values)

    def of(self, expr: ast.expr) -> set[str]:
        """The strings ``expr`` may evaluate to (or hold), so far as the code's text tells: string constants and
        f-strings, never concatenated (a source cut in two still shows each of its kernels whole, and the number of
        texts stays at most the number of string constants, whatever the code does to them)."""
        if isinstance(expr, ast.Constant):
            return {expr.value} if isinstance(expr.value, str) else set()
        if isinstance(expr, ast.JoinedStr):
            return {"".join(part.value if isinstance(part, ast.Constant) else " " for part in expr.values)}
        key = _key(expr)
        if key is None:
            return {text for part in _parts(expr) for text in self.of(part)}
        if key not in self._known:
            self._known[key] = set()  # a name that holds itself (``src = src + more``) adds nothing more
            self._known[key] = {text for value in self.values.get(key, []) for text in self.of(value)}
        return self._known[key]


def _key(expr: ast.expr) -> str | None:
    """The name under which ``_Strings`` keeps what ``expr`` holds: a name, an attribute, a call of a function."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return f".{expr.attr}"
    if isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)) \
            and _called_name(expr.func) not in _STRING_CALLS:
        return f"{_called_name(expr.func)}()"
    return None


def _parts(expr: ast.expr) -> list[ast.expr]:
    """The expressions whose strings make up ``expr``'s."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return [expr.left, expr.right]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        return [expr.left]
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return list(expr.elts)
    if isinstance(expr, ast.Dict):
        return list(expr.values)
    if isinstance(expr, ast.IfExp):
        return [expr.body, expr.orelse]
    if isinstance(expr, (ast.Subscript, ast.Starred)):
        return [expr.value]
    if isinstance(expr, ast.Call):  # "...".format(...), sep.join(parts), dedent(text), str(text), text.strip()
        name = _called_name(expr.func)
        if name == "join":
            return list(expr.args[:1])
        if isinstance(expr.func, ast.Attribute) and name in _STRING_CALLS:
            return [expr.func.value]
        return list(expr.args[:1]) if name in _STRING_CALLS else []
    return []


def _called_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _c_code(source: str) -> str:
    """C, C++ or CUDA ``source`` with its comments, string and character literals, and ``#if 0`` blocks blanked."""
    kept, position = [], 0
    for match in _C_NOISE.finditer(source):
        kept.append(source[position:match.start()])
        kept.append("\n" * match.group().count("\n") or " ")
        position = match.end()
    kept.append(source[position:])
    return _without_if_zero("".join(kept))


def _without_if_zero(source: str) -> str:
    """``source`` without the lines an ``#if 0`` leaves out (up to its ``#else``, ``#elif`` or ``#endif``)."""
    kept, depth = [], 0  # depth: how deep inside the conditionals of an #if 0 block, 0 outside one
    for line in source.split("\n"):
        directive = _DIRECTIVE.match(line)
        word = directive.group(1) if directive else ""
        if depth:
            if word.startswith("if"):
                depth += 1
            elif word == "endif" or (depth == 1 and word in ("else", "elif")):
                depth -= 1
            kept.append("")
            continue
        if word == "if" and _IF_ZERO.match(line):
            depth = 1
            kept.append("")
            continue
        kept.append(line)
    return "\n".join(kept)


def _global_functions(cuda_code: str) -> set[str]:
    """The names of the ``__global__`` functions ``cuda_code`` declares: the last word before the first ``(`` after
    each ``__global__``, when only a declaration's words and marks stand between (read within a bounded span, so the
    scan is linear in the text)."""
    names = set()
    for match in _GLOBAL.finditer(cuda_code):
        span = cuda_code[match.end():match.end() + DECLARATION_CHARS]
        head = span[:span.find("(")].rstrip() if "(" in span else ""
        if head and _DECLARATION.fullmatch(head):
            start = len(head)
            while start and (head[start - 1].isalnum() or head[start - 1] == "_"):
                start -= 1
            if start < len(head) and not head[start].isdigit():
                names.add(head[start:])
    return names


def _gpu_functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Each function a GPU decorator compiles, with its language, that the code refers to outside its own definition
    (a launch ``kernel[grid](...)``, ``self.kernel(...)``, passing it on)."""
    references: dict[str, list[int]] = {}  # name -> the lines of the nodes naming it
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            references.setdefault(node.id, []).append(node.lineno)
        elif isinstance(node, ast.Attribute):
            references.setdefault(node.attr, []).append(node.lineno)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (language := _gpu_language(node)):
            first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            if any(not first <= line <= (node.end_lineno or node.lineno) for line in references.get(node.name, [])):
                found.append((node, language))
    return found


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
