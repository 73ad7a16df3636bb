# GENERATED from tests/_async/test_reliability.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Faults, bad input and TLS: what a fault-injection probe found (written once, generated for the sync twin)."""

from __future__ import annotations

import http.server
import json
import logging
import math
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.sync import (
    ConnectError,
    Env,
    EnvClosed,
    EnvPool,
    InvalidHeader,
    InvalidOption,
    MessageTimeout,
    OpenEnvError,
    ProtocolError,
    ServerProvider,
    SessionLost,
)

from ..envs import IN_TIME, CounterEnv
from ..helpers_sync import close_from_another_thread, run_in_thread


class RunningServer(ServerProvider):
    """A provider for a server that is already running (start returns its URL; stop does nothing)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.started = 0

    def start(self) -> str:
        self.started += 1
        return self.url

    def stop(self) -> None:
        pass


# -- 1. close() from another thread ends a call in flight ------------------------------------


def test_close_from_another_thread_ends_a_call_in_flight(script_server: Any) -> None:
    server = script_server(lambda frame: None)  # never answers
    # no keepalive, no message timeout: nothing but close() can end the step
    env = Env(server.url, message_timeout=None, ping_interval=None, ping_timeout=None).connect()
    closer = close_from_another_thread(env.close)
    with pytest.raises(SessionLost) as info:
        env.step({"delta": 1})
    assert not isinstance(info.value, MessageTimeout)
    assert closer.finish() is False, "the step kept waiting after close() returned on another thread"
    assert env.closed and not env.connected


# -- 2. header values never reach debug logs -----------------------------------------------


def _leaks(caplog: pytest.LogCaptureFixture, secrets: list[str]) -> list[str]:
    # the test server's own handshake lines (logger websockets.server) are not the client's
    lines = [f"{r.name}: {r.getMessage()}" for r in caplog.records if not r.name.startswith("websockets.server")]
    return [line for line in lines if any(secret in line for secret in secrets)]


def test_header_and_query_values_never_reach_debug_logs(
    counter_server: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = ["HSECRET-1", "ASECRET-2", "QSECRET-3", "CSECRET-4"]
    headers = {"X-Api-Key": "HSECRET-1", "Authorization": "Bearer ASECRET-2", "X-Custom": "CSECRET-4"}
    caplog.set_level(logging.DEBUG)
    url = counter_server.url + "/?token=QSECRET-3"
    with Env.from_schema(url, headers=headers) as env:  # GET /schema, then the WebSocket
        env.reset()
    with Env.from_provider(RunningServer(counter_server.url), headers=headers) as env:  # /health
        env.reset()
    monkeypatch.setenv("OPENENV_CLIENT_MODE", "production")
    env = Env(url, headers=headers)  # POST /mcp (our server drops it: the request is still sent)
    with pytest.raises(ConnectError, match="production mode"):
        env.reset()
    env.close()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "openenv.websockets")
    assert "X-Api-Key: <hidden>" in logged and "token=***" in logged  # the handshake was logged...
    assert "User-Agent: openenv-twin" in logged  # ...harmless headers stay readable
    assert any(r.name.startswith("httpx") for r in caplog.records)
    assert _leaks(caplog, secrets) == []  # ...and no value leaked anywhere


_SECRETS = ["HSECRET-1", "ASECRET-2", "QSECRET-3", "PSECRET-5", "YWxpY2U6UFNFQ1JFVC01"]  # the last: alice:PSECRET-5


def _with_secrets(url: str) -> str:
    """``url`` with credentials in it and a token in its query."""
    return url.replace("://", "://alice:PSECRET-5@", 1) + "/?token=QSECRET-3"


def test_url_credentials_never_reach_any_log_line(counter_server: Any, caplog: pytest.LogCaptureFixture) -> None:
    # httpx's own INFO line ("HTTP Request: GET http://alice:...@..."), websockets' on both sides, ours
    caplog.set_level(logging.DEBUG)
    with Env.from_schema(_with_secrets(counter_server.url), headers={"X-Api-Key": "HSECRET-1"}) as env:
        env.reset()
    requests = [r.getMessage() for r in caplog.records if r.name == "httpx" and "HTTP Request" in r.getMessage()]
    assert requests and all("://***@127.0.0.1" in line for line in requests), requests
    lines = [f"{r.name}: {r.getMessage()}" for r in caplog.records]
    assert any("websockets" in line and "<hidden>" in line for line in lines)  # a handshake was logged
    assert [line for line in lines if any(secret in line for secret in _SECRETS)] == []


class _EchoingServer(http.server.BaseHTTPRequestHandler):
    """Answers every GET ``500`` with the request's secret-bearing headers and its target in the body."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        shown = [f"{k}: {v}" for k, v in self.headers.items() if k.lower() in ("authorization", "x-api-key")]
        body = ("\n".join([*shown, self.path])).encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def echoing_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize("headers", [{"Authorization": "Bearer ASECRET-2"}, {"X-Api-Key": "HSECRET-1"}])
