"""What a reference worker sends the judge is read through declared claims and a JSON codec of plain values, each
checked on arrival: anything else is a protocol violation or a refused value, never code run in the judge."""

from __future__ import annotations

import json
import pickle

import pytest
import torch

from evalkit.sandbox import reference_protocol as rp
from evalkit.sandbox.protocol import ProtocolViolation, RequestRefused
from evalkit.sandbox.values import MAX_TENSOR_ELEMENTS, decode, encode


@pytest.mark.parametrize("value", [
    [16, 3.5, None, True, "relu"], [(3, 3), {"stride": 2}], [torch.float16], [torch.arange(6).reshape(2, 3)],
    [torch.tensor([1.5, -2.0], dtype=torch.bfloat16)], [torch.Size([4, 4])],
])
def test_plain_values_travel_as_json_and_come_back_equal(value):
    back = decode(json.loads(json.dumps(encode(value))))
    assert len(back) == len(value)
    for got, sent in zip(back, value):
        if isinstance(sent, torch.Tensor):
            assert got.dtype == sent.dtype and torch.equal(got, sent)
        else:
            assert got == (tuple(sent) if isinstance(sent, torch.Size) else sent)


@pytest.mark.parametrize("data", [
    {"pickle": "gASV"}, {"list": [1], "tuple": [2]}, {"tensor": {"dtype": "float32", "shape": [2], "values": [1.0]}},
    {"tensor": {"dtype": "object", "shape": [1], "values": [1]}}, {"dtype": "complex128"},
    {"tensor": {"dtype": "float32", "shape": [MAX_TENSOR_ELEMENTS + 1], "values": []}},
    {"dict": [[1, 2]]}, {"list": [{"list": [{"list": [{"list": [{"list": [{"list": [{"list": [{"list": [
        {"list": [{"list": []}]}]}]}]}]}]}]}]}]}, 2**70,
])
def test_anything_but_a_plain_value_is_refused(data):
    with pytest.raises(ValueError):
        decode(data)


def test_an_object_that_is_no_plain_value_cannot_be_encoded():
    with pytest.raises(ValueError, match="builtins.object"):
        encode([object()])


def _loaded(**changes):
    reply = {"op": "loaded", "init_inputs": {"list": [16]}, "state": [{"shape": [16, 16], "dtype": "float32",
                                                                        "name": "w"}],
             "inputs": [{"shape": [8, 16], "dtype": "float32"}], "values": [None],
             "own": [{"shape": [8, 16], "dtype": "float32"}], "expected": [{"shape": [8, 16], "dtype": "float64"}],
             "precision": "float64"}
    return json.dumps({**reply, **changes}).encode()


def test_a_well_formed_reply_is_read_as_its_claim():
    claim = rp.decode_reply(_loaded())
    assert isinstance(claim, rp.Loaded) and claim.state == [rp.TensorSpec([16, 16], "float32", "w")]
    assert rp.layout(claim.inputs + claim.own) == ([0, 512], 1024)


@pytest.mark.parametrize("raw", [
    b"not json", json.dumps({"op": "pwned"}).encode(), json.dumps({"op": "done"}).encode(),
    json.dumps({"op": "done", "request": "time", "ms": -1}).encode(),
    json.dumps({"op": "done", "request": "time", "ms": 1, "extra": 1}).encode(),
    _loaded(precision="float16"), _loaded(values=[]), _loaded(own=[]),
    _loaded(inputs=[{"shape": [-1], "dtype": "float32"}]), _loaded(inputs=[{"shape": [1], "dtype": "object"}]),
    _loaded(inputs=[{"shape": [1] * 40, "dtype": "float32"}]), _loaded(state=[{"shape": "16", "dtype": "float32"}]),
    _loaded(state=[{"shape": [1], "dtype": "float32"}] * (rp.MAX_TENSORS + 1)),
    b"[" * 100_000,
])
def test_a_malformed_reply_is_a_protocol_violation(raw):
    with pytest.raises(ProtocolViolation):
        rp.decode_reply(raw)


def test_a_failures_text_is_bounded_and_made_printable():
    claim = rp.decode_reply(json.dumps({"op": "failed", "stage": "import", "message": "x\x00" * 10**5}).encode())
    assert len(claim.message) == rp.MAX_MESSAGE and "\x00" not in claim.message


def test_the_worker_refuses_a_request_of_another_version_or_kind():
    setup = rp.setup("serve", "p/reference.py", "cpu", "fp32", 1, 2, {})
    assert rp.read_request(pickle.loads(pickle.dumps(setup)), first=True) == setup
    for wrong, first in ((rp.ReferenceRequest("inputs", version=0), False), (rp.ReferenceRequest("shell"), False),
                         (setup, False), (rp.ReferenceRequest("exit"), True),
                         (rp.setup("serve", "p", "cpu", "fp64", 1, 2, {}), True)):
        with pytest.raises(RequestRefused):
            rp.read_request(wrong, first=first)
