"""A judge keeps the problems it loaded lately: going back to one loads nothing again (its reference, its
timed facts, its float64 outputs), within bounds: past their number the least recently used goes, past a memory
bound the one holding the most."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import FIXTURES
from evalkit import Evaluator
from evalkit.schedule import device_judge, gpu_memory, kept_problems
from evalkit.sandbox.cuda_buffers import CudaDriverError
from evalkit.sandbox.launcher import Limits
from evalkit.sandbox.programs import REFERENCE_WORKER
from evalkit.sandbox.spare import SpareWorker, discard
from evalkit.schedule.overlap import Lanes
from evalkit.schedule.kept_problems import KeptProblems, ProblemContext, ReferenceOutOfMemory

PROBLEMS = FIXTURES / "judge_problems"
ANSWERS = FIXTURES / "judge_submissions" / "fixtures"
SETTINGS = dict(device="cpu", baselines=("eager",), timing_trials=5, warmup=1, seed=3)


def _answer(problem: str, name: str) -> str:
    return next((ANSWERS / problem).glob(f"{name}.*")).read_text()


def _loads_of_each_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Judge a correct answer of linear_relu, one of scale_rows, then linear_relu's again; the problems loaded."""
    loaded: list[str] = []

    class CountedReference(device_judge.ReferenceProblem):
        def __init__(self, problem, *args, **kwargs):
            loaded.append(problem.id)
            super().__init__(problem, *args, **kwargs)

    monkeypatch.setattr(device_judge, "ReferenceProblem", CountedReference)
    with Evaluator(problems=PROBLEMS, cache_dir=tmp_path, **SETTINGS) as ev:
        rows = [ev.judge(problem, _answer(problem, name)) for problem, name in
                [("linear_relu", "correct_python"), ("scale_rows", "correct"), ("linear_relu", "correct_python")]]
    assert [row["verdict"] for row in rows] == ["correct"] * 3, [row["reason"] for row in rows]
    assert [row["problem"] for row in rows if "problem_load_s" in row["stage_seconds"]] == loaded, \
        "the rows of the answers their problem was loaded for say so, and no other row"
    return loaded


@pytest.mark.slow  # a whole Evaluator, three answers judged: most of a minute on 2 cores
def test_going_back_to_a_kept_problem_loads_nothing_again(monkeypatch, tmp_path):
    assert _loads_of_each_problem(monkeypatch, tmp_path) == ["linear_relu", "scale_rows"]


@pytest.mark.slow  # a whole Evaluator, three answers judged: most of a minute on 2 cores
def test_the_least_recently_used_problem_goes_once_the_judge_keeps_its_most(monkeypatch, tmp_path):
    monkeypatch.setattr(kept_problems, "KEPT_PROBLEMS", 1)
    assert _loads_of_each_problem(monkeypatch, tmp_path) == ["linear_relu", "scale_rows", "linear_relu"]


def _kept(**held_bytes: int) -> KeptProblems:
    """A judge's kept problems on a GPU, the least recently used first, each holding that many bytes of it
    (``held_bytes``)."""
    kept = KeptProblems({}, "cuda", kept_problems.kept_memory_share(1))
    kept.contexts.update((name, _Held(size)) for name, size in held_bytes.items())
    return kept


class _Held(ProblemContext):
    def __init__(self, size: int) -> None:
        super().__init__(problem=None)  # type: ignore[arg-type] - only its size is read
        self.judge = SimpleNamespace(ref=SimpleNamespace(lent_device_bytes=lambda: size, close=lambda: None),
                                     expected_bytes=0)


def test_a_judge_over_its_share_of_the_gpus_memory_unloads_the_least_recently_used_until_under_it(monkeypatch):
    kept = _kept(old=1, recent=1, current=1)
    shares = iter([0.4, 0.2])  # measured before each drop
    monkeypatch.setattr(kept, "memory_share", lambda: next(shares))
    monkeypatch.setattr(kept_problems, "free_garbage", lambda device: None)
    kept.make_room()
    assert kept.ids == ["recent", "current"]


