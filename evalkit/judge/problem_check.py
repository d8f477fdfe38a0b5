"""Validating problem folders (``evalkit problems check``) and describing them (``evalkit problems``).

Shapes come from the meta device: the model and its inputs are built under ``with torch.device("meta")``
(so ``torch.rand`` makes storage-less tensors) and run forward there. The real forward runs only where it
is cheap (small problems on CPU) or asked for (``device="cuda"``); it also looks for degenerate problems,
whose output barely depends on the input or is so close to zero that returning zeros would pass, with
the judge's own comparison (``evalkit.judge.tensor_check.compare_outputs``).

Trusted side: runs only a problem's own reference.py (trusted problem code), never submission code.
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any, Callable

import torch

from evalkit.judge.reference import in_precision, precision_dtype, to_double
from evalkit.judge.tensor_check import compare_outputs
from evalkit.sources.problems import Problem, ProblemError, where_in

logger = logging.getLogger(__name__)

DEFAULT_MAX_CPU_ELEMENTS = 50_000_000  # input + output elements above which CPU checks stay on the meta device
DEVICES = ("cpu", "cuda")


@dataclass
class CheckReport:
    """What ``check_problem`` found: errors make the problem unusable, warnings and notes do not."""

    problem_id: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    input_shapes: list[list[int] | None] = field(default_factory=list)
    output_shape: list[Any] | None = None  # a shape, or a list of shapes for a tuple output

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}


@dataclass
class _Probe:
    """The meta-device pass: shapes, sizes, and what went wrong."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    input_shapes: list[list[int] | None] = field(default_factory=list)
    output_shape: list[Any] | None = None
    elements: int = 0
    bytes: int = 0
    forward_error: str = ""


# ------------------------------------------------------------------------------------------------ helpers


def _shape_of(output: Any) -> list[Any] | None:
    if isinstance(output, torch.Tensor):
        return list(output.shape)
    if isinstance(output, (tuple, list)) and output and all(isinstance(o, torch.Tensor) for o in output):
        return [list(o.shape) for o in output]
    return None


def _tensors_of(output: Any) -> list[torch.Tensor]:
    return list(output) if isinstance(output, (tuple, list)) else [output]


def _raised(what: str, err: BaseException, problem: Problem) -> str:
    return f"{what} raised {type(err).__name__}: {err}{where_in(err, problem.reference_path)}"


def _call_list(fn: Callable[[], Any], name: str, problem: Problem, errors: list[str],
               warnings: list[str]) -> list[Any] | None:
    """``fn()`` as a list, or None with an error saying why not."""
    try:
        value = fn()
    except Exception as err:  # noqa: BLE001 - any failure of problem code is reported, not raised
        errors.append(_raised(f"{name}()", err, problem))
        return None
    if isinstance(value, tuple):
        warnings.append(f"{name}() returns a tuple; KernelBench problems return a list")
        return list(value)
    if not isinstance(value, list):
        errors.append(f"{name}() must return a list, got {type(value).__name__}")
        return None
    return value


def _check_tensors(inputs: list[Any], errors: list[str]) -> bool:
    bad = [f"get_inputs()[{i}] is {str(v)[:40]!r} of type {type(v).__name__}, not a torch.Tensor"
           for i, v in enumerate(inputs) if not isinstance(v, torch.Tensor)]
    errors.extend(f"{message}; every element of get_inputs() must be a tensor" for message in bad)
    return not bad


def _check_interface(module: ModuleType, problem: Problem, errors: list[str]) -> bool:
    path = problem.reference_path
    model = getattr(module, "Model", None)
    if model is None:
        errors.append(f"{path}: defines no `Model`; a problem needs `class Model(nn.Module)`")
    elif not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        kind = "a class that does not derive from it" if isinstance(model, type) else f"a {type(model).__name__}"
        errors.append(f"{path}: `Model` must be a subclass of torch.nn.Module; it is {kind}")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name, None)):
            errors.append(f"{path}: defines no function `{name}()` (it must return a list)")
    return not errors


# --------------------------------------------------------------------------------------------- meta probe


def _build_model(module: ModuleType, init: list[Any], problem: Problem, errors: list[str]) -> torch.nn.Module | None:
    try:
        return module.Model(*init)
    except Exception as err:  # noqa: BLE001
        errors.append(_raised("Model(*get_init_inputs())", err, problem))
        return None


def _meta_forward(model: torch.nn.Module, inputs: list[Any], probe: _Probe) -> None:
    try:
        with torch.no_grad():
            output = model(*inputs)
    except Exception as err:  # noqa: BLE001
        probe.forward_error = f"{type(err).__name__}: {err}"
        return
    probe.output_shape = _shape_of(output)
    if probe.output_shape is None:
        probe.forward_error = f"forward returned a {type(output).__name__}, not a tensor or a tuple of tensors"
        return
    for tensor in _tensors_of(output):
        probe.elements += tensor.numel()
        probe.bytes += tensor.numel() * tensor.element_size()