def test_an_http_error_body_echoing_the_request_is_scrubbed(echoing_server: str, headers: dict[str, str]) -> None:
    with pytest.raises(ProtocolError, match="HTTP 500") as info:
        Env.from_schema(_with_secrets(echoing_server), headers=headers)  # GET /schema
    assert "<hidden>" in str(info.value)
    assert [secret for secret in _SECRETS if secret in str(info.value)] == []


# -- 3. header values and URL query values never in errors or reprs ----------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer T0KEN-FROM-FILE\n"},
        {"Authorization": "Bearer T0KEN-FROM-FILE\r\nX-Evil: 1"},
        {"Authorization": " Bearer T0KEN-FROM-FILE"},
        {"X-Api-Key": "T0KEN-FROM-FILE\x00"},
        {"Bad Name": "T0KEN-FROM-FILE"},
    ],
)
def test_bad_headers_are_refused_at_construction(counter_server: Any, headers: dict[str, str]) -> None:
    name = next(iter(headers))
    with pytest.raises(InvalidHeader) as info:
        Env(counter_server.url, headers=headers)
    assert isinstance(info.value, ValueError) and isinstance(info.value, OpenEnvError)
    assert info.value.header == name and repr(name) in str(info.value)
    assert "T0KEN" not in str(info.value)
    with pytest.raises(InvalidHeader) as info:
        Env.from_schema(counter_server.url, headers=headers)  # before any HTTP request
    assert "T0KEN" not in str(info.value)


def test_query_values_are_hidden_in_reprs_and_errors(counter_server: Any, free_port: int) -> None:
    env = Env(f"http://127.0.0.1:{free_port}/?token=QSECRET&v=1")
    assert "QSECRET" not in repr(env) and "token=***" in repr(env)
    with pytest.raises(ConnectError) as info:
        env.reset()
    assert "QSECRET" not in str(info.value) and "token=***" in str(info.value)
    env.close()
    env = Env(counter_server.url + "/not-here?token=QSECRET")
    with pytest.raises(ConnectError) as info:
        env.connect()
    assert "QSECRET" not in str(info.value)
    env.close()


# -- 4. nan and inf timeouts -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["connect_timeout", "message_timeout", "ping_interval", "ping_timeout"])
@pytest.mark.parametrize("value", [math.nan, -1.0, -math.inf, 0])
def test_nan_and_negative_timeouts_are_refused(counter_server: Any, name: str, value: float) -> None:
    with pytest.raises(InvalidOption, match=name) as info:
        Env(counter_server.url, **{name: value})  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_inf_timeouts_mean_no_limit(counter_server: Any) -> None:
    inf = math.inf
    env = Env(counter_server.url, connect_timeout=inf, message_timeout=inf, ping_interval=inf, ping_timeout=inf)
    options = env.options
    assert (options.connect_timeout, options.message_timeout, options.ping_interval, options.ping_timeout) == (
        None,
        None,
        None,
        None,
    )
    with env:
        env.reset()
        assert (env.step({"delta": 2, "sleep": 0.1})).observation["count"] == 2
    with Env.from_schema(counter_server.url, message_timeout=inf, connect_timeout=inf) as env:
        assert (env.reset(start=1)).observation.count == 1  # type: ignore[attr-defined]