def test_a_gpu_short_of_free_memory_unloads_the_least_recently_used_whoever_holds_the_memory(monkeypatch):
    """A problem given as text holds memory the kept's allocations do not show (its reference's worker, the
    buffers lent to it): the GPU's free memory bounds the kept problems too."""
    kept = _kept(old=1, recent=1, current=1)
    monkeypatch.setattr(kept, "memory_share", lambda: 0.0)  # the kept's own tensors: nothing
    floor = kept_problems.FREE_MEMORY_FLOOR_SHARE
    free = iter([floor / 4, floor / 2, floor + 0.01])  # measured before each drop
    monkeypatch.setattr(kept, "free_share", lambda: next(free))
    monkeypatch.setattr(kept_problems, "free_garbage", lambda device: None)
    kept.make_room()
    assert kept.ids == ["current"]


@pytest.mark.parametrize("free", ["plenty", "short"])
def test_a_problem_left_keeps_its_live_baseline_unless_the_gpu_is_short_of_free_memory(monkeypatch, free):
    # An RL step goes through its problems in turn: each problem's live baseline, started again at every return to
    # it, cost about 1 s of the judge a problem. It stays with its problem, unless the GPU's free memory is short:
    # then it goes, for the next answers' workers to use.
    kept = _kept(first=1, second=1)
    for context in kept:
        context.partner = SimpleNamespace()  # type: ignore[assignment] - only whether it is closed is read
    floor = kept_problems.FREE_MEMORY_FLOOR_SHARE
    monkeypatch.setattr(kept, "free_share", lambda: floor + 0.01 if free == "plenty" else floor - 0.01)
    closed: list[str] = []
    monkeypatch.setattr(kept_problems, "close_partner", lambda context: closed.append(
        next(name for name, kept_context in kept.contexts.items() if kept_context is context)))
    kept.switch_to("first")
    assert kept.ids == ["second", "first"]
    assert closed == ([] if free == "plenty" else ["second"])


def test_past_a_memory_bound_the_problem_holding_the_most_goes_first_so_a_trainers_round_keeps_the_rest(monkeypatch):
    # An RL step goes through its problems in turn: dropping the least recently used there dropped each one
    # before it came round again, where dropping the largest keeps the others loaded from step to step.
    kept = _kept(small=2**20, large=2**34, medium=2**30, other=2**34)
    shares = iter([0.4, 0.4, 0.2])  # measured before each drop
    monkeypatch.setattr(kept, "memory_share", lambda: next(shares))
    monkeypatch.setattr(kept, "free_share", lambda: 1.0)
    monkeypatch.setattr(kept_problems, "free_garbage", lambda device: None)
    kept.make_room()
    assert kept.ids == ["small", "medium"], "the two largest go, the least recent of them first"


def test_past_the_number_of_kept_problems_the_least_recently_used_goes_whatever_it_holds(monkeypatch):
    monkeypatch.setattr(kept_problems, "KEPT_PROBLEMS", 2)
    kept = _kept(small=2**20, large=2**34)
    monkeypatch.setattr(kept, "memory_share", lambda: 0.0)
    monkeypatch.setattr(kept, "free_share", lambda: 1.0)
    monkeypatch.setattr(kept_problems, "free_garbage", lambda device: None)
    kept.make_room()
    assert kept.ids == ["large"]


def test_the_judges_of_one_gpu_split_its_memory_share_for_kept_problems():
    assert kept_problems.kept_memory_share(1) == kept_problems.KEPT_PROBLEMS_MEMORY_SHARE
    assert kept_problems.kept_memory_share(2) == kept_problems.KEPT_PROBLEMS_MEMORY_SHARE / 2


# How running out of GPU memory reaches a judge: a sandboxed reference's worker's message (its word), the driver
# refusing a buffer the judge lends one (two judges on an H200: docs/gpu-runs/2026-11-30-gpu-busy-cold-builds-h200),
# and the judge's own load of a reference failing either way.
REPORTED = device_judge.ReferenceFailed("the reference failed (expected): OutOfMemoryError: CUDA out of memory")
DRIVER_REFUSED = CudaDriverError("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_OUT_OF_MEMORY")
OUT_OF_MEMORY = [REPORTED, DRIVER_REFUSED,
                 ReferenceOutOfMemory("the reference ran out of GPU memory: CudaDriverError: cuMemAlloc_v2 failed: "
                                      "CUDA_ERROR_OUT_OF_MEMORY")]


