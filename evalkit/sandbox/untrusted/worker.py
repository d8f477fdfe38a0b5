"""Untrusted side: the harness inside the submission's process (``python -m evalkit.sandbox.untrusted.worker FD``).

Everything here runs in the same interpreter as the submission, so the submission can rewrite all of
it and nothing it reports is trusted: the judge decides verdicts from what it reads of this process's memory
while it is frozen, and the time it observes itself. This file only loads the submission, runs the requests the
judge sends (``evalkit.sandbox.protocol``), keeps each call's outputs where they are (``outputs.OutputPlacer`` says
where) and replies with claims.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from evalkit.sandbox import protocol
from evalkit.sandbox.protocol import Op
from evalkit.sandbox.untrusted.native_calls import NativeCalls
from evalkit.sandbox.untrusted.outputs import OutputPlacer, StandIn

SUBMISSION_MODULE = "submission"
PRELOADED = ("torch", "torch.profiler", "evalkit.sandbox.clock", "evalkit.sandbox.shared_buffers",
             "evalkit.sandbox.cuda_buffers")


def _frames(exc: BaseException, code_path: str) -> list[protocol.FrameClaim]:
    frames = traceback.extract_tb(exc.__traceback__)[-protocol.MAX_FRAMES:]
    return [protocol.FrameClaim(file=os.path.basename(f.filename), line=f.lineno or 0, function=f.name,
                                in_submission=os.path.abspath(f.filename) == code_path, text=(f.line or "")[:200])
            for f in frames]


def _is_build_failure(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, (RuntimeError, OSError, ImportError)) and (
        text.startswith("Error building extension") or "ninja" in text.lower() and "build" in text.lower()
        or any(mod.startswith("torch.utils.cpp_extension") for mod in _exception_modules(exc))
    )


def _exception_modules(exc: BaseException) -> list[str]:
    modules = []
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        modules.append(frame.f_globals.get("__name__", ""))
    return modules


def _is_jit_compile_failure(exc: BaseException) -> bool:
    """A kernel a JIT compiles at its first call failed to compile (Triton's ``CompilationError``)."""
    return type(exc).__name__ == "CompilationError" and type(exc).__module__.startswith("triton")


def error_claim(exc: BaseException, stage: str, code_path: str) -> protocol.ErrorClaim:
    if isinstance(exc, SystemExit):
        kind, text = "runtime_error", f"the submission called exit({exc.code!r}) during {stage}"
    elif _is_jit_compile_failure(exc):
        kind, text = "compile_error", f"{type(exc).__name__}: {exc}"
    elif _is_build_failure(exc):
        kind, text = "compile_error", str(exc)
    else:
        kind, text = "runtime_error", f"{type(exc).__name__}: {exc}"
    return protocol.ErrorClaim(kind=kind, stage=stage, type=type(exc).__name__, message=text[:protocol.MAX_TEXT],
                               traceback=_frames(exc, code_path))


def interface_error(message: str) -> protocol.ErrorClaim:
    return protocol.ErrorClaim(kind="interface_error", stage="interface", message=message)


class Harness:
    def __init__(self, conn: Connection, setup: dict[str, Any]) -> None:
        import torch.profiler

        from evalkit.sandbox.clock import Clock  # bound before any submission code runs

        self._profile, self._activity = torch.profiler.profile, torch.profiler.ProfilerActivity
        self._no_grad = torch.no_grad  # forward is inference, as in the reference's timing: no autograd graph

        self.conn, self.setup = conn, setup
        self.device = setup["device"]
        self.code_path = os.path.abspath(setup["code_path"])
        self.clock = Clock(self.device)
        self.model = None
        self.inputs: list[list[Any]] = []  # the judge's input buffers: one set per forward call of a request
        self.placer = OutputPlacer(self.device, setup["outputs"])
        self._kept: list[Any] = []  # the last request's outputs, where the judge reads them while this is frozen
        self._stand_in: StandIn | None = None  # what a ping calls, before any submission code ran
        # On a CPU no profiler names kernels: what tells an answer's own is native code it built and called.
        self.native = NativeCalls.before_the_answer([setup.get("extensions_dir") or "", os.getcwd()]) \
            if self.device == "cpu" and setup["mode"] == "judge" else None

    def reply(self, claim: protocol.Claim | bytes) -> None:
        self.conn.send_bytes(claim if isinstance(claim, bytes) else claim.encode())

    def load(self) -> Any:
        spec = importlib.util.spec_from_file_location(SUBMISSION_MODULE, self.code_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[SUBMISSION_MODULE] = module
        spec.loader.exec_module(module)
        return module

    def build_in_constructor(self, module: Any) -> protocol.ErrorClaim | None:
        """Construct ModelNew once (no GPU visible) so extensions built in ``__init__`` are built now.

        Only a build failure is reported; any other failure here is left for the judge stage,
        which runs with the GPU and reports it properly.
        """
        model_cls = getattr(module, "ModelNew", None)
        if self.setup.get("init_inputs") is None or not isinstance(model_cls, type):
            return None
        try:
            model_cls(*self.setup["init_inputs"])
        except Exception as exc:  # noqa: BLE001
            claim = error_claim(exc, "construct", self.code_path)
            return claim if claim.kind == "compile_error" else None
        return None

    def construct(self, module: Any, landlock_abi: int) -> protocol.Claim:
        import dataclasses

        import torch

        model_cls = getattr(module, "ModelNew", None)
        if model_cls is None:
            return interface_error("the code defines no ModelNew")
        if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
            return interface_error("ModelNew is a class that does not derive from torch.nn.Module"
                                   if isinstance(model_cls, type) else
                                   f"ModelNew is a {type(model_cls).__name__}, not an nn.Module class")
        torch.manual_seed(self.setup["init_seed"])
        try:
            model = model_cls(*self.setup["init_inputs"])
        except Exception as exc:  # noqa: BLE001 - any failure here is the submission's
            claim = error_claim(exc, "construct", self.code_path)
            if claim.kind == "compile_error":
                return claim
            return dataclasses.replace(claim, kind="interface_error",
                                       message=f"ModelNew(*get_init_inputs()) failed: {claim.message}")
        weights = self._load_weights(model)
        model = model.to(self.device)
        dtype = getattr(torch, self.setup["dtype"])
        if dtype != torch.float32:  # as KernelBench does: the whole model in the problem's dtype
            model = model.to(dtype)
        signature_problem = _forward_signature_problem(model, self.setup["n_inputs"])
        if signature_problem:
            return interface_error(signature_problem)
        self.model = model
        return protocol.ReadyClaim(weights=weights, landlock=landlock_abi, privileges=self.setup["privileges"])

    def _load_weights(self, model: Any) -> str:
        reference = self.setup.get("state_dict") or {}
        own = model.state_dict()
        same = reference and set(own) == set(reference) and all(
            tuple(own[k].shape) == tuple(reference[k].shape) for k in own)
        if not same:
            return "seeded"
        model.load_state_dict(reference)
        return "state_dict"

    def call(self, nonce: int, calls: int) -> bytes:
        """Forward on each of the first ``calls`` sets of inputs in turn, each timed by device events around it and
        followed by a device-wide synchronize (work a forward left on another stream is part of it), as the field
        times a kernel in one process. The results stay where forward left them until the next request."""
        self._kept = []  # the judge read the last request's outputs while this process was frozen
        with self._no_grad():
            results, times = self.clock.time_calls(self.model, self.inputs[:max(calls, 1)])
        formed, form, places, segments, self._kept = self.placer.place(results)
        return protocol.encode_called(nonce, formed, form, times, places, segments)

    def null_call(self, nonce: int, calls: int | None) -> protocol.PongClaim:
        """A calibration ping: the call path of ``call``, with the harness's stand-in for a model (on a GPU one
        kernel on one element a call), its outputs placed as a call's are. What the judge's clock reads beyond the
        stand-in's own events is the judge's and the harness's part of a request, which it subtracts from a call."""
        if self._stand_in is None:
            self._stand_in = StandIn(self.device, self.placer.specs)
        with self._no_grad():
            results, times = self.clock.time_calls(self._stand_in, self.inputs[:max(calls or len(self.inputs), 1)])
        self.placer.place(results)
        return protocol.PongClaim(nonce=nonce, call_ms=times)

    def drop_stand_in(self) -> None:
        self._stand_in = None  # its outputs may be gigabytes the answer's own will want

    def profile(self) -> protocol.ProfiledClaim:
        """The device kernels one forward call launches, with their device time, and the operators it calls; on a
        CPU, in place of kernels, the functions of native code the answer built that it called (``native_calls``:
        no profiler, whose start took seconds of the call's limit on a loaded machine)."""
        if self.native is not None:
            with self._no_grad(), self.native.watching():
                self.model(*self.inputs[0])
            return protocol.ProfiledClaim(kernels=[name[:200] for name in self.native.called()[:protocol.MAX_ITEMS]],
                                          aten_ops=[])
        activities = [self._activity.CPU] + ([self._activity.CUDA] if self.device == "cuda" else [])
        with self._profile(activities=activities) as prof, self._no_grad():
            self.model(*self.inputs[0])
            self.clock.synchronize()
        kernel_us: dict[str, float] = {}
        ops = set()
        for event in prof.events():
            if str(event.device_type).endswith("CUDA"):
                name = event.name[:200]
                kernel_us[name] = kernel_us.get(name, 0.0) + max(float(event.time_range.elapsed_us()), 0.0)
            elif event.name.startswith("aten::"):
                ops.add(event.name)
        kernels = sorted(kernel_us, key=lambda k: -kernel_us[k])[:protocol.MAX_ITEMS]
        return protocol.ProfiledClaim(kernels=kernels, aten_ops=sorted(ops)[:protocol.MAX_ITEMS],
                                      kernel_us=[kernel_us[k] for k in kernels])


def _forward_signature_problem(model: Any, n_inputs: int) -> str:
    try:
        inspect.signature(model.forward).bind(*([None] * n_inputs))
    except TypeError as exc:
        return f"ModelNew.forward cannot take the reference's {n_inputs} input(s): {exc}"
    except ValueError:
        pass  # no introspectable signature (a C++ forward): let the call decide
    return ""


def receive_setup(conn: Connection, mappings: list[Any]) -> dict[str, Any]:
    """The setup request with its values unpacked and the judge's buffers mapped (before any confinement)."""
    import pickle

    from evalkit.sandbox.shared_buffers import map_entries, receive_fds

    request = protocol.read_request(conn.recv(), setup=True)
    fds = receive_fds(conn.fileno(), request.fd_count) if request.fd_count else []
    setup = {"mode": request.mode, "code_path": request.code_path, "device": request.device,
             "limits": request.limits, "judge_pid": request.judge_pid, "extensions_dir": request.extensions_dir,
             "init_seed": request.init_seed, "n_inputs": request.n_inputs, "dtype": request.dtype,
             "init_inputs": pickle.loads(request.init_inputs), "state_dict": pickle.loads(request.state_dict),
             "inputs": sets_of(map_entries(request.inputs, fds, mappings), request.batch), "memory": request.memory,
             "outputs": request.outputs}
    for fd in fds:
        os.close(fd)
    return setup


def sets_of(stacked: list[Any], batch: int) -> list[list[Any]]:
    """The judge's input buffers, one per input with the ``batch`` calls' values stacked along a first dimension
    (other inputs given by value) -> each call's set of inputs."""
    import torch

    return [[value[k] if isinstance(value, torch.Tensor) else value for value in stacked] for k in range(batch)]


def serve(conn: Connection) -> None:
    from evalkit.sandbox.shared_buffers import send_own_memory
    from evalkit.sandbox.untrusted.confine import confine

    mappings: list[Any] = []  # the judge's CPU buffers stay mapped for the worker's life
    setup = receive_setup(conn, mappings)
    if setup.get("extensions_dir"):  # chosen when the answer was: a worker may have started before it
        os.environ["TORCH_EXTENSIONS_DIR"] = setup["extensions_dir"]
    drives_gpu = setup["mode"] != "build" and setup["device"] == "cuda"
    if setup["memory"]:
        send_own_memory(conn.fileno())
    landlock_abi, setup["privileges"] = confine(setup["limits"], setup["judge_pid"], gpu=drives_gpu)
    harness = Harness(conn, setup)
    harness.inputs = setup["inputs"]
    if setup["mode"] == "judge" and not _serve_until_load(conn, harness):
        return
    stage = "import"
    try:
        module = harness.load()
        stage = "construct"
        if setup["mode"] == "build":
            built = protocol.BuiltClaim(landlock=landlock_abi, privileges=setup["privileges"])
            harness.reply(harness.build_in_constructor(module) or built)
            return
        ready = harness.construct(module, landlock_abi)
        harness.reply(ready)
        if not isinstance(ready, protocol.ReadyClaim):
            return
        stage = "forward"
        _serve_requests(conn, harness)
    except protocol.RequestRefused:
        raise  # the judge's request, not the submission: never reported as the submission's failure
    except BaseException as exc:  # noqa: BLE001 - report everything, including SystemExit
        harness.reply(error_claim(exc, stage, harness.code_path))


def _serve_until_load(conn: Connection, harness: Harness) -> bool:
    """Answer the judge's calibration pings while no submission code has run; True once asked to load."""
    while True:
        request = protocol.read_request(conn.recv())
        if request.op == Op.LOAD:
            harness.drop_stand_in()
            return True
        if request.op == Op.PING:
            harness.reply(harness.null_call(request.nonce, request.calls))
        elif request.op == Op.EXIT:
            return False


def _serve_requests(conn: Connection, harness: Harness) -> None:
    while True:
        request = protocol.read_request(conn.recv())
        op = request.op
        if op == Op.EXIT:
            return
        if op == Op.CALL:
            harness.reply(harness.call(request.nonce, request.calls or len(harness.inputs)))
        elif op == Op.PING:
            harness.reply(harness.null_call(request.nonce, request.calls))
        elif op == Op.PROFILE:
            harness.reply(harness.profile())


def _preload() -> None:
    """Import what every request needs (torch above all: seconds) before the setup arrives, so a worker started
    ahead of its answer (``evalkit.sandbox.spare``) is ready when the answer is; a GPU judge's worker also
    creates its CUDA context and starts cuDNN and cuBLAS (a second or more each; an answer's first call paid them
    on the judge's time), and a worker that will only profile starts the profiler (CUPTI: 1.0-1.6 s). No
    submission code has run."""
    for name in PRELOADED:
        importlib.import_module(name)
    preload_cuda()


def preload_cuda() -> None:
    """Where the judge asks it (``PRELOAD_CUDA_VARIABLE``), start CUDA, cuDNN and cuBLAS now (and the profiler, where
    asked too), before any code of the answer's or the reference's has run."""
    if os.environ.get(protocol.PRELOAD_CUDA_VARIABLE) == "1":
        import torch

        try:
            small = torch.zeros(1, 1, 8, 8, device="cuda")  # CUDA is started by its first allocation
            torch.nn.functional.conv2d(small, small[:, :, :3, :3])  # cuDNN's handle
            torch.mm(small[0, 0], small[0, 0])  # cuBLAS's handle and workspace
            torch.cuda.synchronize()
            if os.environ.get(protocol.PRELOAD_PROFILER_VARIABLE) == "1":
                _start_profiler(lambda: torch.mm(small[0, 0], small[0, 0]))
        except Exception:  # noqa: BLE001 - a head start only: the worker's own load meets and reports the failure
            pass


def _start_profiler(work: Any) -> None:
    """Profile ``work`` once: the profiler's later sessions in this process start in milliseconds."""
    import warnings

    import torch
    import torch.profiler

    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": none are read here
        warnings.simplefilter("ignore")
        with torch.profiler.profile(activities=activities):
            work()
            torch.cuda.synchronize()


REFUSED_EXIT = 70  # EX_SOFTWARE: a request this worker does not speak (two versions of evalkit)
HARNESS_FAILED_EXIT = 71  # EX_OSERR: the harness itself failed outside any claim (a folder it could not reach)


def main() -> None:
    """``worker FD JUDGE_PID``: serve the judge on the socket ``FD``."""
    run_harness(serve, _preload, "evalkit worker")


def run_harness(serve_judge: Any, preload: Any, who: str) -> None:
    """A harness's life (this worker's, or a reference's: ``reference_worker``), ``FD JUDGE_PID`` from the command
    line: it dies with the judge, says so, ``preload``s, then ``serve_judge``s the socket ``FD``; it never exits 0
    silently after a failure of its own, and skips the interpreter's teardown."""
    import warnings

    from evalkit.sandbox.untrusted.privileges import die_with_judge

    # torch's "Failed to initialize NumPy" (NumPy is no dependency): it filled the tail of build logs the reports show
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    conn = Connection(int(sys.argv[1]))
    try:
        die_with_judge(int(sys.argv[2]))  # a worker started ahead may wait long for its answer: never orphaned
        open(protocol.ARMED_FILE, "w").close()  # in its own folder (the cwd), still the judge's
        preload()
        serve_judge(conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the judge went away or closed the connection: nothing left to do
    except protocol.RequestRefused as refused:
        sys.stderr.write(f"{who}: refused the judge's request: {refused}\n")
        sys.stderr.flush()
        os._exit(REFUSED_EXIT)
    except Exception as err:  # noqa: BLE001 - never a silent exit 0: the judge reads a crash, with what happened
        traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"{who}: the harness failed: {type(err).__name__}: {err}\n")
        sys.stderr.flush()
        os._exit(HARNESS_FAILED_EXIT)
    finally:
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown, which submission code may have sabotaged


if __name__ == "__main__":
    main()
