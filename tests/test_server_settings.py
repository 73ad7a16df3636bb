"""What the server's transports are given, without sockets: settings, the pending gate, one option checker.

The transports (``server/_threads.py``, ``server/_aio.py``, ``server/asgi.py``)
get a frozen `ServerSettings`, the protocol and a `PendingGate`, never the
`EnvServer` facade; `EnvServer` and the ASGI app check their options with the
same functions, so one bad value gets one message. `Session`'s two drivers
share one decision path (`Session._plan`).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from openenv.server import EnvServer
from openenv.server._settings import PendingGate, ServerSettings
from openenv.server.asgi import create_app, uvicorn_config
from openenv.server.echo import EchoEnvironment
from openenv.server.protocol import EnvProtocol

SERVER = Path(__file__).resolve().parent.parent / "src" / "openenv" / "server"


def _message(fn: Any, **kwargs: Any) -> str:
    with pytest.raises(ValueError) as info:
        fn(**kwargs)
    return str(info.value)


@pytest.mark.parametrize("bad", [0, -1.5, True, "10"])
def test_idle_timeout_is_refused_with_one_message_by_every_entry_point(bad: object) -> None:
    embedded = _message(lambda **kw: EnvServer(EchoEnvironment, **kw), idle_timeout=bad)
    asgi = _message(lambda **kw: create_app(EchoEnvironment, **kw), idle_timeout=bad)
    assert embedded == asgi == f"idle_timeout must be a positive number of seconds or None, not {bad!r}"


@pytest.mark.parametrize("bad", [0, -3, True, 2.0])
def test_max_pending_is_refused_with_one_message_by_every_entry_point(bad: object) -> None:
    app = create_app(EchoEnvironment)
    embedded = _message(lambda **kw: EnvServer(EchoEnvironment, **kw), max_pending=bad)
    asgi = _message(lambda **kw: uvicorn_config(app, **kw), max_pending=bad)
    assert embedded == asgi == f"max_pending must be at least 1 (an int), not {bad!r}"


def test_handshake_timeout_is_refused_with_one_message_by_every_entry_point() -> None:
    app = create_app(EchoEnvironment)
    embedded = _message(lambda **kw: EnvServer(EchoEnvironment, **kw), handshake_timeout=-1)
    asgi = _message(lambda **kw: uvicorn_config(app, **kw), handshake_timeout=-1)
    assert embedded == asgi == "handshake_timeout must be a positive number of seconds or None, not -1"


def test_the_other_numeric_options_say_what_they_take() -> None:
    assert _message(lambda **kw: EnvServer(EchoEnvironment, **kw), backlog=0) == (
        "backlog must be at least 1 (an int), not 0"
    )
    assert _message(lambda **kw: EnvServer(EchoEnvironment, **kw), max_message_size=0) == (
        "max_message_size must be at least 1 (an int, in bytes), not 0"
    )
    assert _message(lambda **kw: create_app(EchoEnvironment, **kw), max_body_size=-1) == (
        "max_body_size must be at least 0 (an int, in bytes), not -1"
    )


def test_the_pending_gate_counts_and_refuses_beyond_its_limit() -> None:
    gate = PendingGate(2)
    assert gate.enter() and gate.enter()
    assert gate.count == 2
    assert not gate.enter()  # refused: not counted
    assert gate.count == 2
    gate.leave()
    assert gate.enter() and gate.count == 2


def test_settings_are_frozen_and_make_options_both_websockets_servers_take() -> None:
    from websockets.asyncio.server import serve as aio_serve
    from websockets.sync.server import serve as sync_serve

    server = EnvServer(EchoEnvironment, port=0, handshake_timeout=None, ping_interval=None)
    settings = server._settings
    assert isinstance(settings, ServerSettings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.port = 1  # type: ignore[misc]
    options = settings.serve_options()
    assert options["open_timeout"] is None and options["ping_interval"] is None
    for serve in (sync_serve, aio_serve):
        params = inspect.signature(serve).parameters
        # backlog (and, on the asyncio server, ssl) go on through **kwargs to the socket or loop.create_server
        assert set(options) - {"backlog", "ssl"} <= set(params)
        assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@pytest.mark.parametrize("module", ["_threads.py", "_aio.py", "asgi.py"])
def test_no_transport_imports_the_facade_or_another_transport(module: str) -> None:
    tree = ast.parse((SERVER / module).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            name = ("." * node.level) + (node.module or "")
            imported.add(name.replace("openenv.server.", "."))
    transports = {".app", "._threads", "._aio", ".asgi"} - {"." + module[:-3]}
    assert not imported & transports, f"{module} imports {sorted(imported & transports)}"


def test_one_decision_path_for_both_drivers() -> None:
    """``_plan`` answers at once, hands a plain step's action to the driver, or gives the frame generator."""
    protocol = EnvProtocol(EchoEnvironment)
    session, error = protocol.open_session()
    assert session is not None and error is None
    try:
        ended = session._plan(b"\x00")
        assert type(ended) is tuple and ended[1] is False and '"SESSION_ERROR"' in ended[0]
        invalid = session._plan("{")
        assert type(invalid) is tuple and invalid[1] is True and '"INVALID_JSON"' in invalid[0]
        bad_action = session._plan('{"type":"step","data":{"nope":1}}')
        assert type(bad_action) is tuple and '"VALIDATION_ERROR"' in bad_action[0]
        action = session._plan('{"type":"step","data":{"message":"hi"}}')
        assert isinstance(action, BaseModel)
        frames = session._plan('{"type":"reset"}')
        assert isinstance(frames, types.GeneratorType)
        frames.close()
        # the drivers answer alike from that one path
        assert session.handle('{"type":"step","data":{"message":"hi"}}')[1] is True
    finally:
        protocol.end_session(session)