def test_running_out_of_memory_is_what_the_judges_own_process_observed_not_what_a_message_says():
    assert kept_problems.out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert kept_problems.out_of_memory(DRIVER_REFUSED)
    assert not kept_problems.out_of_memory(CudaDriverError("cuMemFree_v2 failed: CUDA_ERROR_INVALID_VALUE",
                                                        "CUDA_ERROR_INVALID_VALUE"))
    assert not kept_problems.out_of_memory(REPORTED), "a sandboxed worker's word is weighed by KeptProblems"
    assert not kept_problems.out_of_memory(RuntimeError("CUDA_ERROR_OUT_OF_MEMORY OutOfMemoryError"))
    assert not kept_problems.out_of_memory(device_judge.ReferenceFailed("the reference's sandbox ended: killed"))


def test_a_references_word_that_it_ran_out_of_memory_is_believed_once_until_one_of_its_answers_goes_through():
    """A hostile reference given as text could report running out of memory at every answer: each belief unloads
    every kept problem, and a load failing that way is not kept as broken. What the judge observes itself always
    counts."""
    kept = _kept()
    assert kept.out_of_memory("p", REPORTED) and not kept.out_of_memory("p", REPORTED)
    assert kept.out_of_memory("other", REPORTED), "each problem's reference has its own word"
    assert kept.out_of_memory("p", DRIVER_REFUSED) and kept.out_of_memory("p", torch.OutOfMemoryError("out"))
    assert not kept.out_of_memory("p", device_judge.ReferenceFailed("the reference's sandbox ended: killed"))
    kept.answered("p")
    assert kept.out_of_memory("p", REPORTED), "believed again once an answer of the problem was judged through"


def test_the_references_remembered_for_their_word_are_bounded_the_oldest_forgotten_first(monkeypatch):
    """A server whose clients keep sending new references that report running out of memory stays flat: past
    ``REPORTED_REMEMBERED`` the oldest is forgotten (its next word believed once more), the newest still refused."""
    monkeypatch.setattr(kept_problems, "REPORTED_REMEMBERED", 3)
    kept = _kept()
    for problem in ("a", "b", "c", "d"):
        assert kept.out_of_memory(problem, REPORTED)
    assert len(kept._reported) == 3
    assert not kept.out_of_memory("d", REPORTED) and not kept.out_of_memory("b", REPORTED)
    assert kept.out_of_memory("a", REPORTED), "the oldest was forgotten"


def test_the_current_context_is_the_problem_judged_last_and_clear_forgets_them_all():
    kept = _kept(first=1, second=2)
    assert kept.current_context() is kept.get("second")
    kept.clear()
    assert kept.current_context() is None and kept.ids == []


def _device_judge(monkeypatch, kept: list[str], gate: object, shares_gpu: bool | None = None) -> device_judge.DeviceJudge:
    """A device judge on a GPU keeping ``kept`` (the current problem last, each holding nothing), its GPU's gate
    ``gate``, other judges of its run on that GPU when ``shares_gpu`` (by default, when it has a gate), with nothing
    to free and every answer built."""
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)
    judge.device, judge._kept, judge._lanes = "cuda", _kept(**dict.fromkeys(kept, 0)), Lanes(gate, [])
    judge._shares_gpu = gate is not None if shares_gpu is None else shares_gpu
    monkeypatch.setattr(kept_problems, "free_garbage", lambda device: None)
    monkeypatch.setattr(device_judge.verdicts, "build_failed_row", lambda *args: None)
    return judge


