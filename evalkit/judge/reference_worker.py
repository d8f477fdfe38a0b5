"""Untrusted side: the harness inside an untrusted reference's process (``python -m
evalkit.judge.reference_worker FD JUDGE_PID``), for a problem given as text. It lives with the judge because it
runs the judge's own reference code, in a sandbox the judge starts for it (``judge.sandboxed_reference``); the
sandbox's rules apply to it as to an answer's worker (``tests/test_layout.py``: what it may import).

The reference runs here, confined as an answer's worker is (``confine``), and never in the judge: importing it,
checking it defines what a reference must, its init inputs, building its model, drawing its inputs, PyTorch's own
result and the float64 oracle. It is the judge's own ``ReferenceProblem``, run in this process on the worker's
copy of the file; what it computes reaches the judge only as declared claims (``reference_protocol``) and through
buffers the judge owns and lent. Everything here shares the interpreter with the reference, so the reference can
rewrite all of it: what it can change is its own problem's reference, which is its sender's to write anyway.
"""

from __future__ import annotations

import importlib
import os
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from evalkit.sandbox import reference_protocol as rp
from evalkit.sandbox.protocol import RequestRefused
from evalkit.sandbox.values import encode


class Stage:
    """The stage the reference is in, for its error's claim."""

    def __init__(self) -> None:
        self.name = "import"


def _reply(conn: Connection, claim: rp.ReferenceClaim) -> None:
    conn.send_bytes(claim.encode())


def _spec(value: Any, name: str = "") -> rp.TensorSpec | None:
    import torch

    if not isinstance(value, torch.Tensor):
        return None
    return rp.TensorSpec(shape=list(value.shape), dtype=str(value.dtype).removeprefix("torch."), name=name)


def _specs(values: list[Any]) -> list[rp.TensorSpec | None]:
    return [_spec(value) for value in values]


def _same_form(values: list[Any], specs: list[rp.TensorSpec | None], what: str, dtypes: bool = True) -> None:
    """``ValueError`` when ``values`` do not have the form the first draw described (``specs``): shapes, and with
    ``dtypes`` dtypes (an oracle that fell back to float32 fills its float64 buffers all the same)."""
    def form(spec: rp.TensorSpec | None) -> Any:
        return spec and ((tuple(spec.shape), spec.dtype) if dtypes else tuple(spec.shape))

    got, wanted = [form(spec) for spec in _specs(values)], [form(spec) for spec in specs]
    if got != wanted:
        raise ValueError(f"{what} changed form from one draw to the next ({got[:4]} where the first had "
                         f"{wanted[:4]}); a problem's tensors keep their shapes and dtypes")


def _load(setup: rp.ReferenceSetup, stage: Stage) -> Any:
    """The reference as the judge would hold it, loaded in this process (``ReferenceProblem``), or, checking
    only, the claim that it imports and defines what a reference must, with its init inputs."""
    from evalkit.sources.problems import check_module, load_problem

    problem = load_problem(Path(setup.code_path).parent)  # relative: its messages name no folder of the host
    module = problem.load_module()
    stage.name = "interface"
    check_module(module, str(problem.reference_path))
    stage.name = "get_init_inputs"
    init_inputs = encode(list(module.get_init_inputs()))  # a ValueError names what cannot be carried back
    if setup.mode == "check":
        return rp.Checked(init_inputs=init_inputs)
    from evalkit.judge.reference import ReferenceProblem

    stage.name = "construct"
    return ReferenceProblem(problem, setup.device, setup.init_seed, setup.precision)


