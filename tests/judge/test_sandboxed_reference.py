"""A problem given as text is untrusted: its reference is checked and run in sandboxed workers of its own, never in
the judge's process, and the judge holds it through the interface it holds a folder's by (``ReferenceProblem``),
getting the same weights, inputs and outputs. Whatever that worker does wrong is the reference's failure."""

from __future__ import annotations

import builtins
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import FIXTURES
from evalkit.judge.reference import ReferenceProblem
from evalkit.judge.sandboxed_reference import (CHECKED_FILE, ReferenceFailed, SandboxedReference, check_untrusted,
                                               checked_init_inputs)
from evalkit.sandbox import reference_protocol as rp
from evalkit.sandbox.launcher import Limits, UntrustedProcess
from evalkit.sandbox.programs import REFERENCE_WORKER
from evalkit.sources.problems import ProblemError, load_problem, problem_from_source

FOLDER = FIXTURES / "judge_problems" / "linear_relu"
REFERENCE = (FOLDER / "reference.py").read_text()
LIMITS = Limits(group=f"test-{uuid.uuid4().hex[:8]}", memory_bytes=4 * 2**30)
MARK = "EVALKIT_TEST_REFERENCE_RAN_HERE"


def _served(problem, precision: str = "fp32", device: str = "cpu") -> SandboxedReference:
    worker = UntrustedProcess(Path(tempfile.mkdtemp(prefix="evalkit-test-")), LIMITS, {}, program=REFERENCE_WORKER)
    return SandboxedReference(problem, device, 3, precision, worker, LIMITS.memory_bytes)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_judge_gets_from_a_sandboxed_reference_what_the_reference_computes_in_its_own_process(tmp_path, precision):
    trusted = ReferenceProblem(load_problem(FOLDER), "cpu", init_seed=3, precision=precision)
    ref = _served(problem_from_source(REFERENCE, root=tmp_path), precision)
    try:
        assert (ref.init_inputs, ref.n_inputs, ref.dtype) == (trusted.init_inputs, trusted.n_inputs, trusted.dtype)
        assert list(ref.state_dict) == list(trusted.state_dict)
        assert all(torch.equal(ref.state_dict[k], trusted.state_dict[k]) for k in trusted.state_dict)
        for seed in (1, 2):
            inputs = ref.make_inputs(seed)
            assert all(torch.equal(a, b) for a, b in zip(inputs, trusted.make_inputs(seed)))
            for ours, theirs in ((ref.expected(inputs), trusted.expected(inputs)),
                                 (ref.pytorch_own(inputs), trusted.pytorch_own(inputs))):
                assert [(t.dtype, t.shape) for t in ours] == [(t.dtype, t.shape) for t in theirs]
                assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
        assert ref.precision == "float64" and ref.output_specs(ref.pytorch_own(inputs)) == trusted.output_specs(
            trusted.pytorch_own(inputs))
        assert 0 < ref.eager_ms(1) < 10_000
    finally:
        ref.close()


@pytest.mark.cuda
def test_on_a_gpu_the_judge_gets_the_references_tensors_through_the_memory_it_lends(tmp_path):
    trusted = ReferenceProblem(load_problem(FOLDER), "cuda", init_seed=3)
    ref = _served(problem_from_source(REFERENCE, root=tmp_path), device="cuda")
    try:
        inputs = ref.make_inputs(1)
        assert inputs[0].is_cuda and torch.equal(inputs[0], trusted.make_inputs(1)[0])
        expected, own = ref.expected(inputs)[0], ref.pytorch_own(inputs)[0]
        assert expected.is_cuda and expected.dtype == torch.float64 and own.dtype == torch.float32
        assert torch.allclose(expected, trusted.expected(inputs)[0])
        assert torch.allclose(own, trusted.pytorch_own(inputs)[0])
        assert 0 < ref.eager_ms(1) < 10_000
    finally:
        ref.close()


def test_a_reference_given_as_text_never_runs_in_the_judges_process(tmp_path):
    problem = problem_from_source(f"{REFERENCE}\nimport builtins\nbuiltins.{MARK} = True\n", root=tmp_path)
    check_untrusted(problem, LIMITS)
    ref = _served(problem)
    try:
        ref.expected(ref.make_inputs(1))
    finally:
        ref.close()
    assert not hasattr(builtins, MARK), "the reference ran in the judge's process"
    with pytest.raises(ProblemError, match="runs only in a sandbox"):
        problem.load_module()
    assert problem.init_inputs_or_none() is None  # never computed here
    assert checked_init_inputs(problem) == [16], "the builds' init inputs are what the sandboxed check found"


@pytest.mark.parametrize(("code", "says"), [
    ("def get_inputs(:\n", "reference.py:1: syntax error"),
    (REFERENCE.replace("def get_inputs", "def get_inputz"), "defines no get_inputs"),
    (REFERENCE.replace("return [features]", "raise RuntimeError('no init')"),
     "RuntimeError: no init (line 23 of reference.py)"),
    (REFERENCE.replace("return [features]", "return [object()]"), "builtins.object"),
    (REFERENCE + "\nimport sys\nsys.exit(4)\n", "importing it raised SystemExit: 4"),
])
def test_a_broken_reference_given_as_text_is_refused_once_naming_no_folder_of_the_host(tmp_path, code, says):
    problem = problem_from_source(code, root=tmp_path)
    with pytest.raises(ProblemError) as raised:
        check_untrusted(problem, LIMITS)
    message = str(raised.value)
    assert says in message, message
    assert str(tmp_path) not in message and tempfile.gettempdir() not in message, message
    assert (problem.path / CHECKED_FILE).is_file(), "a second request of the same text would check it again"
    with pytest.raises(ProblemError, match="cannot be used"):
        check_untrusted(problem, Limits(group="never-started", max_processes=0))


