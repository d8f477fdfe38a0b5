"""Untrusted side (the worker's harness, inside the submission's interpreter): where a call's outputs lie, and the
stand-in model a calibration ping calls, whose outputs have the same form.

The worker never copies an output anywhere: it keeps each call's result where forward left it until its next
request, and tells the judge where that is (``protocol.PlaceClaim``). On a GPU that is an offset into one of the
worker's CUDA allocations, which the reply names by IPC handle (``protocol.SegmentClaim``); on a CPU an address
in the worker's memory. The judge reads it itself, once the worker is frozen (``sandbox.worker_memory``). Like
everything here this is the submission's to rewrite: a place is a claim, and a wrong one only makes the judge
read something that is not the output.
"""

from __future__ import annotations

from typing import Any, Protocol

from evalkit.sandbox import protocol


class SegmentNamer(Protocol):
    """What names the allocation holding a device address: ``cuda_buffers.SegmentExporter``, or a test's."""

    def segment(self, address: int) -> tuple[int, int, bytes]: ...


class OutputPlacer:
    """Checks each call's result against the setup's form (``specs``: shape and dtype per output) and says where
    its tensors lie. On a GPU each output's allocation is named by its IPC handle, asked of the driver once per
    allocation (``cuda_buffers.SegmentExporter``)."""

    def __init__(self, device: str, specs: list[dict[str, Any]], exporter: SegmentNamer | None = None) -> None:
        self.device, self.specs = device, specs
        self._exporter = exporter  # a ``SegmentExporter`` (or a test's), made at the first GPU output

    def place(self, results: list[Any]) -> tuple[bool, dict[str, Any], list[list[Any]], list[Any], list[Any]]:
        """For ``results`` (one per call): whether every output had the setup's form, the form of the first call's
        that did not (else of the last call's), each call's places in their wire form (``PlaceClaim.wire``), the
        allocations they name, and what to keep alive until the next request (the outputs, or copies of those no
        handle could name)."""
        places: list[list[Any]] = []
        named: dict[bytes, tuple[int, int]] = {}  # handle -> (its index in this reply's segments, its size)
        kept: list[Any] = []
        outputs: list[Any] = []
        for result in results:
            outputs = _outputs(result)
            if not self._formed(outputs):
                return False, _form(outputs), [], [], kept
            placed = []
            for out in outputs:
                place, out = self._place_one(out.detach(), named)
                placed.append(place)
                kept.append(out)
            places.append(placed)
        segments = [protocol.SegmentClaim(handle=handle.hex(), nbytes=size) for handle, (_, size) in named.items()]
        return True, _form(outputs), places, segments, kept

    def _formed(self, outputs: list[Any]) -> bool:
        import torch

        if len(outputs) != len(self.specs) or not all(isinstance(o, torch.Tensor) for o in outputs):
            return False
        return all(list(o.shape) == spec["shape"] and str(o.dtype) == "torch." + spec["dtype"]
                   and o.device.type == self.device for o, spec in zip(outputs, self.specs))

    def _place_one(self, out: Any, named: dict[bytes, tuple[int, int]]) -> tuple[list[Any], Any]:
        strides = list(out.stride())
        if self.device != "cuda":
            return [-1, out.data_ptr(), strides], out
        found = self._segment_of(out.data_ptr())
        if found is None:
            out = out.clone()  # memory no handle names (expandable segments, an input mapped from the judge)
            strides = list(out.stride())
            found = self._segment_of(out.data_ptr())
        if found is None:
            raise RuntimeError("the harness could not name the GPU allocation of an output")
        start, size, handle = found
        index = named.setdefault(handle, (len(named), size))[0]
        return [index, out.data_ptr() - start, strides], out

    def _segment_of(self, address: int) -> tuple[int, int, bytes] | None:
        from evalkit.sandbox.cuda_buffers import CudaDriverError, SegmentExporter

        self._exporter = self._exporter or SegmentExporter()
        try:
            found: tuple[int, int, bytes] = self._exporter.segment(address)
        except CudaDriverError:
            return None
        return found


def _outputs(result: Any) -> list[Any]:
    return (list(result) if isinstance(result, (tuple, list)) else [result])[:protocol.MAX_ITEMS]


def _form(outputs: list[Any]) -> dict[str, Any]:
    import torch

    return {"types": [type(o).__module__ + "." + type(o).__qualname__ for o in outputs],
            "shapes": [list(o.shape) if isinstance(o, torch.Tensor) else None for o in outputs],
            "dtypes": [str(o.dtype) if isinstance(o, torch.Tensor) else None for o in outputs]}

class StandIn:
    """What a calibration ping calls in place of a model: one tiny kernel on a GPU (the hand-over of the GPU between
    the judge's process and this one, which every call pays), nothing on a CPU; it returns outputs of the form the
    setup gives, made once."""

    def __init__(self, device: str, specs: list[dict[str, Any]]) -> None:
        import torch

        self._flag = torch.zeros(1, device=device) if device == "cuda" else None
        outputs = [torch.empty(spec["shape"], dtype=getattr(torch, spec["dtype"]), device=device) for spec in specs]
        self._result = outputs[0] if len(outputs) == 1 else outputs

    def __call__(self, *inputs: Any) -> Any:
        if self._flag is not None:
            self._flag.add_(1)
        return self._result