def _attempts_after_one_out_of_memory(monkeypatch, kept: list[str], gate: object, seen,
                                      error: Exception = OUT_OF_MEMORY[0]) -> list[object]:
    """What ``seen(judge)`` read at each attempt of a device judge keeping ``kept`` (the current problem last), its
    GPU's gate ``gate``, at an answer of "current" whose first attempt ran the GPU out of memory (``error``)."""
    judge = _device_judge(monkeypatch, kept, gate)
    attempts: list[object] = []

    def judged(submission, early, outcome):
        attempts.append(seen(judge))
        if len(attempts) == 1:
            raise error
        return "row"

    monkeypatch.setattr(judge, "_judged", judged)
    assert judge._row(SimpleNamespace(problem="current", sample="s"), None, None) == "row"
    return attempts


@pytest.mark.parametrize("error", OUT_OF_MEMORY, ids=["reference worker", "driver", "reference load"])
def test_an_answer_that_ran_the_gpu_out_of_memory_beside_kept_problems_is_judged_again_with_them_unloaded(monkeypatch,
                                                                                                         error):
    """Kept problems are a cache: when the GPU runs out of memory (in the judge, or in a sandboxed reference's
    worker) with other problems kept, they go and the answer is judged once more, never charged for the cache."""
    attempts = _attempts_after_one_out_of_memory(monkeypatch, ["old", "other", "current"], None,
                                                 lambda judge: judge._kept.ids, error)
    # the second attempt with nothing kept: the problem's own reference is loaded anew (its worker ended with the error)
    assert attempts == [["old", "other", "current"], []]


def test_an_out_of_memory_with_nothing_else_kept_and_no_other_judge_is_not_judged_again(monkeypatch):
    judge = _device_judge(monkeypatch, ["current"], None)
    monkeypatch.setattr(device_judge.verdicts, "judge_failed_row", lambda submission, early, device, err: repr(err))
    calls = []

    def judged(submission, early, outcome):
        calls.append(1)
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(judge, "_judged", judged)
    submission = type("Submission", (), {"problem": "current", "sample": "s"})()
    assert "OutOfMemoryError" in judge._row(submission, None, None) and calls == [1]


def _recording_gate(monkeypatch) -> tuple[object, list[tuple[int, int]]]:
    """A GPU's gate whose memory shares held (bytes, budget) are listed while held, the answers' budget 2**36."""
    from contextlib import contextmanager

    held: list[tuple[int, int]] = []

    class Gate:
        @contextmanager
        def memory(self, nbytes: int, budget_bytes: int):
            held.append((nbytes, budget_bytes))
            yield
            held.remove((nbytes, budget_bytes))

    monkeypatch.setattr(gpu_memory, "answers_budget_bytes", lambda device: 2**36)
    return Gate(), held


def test_an_out_of_memory_beside_other_judges_is_judged_again_once_no_other_judges_answer_holds_memory(monkeypatch):
    """With other judges on its GPU, what ran it out of memory may be theirs (two judges' answers and kept problems
    ran an H200 short, and a sandboxed reference's float64 outputs failed twice: its answers were skipped): the answer
    is judged once more holding the whole of the answers' memory, after the other judges' answers and before new ones."""
    gate, held = _recording_gate(monkeypatch)
    attempts = _attempts_after_one_out_of_memory(monkeypatch, ["current"], gate, lambda judge: list(held))
    assert attempts == [[], [(2**36, 2**36)]]


def _rows_of_an_answer_saying_it_ran_out_of_memory(monkeypatch, kept: list[str], gate: object, says: str,
                                                    verdict: str = "runtime_error",
                                                    seen=lambda judge: list(judge._kept.ids),
                                                    shares_gpu: bool | None = None) -> list[object]:
    """Of an answer of "current" whose worker fails saying ``says`` every time, judged by a device judge keeping
    ``kept`` (the current problem last) with its GPU's gate ``gate``: which judging gave its row, then what
    ``seen(judge)`` read at each judging (by default, the problems kept); then the problems kept after it."""
    judge = _device_judge(monkeypatch, kept, gate, shares_gpu)
    attempts: list[object] = []

    def judged(submission, early, outcome):
        attempts.append(seen(judge))
        return SimpleNamespace(verdict=verdict, error={"type": says.split(":")[0], "message": says},
                               attempt=len(attempts))

    monkeypatch.setattr(judge, "_judged", judged)
    row = judge._row(SimpleNamespace(problem="current", sample="s"), None, None)
    return [row.attempt, *attempts, judge._kept.ids]


