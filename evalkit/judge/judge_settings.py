"""Trusted side: how one problem's answers are judged, as the judge reads it: the problem's settings as the run's
plan resolved them, and the run's seed (``JudgeSettings``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from evalkit.judge.repetitions import RepetitionRule
from evalkit.sources.settings import TIMING_KEYS, JudgingPlan, ProblemSettings


@dataclass(frozen=True, kw_only=True)
class JudgeSettings(ProblemSettings):
    """How one problem's answers (and its baselines) are judged: its settings as the run's plan resolved them
    (``evalkit.sources.settings.JudgingPlan``: problem.toml's, each override applied, atol and rtol filled in), declared
    once by ``ProblemSettings``, and the run's seed."""

    atol: float  # resolved: the plan fills in the precision's where the problem and the run give none
    rtol: float
    seed: int
    time_submissions: bool = True

    @classmethod
    def of(cls, plan: JudgingPlan, seed: int) -> "JudgeSettings":
        """The settings ``plan`` resolved, with the run's ``seed``."""
        return cls(**{f.name: getattr(plan.settings, f.name) for f in fields(ProblemSettings)}, seed=seed)

    def repetitions(self) -> RepetitionRule:
        """When a timing stops (docs/judge.md, How many calls)."""
        return RepetitionRule(min_timing_trials=self.min_timing_trials, timing_trials=self.timing_trials,
                              timing_precision=self.timing_precision, timing_budget_s=self.timing_budget_s,
                              timing_checks=self.timing_checks)

    def timing_key(self) -> str:
        """The settings that shape a timing (declared so: ``sources.settings.TIMING_KEYS``), as text: part of a
        cached baseline's key."""
        return " ".join(f"{key} {value:g}" if isinstance(value := getattr(self, key), (int, float)) else f"{key} {value}"
                        for key in TIMING_KEYS)
