"""The protocol is strict: whatever a worker writes that is not the answer to the request in progress
raises ProtocolError (never another exception), and the trusted side then kills the worker, fails the
call as the submission's doing and answers the next call from a fresh worker."""

from __future__ import annotations

import os
import random
import struct
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from grader.host.failures import SubmissionFailure, WorkerCrash
from grader.host.limits import Limits
from grader.host.session import GradingSession
from grader.inside.shared import protocol, tensor_bytes
from grader.judge.structure import describe


def frame(body: bytes, blob: bytes = b"", magic: bytes = protocol.MAGIC, *, json_len: int | None = None) -> bytes:
    return struct.pack("<4sQQ", magic, len(body) if json_len is None else json_len, len(blob)) + body + blob


def read(data: bytes, **options) -> tuple[dict, dict]:
    with tempfile.TemporaryFile() as file:  # not a pipe: a frame may be bigger than a pipe's buffer
        file.write(data)
        file.seek(0)
        return protocol.read_message(file.fileno(), **options)


DEEP = 200_000


@pytest.mark.parametrize("data", [
    frame(b"[" * DEEP + b"]" * DEEP),
    frame(b'{"ok":true,"value":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"),
    frame(b"{}", magic=b"EVIL"),
    frame(b"{not json"),
    frame(b"\xff\xfe"),
    frame(b"[1, 2]"),
    frame(b'{"value": 1' + b"0" * 5000 + b"}"),  # an int past Python's digit limit
    frame(b"{}", json_len=protocol.MAX_JSON_BYTES + 1),
    frame(b"{}", b"x" * 64),  # not safetensors
], ids=["deep list", "deep object", "magic", "bad json", "not utf-8", "not an object", "huge int", "too big",
        "bad blob"])
def test_a_frame_that_does_not_decode_raises_protocol_error(data):
    with pytest.raises(protocol.ProtocolError):
        read(data)


def test_a_blob_over_the_limit_is_refused_before_it_is_read():
    with pytest.raises(protocol.ProtocolError, match="over the"):
        read(frame(b"{}", save_tensors({"t0": torch.zeros(1000)})), max_blob_bytes=100)


# --- replies -----------------------------------------------------------------------------------

ERROR = {"type": "ValueError", "message": "m", "traceback": "t",
         "where": {"file": "attention.py", "line": 3, "function": "attention", "code": "x"}}


@pytest.mark.parametrize("header", [
    {"id": 7, "ok": True, "value": None},
    {"id": 7, "ok": False, "error": ERROR},
    {"id": 7, "ok": False, "error": {**ERROR, "where": None}},
])
def test_a_reply_that_answers_the_request_passes(header):
    protocol.check_reply(header, 7)


@pytest.mark.parametrize("header", [
    {"id": 6, "ok": True, "value": 1},  # stale
    {"id": 8, "ok": True, "value": 1},  # forged ahead
    {"ok": True, "value": 1},
    {"id": [7], "ok": True, "value": 1},
    {"id": 7.0, "ok": True, "value": 1},
    {"id": True, "ok": True, "value": 1},
    {"id": 7, "value": 1},
    {"id": 7, "ok": 1, "value": 1},
    {"id": 7, "ok": True},
    {"id": 7, "ok": False},
    {"id": 7, "ok": False, "error": "boom"},
    {"id": 7, "ok": False, "error": {**ERROR, "message": [[[]]]}},
    {"id": 7, "ok": False, "error": {**ERROR, "where": [1]}},
    {"id": 7, "ok": False, "error": {**ERROR, "where": {"line": {"deep": []}}}},
])
def test_a_stale_forged_or_shapeless_reply_is_refused(header):
    with pytest.raises(protocol.ProtocolError):
        protocol.check_reply(header, 7)


def test_the_hello_is_request_0():
    protocol.check_reply({"id": 0, "ok": True, "value": {"pid": 1}}, 0)
    with pytest.raises(protocol.ProtocolError):
        protocol.check_reply({"id": 1, "ok": True, "value": {"pid": 1}}, 0)


# --- values ------------------------------------------------------------------------------------


def decoder(**tensors: torch.Tensor) -> protocol.Decoder:
    return protocol.Decoder(tensors, lambda value: ("handle", value["$handle"]), place=lambda t, device, grad: t)


@pytest.mark.parametrize("value", [
    {"$dtype": [1]}, {"$dtype": {"a": 1}}, {"$dtype": "complex64"},
    {"$tensor": [1]}, {"$tensor": {"k": 1}}, {"$tensor": "t9"},
    {"$tensor": "t0", "device": ["cpu"]}, {"$tensor": "t0", "device": "file:///etc"},
    {"$tensor": "t0", "requires_grad": "yes"}, {"$tensor": "t0", "requires_grad": [True]},
    {"$tensor": "t0", "extra": 1}, {"$tensor": "c0"},
    {"$float": [1]}, {"$float": "1.5"}, {"$float": None},
    {"$device": [1]}, {"$device": "cuda:x"}, {"$device": "cuda:" + "9" * 5000}, {"$device": None},
    {"$handle": [1]}, {"$handle": "1"}, {"$handle": True}, {"$handle": 1.0},
    {"$handle": 1, "type": [1]}, {"$handle": 1, "kind": {"a": 1}},
    {"$dict": "x"}, {"$dict": [[[1], 2]]}, {"$dict": [[True, 2]]}, {"$dict": [[1.5, 2]]}, {"$dict": [[1]]},
    {"$dict": [1]}, {"$tuple": {}}, {"$tuple": "ab"},
    {"$tuple": [], "$dict": []}, {"$pickle": "..."}, {}, {"a": 1},
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
], ids=repr)
def test_a_value_the_decoder_cannot_rebuild_raises_protocol_error_and_nothing_else(value):
    with pytest.raises(protocol.ProtocolError):
        decoder(t0=torch.zeros(2), c0=torch.zeros(2, dtype=torch.complex64)).decode(value)


def test_well_formed_tags_still_decode():
    x = torch.arange(3.0)
    back = decoder(t0=x).decode({"$tuple": [
        {"$tensor": "t0", "device": "cpu", "requires_grad": False}, {"$dtype": "float64"}, {"$device": "cuda:1"},
        {"$float": "-inf"}, {"$dict": [["a", 1], [2, [None]]]}, {"$handle": 4, "type": "m.T", "kind": "module"},
    ]})
    assert torch.equal(back[0], x) and back[1] is torch.float64 and back[2] == torch.device("cuda:1")
    assert back[3] == -float("inf") and back[4] == {"a": 1, 2: [None]} and back[5] == ("handle", 4)


def test_random_garbage_never_raises_anything_but_protocol_error():
    """Any JSON value, tagged or not, either decodes or is refused as a ProtocolError."""
    rng = random.Random(15)
    tags = ["$tensor", "$tuple", "$dict", "$float", "$dtype", "$device", "$handle", "device", "requires_grad",
            "type", "kind", "x"]
    leaves = [None, True, False, 0, 1, -1, 2**70, 1.5, "", "t0", "cpu", "cuda:0", "nan", "float32", "a"]

    def garbage(depth: int):
        roll = rng.random()
        if depth > 5 or roll < 0.4:
            return rng.choice(leaves)
        if roll < 0.65:
            return [garbage(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice(tags): garbage(depth + 1) for _ in range(rng.randrange(1, 3))}

    refused = 0
    for _ in range(3000):
        try:
            decoder(t0=torch.zeros(1)).decode(garbage(0))
        except protocol.ProtocolError:
            refused += 1
    assert refused > 500  # the garbage was garbage


NESTED = {"list": (lambda v: [v], lambda v: [v]), "tuple": (lambda v: (v,), lambda v: {"$tuple": [v]}),
          "dict": (lambda v: {"k": v}, lambda v: {"$dict": [["k", v]]})}


def nest(depth: int, wrap, leaf):
    for _ in range(depth):
        leaf = wrap(leaf)
    return leaf


@pytest.mark.parametrize("leaf", [1, "s", None, 2.5, True], ids=repr)
@pytest.mark.parametrize("kind", NESTED)
def test_the_depth_limit_holds_down_to_the_leaves_both_ways(kind, leaf):
    """Plain values in a list or dict are taken without a call each: the limit must still count their level."""
    wrap, encoded = NESTED[kind]
    deepest = protocol.Encoder(lambda obj: pytest.fail(f"unexpected object {obj!r}")).encode(
        nest(protocol.MAX_DEPTH, wrap, leaf))
    assert decoder().decode(deepest) == nest(protocol.MAX_DEPTH, wrap, leaf)
    with pytest.raises(protocol.ProtocolError, match="levels deep"):
        protocol.Encoder(lambda obj: {}).encode(nest(protocol.MAX_DEPTH + 1, wrap, leaf))
    with pytest.raises(protocol.ProtocolError, match="levels deep"):
        decoder().decode(nest(protocol.MAX_DEPTH + 1, encoded, leaf))


@pytest.mark.parametrize("many", [lambda n: [0] * n, lambda n: tuple(range(n)), lambda n: dict.fromkeys(range(n), "")],
                         ids=["list", "tuple", "dict"])
def test_the_item_limit_counts_each_value_once(many):
    protocol.Encoder(lambda obj: {}).encode(many(protocol.MAX_ITEMS - 1))  # the container is an item too
    with pytest.raises(protocol.ProtocolError, match="more than"):
        protocol.Encoder(lambda obj: {}).encode(many(protocol.MAX_ITEMS))


def test_tensors_go_out_in_the_bytes_safetensors_itself_writes():
    """save_tensors points safetensors at each tensor's memory: views, strides, a negative view, an empty tensor
    and every dtype must come out as safetensors' own writer makes them from contiguous copies."""
    base = torch.randn(4, 6, 8, requires_grad=True)
    tensors = {"transposed": base.transpose(0, 2), "view": base[1:3, 2], "same_view": base[1:3, 2],
               "expanded": torch.ones(3, 1).expand(3, 4), "negative": torch.randn(3)._neg_view(),
               "channels_last": torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
               "empty": torch.zeros(0, 5), "scalar": torch.tensor(3.5)}
    tensors |= {str(dtype): (torch.randn(3, 4) * 10).to(dtype) for dtype in tensor_bytes._DTYPES.values()}
    copies = {name: t.detach().resolve_neg().clone(memory_format=torch.contiguous_format)
              for name, t in tensors.items()}
    blob = protocol.save_tensors(tensors)
    assert blob == save_tensors(copies)
    back = load_tensors(blob)
    assert all(torch.equal(back[name], t) and back[name].dtype == t.dtype for name, t in copies.items())


def test_a_message_bigger_than_the_pipe_arrives_whole():
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # as the trusted side writes: partial writes, then a wait for room
    x = torch.randn(300_000)
    got = []
    reader = threading.Thread(target=lambda: got.append(protocol.read_message(read_fd, deadline=time.monotonic() + 30)))
    reader.start()
    protocol.write_message(write_fd, {"value": 1}, {"t0": x}, deadline=time.monotonic() + 30)
    reader.join()
    os.close(read_fd)
    os.close(write_fd)
    header, tensors = got[0]
    assert header == {"value": 1} and torch.equal(tensors["t0"], x)


def test_a_peer_that_stops_reading_times_the_write_out():
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    with pytest.raises(protocol.Timeout):
        protocol.write_message(write_fd, {"value": 1}, {"t0": torch.zeros(300_000)}, deadline=time.monotonic() + 0.2)
    os.close(read_fd)
    os.close(write_fd)


# --- a real worker -----------------------------------------------------------------------------

# Each forge_<kind>() writes to the worker's own reply pipe, as hostile code can, then returns 1.
FORGER = textwrap.dedent('''
    import functools, json, os, struct, sys

    def _local(function, name):
        frame = sys._getframe()
        while not (frame.f_code.co_name == function and name in frame.f_locals):
            frame = frame.f_back
        return frame.f_locals[name]

    def _frame(header, magic=b"GRDR"):
        body = header if isinstance(header, bytes) else json.dumps(header).encode()
        return struct.pack("<4sQQ", magic, len(body), 0) + body

    def _forge(kind):
        fd, request_id = _local("serve", "fd_out"), _local("handle", "request")["id"]
        data = {
            "deep_json": _frame(b"[" * 200_000 + b"]" * 200_000),
            "bad_magic": _frame({"id": request_id, "ok": True, "value": 2}, magic=b"EVIL"),
            "answers_the_next_request": _frame({"id": request_id + 1, "ok": True, "value": 2}),
            "no_id": _frame({"ok": True, "value": 2}),
            "bad_dtype": _frame({"id": request_id, "ok": True, "value": {"$dtype": [1]}}),
            "bad_tensor": _frame({"id": request_id, "ok": True, "value": {"$tensor": [1]}}),
            "deep_error": _frame({"id": request_id, "ok": False, "error": {"type": "E", "message": [[[[]]]]}}),
            "neither": _frame({"id": request_id, "value": 2}),
            "ahead": _frame({"id": request_id, "ok": True, "value": 2}),  # the real reply (1) follows it
        }[kind]
        os.write(fd, data)
        return 1

    KINDS = ["deep_json", "bad_magic", "answers_the_next_request", "no_id", "bad_dtype", "bad_tensor",
             "deep_error", "neither", "ahead"]
    for _kind in KINDS:
        globals()["forge_" + _kind] = functools.partial(_forge, _kind)

    def add(a, b):
        return a + b

    def apply(fn, x):
        return fn(x)

    import torch

    class Scale(torch.nn.Module):
        def __init__(self, factor):
            super().__init__()
            self.factor = torch.nn.Parameter(torch.tensor(float(factor)))
            self.type = "scale"  # a name nn.Module gives a method

        def forward(self, x):
            return x * self.factor

    def pid():
        return os.getpid()
''')
KINDS = ["deep_json", "bad_magic", "answers_the_next_request", "no_id", "bad_dtype", "bad_tensor", "deep_error",
         "neither"]


@pytest.fixture(scope="module")
def forger(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forger")
    (folder / "attention.py").write_text(FORGER)
    session = GradingSession.open(Path(folder), device="cpu", limits=Limits(call_timeout_s=30))
    yield session
    session.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_forged_frame_kills_the_worker_fails_the_call_and_the_next_call_is_answered_by_a_fresh_worker(forger,
                                                                                                       kind):
    impl = forger.impl()
    before = impl.attention.pid()
    with pytest.raises(WorkerCrash, match=r"attention\.forge_\w+\(\) broke the grader's protocol .*: the worker "
                                          r"was restarted"):
        getattr(impl.attention, f"forge_{kind}")()
    assert forger.connection.process is None, "the worker that broke the protocol is still in use"
    assert forger.connection.sandbox_failure is None, "a submission's forgery was taken for the sandbox's failure"
    for a in range(3):  # no stale reply answers a later request
        assert impl.attention.add(a, 10) == a + 10
    assert impl.attention.pid() != before


def test_a_forged_answer_with_the_right_id_is_the_submissions_answer_and_the_real_one_then_kills_the_worker(forger):
    """Code in the worker may answer for itself; the reply that then follows it answers nothing."""
    impl = forger.impl()
    assert impl.attention.forge_ahead() == 2  # the forgery came first
    with pytest.raises(WorkerCrash, match=r"attention\.add\(\) broke the grader's protocol \(a reply with id \d+ "
                                          r"arrived where the reply to request \d+ was due\)"):
        impl.attention.add(1, 2)
    assert impl.attention.add(1, 2) == 3


def test_a_modules_method_is_named_in_the_call_that_uses_it_one_round_trip_not_two(forger):
    impl = forger.impl()
    model = impl.attention.Scale(3.0)
    requests = forger.connection.process._last_id
    assert model.eval()._handle == model._handle  # Module.eval returns the module itself
    assert torch.equal(model.forward(torch.ones(2)), torch.full((2,), 3.0))
    assert model.load_state_dict({"factor": torch.tensor(2.0)}) == ([], [])
    assert forger.connection.process._last_id == requests + 3
    assert model.training is False


def test_a_modules_method_used_other_than_by_a_call_is_looked_up_first(forger):
    impl = forger.impl()
    model = impl.attention.Scale(3.0)
    forward = model.forward
    assert torch.equal(impl.attention.apply(forward, torch.ones(2)), torch.full((2,), 3.0))
    assert forward._method is None  # it stands for the bound method in the worker now
    assert torch.equal(forward(torch.ones(1)), torch.full((1,), 3.0))
    with pytest.raises(AssertionError, match=r"should be a torch\.nn\.Module"):
        describe(model.train)


def test_a_method_name_the_submission_gave_to_data_fails_with_a_hint(forger):
    impl = forger.impl()
    model = impl.attention.Scale(3.0)
    with pytest.raises(SubmissionFailure, match="not callable"):
        model.type()
    with pytest.raises(SubmissionFailure, match=r"should be the method every torch\.nn\.Module has, got a str"):
        impl.attention.apply(model.type, 1)
    assert torch.equal(model(torch.ones(1)), torch.full((1,), 3.0))  # the worker lives on