def _probe_inputs(module: ModuleType, problem: Problem, probe: _Probe) -> list[Any] | None:
    """``get_inputs()`` on the meta device; for real only if it raises there (the meta device may be the trouble)."""
    meta_errors: list[str] = []
    with torch.device("meta"):
        inputs = _call_list(module.get_inputs, "get_inputs", problem, meta_errors, probe.warnings)
    if inputs is None and meta_errors[0].startswith("get_inputs() raised"):
        inputs = _call_list(module.get_inputs, "get_inputs", problem, probe.errors, [])
        if inputs is not None:
            probe.notes.append(f"get_inputs() fails on the meta device ({meta_errors[0]}); shapes from real inputs")
        return inputs
    probe.errors += meta_errors
    return inputs


def _meta_probe(module: ModuleType, problem: Problem) -> _Probe:
    """Build the model and inputs on the meta device and run forward there."""
    probe = _Probe()
    with torch.device("meta"):
        init = _call_list(module.get_init_inputs, "get_init_inputs", problem, probe.errors, probe.warnings)
    inputs = _probe_inputs(module, problem, probe)
    if init is None or inputs is None or not _check_tensors(inputs, probe.errors):
        return probe
    probe.input_shapes = [list(v.shape) for v in inputs]
    probe.elements = sum(v.numel() for v in inputs)
    probe.bytes = sum(v.numel() * v.element_size() for v in inputs)
    meta_errors: list[str] = []
    with torch.device("meta"):
        model = _build_model(module, init, problem, meta_errors)
        if model is not None:
            _meta_forward(model, inputs, probe)
    if model is None:  # maybe only the meta device is the trouble: build it for real to tell
        init = _call_list(module.get_init_inputs, "get_init_inputs", problem, probe.errors, [])
        if init is not None and _build_model(module, init, problem, probe.errors) is not None:
            probe.forward_error = f"Model cannot be built on the meta device ({meta_errors[0]})"
    return probe


def _gigabytes(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.2f} GB" if n_bytes < 1e10 else f"{n_bytes / 1e9:.0f} GB"


# ------------------------------------------------------------------------------------------- real forward


def _forward(module: ModuleType, model: torch.nn.Module, seed: int, device: str, problem: Problem,
             errors: list[str]) -> tuple[list[torch.Tensor], list[Any]] | None:
    """The outputs (as a list) and output shape of one forward on inputs drawn under ``seed``."""
    torch.manual_seed(seed)
    try:
        with torch.device(device):
            inputs = list(module.get_inputs())
    except Exception as err:  # noqa: BLE001
        errors.append(_raised(f"get_inputs() on {device}", err, problem))
        return None
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in inputs]
    try:
        with torch.no_grad():
            output = model(*inputs)
    except Exception as err:  # noqa: BLE001
        errors.append(_raised(f"forward on {device}", err, problem))
        return None
    shape = _shape_of(output)
    if shape is None:
        errors.append(f"forward returned a {type(output).__name__}; it must return a tensor or a tuple of tensors")
        return None
    return [t.detach() for t in _tensors_of(output)], shape


def _zeros_like(tensor: torch.Tensor) -> torch.Tensor:
    """Zeros of ``tensor``'s shape, dtype and device that take no memory (one element, expanded)."""
    return torch.zeros((), dtype=tensor.dtype, device=tensor.device).expand(tensor.shape)


def _all_finite(tensor: torch.Tensor) -> bool:
    """No NaN or inf in ``tensor``: with an infinite tolerance around zero only those fail."""
    return compare_outputs(tensor, _zeros_like(tensor), atol=math.inf, rtol=0.0).ok


