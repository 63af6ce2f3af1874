"""The wire's encoding (`wire.encode`): trace records with orjson as the trace writer writes them, the rest with the
standard codec. Compared, on the same messages, with what the standard codec alone gave."""

from __future__ import annotations

import enum
import json
import math
import socket
from datetime import datetime, timezone

import pytest

from qitos.run.sides.wire import Channel, encode
from qitos.trace.writer import _dumps


def _standard(message):
    return json.loads(json.dumps(message, default=str, separators=(",", ":")))


def _event(payload):
    return {"op": "event", "kind": "tool_result", "phase": "ACT", "payload": payload, "step_id": 2, "ok": True,
            "error": None}


MESSAGES = [
    {"t": "ops", "ops": [_event({"output": "42", "n": 3, "x": 0.1, "none": None, "text": "é ☃ \u2028 \"q\" \\"})]},
    {"t": "call", "id": 7, "method": "model.complete",
     "payload": {"messages": [{"role": "user", "content": "hi"}], "tools": None, "params": {"temperature": 0.25}},
     "ops": [_event({"nested": {"a": [1, 2, {"b": None}]}, "when": datetime(2026, 1, 2, tzinfo=timezone.utc)}),
             {"op": "step", "record": {"step_id": 1, "visual_assets": []}, "assets": {}}]},
    {"t": "done", "outcome": {"stop_reason": "final", "final_answer": "x"}},
    {"ops": [_event({1: "an integer key", None: "a null key", 2.5: "a float key", True: "a bool key"})]},
    {"t": "ops", "ops": [{"op": "write_manifest"}], "empty": {}, "list": []},
]


@pytest.mark.parametrize("message", MESSAGES)
def test_messages_decode_to_what_the_standard_codec_gave(message):
    assert json.loads(encode(message)) == _standard(message)


def test_a_trace_record_is_written_the_same_whichever_codec_carried_it():
    """What the scoring side writes to the trace file from a record: the same line after either codec, non-finite
    floats included (null: the writer's orjson writes null where the standard codec wrote NaN)."""
    record = _event({"nan": math.nan, "inf": [math.inf, -math.inf], "x": 1.5, "when": datetime(2026, 1, 2)})
    via_wire = json.loads(encode({"t": "ops", "ops": [record]}))["ops"][0]
    via_standard = json.loads(json.dumps(record, default=str))
    assert _dumps(via_wire) == _dumps(via_standard)
    assert via_wire["payload"]["nan"] is None


def test_a_calls_parameters_and_an_outcome_keep_nan():
    """Outside the trace records a NaN stays NaN, as the standard codec sent it: the model client then refuses the
    request, as it would have (never a request with null in its place)."""
    message = {"t": "call", "id": 1, "method": "model.complete",
               "payload": {"messages": [], "params": {"temperature": math.nan}}, "ops": [_event({"ok": 1})]}
    decoded = json.loads(encode(message))
    assert math.isnan(decoded["payload"]["params"]["temperature"])
    outcome = json.loads(encode({"t": "done", "outcome": {"final_answer": math.inf}}))
    assert outcome["outcome"]["final_answer"] == math.inf


def test_what_orjson_refuses_goes_through_the_standard_codec():
    for payload in ({"big": 2 ** 70}, {"surrogate": "\ud800"}):
        message = {"t": "ops", "ops": [_event(payload)]}
        assert json.loads(encode(message)) == _standard(message)


def test_a_plain_enum_in_a_record_is_written_by_its_value():
    """The one value the codecs spell differently: a plain Enum (not a str or int one) in a trace record. The
    standard codec wrote `str(member)`; orjson, as the trace writer, writes its value."""

    class Colour(enum.Enum):
        RED = 1

    decoded = json.loads(encode({"t": "ops", "ops": [_event({"c": Colour.RED})]}))
    assert decoded["ops"][0]["payload"]["c"] == 1


def test_encoded_messages_cross_a_socket_whole():
    left, right = socket.socketpair()
    try:
        sender, reader = Channel(left), Channel(right)
        for message in MESSAGES[:3]:
            sender.send(message)
        assert [reader.recv(timeout=5) for _ in MESSAGES[:3]] == [_standard(m) for m in MESSAGES[:3]]
    finally:
        left.close()
        right.close()
