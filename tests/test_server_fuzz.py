"""Fuzz both servers (the embedded one and the ASGI app under uvicorn) over real sockets on 127.0.0.1
with malformed and hostile frames.

After every frame: the fuzzed session got an error frame (strict JSON) or a close, never a
hang, and a fresh client on ANOTHER session still resets and steps. Bounded in count
(a fixed list plus ``FUZZ_RANDOM`` seeded random frames) and time (10 s per frame).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv.server import EnvServer
from openenv.server.tools_demo import ToolsDemoEnvironment
from openenv.sync import Env

from .envs import CounterEnv

FUZZ_RANDOM = 40
BIG = 20 * 1024 * 1024


def _fixed_frames() -> Iterator[tuple[str, Any]]:
    yield "deep list", "[" * 200_000
    yield "deep object in step", '{"type":"step","data":' + '{"a":' * 5000 + "1" + "}" * 5001
    yield "deep but parseable", '{"type":"step","data":{"delta":' + "[" * 900 + "]" * 900 + "}}"
    yield "huge int", '{"type":"step","data":{"delta":' + "9" * 5000 + "}}"
    yield "large int", '{"type":"step","data":{"delta":' + "9" * 4000 + "}}"
    yield "huge float", '{"type":"step","data":{"delta":1e400}}'
    yield "NaN", '{"type":"reset","data":{"seed":NaN,"start":Infinity}}'
    yield "escaped lone surrogate", '{"type":"step","data":{"delta":"\\ud800"}}'
    yield "surrogate key", '{"type":"step","data":{"\\udfff":1}}'
    yield "invalid utf-8 text frame", (b"\xed\xa0\x80", True)
    yield "binary frame", (b'{"type":"reset"}', False)
    yield "20 MB text frame", '{"type":"step","data":{"x":"' + "a" * BIG + '"}}'
    yield "20 MB binary frame", (b"\x00" * BIG, False)
    yield "empty", ""
    yield "null", "null"
    yield "unknown type", '{"type":"launch_missiles"}'
    yield "type not a string", '{"type":["step"],"data":{}}'
    yield "missing type", '{"data":{"delta":1}}'
    yield "data a list", '{"type":"step","data":[1,2]}'
    yield "data a string", '{"type":"reset","data":"x"}'
    yield "extra keys", '{"type":"state","data":{},"extra":1}'
    yield "wrong field type", '{"type":"step","data":{"delta":"seven","sleep":"x"}}'
    yield "mcp not json-rpc", '{"type":"mcp","data":{"hello":"world"}}'
    yield "mcp bad method", '{"type":"mcp","data":{"jsonrpc":"2.0","id":1,"method":7}}'
    yield "mcp bad params", '{"type":"mcp","data":{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":[]}}'
    yield (
        "mcp unknown tool",
        '{"type":"mcp","data":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}}',
    )
    yield (
        "mcp bad args",
        '{"type":"mcp","data":{"jsonrpc":"2.0","id":"x","method":"tools/call",'
        '"params":{"name":"add","arguments":{"a":NaN,"b":[{}]}}}}',
    )
    yield (
        "mcp session close",
        '{"type":"mcp","data":{"jsonrpc":"2.0","id":2,"method":"openenv/session/close","params":{"session_id":{}}}}',
    )
    yield "call_tool step", '{"type":"step","data":{"type":"call_tool","tool_name":{"x":1},"arguments":5}}'
    yield "close with data", '{"type":"close","data":{"now":true}}'


def _random_frames(seed: int) -> Iterator[tuple[str, Any]]:
    rng = random.Random(seed)
    types = ["reset", "step", "state", "close", "mcp", "", "STEP", None, 1]

    def value(depth: int = 0) -> Any:
        kind = rng.randrange(8 if depth < 4 else 5)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.choice([0, -1, 2**63, -(2**70), 10**300])
        if kind == 2:
            return rng.choice([0.5, -0.0, 1e308, float("nan"), float("inf")])
        if kind in (3, 4):
            return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x2FFFF)])) for _ in range(5))
        if kind == 5:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {str(value(depth + 1))[:8]: value(depth + 1) for _ in range(rng.randrange(4))}

    for i in range(FUZZ_RANDOM):
        style = i % 4
        if style == 0:
            text = json.dumps({"type": rng.choice(types), "data": value()})
        elif style == 1:
            extra = value(3)
            data = {
                "jsonrpc": rng.choice(["2.0", 2]),
                "id": value(),
                "method": rng.choice(["tools/list", "tools/call"]),
            }
            text = json.dumps({"type": "mcp", "data": {**data, **(extra if isinstance(extra, dict) else {})}})
        elif style == 2:
            text = json.dumps({"type": "step", "data": {"delta": value(), "sleep": 0, "size": rng.randrange(3)}})
            text = text[: rng.randrange(1, len(text) + 1)]  # truncated
        else:
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
            yield f"random bytes {i}", (raw, rng.random() < 0.5)
            continue
        yield f"random {i}", text


def _strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"non-standard JSON {constant!r}")

    return json.loads(text, parse_constant=refuse)


@contextmanager
def _server(transport: str, factory: Any) -> Iterator[Any]:
    if transport == "embedded":
        with EnvServer(factory, max_sessions=4) as srv:
            yield srv
        return
    from .asgi_server import AsgiServer

    asgi = AsgiServer(factory, max_sessions=4)
    try:
        yield asgi
    finally:
        asgi.stop()


def _throw(srv: Any, frame: Any) -> str:
    """Send one frame on a new session; return how the server answered."""
    with connect(srv.ws_url, open_timeout=10, max_size=None) as conn:
        try:
            if isinstance(frame, tuple):
                conn.send(frame[0], text=frame[1])
            else:
                conn.send(frame)
            reply = conn.recv(timeout=10)  # a hang fails here with TimeoutError
        except ConnectionClosed as exc:
            return f"closed {exc.rcvd.code if exc.rcvd else None}"
        assert isinstance(reply, str)
        message = _strict(reply)
        assert isinstance(message, dict) and isinstance(message.get("type"), str), reply[:200]
        return str(message["type"])


@pytest.mark.parametrize("transport", ["embedded", "asgi"])
@pytest.mark.parametrize("factory", [CounterEnv, ToolsDemoEnvironment])
def test_fuzzed_frames_never_break_the_server(factory: Any, transport: str) -> None:
    started = time.monotonic()
    seen: dict[str, str] = {}
    with _server(transport, factory) as srv, Env(srv.url) as witness:
        witness.reset()
        for name, frame in [*_fixed_frames(), *_random_frames(seed=1234)]:
            seen[name] = _throw(srv, frame)
            # ANOTHER session still works: the witness keeps its session, a fresh client starts one
            assert witness.state() is not None
            with Env(srv.url) as fresh:
                fresh.reset()
                if factory is CounterEnv:
                    assert fresh.step({"delta": 1}).observation["count"] == 1
                else:
                    assert fresh.call_tool("add", a=1, b=2).data == 3
            assert time.monotonic() - started < 240, "fuzzing took too long"
    assert seen["20 MB text frame"] == "closed 1009"
    assert seen["binary frame"] == "error"
    assert seen["deep list"] == "error"
    assert seen["huge int"] == "error"
    assert seen["unknown type"] == "error"