DIES_LATER = REFERENCE.replace("def get_inputs():\n", "CALLS = []\n\n\ndef get_inputs():\n    CALLS.append(1)\n"
                               "    if len(CALLS) > 2:\n        import os\n        os._exit(3)\n")
RAISES_LATER = REFERENCE.replace("def forward(self, x):\n", "def forward(self, x):\n"
                                 "        if x.dtype == torch.float64: raise ValueError('no float64 today')\n")


@pytest.mark.parametrize(("code", "says"), [(DIES_LATER, "sandbox ended"), (RAISES_LATER, "no float64 today")])
def test_a_reference_that_fails_or_dies_while_judging_is_the_references_failure(tmp_path, code, says):
    problem = problem_from_source(code, root=tmp_path)
    with pytest.raises(ReferenceFailed, match=says):
        ref = _served(problem)
        try:
            for seed in range(4):
                ref.expected(ref.make_inputs(seed))
        finally:
            ref.close()


def test_a_reference_whose_worker_cannot_be_stopped_is_the_references_failure(tmp_path, monkeypatch):
    from evalkit.sandbox.launcher import WorkerGone

    ref = _served(problem_from_source(REFERENCE, root=tmp_path))
    try:
        worker = ref._worker

        def cannot_stop() -> None:
            worker.kill("timeout: not every process of its sandbox stopped")
            raise WorkerGone("timeout", "not every process of its sandbox stopped")

        monkeypatch.setattr(worker, "freeze", cannot_stop)
        with pytest.raises(ReferenceFailed, match="not every process of its sandbox stopped"):
            ref.make_inputs(0)
    finally:
        ref.close()


def test_a_reference_workers_precisions_are_the_settings_own():
    from evalkit.sandbox.reference_protocol import PRECISION_NAMES
    from evalkit.sources.settings import PRECISIONS

    assert PRECISION_NAMES == PRECISIONS


def test_a_reference_that_claims_a_slow_forward_is_timed_by_the_judges_clock(tmp_path):
    lying = (f"{REFERENCE}\nimport evalkit.judge.reference as _reference\n"
             "_reference.ReferenceProblem.eager_ms = lambda self, seed, calls=3: 1e9\n")
    ref = _served(problem_from_source(lying, root=tmp_path))
    try:
        assert ref.eager_ms(1) < 60_000  # its claim alone would give every answer a limit of 1e12 s
    finally:
        ref.close()


def test_a_float64_output_read_at_once_is_the_lent_buffer_and_a_kept_one_a_copy(tmp_path):
    """The judge reads a sandboxed reference's float64 outputs in the buffers it lent the worker, without a copy (on
    the H200 a copy was a second 16 GiB output in the judge's process); what it keeps (``expected``) is a copy that
    the next request cannot change."""
    ref = _served(problem_from_source(REFERENCE, root=tmp_path))
    try:
        first, second = ref.make_inputs(1), ref.make_inputs(2)
        kept = ref.expected(first)[0]
        at_once = ref.expected_read_at_once(first)[0]
        assert torch.equal(at_once, kept)
        again = ref.expected_read_at_once(second)[0]
        assert again.data_ptr() == at_once.data_ptr(), "the float64 output was copied"
        assert not torch.equal(at_once, kept) and torch.equal(kept, ref.expected(first)[0])
    finally:
        ref.close()


def test_a_judge_keeps_copies_of_the_float64_outputs_it_reuses_and_reads_the_rest_in_place(tmp_path):
    from evalkit.judge.judge_settings import JudgeSettings
    from evalkit.judge.submission_judge import Judge

    trusted = ReferenceProblem(load_problem(FOLDER), "cpu", init_seed=3)
    ref = _served(problem_from_source(REFERENCE, root=tmp_path))
    try:
        settings = JudgeSettings(atol=1e-2, rtol=1e-2, correctness_trials=2, timing_trials=3, warmup_trials=1,
                                 run_timeout_s=5, seed=11)
        judge = Judge(ref, settings, Limits())
        first, second = judge.correctness_inputs(0), judge.correctness_inputs(1)
        judge.expected(0, first)
        judge.expected(1, second)  # a request of its own: the worker rewrites its float64 buffers
        assert torch.equal(judge.expected(0, first)[0], trusted.expected(first)[0]), "a kept output was overwritten"
        judge._expected_room = 0  # no room left: read in the lent buffer, before the next request
        assert judge.expected(2, judge.correctness_inputs(2))[0].data_ptr() == \
            ref.expected_read_at_once(second)[0].data_ptr()
    finally:
        ref.close()


def test_on_a_gpu_every_request_waits_for_the_judges_queued_copies_first(monkeypatch):
    # make_inputs clones the inputs' buffers without waiting; the next request may rewrite them meanwhile.
    events: list[str] = []
    reference = SandboxedReference.__new__(SandboxedReference)
    reference.device = "cuda"
    reference._worker = SimpleNamespace(thaw=lambda: events.append("thaw"), freeze=lambda: events.append("freeze"))
    monkeypatch.setattr(reference, "_send", lambda request: events.append(f"send {request.op}"), raising=False)
    monkeypatch.setattr(reference, "_reply", lambda *args: rp.Done(request="inputs", values=[]), raising=False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: events.append("synchronize"))
    reference._ask(rp.ReferenceRequest("inputs", seed=1))
    assert events == ["synchronize", "thaw", "send inputs", "freeze"]