SAID_OUT_OF_MEMORY = "OutOfMemoryError: CUDA out of memory. Tried to allocate 7.97 GiB. GPU 0 has 2.50 GiB free."


def test_an_answer_whose_worker_ran_out_of_gpu_memory_beside_kept_problems_is_judged_once_more_with_them_unloaded(
        monkeypatch):
    """Two judges on an H200: conv2d_square's curated answers, 8 GiB of working memory a call, failed runtime_error
    beside the other judge's answer and kept problems (docs/gpu-runs/2026-12-01-fidelity-overlap-h200). The worker's
    word is enough for one more judging with the memory freed, and that one decides, whatever it says."""
    rows = _rows_of_an_answer_saying_it_ran_out_of_memory(monkeypatch, ["other", "current"], None, SAID_OUT_OF_MEMORY)
    assert rows == [2, ["other", "current"], [], []]  # the second row is the one given, nothing kept around it


def test_an_answer_whose_worker_ran_out_of_gpu_memory_beside_another_judge_is_judged_again_holding_the_answers_memory(
        monkeypatch):
    gate, held = _recording_gate(monkeypatch)
    rows = _rows_of_an_answer_saying_it_ran_out_of_memory(monkeypatch, ["current"], gate, "CUDA error: out of memory",
                                                          verdict="crash", seen=lambda judge: list(held))
    assert rows == [2, [], [(2**36, 2**36)], []]  # the second judging holds the whole of the answers' memory


@pytest.mark.parametrize("kept, says", [(["current"], SAID_OUT_OF_MEMORY),  # alone on its GPU: its own doing
                                        (["other", "current"], "RuntimeError: index out of range"),
                                        (["other", "current"], "killed: the host ran out of memory")])  # its RAM
def test_an_answer_that_ran_out_of_memory_alone_or_failed_otherwise_is_judged_once(monkeypatch, kept, says):
    rows = _rows_of_an_answer_saying_it_ran_out_of_memory(monkeypatch, kept, None, says)
    assert rows == [1, kept, kept]  # nothing unloaded for it


def test_an_answer_out_of_memory_alone_on_its_gpu_is_judged_once_though_its_gpu_has_a_gate(monkeypatch):
    """A judge on a GPU always has that GPU's gate (for other runs on the host); only judges of its own run sharing
    the GPU, or other problems it keeps, may have taken the memory an answer asked for."""
    gate, held = _recording_gate(monkeypatch)
    rows = _rows_of_an_answer_saying_it_ran_out_of_memory(monkeypatch, ["current"], gate, SAID_OUT_OF_MEMORY,
                                                          shares_gpu=False)
    assert rows == [1, ["current"], ["current"]] and held == []


