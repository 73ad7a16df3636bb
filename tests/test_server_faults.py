"""The embedded server under faults: idle sessions, handshake floods, capacity before the handshake,
strict JSON output, request bodies."""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from openenv.server import EnvServer
from openenv.server.app import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_PENDING

from .envs import IN_TIME, BasicCounterObservation, CounterEnv


def ws(srv: EnvServer, **kwargs: Any) -> ClientConnection:
    conn: ClientConnection = connect(srv.ws_url, open_timeout=5, **kwargs)
    return conn


def ask(conn: ClientConnection, frame: Any) -> str:
    conn.send(frame if isinstance(frame, str) else json.dumps(frame))
    reply = conn.recv(timeout=10)
    assert isinstance(reply, str)
    return reply


def strict_loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN/Infinity (RFC 8259 JSON)."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {constant!r} in {text[:200]!r}")

    return json.loads(text, parse_constant=refuse)


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# --------------------------------------------------------------------------- idle timeout


def test_idle_timeout_defaults() -> None:
    srv = EnvServer(CounterEnv)
    assert srv.idle_timeout == DEFAULT_IDLE_TIMEOUT == 300.0
    assert srv.max_pending == DEFAULT_MAX_PENDING
    assert EnvServer(CounterEnv, idle_timeout=None).idle_timeout is None
    for bad in (0, -1, "5", True):
        with pytest.raises(ValueError, match="idle_timeout"):
            EnvServer(CounterEnv, idle_timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_pending"):
        EnvServer(CounterEnv, max_pending=0)


def test_idle_sessions_are_closed_and_free_their_slots() -> None:
    """Idle clients (keepalive pings answered) no longer lock a full server out forever."""
    # each client sends its reset as soon as it is connected (a client whose handshake is done is idle
    # until its first frame): IN_TIME is ample for that on a busy machine
    with EnvServer(CounterEnv, max_sessions=2, idle_timeout=IN_TIME) as srv:
        with ws(srv) as a:
            assert json.loads(ask(a, {"type": "reset"}))["type"] == "observation"
            with ws(srv) as b:
                assert json.loads(ask(b, {"type": "reset"}))["type"] == "observation"
                _expect_idle_close([a, b])
        wait_for(lambda: srv.active_sessions == 0, "the idle slots to be freed")
        with ws(srv) as fresh:
            assert json.loads(ask(fresh, {"type": "reset"}))["type"] == "observation"


def _expect_idle_close(idle: list[ClientConnection]) -> None:
    for conn in idle:
        with pytest.raises(ConnectionClosed) as info:
            conn.recv(timeout=10)
        assert info.value.rcvd is not None
        assert info.value.rcvd.code == 1001
        assert "idle timeout" in info.value.rcvd.reason


def test_busy_sessions_are_not_idle() -> None:
    """The idle clock runs only while the server waits for a message, and restarts with each."""
    with EnvServer(CounterEnv, idle_timeout=IN_TIME) as srv, ws(srv) as conn:
        ask(conn, {"type": "reset"})
        # a step that takes longer than idle_timeout is not idleness; the next frame is served (sent
        # with the step: a loaded client replying late cannot expire it)
        conn.send(json.dumps({"type": "step", "data": {"delta": 1, "sleep": IN_TIME + 1.0}}))
        conn.send(json.dumps({"type": "state"}))
        assert json.loads(conn.recv(timeout=10))["type"] == "observation"
        assert json.loads(conn.recv(timeout=10))["type"] == "state"


# --------------------------------------------------------------------------- handshake flood


def test_pending_handshakes_are_capped() -> None:
    """Connections that never send a request hold a pending slot; beyond the cap: 503 at once."""
    with EnvServer(CounterEnv, max_pending=2, handshake_timeout=30) as srv:
        silent = [socket.create_connection((srv.host, srv.port)) for _ in range(2)]
        try:
            wait_for(lambda: srv.pending_connections == 2, "two pending handshakes")
            with socket.create_connection((srv.host, srv.port)) as extra:
                extra.settimeout(10)
                extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = b""
                try:
                    while chunk := extra.recv(4096):
                        answer += chunk
                except ConnectionResetError:
                    pass  # the unread request may turn the close into a reset
            assert answer == b"" or answer.startswith(b"HTTP/1.1 503 "), answer
            if answer:
                assert b"Too many pending connections" in answer
        finally:
            for sock in silent:
                sock.close()
        wait_for(lambda: srv.pending_connections == 0, "the pending handshakes to end")
        assert httpx.get(srv.url + "/health").status_code == 200
        with ws(srv) as conn:
            assert json.loads(ask(conn, {"type": "state"}))["type"] == "state"


def test_slow_handshakes_time_out() -> None:
    with EnvServer(CounterEnv, handshake_timeout=0.3) as srv:
        with socket.create_connection((srv.host, srv.port)) as sock:
            sock.settimeout(10)
            sock.sendall(b"GET /health HTTP/1.1\r\n")  # ... and nothing more
            assert sock.recv(4096) == b""  # closed by the server
        wait_for(lambda: srv.pending_connections == 0, "the pending handshake to end")


# --------------------------------------------------------------------------- capacity


def test_capacity_is_refused_before_the_handshake() -> None:
    rec: list[CounterEnv] = []

    def factory() -> CounterEnv:
        rec.append(CounterEnv())
        return rec[-1]

    with EnvServer(factory, max_sessions=1) as srv, ws(srv) as first:
        ask(first, {"type": "reset"})
        with pytest.raises(InvalidStatus) as info:
            ws(srv)
        response = info.value.response
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "1"
        frame = strict_loads(bytes(response.body))
        assert frame["type"] == "error"
        assert frame["data"]["code"] == "CAPACITY_REACHED"
        assert len(rec) == 1
        assert srv.active_sessions == 1  # the refusal held no slot
        assert json.loads(ask(first, {"type": "state"}))["type"] == "state"


def test_failed_handshake_after_reservation_frees_the_slot() -> None:
    """An upgrade that passes the capacity check but fails the handshake gives its slot back."""
    with EnvServer(CounterEnv, max_sessions=1) as srv:
        for _ in range(3):
            r = httpx.get(
                srv.ws_url.replace("ws", "http", 1), headers={"Upgrade": "websocket", "Connection": "Upgrade"}
            )
            assert r.status_code == 400  # no Sec-WebSocket-Key
        wait_for(lambda: srv.active_sessions == 0, "the reserved slot to be freed")
        with ws(srv) as conn:
            assert json.loads(ask(conn, {"type": "state"}))["type"] == "state"


# --------------------------------------------------------------------------- strict JSON


@pytest.mark.parametrize(
    "frame",
    [
        '{"type":"step","data":{"delta":NaN}}',
        '{"type":"step","data":{"delta":Infinity,"sleep":-Infinity}}',
        '{"type":"reset","data":NaN}',
        '{"type":"state","data":[NaN]}',
        '{"type":"bogus","x":NaN}',
        "[NaN, Infinity]",
        '{"type":"step","data":{"delta":1e999}}',
    ],
)
def test_error_frames_are_strict_json(frame: str) -> None:
    with EnvServer(CounterEnv) as srv, ws(srv) as conn:
        reply = strict_loads(ask(conn, frame))
        assert reply["type"] == "error"
        text = json.dumps(reply)
        assert "NaN" not in text or '"NaN"' in text  # only ever as a string


class NanEnv(CounterEnv):
    def step(self, action: Any) -> BasicCounterObservation:
        obs = super().step(action)
        obs.reward = math.nan if action.delta == 1 else math.inf
        return obs


def test_non_finite_observations_are_execution_errors() -> None:
    with EnvServer(NanEnv) as srv, ws(srv) as conn:
        ask(conn, {"type": "reset"})
        for delta in (1, 2):
            reply = strict_loads(ask(conn, {"type": "step", "data": {"delta": delta}}))
            assert reply["data"]["code"] == "EXECUTION_ERROR"
            assert "strict JSON" in reply["data"]["message"]
        assert strict_loads(ask(conn, {"type": "state"}))["type"] == "state"  # the session goes on


# --------------------------------------------------------------------------- request bodies


def test_request_bodies_are_answered() -> None:
    with EnvServer(CounterEnv) as srv:
        r = httpx.post(srv.url + "/reset", json={"seed": 1})
        assert r.status_code == 501 and "/ws" in strict_loads(r.content)["detail"]
        r = httpx.post(srv.url + "/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1})
        assert r.status_code == 501
        r = httpx.put(srv.url + "/schema", content=b"{}")
        assert r.status_code == 405 and r.headers["allow"] == "GET"
        with socket.create_connection((srv.host, srv.port)) as sock:  # too large to read: 413 at once
            sock.settimeout(10)
            sock.sendall(b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n{")
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413 "), answer
        with socket.create_connection((srv.host, srv.port)) as sock:  # chunked: 413 too
            sock.settimeout(10)
            sock.sendall(b"POST /step HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 413 ")
        with socket.create_connection((srv.host, srv.port)) as sock:  # not HTTP at all: dropped
            sock.settimeout(10)
            sock.sendall(b"\x16\x03\x01garbage\r\n\r\n")
            assert sock.recv(4096) == b""
        assert httpx.get(srv.url + "/health").status_code == 200
