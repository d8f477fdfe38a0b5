"""`benchmarks/judge_samples.py`'s sampler: every sample of the judge's thread counts once, with an answer in hand or
between answers, and a sample stands for the wall time a sampling round took, not the interval asked (reading the
stacks takes time of its own: counted at the interval, a warm round of 70.6 s on the H200 read as 43 s)."""

from __future__ import annotations

import threading
import time

from conftest import benchmark_module

# A judge's thread as the sampler recognises it: ``engine.py:_serve`` holds an answer in hand while it is in a
# function of ``device_judge.py``.
ENGINE = """
def _serve(stop, in_hand, judge):
    while not stop.is_set():
        if in_hand.is_set():
            judge(in_hand)
        else:
            sum(range(1000))
"""
DEVICE_JUDGE = """
def judge_answer(in_hand):
    while in_hand.is_set():
        sum(range(1000))
"""


def _compiled(source: str, filename: str, name: str):
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the test's own code, named as evalkit's files
    return namespace[name]


def test_each_sample_of_the_judges_thread_counts_once_and_stands_for_a_sampling_rounds_wall_time():
    judge_samples = benchmark_module("judge_samples")
    serve = _compiled(ENGINE, "engine.py", "_serve")
    judge = _compiled(DEVICE_JUDGE, "device_judge.py", "judge_answer")
    stop, in_hand = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(stop, in_hand, judge), daemon=True)
    thread.start()
    sampler = judge_samples.Sampler(0.001)
    try:
        sampler.on.set()
        while sampler.ticks < 20:
            time.sleep(0.01)
        in_hand.set()
        while sampler.busy < 20:
            time.sleep(0.01)
        sampler.on.clear()
        time.sleep(0.05)  # the round in progress ends
    finally:
        in_hand.clear()
        stop.set()
        thread.join(5)
    assert sampler.busy >= 20 and sampler.between >= 20
    assert sampler.busy + sampler.between == sampler.ticks, "the one judge's thread is read once every round"
    assert sampler.inclusive["device_judge.py:judge_answer"] == sampler.busy
    assert sampler.sample_s == sampler.sampled_s / sampler.ticks
    row = sampler.table(sampler.inclusive, 1)[0]
    assert row["s"] == round(sampler.busy * sampler.sample_s, 2) and row["share"] == 1.0
    assert {entry["function"] for entry in sampler.callees_of("engine.py:_serve", 5)} >= {"device_judge.py:judge_answer"}
