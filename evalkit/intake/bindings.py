"""Trusted side, nothing runs: whether code binds the name ``ModelNew`` (read line by line; never parsed or run).

The worker looks ``ModelNew`` up by name in the loaded module, so every statement that binds the name
counts, not only ``class ModelNew``:

- ``class ModelNew`` (the rule evalkit always had) and ``def ModelNew`` (a factory);
- an assignment: ``ModelNew = Fused``, ``ModelNew: type = Fused``, ``Model = ModelNew = Fused``,
  ``ModelNew, rest = Fused, 1``, ``(ModelNew := Fused)``;
- an import under the name: ``from k import Fused as ModelNew``, ``import k as ModelNew``, and a
  ``Fused as ModelNew,`` line of a parenthesised ``from k import (...)``. A plain ``from k import ModelNew``
  does not count: that is how a usage snippet after the answer imports the answer's own class.

At any indentation, as ``class ModelNew`` always was (a binding inside ``if`` or ``try`` counts). Not
recognised: a line that starts with ``#``, several statements on one line, and bindings through
``globals()``, ``setattr`` or ``exec``. Attribute targets (``ModelNew.forward = f``), subscripts,
keyword arguments (``f(ModelNew=1)``) and lambda parameters are not bindings.

Only lines that mention ModelNew are read, each once, with patterns that stay inside the line and have no
nested repetition: linear in the code.
"""

from __future__ import annotations

import re

_CLASS = re.compile(r"^[ \t]*class\s+ModelNew\b", re.M)
_NAME = re.compile(r"(?<![\w.])ModelNew(?![\w.])")
_DEF = re.compile(r"(?:async[ \t]+)?def[ \t]+ModelNew\b")
_IMPORT = re.compile(r"(?:from[ \t]+[\w.]+[ \t]+)?import[ \t(]")
_ITEM = re.compile(r"([\w.]+|\*)(?:[ \t]+as[ \t]+(\w+))?")  # an import item: NAME or NAME as ALIAS
_LIST_ITEM = re.compile(r"[^,]+")
_AS_MODEL_NEW = re.compile(r"\bas[ \t]+ModelNew\b")
_ANNOTATED = re.compile(r"ModelNew[ \t]*:[^=]*=(?!=)")
_WALRUS = re.compile(r"(?<![\w.])ModelNew[ \t]*:=")
_TARGETS = re.compile(r"[\w.,*()\[\] \t]*=(?!=)")  # one target list and its "=" (never "==")
_NOT_A_TARGET = re.compile(r"\w[ \t]*[(\[]|\w[ \t]+\w")  # a call, a subscript, "lambda x", "f(x"


def _import_binds(line: str) -> bool:
    """An import statement that binds ModelNew, or a ``Fused as ModelNew,`` line of a parenthesised one."""
    code = line.split("#", 1)[0]
    if _IMPORT.match(code):
        return _AS_MODEL_NEW.search(code) is not None  # in an import, "as" only ever names an alias
    found = False
    for part in _LIST_ITEM.finditer(code):  # one item at a time: a line of many items is no list of them
        text = part.group().strip(" \t()\\")
        item = _ITEM.fullmatch(text)
        if item is None and text:
            return False  # a line of a parenthesised import holds import items and nothing else
        found = found or item is not None and item.group(2) == "ModelNew"
    return found


def _assigns(line: str) -> bool:
    """``ModelNew`` among the targets of an assignment (``A = ModelNew = x``, ``ModelNew, b = x``)."""
    pos = 0
    while (match := _TARGETS.match(line, pos)) is not None:
        targets = line[pos:match.end() - 1]
        if _NOT_A_TARGET.search(targets):
            return False
        if _NAME.search(targets):
            return not line.rstrip().endswith(",")  # "ModelNew=x," is a keyword argument on its own line
        pos = match.end()
    return False


def _binds_line(line: str) -> bool:
    """Whether one stripped line binds ModelNew."""
    if not line or line[0] == "#":
        return False
    if _DEF.match(line) or _ANNOTATED.match(line) or _WALRUS.search(line):
        return True
    if (" as " in line or line.startswith(("from", "import"))) and _import_binds(line):
        return True
    return _assigns(line)


def binds_model_new(code: str) -> bool:
    """Whether ``code`` binds the name ModelNew in one of the ways the module docstring lists."""
    if "ModelNew" not in code:
        return False
    if _CLASS.search(code):
        return True
    done = -1  # end of the last line looked at: each line is read once however often it names ModelNew
    for match in _NAME.finditer(code):
        if match.start() <= done:
            continue
        start = code.rfind("\n", 0, match.start()) + 1
        done = code.find("\n", match.end())
        done = len(code) if done < 0 else done
        if _binds_line(code[start:done].strip()):
            return True
    return False
