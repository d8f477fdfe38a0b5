"""evalkit.intake.bindings: every way code binds the name ModelNew, and what only looks like one."""

from __future__ import annotations

import pytest

from evalkit.intake.bindings import binds_model_new
from evalkit.intake.extract import extract

HEAD = "import torch.nn as nn\n\nclass Fused(nn.Module):\n    pass\n\n"

BINDS = {
    "class": "class ModelNew(nn.Module):\n    pass\n",
    "assignment": "ModelNew = Fused\n",
    "assignment without spaces": "ModelNew=Fused\n",
    "annotated": "ModelNew: type = Fused\n",
    "annotated generic": "ModelNew: type[nn.Module] = Fused  # the alias the judge loads\n",
    "chained": "Model = ModelNew = Fused\n",
    "chained last": "ModelNew = Model = Fused\n",
    "tuple": "ModelNew, helper = Fused, None\n",
    "tuple second": "helper, ModelNew = None, Fused\n",
    "parenthesised tuple": "(helper, ModelNew) = (None, Fused)\n",
    "starred": "*rest, ModelNew = [1, Fused]\n",
    "walrus": "(ModelNew := Fused)\n",
    "factory def": "def ModelNew(*args):\n    return Fused(*args)\n",
    "async def": "async def ModelNew():\n    pass\n",
    "from import as": "from fused_kernels import FusedScaleReLU as ModelNew\n",
    "from import among others": "from fused_kernels import helper, FusedScaleReLU as ModelNew, other\n",
    "relative import": "from .kernels import Fused as ModelNew\n",
    "import as": "import fused_kernels as ModelNew\n",
    "parenthesised import": "from fused_kernels import (\n    helper,\n    FusedScaleReLU as ModelNew,\n)\n",
    "one-line parenthesised import": "from fused_kernels import (FusedScaleReLU as ModelNew)\n",
    "inside try": "try:\n    from fused import Fast as ModelNew\nexcept ImportError:\n    ModelNew = Fused\n",
    "inside if": "if True:\n    ModelNew = Fused\n",
}

NOT_BINDS = {
    "no mention": "x = 1\n",
    "a call": "model = ModelNew()\n",
    "an argument": "print(ModelNew, Fused)\n",
    "attribute target": "ModelNew.forward = Fused.forward\n",
    "attribute of another": "self.ModelNew = Fused\n",
    "keyword argument": "registry = dict(ModelNew=Fused)\n",
    "keyword argument on its own line": "registry = dict(\n    ModelNew=Fused,\n)\n",
    "subscript target": "table[ModelNew] = 1\n",
    "comparison": "ModelNew == Fused\n",
    "lambda parameter": "f = lambda ModelNew=1: ModelNew\n",
    "comment": "# ModelNew = Fused\n",
    "import under another name": "from fused_kernels import ModelNew as Other\n",
    "import of the name itself": "from solution import ModelNew\n",
    "import of a module named so": "import ModelNew\n",
    "import of a submodule": "import kernels.ModelNew\n",
    "longer name": "ModelNewer = Fused\nclass ModelNewV2:\n    pass\n",
    "annotation only": "ModelNew: type\n",
    "with as": "with open(path) as ModelNew:\n    pass\n",
    "prose": "The ModelNew class wraps Fused, imported as ModelNew later.\n",
}


@pytest.mark.parametrize("code", BINDS.values(), ids=BINDS)
def test_binds(code: str) -> None:
    assert binds_model_new(HEAD + code)


@pytest.mark.parametrize("code", NOT_BINDS.values(), ids=NOT_BINDS)
def test_does_not_bind(code: str) -> None:
    assert not binds_model_new(HEAD + code)


def test_a_line_that_binds_after_lines_that_do_not() -> None:
    code = "m = ModelNew()  # ModelNew, ModelNew\n" * 3 + "ModelNew = Fused\n"
    assert binds_model_new(code)


@pytest.mark.parametrize("code", [BINDS["assignment"], BINDS["from import as"], BINDS["walrus"]],
                         ids=["assignment", "import alias", "walrus"])
def test_an_alias_block_is_extracted(code: str) -> None:
    result = extract("Final answer:\n```python\n" + HEAD + code + "```\n")
    assert result.ok and result.code == HEAD + code and result.candidates[0]["defines_model_new"]


def test_a_block_that_only_uses_model_new_is_not_chosen() -> None:
    usage = "model = ModelNew(3)\nprint(model)\n"
    text = "```python\n" + HEAD + "ModelNew = Fused\n```\nUsage:\n```python\n" + usage + "```\n"
    result = extract(text)
    assert result.block.index == 0 and result.candidates[1]["why"] == "does not define class ModelNew"


def test_a_usage_snippet_importing_model_new_is_not_chosen() -> None:
    usage = "from solution import ModelNew\n\nmodel = ModelNew().cuda()\n"
    text = "Final code:\n```python\n" + HEAD + "ModelNew = Fused\n```\nUse it like this:\n```python\n" + usage + "```\n"
    result = extract(text)
    assert result.ok and result.block.index == 0 and not result.candidates[1]["defines_model_new"]


def test_whole_python_file_with_an_alias() -> None:
    result = extract(HEAD + "ModelNew = Fused\n")
    assert result.ok and result.whole_text