def _judge_sharing_memory(events: list[object]):
    """A device judge on a GPU shared with other judges, its share of the memory recorded in ``events``; and the
    loaded problem that share is sized by."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    import torch

    from evalkit.judge.reference import OutputSpec

    class Gate:
        @contextmanager
        def memory(self, nbytes, budget_bytes):
            events.append(("hold", nbytes))
            yield
            events.append("give back")

    problem = SimpleNamespace(input_templates=[torch.empty(256, device="meta")],
                              specs=[OutputSpec((128,), torch.float32)], batch=1, ref="ref")
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)
    judge.device, judge._lanes = "cuda", Lanes(Gate(), [])
    return judge, problem


def test_a_judge_holds_its_answers_share_of_the_gpus_memory_while_it_judges_it(monkeypatch):
    """The judges of one GPU share its memory: each answer is judged inside its share (``GpuGate.memory``), sized once
    its problem is loaded (``gpu_memory.answer_bytes``)."""
    from types import SimpleNamespace

    events: list[object] = []
    judge, problem = _judge_sharing_memory(events)
    judge._kept = SimpleNamespace(switch_to=lambda problem_id: SimpleNamespace(judge=problem),  # kept: no load
                                  answered=lambda problem_id: events.append(("answered", problem_id)))
    monkeypatch.setattr(judge, "_judge_of", lambda context: problem)
    monkeypatch.setattr(judge, "_judge_one", lambda *args: events.append("judged") or "row")
    submission = SimpleNamespace(problem="p", sample="s")
    assert judge._judged(submission, None, None) == "row"  # type: ignore[arg-type]
    assert events == [("hold", gpu_memory.answer_bytes(problem)), "judged", "give back",  # type: ignore[arg-type]
                      ("answered", "p")], "judged through with its reference answering: its word is believed again"


def test_a_judge_holds_an_answers_share_of_the_gpus_memory_while_it_times_baselines_ahead(monkeypatch):
    """Timing a problem's baselines before its first answer holds the same working set (the live baseline and the
    kind timed beside it), so it is held within the same share."""
    from types import SimpleNamespace

    events: list[object] = []
    judge, problem = _judge_sharing_memory(events)
    context = SimpleNamespace(baselines=None)
    plan = SimpleNamespace(problem_sha256="0" * 64)

    class Cache:
        def lookup(self, key, wanted):
            return None

        def get_or_measure(self, ref, wanted, measure, key):
            events.append(("timed", ref, wanted))
            return {"eager": {"median_ms": 1.0}}

    judge.kinds, judge.plans, judge.seed, judge.driver, judge._cache = ("eager",), {"p": plan}, 0, "", Cache()
    monkeypatch.setattr(judge, "_progress", lambda message: None, raising=False)
    judge._kept = SimpleNamespace(switch_to=lambda problem_id: context)
    monkeypatch.setattr(judge, "_judge_of", lambda context: problem)
    monkeypatch.setattr(judge, "_baseline_of", lambda context: None)
    monkeypatch.setattr(device_judge.JudgeSettings, "of", lambda plan, seed: SimpleNamespace(timing_key=lambda: "t"))
    monkeypatch.setattr(device_judge, "baseline_key", lambda *parts: "key")
    assert judge.prepare("p") == {"eager": {"median_ms": 1.0}}
    assert events == [("hold", gpu_memory.answer_bytes(problem)), ("timed", "ref", ("eager",)),  # type: ignore[arg-type]
                      "give back"]


def test_once_a_problem_comes_as_text_its_next_reference_worker_is_started_ahead(monkeypatch):
    # An RL step's problems all come as text: each load started its reference's worker on the judge's critical path.
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)  # only its reference workers
    judge.device, judge.seed, judge.limits = "cpu", 3, Limits()
    judge._references = SpareWorker(Limits(group=f"test-kept-{uuid.uuid4().hex[:8]}"), {}, count=0,
                                    program=REFERENCE_WORKER)
    monkeypatch.setattr(device_judge, "SandboxedReference", lambda problem, device, seed, precision, worker, memory: worker)
    monkeypatch.setattr(device_judge, "ReferenceProblem", lambda *args, **kwargs: "the judge's own")
    taken = []
    try:
        judge._reference(SimpleNamespace(trusted=True), "fp32")
        assert not judge._references._spares, "no problem came as text: no reference worker is started"
        taken.append(judge._reference(SimpleNamespace(trusted=False), "fp32"))
        assert len(judge._references._spares) == device_judge.REFERENCE_SPARES
        ahead = judge._references._spares[0]
        taken.append(judge._reference(SimpleNamespace(trusted=False), "fp32"))
        assert taken[-1] is ahead, "the next problem's reference gets the worker started ahead"
    finally:
        for worker in taken:
            discard(worker)
        judge._references.close()


def _judge_loading(monkeypatch, failures: list[Exception]) -> tuple[device_judge.DeviceJudge, ProblemContext]:
    """A device judge and a problem whose reference's loads fail with ``failures`` in turn, then succeed."""
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)
    problem = SimpleNamespace(id="p", broken="", sha256="h", trusted=False)
    judge.device, judge._lanes, judge.seed, judge.limits, judge._quiet = "cuda", Lanes(None, []), 0, None, None
    judge._kept = _kept()
    judge.plans = {"p": SimpleNamespace(check_current=lambda sha256: None)}
    monkeypatch.setattr(device_judge.JudgeSettings, "of", lambda plan, seed: SimpleNamespace(precision="float64"))
    monkeypatch.setattr(device_judge, "Judge", lambda ref, *args, **kwargs: ("judge of", ref))

    def reference(problem, precision):
        if failures:
            raise failures.pop(0)
        return "ref"

    monkeypatch.setattr(judge, "_reference", reference)
    return judge, ProblemContext(problem)  # type: ignore[arg-type]


