"""Untrusted side: which native code the answer built and one forward called, on a CPU (no profiler names kernels
there). Runs in the submission's interpreter: what it finds is a claim, which can only spare a flag
(``no_custom_kernel``), never earn a verdict or a time.

Built by the answer: a shared library the process has mapped executable from the answer's own folders (its build's
extension folder, its working folder). A file that is no library (four bytes named ``x.so``) is never mapped, so its
presence counts for nothing. Called: a function of such a library's Python module that the forward called (what
``load_inline`` builds: a pybind11 module, whose functions are named for the module), or an operator of a namespace
the answer registered (``TORCH_LIBRARY``: none of torch's when the harness started) while such a library is mapped.
Both are seen as calls of C functions from Python (``sys.setprofile``'s ``c_call``), in the thread that runs forward.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

OPS_MODULE = "torch._ops."  # the module of a ``torch.ops.<namespace>.<op>`` function: ``torch._ops.<namespace>``


class NativeCalls:
    """Watches one forward for calls into native code the answer built (``watching``), then says which (``called``)."""

    def __init__(self, folders: list[str], namespaces: set[str]) -> None:
        self.folders = tuple(os.path.realpath(folder) + os.sep for folder in folders if folder)
        self.namespaces = namespaces  # the operator namespaces registered before any submission code ran
        self._calls: set[tuple[str, str]] = set()

    @classmethod
    def before_the_answer(cls, folders: list[str]) -> "NativeCalls":
        """Made before the answer is loaded: the operator namespaces registered then are torch's, not the answer's."""
        import torch

        return cls(folders, {name.split("::", 1)[0] for name in torch._C._dispatch_get_all_op_names()})

    @contextmanager
    def watching(self) -> Iterator[None]:
        previous = sys.getprofile()
        sys.setprofile(self._seen)
        try:
            yield
        finally:
            sys.setprofile(previous)

    def _seen(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            module = getattr(arg, "__module__", None)
            if isinstance(module, str):
                self._calls.add((module, str(getattr(arg, "__name__", "?"))))

    def built_libraries(self) -> set[str]:
        """The module names (a library file's name up to its first dot) of the libraries mapped executable from the
        answer's folders."""
        names = set()
        try:
            with open("/proc/self/maps") as maps:
                for line in maps:
                    fields = line.split(maxsplit=5)
                    if len(fields) == 6 and "x" in fields[1] and fields[5].strip().startswith(self.folders):
                        names.add(os.path.basename(fields[5].strip()).split(".", 1)[0])
        except OSError:
            pass
        return names

    def called(self) -> list[str]:
        """``module.function`` of every call the watched forward made into native code the answer built."""
        built = self.built_libraries()
        if not built:
            return []
        return sorted(f"{module}.{name}" for module, name in self._calls
                      if module in built or (module.startswith(OPS_MODULE)
                                             and module[len(OPS_MODULE):] not in self.namespaces))
