"""Trusted side: the Python API, for training loops and notebooks that want a verdict without a report folder.

    from evalkit import Evaluator
    with Evaluator(problems="problems/", device="auto") as ev:
        row = ev.judge("alexnet_conv1", answer_text)        # the same dict as a results.jsonl row
        for row in ev.judge_many(pairs):                     # (problem_id, text) pairs; rows as they complete
            ...

An ``Evaluator`` runs the same engine as ``evalkit score`` (``evalkit.schedule.engine``): the same sandbox,
judges (one per GPU, or ``judges=N`` on CPU), build cache and baseline cache, kept across calls. It holds
no global state and installs no signal handler; ``close()`` (or leaving the ``with`` block) ends every
sandbox it started. Whatever an answer does, it comes back as a row (``verdict`` says what happened); only
a caller's own mistake raises (an unknown problem id, a bad setting).
"""

from __future__ import annotations

import itertools
import logging
import uuid
import weakref
from pathlib import Path
from typing import Any, Iterable, Iterator

from evalkit.records import Submission

logger = logging.getLogger(__name__)

API_RUN = "api"  # the ``run`` field of the API's rows


class Evaluator:
    """Judges answers to the problems under ``problems``; reuse one across calls (builds, baselines and judges
    are kept). Keyword settings are those of ``evalkit score`` (``evalkit.schedule.options.JudgeOptions``:
    ``gpus``, ``judges``, ``jobs``, ``trials``, ``timing_trials``, ``timing_budget_s``, ``atol``, ``rtol``,
    ``timeout_s``, ``baselines``, ``cache_dir``, ``seed`` ...)."""

    def __init__(self, problems: str | Path = "problems", device: str = "auto", **settings: Any) -> None:
        from evalkit.judge.environment import environment
        from evalkit.schedule.engine import Engine
        from evalkit.schedule.machines import machines
        from evalkit.schedule.options import JudgeOptions, default_limits
        from evalkit.schedule.station import BaselineFiles
        from evalkit.sources.problems import discover_problems

        if isinstance(settings.get("baselines"), list):
            settings["baselines"] = tuple(settings["baselines"])
        if settings.get("cache_dir") is not None:
            settings["cache_dir"] = Path(settings["cache_dir"])
        self.options = JudgeOptions(device=device, **{k: v for k, v in settings.items() if v is not None})
        where = machines(self.options)
        self.device = where.device
        self.problems = discover_problems(Path(problems))
        self.seed = self.options.seed if self.options.seed is not None else uuid.uuid4().int % 2**31
        limits = default_limits(self.device, self.options.memory_gib, cache_dir=self.options.cache_dir)
        cache = self.options.cache_dir / "baselines.json"
        baselines = BaselineFiles(None, cache, remeasure=self.options.remeasure_baselines, run=limits.group)
        facts = where.environment or environment()
        self._engine = Engine(self.problems, self.options, self.device, self.seed, limits, baselines,
                              facts.get("driver"), where.placement, backend=where.backend)
        self._finalizer = weakref.finalize(self, _shut_down, self._engine)
        self._samples = itertools.count()

    def judge(self, problem_id: str, text: str, *, sample: str | None = None) -> dict[str, Any]:
        """The row of one answer to ``problem_id`` (a dict, as in ``results.jsonl``)."""
        return next(iter(self.judge_many([(problem_id, text, sample)] if sample else [(problem_id, text)])))

    def judge_many(self, pairs: Iterable[tuple[str, str] | tuple[str, str, str]]) -> Iterator[dict[str, Any]]:
        """Rows of (problem_id, text) or (problem_id, text, sample) answers, in the order they are decided (match
        them by ``sample``: "api-N" in the order given, unless named). Every problem id is checked here, before
        anything is built. One batch at a time per evaluator: consume (or close) one before starting another."""
        submissions = [self._submission(*pair) for pair in pairs]
        return self._rows(submissions)

    def _rows(self, submissions: list[Submission]) -> Iterator[dict[str, Any]]:
        from evalkit.schedule.local import with_origin

        for row in self._engine.judge((submission, []) for submission in submissions):
            yield with_origin(row, self.problems.get(row.problem)).to_dict()

    def close(self) -> None:
        """End every sandbox and judge process this evaluator started (also done on leaving ``with``)."""
        self._finalizer()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _submission(self, problem_id: str, text: str, sample: str | None = None) -> Submission:
        from evalkit.sources.problems import unknown_problem

        if problem_id not in self.problems:
            raise unknown_problem(problem_id, self.problems)
        if not isinstance(text, str):
            raise TypeError(f"the answer to {problem_id!r} must be a str, not {type(text).__name__}")
        name = sample or f"api-{next(self._samples)}"
        return Submission(run=API_RUN, problem=problem_id, sample=name, path=f"<api:{name}>", text=text)


def _shut_down(engine: Any) -> None:
    from evalkit.sandbox.launcher import kill_group

    try:
        engine.close(abandon=True)
    finally:
        kill_group(engine.limits.group)