def _degenerate_output(label: str, a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> list[str]:
    """Warnings about one output, ``a`` and ``b`` being its values for two input seeds."""
    if not (_all_finite(a) and _all_finite(b)):
        return [f"{label} contains NaN or inf for random inputs"]
    warnings: list[str] = []
    zeros = compare_outputs(_zeros_like(a), a, atol=atol, rtol=rtol)  # what a submission returning zeros gets
    if zeros.ok:
        warnings.append(f"degenerate: {label} is so close to zero (max |value| {zeros.max_abs_err:.3g}) "
                        f"that returning zeros would pass (atol={atol}, rtol={rtol})")
    seeds = compare_outputs(b, a, atol=atol, rtol=rtol)
    if seeds.ok:
        warnings.append(f"degenerate: {label} is (nearly) the same for two input seeds (max difference "
                        f"{seeds.max_abs_err:.3g}, within atol={atol}, rtol={rtol}), so a submission that "
                        f"ignores its input could pass")
    return warnings


def _degenerate(first: list[torch.Tensor], second: list[torch.Tensor], problem: Problem,
                warnings: list[str]) -> None:
    for index, (a, b) in enumerate(zip(first, second)):
        label = "output" if len(first) == 1 else f"output[{index}]"
        if not (a.is_complex() or b.is_complex()):
            warnings += _degenerate_output(label, a, b, *problem.settings.tolerances())


def _run_forward(module: ModuleType, problem: Problem, device: str, report: CheckReport) -> None:
    torch.manual_seed(0)
    init = _call_list(module.get_init_inputs, "get_init_inputs", problem, report.errors, [])
    model = _build_model(module, init, problem, report.errors) if init is not None else None
    if model is None:
        return
    model = model.to(device).eval()
    first = _forward(module, model, 0, device, problem, report.errors)
    second = _forward(module, model, 1, device, problem, report.errors) if first is not None else None
    if first is None or second is None:
        return
    shape = first[1]
    if report.output_shape is not None and shape != report.output_shape:
        report.warnings.append(f"output shape on {device} {shape} differs from the meta device's "
                               f"{report.output_shape}")
    report.output_shape = shape
    _degenerate(first[0], second[0], problem, report.warnings)
    report.notes.append(f"forward ran on {device} for two input seeds")
    if problem.settings.precision != "fp32":
        _check_precision(module, model, device, problem, report)


def _check_precision(module: ModuleType, model: torch.nn.Module, device: str, problem: Problem,
                     report: CheckReport) -> None:
    """PyTorch's own result in the problem's precision must run and pass its tolerance against float64 on the same
    cast weights and inputs: else no answer could be judged correct by it."""
    precision, dtype = problem.settings.precision, precision_dtype(problem.settings.precision)
    torch.manual_seed(0)
    with torch.device(device):
        inputs = in_precision(list(module.get_inputs()), dtype)
    low = copy.deepcopy(model).to(dtype)
    try:
        with torch.no_grad():
            own, exact = _tensors_of(low(*inputs)), _tensors_of(copy.deepcopy(low).double()(*to_double(inputs)))
    except Exception as err:  # noqa: BLE001
        report.errors.append(_raised(f"forward in {precision} on {device}", err, problem))
        return
    atol, rtol = problem.settings.tolerances()
    for index, (a, e) in enumerate(zip(own, exact)):
        found = compare_outputs(a, e, atol=atol, rtol=rtol, expected_dtype=dtype)
        if not found.ok:
            report.warnings.append(f"PyTorch's own {precision} result misses the tolerance against float64 "
                                   f"(output {index}: {found.reason}); no answer is likely to pass: raise atol/rtol "
                                   f"in {problem.toml_path}")
    report.notes.append(f"PyTorch's own {precision} result is within atol={atol:g} rtol={rtol:g} of float64")


# -------------------------------------------------------------------------------------------- public API


def require_device(device: str) -> None:
    """Raise ProblemError unless ``device`` is known and usable on this machine."""
    if device not in DEVICES:
        raise ProblemError(f"unknown device '{device}'; choose one of {', '.join(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ProblemError(f"--device cuda: no CUDA GPU is usable here (torch {torch.__version__}); "
                           f"run the check on a GPU machine, or use --device cpu")


def check_problem(problem: Problem, device: str = "cpu",
                  max_cpu_elements: int = DEFAULT_MAX_CPU_ELEMENTS) -> CheckReport:
    """Validate ``problem``: its interface, its shapes (meta device), and its forward where affordable."""
    require_device(device)
    report = CheckReport(problem.id)
    try:
        module = problem.load_module()
    except ProblemError as err:
        report.errors.append(str(err))
        return report
    if not _check_interface(module, problem, report.errors):
        return report
    probe = _meta_probe(module, problem)
    report.errors += probe.errors
    report.warnings += probe.warnings
    report.notes += probe.notes
    report.input_shapes, report.output_shape = probe.input_shapes, probe.output_shape
    if report.errors:
        return report
    if device == "cpu" and probe.elements > max_cpu_elements:
        report.notes.append(f"forward not run on CPU: problem is large ({_gigabytes(probe.bytes)}); "
                            f"run `evalkit problems check --device cuda` on a GPU machine")
        if probe.forward_error:
            report.warnings.append(f"forward fails on the meta device ({probe.forward_error}); "
                                   f"check it on a GPU")
        return report
    _run_forward(module, problem, device, report)
    if probe.forward_error and report.ok:
        report.notes.append(f"forward does not run on the meta device ({probe.forward_error}); "
                            f"`evalkit problems` cannot show its output shape")
    if device == "cuda":
        torch.cuda.empty_cache()
    return report


def describe_problem(problem: Problem) -> dict[str, Any]:
    """id, title, source, path, level, tags, kernelbench (the KernelBench origin, or None), input_shapes and
    output_shape (None if not computable)."""
    origin = problem.kernelbench.to_dict() if problem.kernelbench else None
    info: dict[str, Any] = {"id": problem.id, "title": problem.title, "source": problem.source,
                            "path": str(problem.path), "level": problem.level, "tags": list(problem.tags),
                            "kernelbench": origin, "input_shapes": [], "output_shape": None, "error": None}
    try:
        module = problem.load_module()
    except ProblemError as err:
        info["error"] = str(err)
        return info
    errors: list[str] = []
    if _check_interface(module, problem, errors):
        probe = _meta_probe(module, problem)
        errors += probe.errors
        info["input_shapes"], info["output_shape"] = probe.input_shapes, probe.output_shape
    info["error"] = errors[0] if errors else None
    return info