class Served:
    """A loaded reference serving the judge's requests through the judge's buffers."""

    def __init__(self, ref: Any, probe_seed: int, stage: Stage) -> None:
        self.ref, self.stage = ref, stage
        stage.name = "get_inputs"
        inputs = ref.make_inputs(probe_seed)
        stage.name = "forward"
        own = ref.pytorch_own(inputs)
        ref.pick_float64_backend(inputs)
        expected = ref.expected(inputs)
        self.loaded = rp.Loaded(init_inputs=encode(ref.init_inputs),
                                state=[_spec(value, name) for name, value in ref.state_dict.items()],
                                inputs=_specs(inputs), values=[None if _spec(v) else encode(v) for v in inputs],
                                own=_specs(own), expected=_specs(expected), precision=ref.precision)
        self.buffers: dict[str, list[Any]] = {}

    def bind(self, conn: Connection, bind: rp.ReferenceBind, mappings: list[Any]) -> None:
        from evalkit.sandbox.shared_buffers import map_entries, receive_fds

        fds = receive_fds(conn.fileno(), bind.fd_count) if bind.fd_count else []
        flat = map_entries([bind.state, bind.inputs, bind.own, bind.expected], fds, mappings)
        for fd in fds:
            os.close(fd)
        for role, buffer in zip(("state", "inputs", "own", "expected"), flat):
            self.buffers[role] = rp.views(buffer, getattr(self.loaded, role))
        for view, value in zip(self.buffers["state"], self.ref.state_dict.values()):
            view.copy_(value)

    def serve(self, request: rp.ReferenceRequest) -> rp.Done:
        """One request's reply, once what it computed is in the judge's buffers and its own tensors are freed: a kept
        problem's worker lives on between its answers, and the float64 forward's temporaries (tens of GiB on the
        conv problems, which ran the H200 out of memory with five problems kept) go back to the device before the
        reply, since the judge stops the worker once it has it."""
        import torch

        done = self._served(request)
        if self.ref.device == "cuda":
            torch.cuda.empty_cache()
        return done

    def _served(self, request: rp.ReferenceRequest) -> rp.Done:
        from evalkit.sandbox.values import decode

        self.stage.name = request.op
        if request.op == "time":
            return rp.Done(request=request.op, ms=float(self.ref.eager_ms(request.seed, max(request.calls, 1))))
        if request.op == "inputs":
            drawn = self.ref.make_inputs(request.seed)
            _same_form(drawn, self.loaded.inputs, "get_inputs()")
            self._fill("inputs", drawn)
            return rp.Done(request=request.op, values=[None if _spec(v) else encode(v) for v in drawn])
        inputs = [view.clone() if view is not None else decode(value)
                  for view, value in zip(self.buffers["inputs"], request.values)]
        outputs = self.ref.pytorch_own(inputs) if request.op == "own" else self.ref.expected(inputs)
        _same_form(outputs, getattr(self.loaded, request.op), "the output", dtypes=False)
        self._fill(request.op, outputs)
        return rp.Done(request=request.op, precision=self.ref.precision)

    def _fill(self, role: str, values: list[Any]) -> None:
        import torch

        for view, value in zip(self.buffers[role], values):
            if view is not None:
                view.copy_(value)
        if self.ref.device == "cuda":
            torch.cuda.synchronize()  # the judge reads the buffers as soon as the reply arrives


def serve(conn: Connection) -> None:
    from evalkit.sandbox.untrusted.confine import confine

    setup = rp.read_request(conn.recv(), first=True)
    assert isinstance(setup, rp.ReferenceSetup)
    confine(setup.limits, setup.judge_pid, gpu=setup.device == "cuda")
    mappings: list[Any] = []  # the judge's host buffers stay mapped for the worker's life
    stage = Stage()
    try:
        loaded = _load(setup, stage)
        if isinstance(loaded, rp.Checked):
            _reply(conn, loaded)
            return
        served = Served(loaded, setup.probe_seed, stage)
        _reply(conn, served.loaded)
        bind = rp.read_request(conn.recv())
        if not isinstance(bind, rp.ReferenceBind):
            return  # asked to exit: the judge would not lend buffers for that many bytes
        served.bind(conn, bind, mappings)
        _reply(conn, rp.Bound())
        while True:
            request = rp.read_request(conn.recv())
            if not isinstance(request, rp.ReferenceRequest) or request.op == "exit":
                return
            _reply(conn, served.serve(request))
    except RequestRefused:
        raise  # the judge's request, not the reference: never reported as the reference's failure
    except BaseException as exc:  # noqa: BLE001 - report everything, SystemExit included
        _reply(conn, rp.Failed(stage=stage.name, message=_message(exc, setup.code_path)))


def _message(exc: BaseException, code_path: str) -> str:
    """What went wrong, and where in the reference's own file (never a folder of the host)."""
    from evalkit.sources.errors import ProblemError

    if isinstance(exc, SystemExit):
        return f"the reference called exit({exc.code!r})"
    if isinstance(exc, ProblemError):  # says it all: the file (as this worker names it), the line, what to fix
        return str(exc)
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__)
             if os.path.basename(frame.filename) == os.path.basename(code_path) and frame.lineno]
    where = f" (line {lines[-1]} of reference.py)" if lines and "line " not in str(exc) else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _preload() -> None:
    """Before the setup comes: a worker started ahead (``evalkit.sandbox.spare``) is ready when a problem is."""
    from evalkit.sandbox.untrusted.worker import preload_cuda

    importlib.import_module("torch")
    preload_cuda()


def main() -> None:
    """``reference_worker FD JUDGE_PID``: serve the judge on the socket ``FD``."""
    from evalkit.sandbox.untrusted.worker import run_harness

    run_harness(serve, _preload, "evalkit reference worker")


if __name__ == "__main__":
    main()
