"""On a CPU an answer's own kernel is native code it built and called, never a file's presence (issue 42, F: a four-byte
``x.so`` written at import passed for an extension). A stdlib extension module copied into an answer's folder stands in
for one it built: it counts only once mapped into the process and called during the watched forward."""

from __future__ import annotations

import importlib.util
import shutil
import sys

from evalkit.sandbox.untrusted.native_calls import NativeCalls


def _load_copy(module: object, folder) -> object:
    """A copy of the extension ``module`` loaded from ``folder``, as torch loads an answer's built extension."""
    copy = folder / module.__name__ / module.__file__.rsplit("/", 1)[1]
    copy.parent.mkdir(parents=True)
    shutil.copy(module.__file__, copy)
    spec = importlib.util.spec_from_file_location(module.__name__, copy)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_a_file_named_like_a_library_is_no_native_code(tmp_path):
    (tmp_path / "x.so").write_bytes(b"\x7fELF")
    watcher = NativeCalls([str(tmp_path)], set())
    with watcher.watching():
        sorted([3, 1, 2])
    assert watcher.built_libraries() == set() and watcher.called() == []


def test_a_function_of_a_library_the_answer_built_counts_once_called(tmp_path):
    import _heapq

    built = _load_copy(_heapq, tmp_path / "extensions")
    watcher, before = NativeCalls([str(tmp_path / "extensions")], set()), sys.getprofile()
    assert watcher.built_libraries() == {"_heapq"}  # mapped from the answer's folder
    with watcher.watching():
        sorted([3, 1, 2])  # loaded, but nothing of it called
    assert watcher.called() == []
    with watcher.watching():
        built.heappush([], 1)
    assert watcher.called() == ["_heapq.heappush"]
    assert sys.getprofile() is before  # the watch ends with the forward


def test_libraries_mapped_from_elsewhere_are_not_the_answers(tmp_path):
    import _bisect

    watcher = NativeCalls([str(tmp_path)], set())
    with watcher.watching():
        _bisect.bisect_left([1, 2, 3], 2)  # the interpreter's own extension, not in the answer's folders
    assert watcher.called() == []
