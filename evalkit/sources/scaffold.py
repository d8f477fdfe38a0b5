"""``evalkit problems new``: a new problem folder from templates.

Trusted side; writes problem folders / files; never runs submission code. The commented settings in the
``problem.toml`` template are generated from their declaration in ``evalkit.sources.settings``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from evalkit.sources.errors import ProblemError
from evalkit.sources.problems import REFERENCE_FILE, TOML_FILE, validate_id
from evalkit.sources.settings import commented_toml

logger = logging.getLogger(__name__)


_TEMPLATE_REFERENCE = '''\
"""{id}: describe what the model computes (this template is a Linear layer followed by ReLU)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """The reference computation; submissions must reproduce its output as `ModelNew`."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


batch_size = 16
features = 64


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features]
'''

_TEMPLATE_METADATA = '''\
# Problem metadata; every key is optional (see docs/problems.md).
title = "{id}"
source = ""            # where the problem comes from, e.g. "KernelBench v0.1 level1/19_ReLU"
# level = 1            # KernelBench level, a positive integer
tags = []
'''


def template_toml(problem_id: str) -> str:
    """The problem.toml of a new problem: its metadata, then every setting commented out."""
    return _TEMPLATE_METADATA.format(id=problem_id) + "\n" + "\n".join(commented_toml()) + "\n"


def scaffold_problem(root: Path, problem_id: str) -> Path:
    """Write ``root/<id>/`` with a template reference.py and a commented problem.toml; never overwrites."""
    folder = Path(root) / validate_id(problem_id)
    if folder.exists():
        raise ProblemError(f"{folder} already exists; refusing to overwrite it (choose another id or remove it)")
    folder.mkdir(parents=True)
    (folder / REFERENCE_FILE).write_text(_TEMPLATE_REFERENCE.format(id=problem_id), encoding="utf-8")
    (folder / TOML_FILE).write_text(template_toml(problem_id), encoding="utf-8")
    logger.info("created %s", folder)
    return folder
