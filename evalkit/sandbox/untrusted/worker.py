"""Untrusted side: the harness inside the submission's process (``python -m evalkit.sandbox.untrusted.worker FD``).

Everything here runs in the same interpreter as the submission, so the submission can rewrite all of
it and nothing it reports is trusted: the judge decides verdicts from the output buffers it owns and
the time it observes itself. This file only loads the submission, runs the requests the judge sends
(``evalkit.sandbox.protocol``), copies outputs into the judge's buffers and replies with claims.
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

SUBMISSION_MODULE = "submission"
PRELOADED = ("torch", "torch.profiler", "evalkit.sandbox.clock", "evalkit.sandbox.shared_buffers")


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
        self.outputs: list[list[Any]] = []  # and the output buffers, one set per call
        self._touch = torch.zeros(1, device="cuda") if self.device == "cuda" else None  # what a ping runs
        # On a CPU no profiler names kernels: what tells an answer's own is native code it built and called.
        self.native = NativeCalls.before_the_answer([setup.get("extensions_dir") or "", os.getcwd()]) \
            if self.device == "cpu" and setup["mode"] == "judge" else None

    def reply(self, claim: protocol.Claim) -> None:
        self.conn.send_bytes(claim.encode())

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

    def call(self, nonce: int, calls: int) -> protocol.CalledClaim:
        """Forward on each of the first ``calls`` sets of inputs in turn, each result copied into its set's
        output buffers once every stream of the device is done with it. Claims the device time of the whole
        request (forwards and copies) per call: what the judge charges a call."""
        delivered, form = True, {}
        sets = list(zip(self.inputs, self.outputs))[:max(calls, 1)]

        def run() -> None:
            nonlocal delivered, form
            for inputs, outputs in sets:
                with self._no_grad():
                    result = self.model(*inputs)
                self.clock.synchronize()  # device-wide: work a forward left on another stream is part of it
                ok, form = self._deliver(result, outputs)
                delivered = delivered and ok
        total_ms, _ = self.clock.time_ms(run)
        return protocol.CalledClaim(nonce=nonce, delivered=delivered, **form, ms=total_ms / max(len(sets), 1))

    def null_call(self, nonce: int) -> protocol.PongClaim:
        """A calibration ping: on a GPU, one kernel on one element and a synchronize, then an echo. The judge's own
        work around it (its copies, the round trip) is what it subtracts from a call, and so is the hand-over of
        the GPU from the judge's process to this one and back, which any call pays as soon as it runs anything
        on the GPU; whatever a worker does for a call beyond that is the call's."""
        if self._touch is not None:
            self._touch.add_(1)
            self.clock.synchronize()
        return protocol.PongClaim(nonce=nonce)

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

    def _deliver(self, result: Any, buffers: list[Any]) -> tuple[bool, dict[str, Any]]:
        """Copy the submission's output into the judge-owned buffers, when it has the right form."""
        import torch

        outputs = (list(result) if isinstance(result, (tuple, list)) else [result])[:protocol.MAX_ITEMS]
        form = {"types": [type(o).__module__ + "." + type(o).__qualname__ for o in outputs],
                "shapes": [list(o.shape) if isinstance(o, torch.Tensor) else None for o in outputs],
                "dtypes": [str(o.dtype) if isinstance(o, torch.Tensor) else None for o in outputs]}
        if len(outputs) != len(buffers) or not all(isinstance(o, torch.Tensor) for o in outputs):
            return False, form
        if any(o.shape != b.shape or o.dtype != b.dtype for o, b in zip(outputs, buffers)):
            return False, form
        for out, buf in zip(outputs, buffers):
            buf.copy_(out.detach())
        return True, form


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
             "inputs": _sets(map_entries(request.inputs, fds, mappings), request.batch),
             "outputs": _sets(map_entries(request.outputs, fds, mappings), request.batch)}
    for fd in fds:
        os.close(fd)
    return setup


def _sets(flat: list[Any], batch: int) -> list[list[Any]]:
    """``batch`` sets laid out one after the other -> a list of the sets."""
    size = len(flat) // batch
    return [flat[i * size:(i + 1) * size] for i in range(batch)]


def serve(conn: Connection) -> None:
    from evalkit.sandbox.untrusted.confine import confine

    mappings: list[Any] = []  # the judge's CPU buffers stay mapped for the worker's life
    setup = receive_setup(conn, mappings)
    if setup.get("extensions_dir"):  # chosen when the answer was: a worker may have started before it
        os.environ["TORCH_EXTENSIONS_DIR"] = setup["extensions_dir"]
    drives_gpu = setup["mode"] != "build" and setup["device"] == "cuda"
    landlock_abi, setup["privileges"] = confine(setup["limits"], setup["judge_pid"], gpu=drives_gpu)
    harness = Harness(conn, setup)
    harness.inputs, harness.outputs = setup["inputs"], setup["outputs"]
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
            return True
        if request.op == Op.PING:
            harness.reply(harness.null_call(request.nonce))
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
        elif op == Op.PING:  # only a baseline's worker is pinged once loaded: the judge's own part, in a window
            harness.reply(harness.null_call(request.nonce))
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
    if os.environ.get(protocol.PRELOAD_CUDA_VARIABLE) == "1":
        import torch

        try:
            small = torch.zeros(1, 1, 8, 8, device="cuda")  # CUDA is started by its first allocation
            torch.nn.functional.conv2d(small, small[:, :, :3, :3])  # cuDNN's handle
            torch.mm(small[0, 0], small[0, 0])  # cuBLAS's handle and workspace
            torch.cuda.synchronize()
            if os.environ.get(protocol.PRELOAD_PROFILER_VARIABLE) == "1":
                _start_profiler(lambda: torch.mm(small[0, 0], small[0, 0]))
        except Exception:  # noqa: BLE001 - a head start only: the answer's own load meets and reports the failure
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
    import warnings

    from evalkit.sandbox.untrusted.privileges import die_with_judge

    # torch's "Failed to initialize NumPy" (NumPy is no dependency): it filled the tail of build logs the reports show
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    conn = Connection(int(sys.argv[1]))
    try:
        die_with_judge(int(sys.argv[2]))  # a worker started ahead may wait long for its answer: never orphaned
        open(protocol.ARMED_FILE, "w").close()  # in its own folder (the cwd), still the judge's
        _preload()
        serve(conn)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the judge went away or closed the connection: nothing left to do
    except protocol.RequestRefused as refused:
        sys.stderr.write(f"evalkit worker: refused the judge's request: {refused}\n")
        sys.stderr.flush()
        os._exit(REFUSED_EXIT)
    except Exception as err:  # noqa: BLE001 - never a silent exit 0: the judge reads a crash, with what happened
        traceback.print_exc(file=sys.stderr)
        sys.stderr.write(f"evalkit worker: the harness failed: {type(err).__name__}: {err}\n")
        sys.stderr.flush()
        os._exit(HARNESS_FAILED_EXIT)
    finally:
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown, which submission code may have sabotaged


if __name__ == "__main__":
    main()
