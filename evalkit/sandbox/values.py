"""Both sides of the trust boundary: plain values as JSON, to carry what untrusted code computed (a reference's
``get_init_inputs()``, the entries of its ``get_inputs()`` that are no tensors) back to the judge without pickle,
which would run the sender's code in the judge.

``encode`` (the worker's side) writes a value as JSON data, each container and each value JSON has no word for
tagged: ``{"tuple": [...]}``, ``{"tensor": {"dtype", "shape", "values"}}``. ``decode`` (the judge's side) reads
only that: every node's kind, the depth, the number of nodes, a string's length and a tensor's size are checked,
and anything else is ``ValueError`` naming what it found. A tensor travels by value, so only small ones do
(``MAX_TENSOR_ELEMENTS``); a problem's large tensors go through the judge's buffers instead.

Standard library only at import (the worker imports this before any reference code runs); torch is imported
where a tensor, a dtype or a size is met.
"""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 8
MAX_NODES = 10_000
MAX_STRING = 4096
MAX_TENSOR_ELEMENTS = 65_536
TENSOR_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
_TAGS = ("list", "tuple", "dict", "tensor", "dtype")


def _count(depth: int, nodes: list[int]) -> None:
    """One more part of a value at ``depth`` (``nodes[0]`` counts them): ``ValueError`` past either bound."""
    nodes[0] += 1
    if depth > MAX_DEPTH or nodes[0] > MAX_NODES:
        raise ValueError(f"a value nested deeper than {MAX_DEPTH} or of more than {MAX_NODES} parts")


def encode(value: Any) -> Any:
    """``value`` as JSON data (``ValueError`` for anything ``decode`` would not read back)."""
    return _encode(value, 0, [0])


def _encode(value: Any, depth: int, nodes: list[int]) -> Any:
    _count(depth, nodes)
    if value is None or isinstance(value, (bool, int, float)):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": _tensor_fields(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_encode(item, depth + 1, nodes) for item in value]}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"dict": [[_string(key), _encode(item, depth + 1, nodes)] for key, item in value.items()]}
    raise ValueError(f"a {type(value).__module__}.{type(value).__qualname__}: only numbers, strings, None, lists, "
                     f"tuples, dicts with string keys, dtypes and small tensors can be carried")


def _number(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise ValueError(f"an integer of {value.bit_length()} bits")
    return value


def _string(text: str) -> str:
    if len(text) > MAX_STRING:
        raise ValueError(f"a string of {len(text)} characters (at most {MAX_STRING})")
    return text


def _tensor_fields(tensor: Any) -> dict[str, Any]:
    import torch

    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in TENSOR_DTYPES or tensor.numel() > MAX_TENSOR_ELEMENTS or tensor.layout != torch.strided:
        raise ValueError(f"a tensor of {tensor.numel()} {dtype} elements (at most {MAX_TENSOR_ELEMENTS}, dense, of "
                         f"{', '.join(TENSOR_DTYPES)})")
    values = tensor.detach().to("cpu").reshape(-1)
    if dtype == "bfloat16":
        values = values.float()
    return {"dtype": dtype, "shape": list(tensor.shape), "values": values.tolist()}


def decode(data: Any) -> Any:
    """The value ``data`` (from ``encode``, through JSON) stands for; ``ValueError`` for anything else."""
    return _decode(data, 0, [0])


def _decode(data: Any, depth: int, nodes: list[int]) -> Any:
    _count(depth, nodes)
    if data is None or isinstance(data, (bool, float)):
        return data
    if isinstance(data, int):
        return _number(data)
    if isinstance(data, str):
        return _string(data)
    if not (isinstance(data, dict) and len(data) == 1 and next(iter(data)) in _TAGS):
        raise ValueError(f"an entry {repr(data)[:60]}: expected a number, a string, null or one of {_TAGS}")
    tag, body = next(iter(data.items()))
    if tag in ("list", "tuple"):
        items = [_decode(item, depth + 1, nodes) for item in _sequence(body, tag)]
        return items if tag == "list" else tuple(items)
    if tag == "dict":
        pairs = _sequence(body, tag)
        if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in pairs):
            raise ValueError("a dict whose entries are not [string key, value] pairs")
        return {_string(key): _decode(item, depth + 1, nodes) for key, item in pairs}
    import torch

    if tag == "dtype":
        if body not in TENSOR_DTYPES:
            raise ValueError(f"a dtype {repr(body)[:40]}, not one of {', '.join(TENSOR_DTYPES)}")
        return getattr(torch, body)
    return _decode_tensor(body, torch)


def _sequence(body: Any, tag: str) -> list[Any]:
    if not isinstance(body, list):
        raise ValueError(f"a {tag} whose body is a {type(body).__name__}, not a list")
    return body


def _decode_tensor(body: Any, torch: Any) -> Any:
    if not isinstance(body, dict) or set(body) != {"dtype", "shape", "values"}:
        raise ValueError("a tensor without exactly its dtype, shape and values")
    dtype, shape, values = body["dtype"], body["shape"], body["values"]
    if dtype not in TENSOR_DTYPES:
        raise ValueError(f"a tensor of dtype {repr(dtype)[:40]}, not one of {', '.join(TENSOR_DTYPES)}")
    if not (isinstance(shape, list) and len(shape) <= MAX_DEPTH * 2
            and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_TENSOR_ELEMENTS for n in shape)):
        raise ValueError(f"a tensor of shape {repr(shape)[:60]}")
    count = math.prod(shape)
    if count > MAX_TENSOR_ELEMENTS or not isinstance(values, list) or len(values) != count:
        raise ValueError(f"a tensor of shape {shape} carrying {len(values) if isinstance(values, list) else 'no'} "
                         f"values (at most {MAX_TENSOR_ELEMENTS})")
    kind = bool if dtype == "bool" else (int, float) if dtype.startswith("float") or dtype == "bfloat16" else int
    if not all(isinstance(v, kind) and (dtype == "bool" or not isinstance(v, bool)) for v in values):
        raise ValueError(f"a {dtype} tensor holding a value of another kind")
    return torch.tensor(values, dtype=getattr(torch, dtype)).reshape(shape)
