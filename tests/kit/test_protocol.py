"""The protocol is strict: whatever a worker writes that is not the answer to the request in progress
raises ProtocolError (never another exception), and the trusted side then kills the worker, fails the
call as the submission's doing and answers the next call from a fresh worker."""

from __future__ import annotations

import random
import struct
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as save_tensors

from grader.host.failures import WorkerCrash
from grader.host.limits import Limits
from grader.host.session import GradingSession
from grader.inside.shared import protocol


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
