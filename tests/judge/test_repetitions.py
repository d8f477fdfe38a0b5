"""How many timed requests a timing makes and which are checked (evalkit/judge/repetitions.py): the rule
alone, driven by made-up times (a fake clock), and a secret generator the test controls."""

from __future__ import annotations

import random
import secrets
import statistics

import pytest

from evalkit.judge.repetitions import (MIN_REQUESTS, MIN_VERIFIED, VERIFIED_SHARE, RepetitionRule, Repetitions,
                                       median_interval, precise_enough, stop_reason)

RULE = RepetitionRule(min_timing_trials=10, timing_trials=100, timing_precision=0.01, timing_budget_s=10.0,
                      timing_checks=10)
CHECKS = RULE.timing_checks


def _run(rule: RepetitionRule, times_ms, wall_s, rng: random.Random | None = None) -> tuple[Repetitions, list[bool]]:
    """Feed requests until the rule stops: request i took ``wall_s(i)`` seconds and ``times_ms(i)`` per call."""
    count = Repetitions(rule, rng or random.Random(secrets.randbits(64)))
    checks = []
    while not count.done:
        i = count.requests
        checks.append(count.record(wall_s(i), times_ms(i)))
        assert count.requests <= rule.timing_trials
    return count, checks


def _noisy(i: int) -> float:
    return 1.0 if i % 2 else 2.0  # a median no number of calls pins to 1%


def test_the_medians_interval_comes_from_order_statistics():
    samples = [float(v) for v in range(1, 101)]
    random.Random(1).shuffle(samples)
    assert median_interval(samples) == (40.0, 61.0)  # ranks 50 -/+ 1.96 * sqrt(100) / 2, rounded outwards
    assert median_interval([5.0, 1.0, 3.0] * 3 + [4.0]) == (1.0, 5.0)  # ten samples: their whole range
    assert median_interval([2.0]) == (2.0, 2.0)


def test_precision_is_the_intervals_half_width_relative_to_the_median():
    tight = [100.0 + 0.1 * (i % 5) for i in range(20)]
    assert precise_enough(tight, 0.01)
    spread = [100.0 + 5 * (i % 5) for i in range(20)]
    assert not precise_enough(spread, 0.01)
    assert precise_enough(spread, 0.1)
    assert precise_enough(spread, 0.01, floor_ms=10.0)  # the clock's resolution: nothing finer is asked


def test_tight_samples_stop_at_the_minimum_by_precision():
    assert stop_reason([1.0] * 9, 0.01, RULE) is None  # precise, but fewer than min_timing_trials requests
    assert stop_reason([1.0] * 10, 0.01, RULE) == "precision"
    count, checks = _run(RULE, lambda i: 1.0 + 1e-4 * (i % 3), lambda i: 0.02)
    assert count.stopped_by == "precision"
    # at the minimum, plus only the requests the checks still needed (each of them checked)
    assert RULE.min_timing_trials <= count.requests < RULE.min_timing_trials + CHECKS
    assert sum(checks) == count.checked >= CHECKS
    assert all(checks[RULE.min_timing_trials:])


def test_noisy_samples_go_on_until_the_maximum():
    for made in range(RULE.min_timing_trials, RULE.timing_trials):
        assert stop_reason([_noisy(i) for i in range(made)], 0.01 * made, RULE) is None
    count, _ = _run(RULE, _noisy, lambda i: 0.01)
    assert (count.stopped_by, count.requests) == ("max_trials", RULE.timing_trials)


def test_noisy_samples_stop_once_the_budget_is_spent():
    count, checks = _run(RULE, _noisy, lambda i: 0.4)  # 25 requests fit the 10 s budget
    assert (count.stopped_by, count.requests) == ("budget", 25)
    assert count.spent_s == pytest.approx(10.0)
    assert count.checked >= CHECKS


def test_a_slow_answer_costs_seconds_not_minutes():
    # 2.3 s a request: the budget ends the timing after 5 requests (11.5 s), not 100 (230 s)
    count, checks = _run(RULE, lambda i: 2300.0 + 50 * (i % 2), lambda i: 2.3)
    assert (count.stopped_by, count.requests) == ("budget", 5)
    # the budget affords 4 requests at this pace, so 4 checks are asked for: each request is checked
    # until they are made (the draw may add the fifth)
    assert count.checked >= 4 and all(checks[:4])
    # slower still: the budget lowers the minimum, down to MIN_REQUESTS requests
    count, checks = _run(RULE, lambda i: 30_000.0, lambda i: 30.0)
    assert (count.stopped_by, count.requests, count.checked) == ("budget", MIN_REQUESTS, MIN_VERIFIED)


def test_a_maximum_below_the_minimum_wins():
    rule = RepetitionRule(min_timing_trials=10, timing_trials=3, timing_precision=0.01, timing_budget_s=10.0,
                          timing_checks=10)
    count, checks = _run(rule, lambda i: 1.0, lambda i: 0.01)
    assert count.requests == 3 and count.stopped_by == "precision" and checks == [True] * 3


def test_the_rule_refuses_nonsense():
    for bad in ({"timing_trials": 0}, {"timing_precision": 0.0}, {"timing_precision": float("nan")},
                {"timing_budget_s": 0.0}, {"timing_checks": 0}):
        with pytest.raises(ValueError):
            RepetitionRule(**{"min_timing_trials": 10, "timing_trials": 100, "timing_precision": 0.01,
                              "timing_budget_s": 10.0, "timing_checks": 10, **bad})