def test_a_reference_that_ran_the_gpu_out_of_memory_as_it_loaded_is_loaded_again_not_kept_as_broken(monkeypatch):
    """Two judges on an H200: a problem's load found the GPU full (the driver refused a buffer for its sandboxed
    reference), and the problem was kept as broken: its answers skipped for as long as it stayed loaded. Running out
    of memory is now raised for the answer to be judged again (``_row``); the next load tries anew."""
    judge, context = _judge_loading(monkeypatch, [DRIVER_REFUSED, DRIVER_REFUSED])
    for _ in range(2):  # what the judge observed itself, however often
        with pytest.raises(ReferenceOutOfMemory, match="out of GPU memory.*CUDA_ERROR_OUT_OF_MEMORY") as raised:
            judge._judge_of(context)
        assert judge._kept.out_of_memory("p", raised.value) and context.setup_error == ""
    assert judge._judge_of(context) == ("judge of", "ref")


def test_a_reference_that_says_at_every_load_it_ran_out_of_memory_is_kept_as_broken_at_the_second(monkeypatch):
    """Its word is believed once (the load tried anew); said again before any answer went through, it is the
    reference's failure, kept for the problem's answers like any other: a hostile reference costs one load more."""
    failures = [REPORTED, REPORTED, REPORTED]
    judge, context = _judge_loading(monkeypatch, failures)
    with pytest.raises(ReferenceOutOfMemory):
        judge._judge_of(context)
    assert judge._judge_of(context) is None and "OutOfMemoryError" in context.setup_error
    assert judge._judge_of(context) is None and len(failures) == 1, "not loaded again for every answer"


def test_a_reference_that_says_at_every_answer_it_ran_out_of_memory_unloads_the_other_problems_once(monkeypatch):
    """Each believed report unloads every kept problem: a hostile reference reporting it at each of its answers
    would otherwise empty the judge's cache of every other client's problems, answer after answer."""
    judge = device_judge.DeviceJudge.__new__(device_judge.DeviceJudge)
    judge.device, judge._kept, judge._lanes = "cuda", _kept(), Lanes(None, [])
    monkeypatch.setattr(kept_problems, "free_garbage", lambda device: None)
    monkeypatch.setattr(device_judge.verdicts, "build_failed_row", lambda *args: None)
    monkeypatch.setattr(device_judge.verdicts, "unavailable_row", lambda submission, early, outcome, device, why: why)
    attempts: list[list[str]] = []

    def judged(submission, early, outcome):
        attempts.append(judge._kept.ids)
        raise REPORTED

    monkeypatch.setattr(judge, "_judged", judged)
    for _ in range(3):
        judge._kept.contexts.update(other=_Held(0), current=_Held(0))
        assert "OutOfMemoryError" in judge._row(SimpleNamespace(problem="current", sample="s"), None, None)
    assert attempts == [["other", "current"], [], ["other", "current"], ["other", "current"]]


def test_a_reference_that_fails_to_load_otherwise_stays_broken_for_its_problems_answers(monkeypatch):
    judge, context = _judge_loading(monkeypatch, [ValueError("no Model defined")])
    assert judge._judge_of(context) is None and "ValueError: no Model defined" in context.setup_error
    assert judge._judge_of(context) is None, "not loaded again for every answer"