def test_ready_timeout_is_checked(counter_server: Any) -> None:
    provider = RunningServer(counter_server.url)
    for bad in (math.nan, -1.0):
        with pytest.raises(InvalidOption, match="ready_timeout"):
            Env.from_provider(provider, ready_timeout=bad)
        with pytest.raises(InvalidOption, match="message_timeout"):
            Env.from_provider(provider, message_timeout=bad)
    assert provider.started == 0  # refused before anything was started
    with Env.from_provider(provider, ready_timeout=math.inf) as env:
        assert (env.reset(start=3)).observation["count"] == 3


def test_close_from_another_thread_ends_a_handshake_under_way() -> None:
    """A server that accepts and never answers the upgrade: ``close()`` ends the wait, not ``connect_timeout``."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as silent:
        env = Env(f"http://127.0.0.1:{silent.getsockname()[1]}", connect_timeout=60)
        closer = close_from_another_thread(env.close, delay=0.5)
        with pytest.raises(EnvClosed):  # before: ConnectTimeout, after the whole minute
            env.connect()
        assert not closer.finish()


def test_a_misspelt_option_is_refused_before_any_server_starts(counter_server: Any) -> None:
    from openenv.sync import environment_factory

    provider = RunningServer(counter_server.url)
    bad: dict[str, Any] = {"mesage_timeout": 3}  # misspelt (a static type checker would say so too)
    calls: list[tuple[str, Any]] = [
        ("Env.from_provider", lambda: Env.from_provider(provider, **bad)),
        ("Env.from_env", lambda: Env.from_env("./no-such-checkout", **bad)),
        ("Env.from_docker_image", lambda: Env.from_docker_image("no-such-image:latest", **bad)),
        ("EnvPool.from_provider", lambda: EnvPool.from_provider(lambda i: provider, size=2, **bad)),
        ("EnvPool.from_env", lambda: EnvPool.from_env("./no-such-checkout", size=2, **bad)),
        ("EnvPool.from_docker_image", lambda: EnvPool.from_docker_image("no-such:latest", size=2, **bad)),
        ("environment_factory", lambda: environment_factory(provider, **bad)),
    ]
    for where, call in calls:
        with pytest.raises(TypeError) as info:
            call()
        assert str(info.value) == (
            f"{where}() got an unexpected keyword argument 'mesage_timeout' (did you mean 'message_timeout'?)"
        )
    with pytest.raises(TypeError, match=r"^EnvPool\(\) got an unexpected keyword argument 'mesage_timeout'"):
        EnvPool(counter_server.url, size=2, **bad)
    with pytest.raises(InvalidOption, match="mode must be 'simulation' or 'production', not 'prod'"):
        Env.from_provider(provider, mode="prod")
    assert provider.started == 0  # each was refused before anything was started


# -- 5. every ProtocolError closes the connection -------------------------------------------------


def _malformed_steps(step_data: dict[str, Any]) -> Any:
    def reply(frame: str) -> str:
        kind = json.loads(frame)["type"]
        if kind == "step":
            return json.dumps({"type": "observation", "data": step_data})
        if kind == "state":
            return json.dumps({"type": "state", "data": {"episode_id": "e", "step_count": 0}})
        return json.dumps({"type": "observation", "data": {"observation": {}, "reward": None, "done": False}})

    return reply


@pytest.mark.parametrize(
    "step_data",
    [
        {"reward": 1.0, "done": False},  # no observation
        {"observation": [], "reward": 1.0},  # observation not an object
        {"observation": {}, "reward": "lots", "done": False},  # reward not a number
    ],
)
def test_malformed_step_reply_closes_the_connection(script_server: Any, step_data: dict[str, Any]) -> None:
    server = script_server(_malformed_steps(step_data))
    with Env(server.url) as env:
        env.reset()
        with pytest.raises(ProtocolError):
            env.step({"delta": 1})
        assert not env.connected
        with pytest.raises(SessionLost, match="protocol"):
            env.step({"delta": 1})  # the episode died with the connection
        env.reset()  # reconnects
        assert env.connected


def test_malformed_reply_to_a_tool_step_closes_the_connection(script_server: Any) -> None:
    server = script_server(_malformed_steps({"reward": 0}))
    with Env(server.url) as env:
        env.reset()
        env._mcp.via_step = True  # the step-loop fallback of servers without MCP frames
        with pytest.raises(ProtocolError):
            env.list_tools()
        assert not env.connected


# -- 6. a step before any episode survives a server restart ---------------------------------------


def test_step_before_any_episode_survives_a_server_restart(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=4)
    port = server.port
    env = Env(server.url).connect()
    run_in_thread(server.stop)  # the client sees the close while the server stops
    server_factory(CounterEnv, max_sessions=4, port=port)
    result = env.step({"delta": 2})  # never reached the old server: sent again on a fresh connection
    assert result.observation["count"] == 2
    env.close()


def test_step_during_an_episode_is_never_resent_after_a_restart(server_factory: Any) -> None:
    server = server_factory(CounterEnv, max_sessions=4)
    port = server.port
    env = Env(server.url).connect()
    env.reset()
    run_in_thread(server.stop)
    server_factory(CounterEnv, max_sessions=4, port=port)
    with pytest.raises(SessionLost, match="episode"):
        env.step({"delta": 2})
    env.close()


# -- 7. TLS: verify= for every connection -------------------------------------------------------


def test_tls_default_verify_refuses_an_unknown_ca(tls_server: Any) -> None:
    assert tls_server.url.startswith("https://")
    env = Env(tls_server.url)
    with pytest.raises(ConnectError, match="certificate verification failed.*verify="):
        env.reset()
    env.close()
    with pytest.raises(ConnectError, match="certificate verification failed"):
        Env.from_schema(tls_server.url)  # the HTTP call


@pytest.mark.parametrize("kind", ["str", "path", "context"])
def test_tls_verify_with_a_ca_bundle_or_context(tls_server: Any, tls_files: Any, kind: str) -> None:
    verify: Any = {
        "str": tls_files.ca,
        "path": Path(tls_files.ca),
        "context": ssl.create_default_context(cafile=tls_files.ca),
    }[kind]
    with Env(tls_server.url, verify=verify) as env:  # wss://
        assert (env.reset(start=1)).observation["count"] == 1
        child = env.new_session()  # same options
        assert (child.step({"delta": 2})).observation["count"] == 2
    with Env.from_schema(tls_server.url, verify=verify) as env:  # GET /schema over https, then wss
        assert (env.step({"delta": 3})).observation.count == 3


def test_tls_verify_reaches_health_checks_and_production_mcp(
    tls_server: Any, tls_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConnectError, match="certificate verification failed.*verify="):  # at once, not a timeout
        Env.from_provider(RunningServer(tls_server.url), ready_timeout=30.0)
    with Env.from_provider(RunningServer(tls_server.url), verify=tls_files.ca) as env:
        assert (env.reset(start=4)).observation["count"] == 4
    monkeypatch.setenv("OPENENV_CLIENT_MODE", "production")
    env = Env(tls_server.url)
    with pytest.raises(ConnectError, match="certificate verification failed"):
        env.reset()  # POST /mcp session/create
    env.close()
    env = Env(tls_server.url, verify=tls_files.ca)
    with pytest.raises(ConnectError, match="production mode"):  # past TLS: our server drops POST bodies
        env.reset()
    env.close()


def test_verify_reaches_the_health_checks_without_changing_the_users_provider(
    tls_server: Any, tls_files: Any
) -> None:
    provider = RunningServer(tls_server.url)
    with Env.from_provider(provider, verify=tls_files.ca) as env:  # its health check over https
        assert (env.reset(start=2)).observation["count"] == 2
    assert "verify" not in vars(provider) and provider.verify is True  # passed through, never set on it
    made: list[RunningServer] = []

    def factory(index: int) -> RunningServer:
        made.append(RunningServer(tls_server.url))
        return made[-1]

    with EnvPool.from_provider(factory, size=2, verify=tls_files.ca) as pool:
        pool.reset()
        pool.replace(1)  # a new server from the factory: its health check too
    assert len(made) == 3 and not any("verify" in vars(p) for p in made)

    class OwnCheck(RunningServer):
        def wait_until_ready(self, base_url: str, timeout: float | None) -> None:
            self.checked = True  # an override without verify= is still called, as before

    own = OwnCheck(tls_server.url)
    with Env.from_provider(own, verify=tls_files.ca) as env:
        assert own.checked and (env.reset(start=3)).observation["count"] == 3


def test_https_to_a_plain_server_and_a_refused_schema_fetch_say_what_to_do(
    counter_server: Any, free_port: int
) -> None:
    from openenv._sync.http import get_json
    from openenv._core.options import ClientOptions

    plain = counter_server.url.replace("http://", "https://", 1)  # a plain-HTTP server, asked for TLS
    with pytest.raises(ConnectError) as info:
        Env(plain).connect()
    assert str(info.value).startswith(f"TLS handshake with {plain.replace('https', 'wss', 1)}/ws failed (")
    assert str(info.value).endswith(
        "if the server speaks plain HTTP (python -m openenv serve does), use an http:// URL"
    )
    with pytest.raises(ConnectError, match=r"^TLS handshake with https://.*/schema failed .* use an http:// URL$"):
        Env.from_schema(plain)
    with pytest.raises(ConnectError) as info:
        get_json(f"http://127.0.0.1:{free_port}", "/schema", ClientOptions())
    assert str(info.value) == f"connection refused by http://127.0.0.1:{free_port}/schema; is the server running?"


def test_ssl_cert_file_serves_the_websocket_and_the_http_calls(
    tls_server: Any, tls_files: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", tls_files.ca)
    with Env.from_schema(tls_server.url) as env:  # verify=True: GET /schema and wss
        assert (env.reset(start=6)).observation.count == 6


def test_verify_false_skips_the_check(tls_server: Any) -> None:
    with Env.from_schema(tls_server.url, verify=False) as env:
        assert (env.reset(start=5)).observation.count == 5


def test_bad_verify_values_are_refused(counter_server: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match="no such CA bundle"):
        Env(counter_server.url, verify=str(tmp_path / "missing.pem"))
    with pytest.raises(InvalidOption, match="verify must be"):
        Env(counter_server.url, verify=1.5)  # type: ignore[arg-type]


# -- close() is bounded by the client's own timeouts (issue 32) -------------------------------------


def test_close_against_a_silent_server_takes_no_longer_than_message_timeout(counter_server: Any) -> None:
    from ..faultproxy import FaultProxy

    proxy = FaultProxy(counter_server.port)
    try:
        env = Env(proxy.url, message_timeout=1.0)
        env.reset()
        proxy.blackhole = True  # the close frame and everything after it: never answered
        started = time.monotonic()
        env.close()
        assert time.monotonic() - started < IN_TIME  # it was a fixed 5 s
    finally:
        proxy.close()


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_connection_dropped_during_the_handshake_is_not_called_a_stranger(how: str) -> None:
    # issue 32: no HTTP answer at all (an overloaded or stopping server) said "is this an OpenEnv server?"
    import socket
    import struct

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def drop() -> None:
        sock, _ = listener.accept()
        sock.recv(65536)  # the upgrade request, unanswered
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    thread = threading.Thread(target=drop, daemon=True)
    thread.start()
    try:
        with pytest.raises(ConnectError) as info:
            Env(f"http://127.0.0.1:{port}").connect()
    finally:
        thread.join(30)
        listener.close()
    assert "closed the connection before answering the WebSocket upgrade" in str(info.value)
    assert "is this an OpenEnv server" not in str(info.value)


def test_base_url_keeps_its_secrets_and_nothing_shows_them(counter_server: Any) -> None:
    # decided in issue 32: the accessor returns the URL as given (another client needs it); reprs redact it
    url = counter_server.url.replace("://", "://alice:PSECRET-5@", 1) + "/?token=QSECRET-3"
    env = Env(url)
    assert env.base_url == url.replace("/?", "?") and "QSECRET" not in repr(env) and "PSECRET" not in repr(env)
    with Env(env.base_url) as again:  # reaches the same server
        again.reset()
    env.close()