class Never(random.Random):  # the worst luck: the secret draw never picks a request
    def random(self) -> float:
        return 1.0


def test_fewer_timing_checks_check_fewer_requests_and_never_fewer_than_asked():
    # A short timing (an RL setting: 10 requests at most) checks every request at the default, and with
    # timing_checks 3 only the three it must, whatever the draws; with the draws, about a quarter of the rest.
    fast = dict(min_timing_trials=10, timing_trials=10, timing_precision=0.01, timing_budget_s=10.0)
    count, checks = _run(RepetitionRule(**fast, timing_checks=10), _noisy, lambda i: 0.01, Never())
    assert (count.requests, sum(checks)) == (10, 10)
    count, checks = _run(RepetitionRule(**fast, timing_checks=3), _noisy, lambda i: 0.01, Never())
    assert (count.requests, sum(checks)) == (10, 3) and checks[-3:] == [True] * 3  # forced once they must be
    for seed in range(50):
        count, checks = _run(RepetitionRule(**fast, timing_checks=3), _noisy, lambda i: 0.01, random.Random(seed))
        assert 3 <= sum(checks) == count.checked <= 10
    # below the floor, the floor: a timing never ends with fewer than MIN_VERIFIED checked requests
    count, checks = _run(RepetitionRule(**fast, timing_checks=1), _noisy, lambda i: 0.01, Never())
    assert sum(checks) == MIN_VERIFIED


@pytest.mark.parametrize("times_ms, wall_s, least", [
    (lambda i: 1.0, lambda i: 0.02, CHECKS),  # stops by precision
    (_noisy, lambda i: 0.01, CHECKS),  # runs to the maximum
    (_noisy, lambda i: 0.4, CHECKS),  # the budget affords 25 requests
    (_noisy, lambda i: 4.0, MIN_VERIFIED),  # the budget affords 2 requests: at least 3 are made and checked
])
def test_the_checked_count_is_guaranteed_whatever_the_draws(times_ms, wall_s, least):
    count, checks = _run(RULE, times_ms, wall_s, Never())
    assert sum(checks) == count.checked >= least
    for seed in range(20):
        count, checks = _run(RULE, times_ms, wall_s, random.Random(seed))
        assert sum(checks) == count.checked >= least


def test_every_request_is_checked_at_least_at_the_share_whatever_came_before():
    # Far from any stop (noisy times, ample budget), whether a request is checked is the secret draw alone:
    # about VERIFIED_SHARE of them, independent of the request before.
    rule = RepetitionRule(min_timing_trials=10, timing_trials=4000, timing_precision=0.01, timing_budget_s=1e9,
                          timing_checks=10)
    _, checks = _run(rule, _noisy, lambda i: 0.001)
    early = checks[:3900]
    assert statistics.fmean(early) == pytest.approx(VERIFIED_SHARE, abs=0.04)
    after_checked = [b for a, b in zip(early, early[1:]) if a]
    after_unchecked = [b for a, b in zip(early, early[1:]) if not a]
    assert statistics.fmean(after_checked) == pytest.approx(VERIFIED_SHARE, abs=0.06)
    assert statistics.fmean(after_unchecked) == pytest.approx(VERIFIED_SHARE, abs=0.04)


def test_which_requests_are_checked_comes_from_the_secret_generator_not_the_times():
    # The same times (all the worker could know or shape) with two generators: different checks;
    # the same generator state: the same checks. Nothing else decides them.
    def checks_with(seed: int) -> list[bool]:
        return _run(RULE, _noisy, lambda i: 0.01, random.Random(seed))[1]

    assert checks_with(1) == checks_with(1)
    assert checks_with(1) != checks_with(2)
    assert len({tuple(checks_with(secrets.randbits(64))) for _ in range(5)}) == 5


def test_judge_settings_carry_the_rule_with_problem_tomls_defaults():
    import dataclasses

    from evalkit.judge.submission_judge import JudgeSettings
    from evalkit.sources.settings import ProblemSettings

    settings = JudgeSettings(atol=1e-2, rtol=1e-2, correctness_trials=5, timing_trials=100, warmup_trials=5,
                             run_timeout_s=None, seed=1)  # a constructor from before the rule adapted
    declared = ProblemSettings()
    assert settings.repetitions() == RepetitionRule(min_timing_trials=declared.min_timing_trials, timing_trials=100,
                                                    timing_precision=declared.timing_precision,
                                                    timing_budget_s=declared.timing_budget_s,
                                                    timing_checks=declared.timing_checks)
    assert (declared.timing_trials, declared.min_timing_trials, declared.timing_precision,
            declared.timing_budget_s, declared.timing_checks) == (100, 10, 0.01, 10.0, 10)
    # a cached baseline is keyed by every setting that shapes its timing
    keys = {dataclasses.replace(settings, **change).timing_key() for change in
            ({}, {"timing_budget_s": 5.0}, {"timing_precision": 0.02}, {"min_timing_trials": 20},
             {"timing_trials": 50}, {"warmup_trials": 1}, {"timing_checks": 3})}
    assert len(keys) == 7
