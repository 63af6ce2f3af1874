"""The scoring side's hub (one thread reading every job's socket): a slow or hostile job holds no other up, a
call is answered before what follows it is applied, and a closed socket ends the job after what came before."""

from __future__ import annotations

import socket
import struct
import threading
import time
from typing import Any

import pytest

from qitos.run.sides.hub import CALL, Hub
from qitos.run.sides.wire import Channel, WireClosed


class Recorder:
    """A conversation that notes each message; `done` ends it, `call` goes to the job's thread."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_message(self, message: dict[str, Any], now: float) -> Any:
        self.seen.append(message["t"])
        if message["t"] == "call":
            return CALL
        if message["t"] == "done":
            return {"ended": True}
        return None

    def on_tick(self, now: float) -> Any:
        return None


def _pair() -> tuple[Channel, socket.socket]:
    ours, theirs = socket.socketpair()
    return Channel(ours), theirs


def _frame(payload: bytes) -> bytes:
    return struct.pack("!I", len(payload)) + payload


def test_a_half_sent_message_holds_no_other_job_up() -> None:
    hub = Hub()
    stalled, stalled_agent = _pair()
    quick, quick_agent = _pair()
    results: dict[str, Any] = {}
    first = threading.Thread(target=lambda: results.update(stalled=hub.converse(stalled, Recorder(), None)))
    first.start()
    body = b'{"t":"done"}'
    stalled_agent.sendall(_frame(body)[:7])  # the header and part of the body, then nothing
    time.sleep(0.2)
    quick_agent.sendall(_frame(b'{"t":"ops"}') + _frame(body))
    started = time.monotonic()
    assert hub.converse(quick, Recorder(), None) == {"ended": True}
    assert time.monotonic() - started < 2
    assert first.is_alive(), "the stalled job waits for the rest of its message"
    stalled_agent.sendall(_frame(body)[7:])
    first.join(5)
    assert results["stalled"] == {"ended": True}


def test_what_follows_a_call_is_applied_after_its_answer() -> None:
    hub = Hub()
    channel, agent = _pair()
    conversation = Recorder()
    answered_when: list[list[str]] = []

    def answer(message: dict[str, Any]) -> None:
        time.sleep(0.3)  # a slow service: the hub must not read on meanwhile
        answered_when.append(list(conversation.seen))

    agent.sendall(_frame(b'{"t":"call"}') + _frame(b'{"t":"ops"}') + _frame(b'{"t":"done"}'))
    assert hub.converse(channel, conversation, answer) == {"ended": True}
    assert answered_when == [["call"]]
    assert conversation.seen == ["call", "ops", "done"]


def test_a_closed_socket_ends_the_job_after_the_messages_before_it() -> None:
    hub = Hub()
    channel, agent = _pair()
    conversation = Recorder()
    agent.sendall(_frame(b'{"t":"ops"}') + _frame(b'{"t":"ops"}'))
    agent.close()
    with pytest.raises(WireClosed):
        hub.converse(channel, conversation, None)
    assert conversation.seen == ["ops", "ops"]


def test_a_message_that_is_not_json_ends_only_its_job() -> None:
    hub = Hub()
    bad, bad_agent = _pair()
    good, good_agent = _pair()
    bad_agent.sendall(_frame(b"not json"))
    with pytest.raises(WireClosed):
        hub.converse(bad, Recorder(), None)
    good_agent.sendall(_frame(b'{"t":"done"}'))
    assert hub.converse(good, Recorder(), None) == {"ended": True}


class Forwarding(Recorder):
    """Answers each `ask` on the hub's loop (as a forwarded model call is), after a wait, without blocking."""

    def __init__(self, hub: Hub, channel: Channel) -> None:
        super().__init__()
        self.hub, self.channel = hub, channel

    def on_message(self, message: dict[str, Any], now: float) -> Any:
        if message["t"] != "ask":
            return super().on_message(message, now)

        async def answer() -> None:
            import asyncio

            await asyncio.sleep(0.3)  # an endpoint's latency: the loop serves the other jobs meanwhile
            self.channel.send_nowait({"t": "reply", "n": message["n"]}, lambda rest: threading.Thread(target=rest).start())

        self.hub.spawn(answer())
        return None


def test_calls_answered_on_the_loop_wait_together_and_hold_no_job_up() -> None:
    hub = Hub()
    pairs = [_pair() for _ in range(8)]
    started = time.monotonic()
    threads = []
    for n, (channel, agent) in enumerate(pairs):
        agent.sendall(_frame(b'{"t":"ask","n":%d}' % n))
        threads.append(threading.Thread(target=hub.converse, args=(channel, Forwarding(hub, channel), None)))
        threads[-1].start()
    for n, (channel, agent) in enumerate(pairs):
        agent.settimeout(5)
        reply = Channel(agent).recv(5)
        assert reply == {"t": "reply", "n": n}
        agent.sendall(_frame(b'{"t":"done"}'))
    for thread in threads:
        thread.join(5)
    assert time.monotonic() - started < 1.5, "eight 0.3 s calls waited one after another"


def test_a_reply_the_socket_cannot_take_at_once_goes_whole_and_in_order() -> None:
    channel, agent = _pair()
    rest: list[Any] = []
    big = {"t": "reply", "value": "x" * (4 << 20)}  # far more than a socket buffer: the peer is not reading
    started = time.monotonic()
    channel.send_nowait(big, rest.append)
    assert time.monotonic() - started < 0.5 and len(rest) == 1, "the rest is handed over, not waited for"
    sender = threading.Thread(target=rest[0])
    sender.start()
    after = threading.Thread(target=channel.send, args=({"t": "after"},))
    after.start()  # waits for the rest of the first message: messages stay whole and in order
    peer = Channel(agent)
    assert peer.recv(10) == big
    assert peer.recv(10) == {"t": "after"}
    sender.join(5)
    after.join(5)


def test_a_reply_while_another_thread_sends_is_handed_over_whole() -> None:
    channel, agent = _pair()
    rest: list[Any] = []
    with channel._send_lock:  # another thread is sending on this socket
        channel.send_nowait({"t": "reply", "n": 1}, rest.append)
    assert len(rest) == 1
    rest[0]()
    assert Channel(agent).recv(5) == {"t": "reply", "n": 1}
