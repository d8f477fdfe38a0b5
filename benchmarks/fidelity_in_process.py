"""The field's method for benchmarks/fidelity.py, in a fresh process per answer: the reference and the answer in one
interpreter, timed with device events around each forward (KernelBench's way), nothing imported from evalkit.

    python3 benchmarks/fidelity_in_process.py JOB   (JOB: the JSON ``fidelity.in_process`` writes; stdout: one JSON line)
"""
import importlib.machinery
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
import torch.utils.cpp_extension as cpp_extension

del sys.path[0]  # this script's folder: an answer's imports find nothing of the benchmarks
job = json.loads(sys.argv[1])
device = job["device"]
build_inline = cpp_extension.load_inline


def built_inline(*args, **kwargs):
    """The extension evalkit built for this answer (the same binary it timed), else a build of torch's own."""
    name = kwargs.get("name") or args[0]
    library = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", ""), name, name + ".so")
    if not os.path.exists(library):
        return build_inline(*args, **kwargs)
    loader = importlib.machinery.ExtensionFileLoader(name, library)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, library, loader=loader))
    loader.exec_module(module)
    return module


cpp_extension.load_inline = built_inline


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cast(value, dtype):
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        return value.to(dtype) if value.is_floating_point() else value
    return value


def synchronize():
    if device == "cuda":
        torch.cuda.synchronize()


def call_ms(module, inputs):
    """One forward timed as the field times it: device events around it after a synchronize (the host clock on a
    CPU). (Its milliseconds, its output.)"""
    synchronize()
    if device != "cuda":
        begun = time.perf_counter()
        out = module(*inputs)
        return (time.perf_counter() - begun) * 1e3, out
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = module(*inputs)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end), out


def mean_ms(model, inputs, warmup, calls):
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        return statistics.fmean(call_ms(model, inputs)[0] for _ in range(calls))


reference = load(job["reference"], "reference")
answer = load(job["answer"], "answer")
dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[job["precision"]]
torch.manual_seed(job["seed"])
model = reference.Model(*reference.get_init_inputs()).to(device).to(dtype).eval()
torch.manual_seed(job["seed"])
new = answer.ModelNew(*reference.get_init_inputs())
own, theirs = new.state_dict(), model.state_dict()
if set(own) == set(theirs) and all(own[k].shape == theirs[k].shape for k in own):
    new.load_state_dict(theirs)
new = new.to(device).to(dtype).eval()
def draw_inputs():
    with torch.device(device):  # as evalkit draws them: on the device, never through the host
        return [cast(v, dtype) for v in reference.get_inputs()]


torch.manual_seed(job["seed"] + 1)
inputs = draw_inputs()
warmup, calls = job["warmup"], job["calls"]
if mean_ms(model, inputs, warmup, calls) < job["micro_ms"]:
    calls = job["micro_calls"]
compiled = torch.compile(model) if job["compile"] else None


def distinct_inputs_ms(module, sets):
    """Diagnosis: the mean time of a call by events around it, as evalkit's worker times it: a distinct set of
    inputs each call, every call's output kept until the last (no figure of the field's method)."""
    return paced_ms(module, sets, len(sets), len(sets), 0.0, False, True)


def paced_ms(module, sets, calls, block, gap_s, flush, keep):
    """Diagnosis: the mean time of a call by events around it when calls come in blocks of ``block`` (evalkit's
    requests), the GPU idle ``gap_s`` before each block, L2 flushed before it (``flush``), each block's outputs
    kept until the next (``keep``), inputs cycling through ``sets``."""
    flusher = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device=device) if flush and device == "cuda" else None
    kept, times = [], []
    with torch.no_grad():
        for call in range(calls):
            if call % block == 0:
                kept = []
                synchronize()
                time.sleep(gap_s)
                if flusher is not None:
                    flusher.zero_()
            took, out = call_ms(module, sets[call % len(sets)])
            times.append(took)
            if keep:
                kept.append(out)
    return statistics.fmean(times)


def paced(found):
    """Each pacing of ``job["variants"]``: the reference's and the answer's mean, in turn, ``rounds`` times."""
    block, gap_s = job["block"], job["gap_ms"] / 1e3
    ring = [inputs, draw_inputs()]
    pacings = {"kb": ([inputs], 1, 0.0, False, False), "gaps": ([inputs], 1, gap_s, False, False),
               "blocks": ([inputs], block, gap_s, False, False), "evalkit": (ring, block, gap_s, True, True)}
    for name in job["variants"]:
        sets, size, pause, flush, keep = pacings[name]
        found[f"{name}_reference_ms"] = paced_ms(model, sets, job["variant_calls"], size, pause, flush, keep)
        found[f"{name}_answer_ms"] = paced_ms(new, sets, job["variant_calls"], size, pause, flush, keep)


rounds = []
for _ in range(job["rounds"]):
    found = {"reference_ms": mean_ms(model, inputs, warmup, calls), "answer_ms": mean_ms(new, inputs, warmup, calls),
             "calls": calls}
    if compiled is not None:
        found["compile_ms"] = mean_ms(compiled, inputs, max(warmup, 3), calls)
    if job["distinct"] and device == "cuda" and calls == job["micro_calls"]:  # a microsecond problem's diagnosis
        sets = [draw_inputs() for _ in range(job["distinct"])]
        found["distinct_reference_ms"] = distinct_inputs_ms(model, sets)
        found["distinct_answer_ms"] = distinct_inputs_ms(new, sets)
    if job["variants"]:
        paced(found)
    rounds.append(found)
print(json.dumps(rounds))
