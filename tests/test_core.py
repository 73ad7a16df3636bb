"""The sans-IO core, tested once: URL rules, frames, errors, codecs, options, the call guard."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pydantic
import pytest

from openenv._core import frames
from openenv._core.errors import error_from_frame
from openenv._core.guard import InFlight
from openenv._core.options import ClientOptions
from openenv._core.urls import parse_base_url, redact_url, space_image, space_subdomain, space_url
from openenv.server.echo import EchoAction, EchoObservation
from openenv.sync import (
    CapacityReached,
    Codec,
    ExecutionError,
    InvalidAction,
    InvalidActionType,
    InvalidURL,
    ParseError,
    ProtocolError,
    ServerError,
    ServerValidationError,
    SessionBusy,
    State,
    StepResult,
)


@pytest.mark.parametrize(
    ("given", "base", "ws"),
    [
        # the reference client's results, kept
        ("http://h:8000/", "http://h:8000", "ws://h:8000/ws"),
        ("https://h/prefix/", "https://h/prefix", "wss://h/prefix/ws"),
        ("wss://h", "wss://h", "wss://h/ws"),
        # where the reference client goes wrong, we do better
        ("h:8000", "http://h:8000", "ws://h:8000/ws"),
        ("http://h/ws", "http://h", "ws://h/ws"),
        ("http://h/ws/", "http://h", "ws://h/ws"),
        ("HTTP://h", "http://h", "ws://h/ws"),
        ("http://h/?x=1", "http://h?x=1", "ws://h/ws?x=1"),
        ("http://h/p/ws?x=1#frag", "http://h/p?x=1", "ws://h/p/ws?x=1"),
        ("  ws://127.0.0.1:9/  ", "ws://127.0.0.1:9", "ws://127.0.0.1:9/ws"),
        ("http://[::1]:8000", "http://[::1]:8000", "ws://[::1]:8000/ws"),
    ],
)
def test_url_rules(given: str, base: str, ws: str) -> None:
    endpoints = parse_base_url(given)
    assert (endpoints.base_url, endpoints.ws_url) == (base, ws)


def test_http_url_for_readonly_endpoints() -> None:
    assert parse_base_url("wss://h/p?x=1").http("/health") == "https://h/p/health"
    assert parse_base_url("ws://h:1").http("/schema") == "http://h:1/schema"


@pytest.mark.parametrize(
    "bad",
    ["", " ", "ftp://h", "http://", "http://h:notaport", "http://h:70000", 42, "0\x0c#", "http://a b/"],
)
def test_bad_urls(bad: Any) -> None:
    with pytest.raises(InvalidURL):
        parse_base_url(bad)


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("[::1]", True),
        ("10.1.2.3", True),
        ("192.168.0.2", True),
        ("example.com", False),
        ("8.8.8.8", False),
        ("x.hf.space", False),
    ],
)
def test_locality(host: str, local: bool) -> None:
    assert parse_base_url(f"http://{host}:1").is_local is local


def test_redact_url() -> None:
    assert redact_url("https://u:secret@h/x") == "https://***@h/x"
    assert redact_url("https://h/x") == "https://h/x"


def test_space_names() -> None:
    assert space_subdomain("openenv/echo_env") == "openenv-echo-env"
    assert space_subdomain("Org/My.Space_v2") == "org-my-space-v2"
    assert space_url("openenv/echo_env") == "https://openenv-echo-env.hf.space"
    assert space_image("openenv/echo_env") == "registry.hf.space/openenv-echo-env:latest"
    assert space_image("a/b", tag="v1", registry="127.0.0.1:5000/") == "127.0.0.1:5000/a-b:v1"
    for bad in ["noslash", "a/b/c", "", "a /b"]:
        with pytest.raises(InvalidURL):
            space_subdomain(bad)


def test_encode_frames() -> None:
    assert json.loads(frames.encode_reset({"seed": 1})) == {"type": "reset", "data": {"seed": 1}}
    assert json.loads(frames.encode_reset({})) == {"type": "reset", "data": {}}
    assert json.loads(frames.encode_step({"a": "é"})) == {"type": "step", "data": {"a": "é"}}
    assert json.loads(frames.STATE_FRAME) == {"type": "state"}
    assert json.loads(frames.CLOSE_FRAME) == {"type": "close"}
    request = {"jsonrpc": "2.0", "method": "tools/list", "id": 1}
    assert json.loads(frames.encode_mcp(request)) == {"type": "mcp", "data": request}
    with pytest.raises(InvalidActionType, match="JSON"):
        frames.encode_step({"x": object()})
    with pytest.raises(InvalidActionType, match="JSON"):
        frames.encode_step({"x": {1, 2}})
    with pytest.raises(InvalidAction, match="NaN"):
        frames.encode_step({"x": float("nan")})
    with pytest.raises(TypeError, match="dict"):
        frames.encode_step(["not", "a", "dict"])  # type: ignore[arg-type]
    lone = "a\ud800b"  # a str, but no Unicode text: no UTF-8 frame can carry it
    with pytest.raises(InvalidAction) as info:
        frames.encode_step({"x": lone})
    assert str(info.value) == (
        "the action cannot be sent: it holds '\\ud800', a lone surrogate: a Python str, but not valid Unicode "
        "(frames are UTF-8 text)"
    )
    with pytest.raises(TypeError, match="cannot send this reset payload as JSON: it holds '\\\\udcff', a lone"):
        frames.encode_reset({"x": "\udcff"})
    assert json.loads(frames.encode_step({"a": "\U0001f600 \u2028"})) == {
        "type": "step",
        "data": {"a": "\U0001f600 \u2028"},
    }


def test_decode_reply_checks_the_type() -> None:
    ok = json.dumps({"type": "state", "data": {"step_count": 1}})
    assert frames.decode_reply(ok, frames.STATE) == {"step_count": 1}
    with pytest.raises(ProtocolError, match="expected a 'observation' reply"):
        frames.decode_reply(ok, frames.OBSERVATION)
    for bad in ["nope", "[1]", json.dumps({"type": "state"}), json.dumps({"type": "state", "data": 3})]:
        with pytest.raises(ProtocolError):
            frames.decode_reply(bad, frames.STATE)
    with pytest.raises(ProtocolError, match="binary"):
        frames.decode_reply(b"{}", frames.STATE)


def test_error_frames_become_typed_exceptions() -> None:
    capacity = {
        "message": "Server at capacity: 2/2 sessions active. Cannot accept new connections.",
        "code": "CAPACITY_REACHED",
        "active_sessions": 2,
        "max_sessions": 2,
    }
    with pytest.raises(CapacityReached) as info:
        frames.decode_reply(json.dumps({"type": "error", "data": capacity}), frames.OBSERVATION)
    assert (info.value.active_sessions, info.value.max_sessions, info.value.fatal) == (2, 2, True)
    validation = error_from_frame(
        {
            "message": "Invalid message",
            "code": "VALIDATION_ERROR",
            "errors": [
                {"type": "less_than_equal", "loc": ["delta"], "msg": "Input should be less than or equal to 100"}
            ],
        }
    )
    assert isinstance(validation, ServerValidationError) and not validation.fatal
    assert "delta: Input should be less than or equal to 100" in str(validation)
    execution = error_from_frame({"message": "boom", "code": "EXECUTION_ERROR"})
    assert isinstance(execution, ExecutionError) and str(execution) == "boom (code: EXECUTION_ERROR)"
    odd = error_from_frame("not an object")
    assert type(odd) is ServerError
    again = pickle.loads(pickle.dumps(validation))
    assert isinstance(again, ServerValidationError) and again.errors == validation.errors


@pytest.mark.parametrize(
    ("data", "metadata"),
    [
        ({"observation": {"x": 1, "metadata": {"a": 1}}, "reward": 1, "done": False, "metadata": {"a": 1}}, {"a": 1}),
        (
            {"observation": {"x": 1, "metadata": {"a": 1}}, "reward": 1, "done": False},
            {"a": 1},
        ),  # only inside the observation
        ({"observation": {"x": 1, "metadata": {}}, "reward": 1, "done": False}, {}),  # 0.10 /ws, empty
        ({"observation": {"x": 1}, "reward": 1, "done": False}, {}),  # 0.3: no metadata anywhere
        ({"observation": {"x": 1, "metadata": {}}, "reward": 1.0, "done": False, "metadata": None}, {}),  # HTTP
    ],
)
def test_step_result_metadata_variants(data: Any, metadata: Any) -> None:
    result = frames.parse_step_result(data)
    assert result.metadata == metadata
    assert result.reward == 1.0 and isinstance(result.reward, float)
    assert result.observation["x"] == 1


def test_step_result_reward_and_shape() -> None:
    assert frames.parse_step_result({"observation": {}, "reward": True}).reward == 1.0
    assert frames.parse_step_result({"observation": {}}).reward is None
    with pytest.raises(ProtocolError):
        frames.parse_step_result({"observation": {}, "reward": "high"})
    with pytest.raises(ProtocolError):
        frames.parse_step_result({"reward": 1})


def test_generic_codec_passes_dicts_and_dumps_models() -> None:
    codec: Codec[Any, Any, Any] = Codec()
    assert codec._step_payload({"a": 1}) == {"a": 1}
    assert codec._step_payload(EchoAction(message="m")) == {"metadata": {}, "message": "m"}
    with pytest.raises(TypeError):
        codec._step_payload(42)
    assert codec._parse_state({"step_count": 2}) == {"step_count": 2}


def test_typed_codec() -> None:
    codec: Codec[Any, Any, Any] = Codec(action=EchoAction, observation=EchoObservation, state=State)
    assert codec._step_payload({"message": "m"}) == {"metadata": {}, "message": "m"}
    with pytest.raises(InvalidAction):
        codec._step_payload({"message": 3, "nope": 1})
    with pytest.raises(InvalidActionType, match="EchoAction"):
        codec._step_payload(State())
    result = codec._parse_result(
        {"observation": {"echoed_message": "m", "message_length": 1, "metadata": {}}, "reward": 0.1, "done": True}
    )
    assert isinstance(result, StepResult) and isinstance(result.observation, EchoObservation)
    assert (result.observation.done, result.observation.reward, result.done) == (True, 0.1, True)
    with pytest.raises(ParseError, match="EchoObservation") as info:
        codec._parse_result({"observation": {"unexpected": 1}, "done": False})
    assert (info.value.kind, info.value.payload) == ("observation", {"observation": {"unexpected": 1}, "done": False})
    state = codec._parse_state({"episode_id": "e", "step_count": 1, "extra": 5})
    assert isinstance(state, State) and state.model_extra == {"extra": 5}
    assert "EchoAction" in repr(codec)


def test_codec_with_unions_of_models() -> None:
    from typing import Annotated, Union

    from .openenv_models import GameOverObservation, MoveAction, ResignAction, RoundObservation

    plain = Codec(action=MoveAction | ResignAction, observation=RoundObservation | GameOverObservation)
    annotated = Codec(
        action=Annotated[Union[MoveAction, ResignAction], pydantic.Field(discriminator="type")],  # noqa: UP007
        observation=RoundObservation | GameOverObservation,
    )
    for codec in (plain, annotated):
        assert codec._step_payload({"type": "resign"}) == {"type": "resign", "reason": "", "metadata": {}}
        assert codec._step_payload(MoveAction(stance="guard"))["stance"] == "guard"
        with pytest.raises(InvalidAction):
            codec._step_payload({"type": "move", "stance": "dance"})
        with pytest.raises(InvalidActionType):
            codec._step_payload(EchoAction(message="x"))
    assert repr(plain) == "Codec(action=MoveAction | ResignAction, observation=RoundObservation | GameOverObservation)"
    over = {"kind": "game_over", "winner": "you", "reason": "knockout", "rounds": 4, "your_hp": 1, "opponent_hp": 0}
    result = plain._parse_result({"observation": over, "reward": 1.0, "done": True})
    assert isinstance(result.observation, GameOverObservation)
    # reward and done (fields every member has) are filled in from the frame
    assert (result.observation.reward, result.observation.done) == (1.0, True)
    result = plain._parse_result({"observation": {"kind": "round", "your_hp": 3, "opponent_hp": 2}, "done": False})
    assert isinstance(result.observation, RoundObservation)
    with pytest.raises(ParseError, match=r"RoundObservation \| GameOverObservation"):
        plain._parse_result({"observation": {"kind": "nope"}, "done": False})


def test_in_flight_guard() -> None:
    guard = InFlight()
    with guard:
        assert guard.busy
        with pytest.raises(SessionBusy, match="new_session"):
            with guard:
                pass
    assert not guard.busy


def test_client_options() -> None:
    options = ClientOptions(headers={"Authorization": "Bearer T0KEN"})
    assert "T0KEN" not in repr(options)
    local = parse_base_url("http://127.0.0.1:1")
    remote = parse_base_url("https://x.hf.space")
    assert options.ws_kwargs(local)["compression"] is None
    assert options.ws_kwargs(local)["proxy"] is None
    assert options.ws_kwargs(remote)["compression"] == "deflate"
    assert "proxy" not in options.ws_kwargs(remote)
    assert ClientOptions(compression=True).ws_kwargs(local)["compression"] == "deflate"
    assert ClientOptions(compression=False).ws_kwargs(remote)["compression"] is None
    bads: list[dict[str, Any]] = [
        {"connect_timeout": -1},
        {"ping_interval": "3"},
        {"max_message_size": 1.5},
        {"compression": "yes"},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            ClientOptions(**bad)
    with pytest.raises(TypeError):
        ClientOptions(headers={"a": 1})  # type: ignore[dict-item]


def test_hf_token_only_to_hf_spaces_over_tls() -> None:
    from openenv._blocking.sources import hosted_headers

    env = {"HF_TOKEN": "hf_secret"}
    assert hosted_headers("https://owner-name.hf.space", None, env) == {"Authorization": "Bearer hf_secret"}
    assert hosted_headers("wss://owner-name.hf.space", None, env) == {"Authorization": "Bearer hf_secret"}
    assert hosted_headers("http://owner-name.hf.space", None, env) == {}
    assert hosted_headers("https://example.com", None, env) == {}
    assert hosted_headers("https://a-b.hf.space", {"authorization": "mine"}, env) == {"authorization": "mine"}
    assert hosted_headers("https://a-b.hf.space", None, {}) == {}


def test_credentials_never_reach_the_websockets_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from openenv._adapters import ws_logger

    WS_LOGGER = ws_logger()

    with caplog.at_level(logging.DEBUG, logger=WS_LOGGER.name):
        WS_LOGGER.debug("> %s: %s", "Authorization", "Bearer hf_secret")
        WS_LOGGER.debug("> %s: %s", "Host", "example.com")
    assert "hf_secret" not in caplog.text
    assert "Authorization: <hidden>" in caplog.text and "Host: example.com" in caplog.text


def test_redact_url_hides_query_values_but_keeps_keys() -> None:
    assert redact_url("https://h/x?token=abc&v=1") == "https://h/x?token=***&v=***"
    assert redact_url("wss://u:p@h/ws?abc#frag") == "wss://***@h/ws?***#***"
    assert redact_url("https://h/x?flag=") == "https://h/x?flag=***"
    assert "abc" not in repr(parse_base_url("http://h/?token=abc"))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:S3CRET/PW@127.0.0.1:1", "http://***@127.0.0.1:1"),  # read as host "alice", port "S3CRET"
        ("http://alice:S3CRET#PW@127.0.0.1:1", "http://***@127.0.0.1:1"),
        ("http://alice:S3?CRET@127.0.0.1:1/ws?token=x", "http://***@127.0.0.1:1/ws?token=***"),
        ("http://alice:123?x@h:1/ws", "http://***@h:1/ws"),  # a port that is a number: the query says it
        ("http://tok/en@h", "http://***@h"),
        ("alice:S3/CR@127.0.0.1:1", "***@127.0.0.1:1"),
        ("http://a@b@c:1/x", "http://***@c:1/x"),
        ("http://user:p@ss/w@h", "http://***@h"),  # the parser found "user:p": the rest of the password too
        ("http://h:8000/ws?email=a@b.c", "http://h:8000/ws?email=***"),  # an @ in a query value: no credentials
        ("https://coder.example.com/@alice/ws/apps/env", "https://coder.example.com/@alice/ws/apps/env"),  # a path's
        ("http://hub:8000/user/jane@corp.com/proxy/8000", "http://hub:8000/user/jane@corp.com/proxy/8000"),
    ],
)
def test_redact_url_hides_credentials_that_hold_a_delimiter(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_an_at_sign_of_the_path_or_a_query_value_is_no_credentials() -> None:
    for url in ("https://coder.example.com/@alice/ws.main/apps/env", "http://hub:8000/user/jane@corp.com/proxy/8000"):
        assert parse_base_url(url).http_url == url  # Coder's and JupyterHub's path-based apps
    assert parse_base_url("admin:s3cret@myhost:8000/?next=https://x").host == "myhost"  # no scheme: "://" later on
    assert redact_url("admin:s3cret@myhost:8000/?next=https://x") == "***@myhost:8000/?next=***"


def test_an_unparsable_url_with_credentials_says_why_without_them() -> None:
    for url in (
        "http://alice:S3CRET/PW@127.0.0.1:1",
        "https://bob:Zx9/Qk+w==@h:443/ws",
        "http://alice:S3#CRET@h:1",
        "http://bob:1234/Zx9S3CRET@h",  # parses (host "bob", port 1234): refused, never connected to
    ):
        with pytest.raises(InvalidURL) as info:
            parse_base_url(url)
        message = str(info.value)
        assert "S3" not in message and "CRET" not in message and "Zx9" not in message and "bob" not in message
        assert "***@" in message and "percent-encode" in message
    with pytest.raises(InvalidURL, match="Port could not be cast to integer value as 'abc'"):
        parse_base_url("http://h:abc/x")  # no credentials: the parser's own reason


def test_timeouts_nan_inf_and_negative() -> None:
    import math

    from openenv._core.errors import InvalidOption
    from openenv._core.options import check_timeout

    assert check_timeout("t", math.inf) is None
    assert check_timeout("t", 3) == 3.0
    for bad in (math.nan, -1, 0, -math.inf, True, "1"):
        with pytest.raises(InvalidOption, match="t must be"):
            check_timeout("t", bad)  # type: ignore[arg-type]


def test_headers_are_checked_and_scrubbed() -> None:
    from openenv._core.errors import InvalidHeader
    from openenv._core.options import check_headers
    from openenv._core.urls import scrub

    assert check_headers({"X-Api-Key": "a b\tc"}) == {"X-Api-Key": "a b\tc"}
    for bad in ({"A": "SEKRIT\n"}, {"A": ""}, {"A": "caf\u00e9"}, {"A:": "x"}, {"": "x"}):
        with pytest.raises(InvalidHeader) as info:
            check_headers(bad)
        assert "SEKRIT" not in str(info.value)
    assert scrub("invalid header: Bearer T0KEN\\n", ["Bearer T0KEN"]) == "invalid header: <hidden>\\n"
    assert scrub("got T0KEN-1234", ["Bearer T0KEN-1234"]) == "got <hidden>"


def test_websockets_log_lines_hide_every_unlisted_header() -> None:
    import logging

    from openenv._adapters import ws_logger

    WS_LOGGER = ws_logger()

    def shown(msg: str, *args: Any) -> str:
        record = logging.LogRecord(WS_LOGGER.name, logging.DEBUG, __file__, 1, msg, args, None)
        for f in WS_LOGGER.filters:
            f.filter(record)  # type: ignore[union-attr]
        return record.getMessage()

    assert shown("> %s: %s", "X-Api-Key", "K") == "> X-Api-Key: <hidden>"
    assert shown("< %s: %s", "Set-Cookie", "K") == "< Set-Cookie: <hidden>"
    assert shown("> %s: %s", "User-Agent", "ua") == "> User-Agent: ua"
    assert shown("> GET %s HTTP/1.1", "/ws?token=K") == "> GET /ws?token=*** HTTP/1.1"


def test_verify_options() -> None:
    import ssl

    from openenv._core.options import ClientOptions as Options

    remote = parse_base_url("wss://example.com")
    assert "ssl" not in Options().ws_kwargs(remote)  # websockets' default context
    assert "ssl" not in Options(verify=False).ws_kwargs(parse_base_url("ws://example.com"))
    context = ssl.create_default_context()
    assert Options(verify=context).ws_kwargs(remote)["ssl"] is context
    assert Options(verify=context).http_verify() is context
    unchecked = Options(verify=False).ws_kwargs(remote)["ssl"]
    assert unchecked.verify_mode == ssl.CERT_NONE and not unchecked.check_hostname
    assert "verify=False" in repr(Options(verify=False))


def test_option_defaults_are_defined_once() -> None:
    import dataclasses
    import inspect

    from openenv._core.options import DEFAULTS, READY_TIMEOUT, ClientOptions, EnvOptions
    from openenv.aio import Env as AsyncEnv
    from openenv.sync import Env

    fields = {f.name for f in dataclasses.fields(ClientOptions)}
    assert set(EnvOptions.__annotations__) == fields | {"mode"}
    for cls in (Env, AsyncEnv):
        params = inspect.signature(cls.__init__).parameters
        assert set(params) - {"self", "base_url", "codec"} == fields | {"mode"}
        for name in fields - {"headers"}:
            assert params[name].default == getattr(DEFAULTS, name), name
        for ctor in (cls.from_provider, cls.from_docker_image, cls.from_env):
            assert inspect.signature(ctor).parameters["ready_timeout"].default == READY_TIMEOUT


def test_bootstrap_error_lists_each_failure_and_round_trips() -> None:

    from openenv._core.errors import BootstrapError, ContainerExited, ProviderError, ReadinessTimeout

    failures: dict[int, BaseException] = {
        3: ReadinessTimeout("http://127.0.0.1:9 did not become healthy within 5.0 s", "line one\nline two"),
        1: ContainerExited("openenv-x", 3, "fatal: no model"),
    }
    error = BootstrapError(failures, 4)
    assert isinstance(error, ProviderError)
    assert list(error.failures) == [1, 3]  # by index
    text = str(error)
    assert text.startswith("2 of 4 servers failed to start; every server was stopped:")
    assert "[1] ContainerExited: container openenv-x exited before it became ready (exit code 3)" in text
    assert "fatal: no model" in text and text.count("fatal: no model") == 1  # logs already in the message
    assert "[3] ReadinessTimeout: http://127.0.0.1:9 did not become healthy" in text and "line two" in text
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == text and list(copy.failures) == [1, 3] and copy.total == 4


def test_bootstrap_error_lists_identical_causes_once() -> None:
    """Eight pulls of one missing image give one message, not eight copies of it."""
    from openenv._core.errors import BootstrapError, ContainerExited, ImageNotFound

    missing = "image echo-env:latest is not available locally and could not be pulled (no such host); build it"
    error = BootstrapError({i: ImageNotFound(missing, "echo-env:latest") for i in range(8)}, 8)
    head = "8 of 8 servers failed to start (every server was stopped)"
    assert str(error) == f"{head}, all with: ImageNotFound: {missing}"
    one = BootstrapError({2: ImageNotFound(missing, "echo-env:latest")}, 3)
    assert str(one) == f"1 of 3 servers failed to start (every server was stopped): [2] ImageNotFound: {missing}"
    two = BootstrapError({0: ImageNotFound(missing, "x"), 3: ImageNotFound(missing, "x")}, 4)
    assert str(two) == f"2 of 4 servers failed to start (every server was stopped): [0, 3] ImageNotFound: {missing}"
    mixed = BootstrapError({**{i: ImageNotFound(missing, "x") for i in (0, 2, 5)}, 4: ContainerExited("c", 1, "")}, 6)
    text = str(mixed)
    assert text.count(missing) == 1 and f"  [0, 2, 5] ImageNotFound: {missing}" in text
    assert "  [4] ContainerExited: container c exited" in text
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_library_log_lines_hide_url_credentials_query_values_and_headers() -> None:
    import logging

    from openenv._core.options import RedactSecrets

    def shown(msg: str, *args: Any) -> str:
        record = logging.LogRecord("lib", logging.INFO, __file__, 1, msg, args, None)
        RedactSecrets().filter(record)
        return record.getMessage()

    assert shown("HTTP Request: %s %s", "GET", "http://alice:pw@h:1/schema?token=T") == (
        "HTTP Request: GET http://***@h:1/schema?token=***"
    )
    assert shown('%s - "WebSocket %s" [accepted]', "127.0.0.1:5", "/ws?token=T") == (
        '127.0.0.1:5 - "WebSocket /ws?token=***" [accepted]'
    )
    access = shown('%s - "%s %s HTTP/%s" %d', "c", "GET", "/state?k=v", "1.1", 200)
    assert access == 'c - "GET /state?k=*** HTTP/1.1" 200'
    assert shown("< %s: %s", "authorization", "Bearer T") == "< authorization: <hidden>"
    assert shown("< %s: %s", "host", "h") == "< host: h"
    assert (
        shown("Uvicorn running on %s://%s:%d", "http", "127.0.0.1", 8000) == "Uvicorn running on http://127.0.0.1:8000"
    )


def test_url_secrets_and_scrubbed_http_error_bodies() -> None:
    from openenv._core.errors import ProtocolError
    from openenv._core.mcp import http_json
    from openenv._core.options import ClientOptions
    from openenv._core.urls import url_secrets

    assert set(url_secrets("http://alice:p%40ss@h/?token=a%2Bb&x")) >= {"p%40ss", "p@ss", "a%2Bb", "a+b", "x"}
    assert "YWxpY2U6cEBzcw==" in url_secrets("http://alice:p%40ss@h/")  # HTTP Basic: alice:p@ss
    assert url_secrets("http://h/") == [] and url_secrets("") == []
    options = ClientOptions.of({"headers": {"Authorization": "Bearer ASECRET"}})
    body = b"echo: Authorization: Bearer ASECRET token=QSECRET"
    with pytest.raises(ProtocolError) as info:
        http_json(500, body, "http://h/schema?token=***", options.secrets("http://h/?token=QSECRET"))
    assert "ASECRET" not in str(info.value) and "QSECRET" not in str(info.value) and "<hidden>" in str(info.value)


def test_a_hidden_url_s_host_and_path_are_scrubbed_from_what_its_server_sends() -> None:
    """A cloud sandbox's URL is a capability as a whole: a server echoing its own address shows ``<hidden>``."""
    from openenv._core.errors import ProtocolError
    from openenv._core.mcp import http_json
    from openenv._core.options import ClientOptions
    from openenv._core.urls import hide_url, scrub, unhide_url, url_secrets

    url = "https://sbx-7f3a9c.sandbox.example.dev:8443/s/cap-91d2"
    assert url_secrets(url) == []  # not hidden: nothing in it is a secret
    hide_url(url, "<sandbox 1>")
    try:
        secrets = ClientOptions().secrets(url + "/reset")  # a URL below the hidden one
        body = (
            b"bad request to https://sbx-7f3a9c.sandbox.example.dev:8443/s/cap-91d2/reset "
            b"(Host: sbx-7f3a9c.sandbox.example.dev:8443, path /s/cap-91d2/reset)"
        )
        with pytest.raises(ProtocolError) as info:
            http_json(400, body, "<sandbox 1>/reset", secrets)
        message = str(info.value)
        assert "sbx-7f3a9c" not in message and "cap-91d2" not in message, message
        assert "<hidden>" in message
    finally:
        unhide_url(url)
    assert url_secrets(url) == []
    local = "http://127.0.0.1:8123/env"  # a provider's loopback server: hidden while it runs, nothing secret in it
    hide_url(local, "<local 1>")
    try:
        text = "db at 127.0.0.1:5432 refused; GET /environment/list"
        assert scrub(text, url_secrets(local)) == text
        assert scrub("from 127.0.0.1:8123/env/ws", url_secrets(local)) == "from <hidden>/ws"
    finally:
        unhide_url(local)
