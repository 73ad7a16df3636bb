"""``environment_factory``: the sans-IO core, the flavours, and the schemas transformers reads back."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Optional, Union

import pydantic
import pytest

import openenv.aio as aio
import openenv.sync as sync
from openenv._core import trl as core
from openenv._core.tool_models import Tool, ToolResult
from openenv.server import EnvServer
from openenv.server.tools_demo import ToolsDemoEnvironment

from .envs import GuessEnv

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ sans-IO core


@pytest.mark.parametrize(
    ("schema", "expected", "nullable"),
    [
        ({"type": "string"}, str, False),
        ({"type": "integer"}, int, False),
        ({"type": "number"}, float, False),
        ({"type": "boolean"}, bool, False),
        ({"type": "array", "items": {"type": "integer"}}, list[int], False),
        ({"type": "array"}, list[Any], False),
        ({"type": "object"}, dict[str, Any], False),
        ({"type": "object", "properties": {"x": {"type": "integer"}}}, dict[str, Any], False),
        ({"enum": ["a", "b"], "type": "string"}, Literal["a", "b"], False),
        ({"enum": ["a", None]}, Optional[Literal["a"]], True),  # noqa: UP045
        ({"const": 3}, Literal[3], False),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, Optional[int], True),  # noqa: UP045
        ({"type": ["string", "null"]}, Optional[str], True),  # noqa: UP045
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, Union[int, str], False),  # noqa: UP007
        ({"$ref": "#/$defs/Mode"}, Literal["x", "y"], False),
        ({"$ref": "#/$defs/Missing"}, Any, False),
        ({}, Any, False),
        ({"type": "null"}, Optional[Any], True),  # noqa: UP045
    ],
)
def test_annotation_of(schema: dict[str, Any], expected: Any, nullable: bool) -> None:
    defs = {"Mode": {"enum": ["x", "y"], "type": "string"}}
    assert core.annotation_of(schema, defs) == (expected, nullable)


def test_method_spec_signature_and_docstring() -> None:
    schema = {
        "type": "object",
        "properties": {
            "from": {"type": "string", "default": "a"},
            "self": {"type": "integer", "title": "Self Value"},
            "my-arg": {"type": "number", "description": "A\n   multi-line   description."},
        },
        "required": ["self", "my-arg"],
    }
    description = "Do things.\n\nArgs:\n    from: Where from.\n      (continued)\nReturns:\n    Stuff."
    spec = core.method_spec("do", "do", description, schema)
    assert str(spec.signature()) == "(self, self_: int, my_arg: float, from_: str = 'a') -> str"
    assert spec.docstring() == (
        "Do things.\n\nArgs:\n    self_: Self Value\n    my_arg: A multi-line description.\n"
        "    from_: Where from. (continued)\n\nReturns:\n    The tool's result, as text."
    )
    assert core.bind_arguments(spec, (1, 2.5), {"from_": "b"}) == {"self": 1, "my-arg": 2.5, "from": "b"}
    with pytest.raises(TypeError):
        core.bind_arguments(spec, (), {"nope": 1})


def test_bind_arguments_sends_only_what_was_given() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "string"},
            "c": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3},
        },
        "required": ["a"],
    }
    spec = core.method_spec("f", "f", "F.", schema)
    assert str(spec.signature(with_self=False)) == "(a: int, b: str = None, c: Optional[int] = 3) -> str"
    assert core.bind_arguments(spec, (1,), {}) == {"a": 1}
    assert core.bind_arguments(spec, (1,), {"b": None, "c": None}) == {"a": 1, "c": None}


def test_method_names() -> None:
    tools = [
        Tool(name=name, description="", input_schema={})
        for name in ("reset", "close", "class", "my tool", "__init__", "_hidden", "9lives", "hidden", "get_reward")
    ]
    specs, notes = core.plan_methods(tools)
    assert [(s.name, s.tool) for s in specs] == [
        ("reset_tool", "reset"),
        ("close_tool", "close"),
        ("class_", "class"),
        ("my_tool", "my tool"),
        ("hidden", "_hidden"),
        ("tool_9lives", "9lives"),
        ("get_reward_tool", "get_reward"),
    ]
    assert any("skipped tool '__init__'" in n for n in notes)
    assert any("skipped tool 'hidden'" in n for n in notes)
    assert specs[0].description == "Call the tool 'reset'."


def test_step_spec_leaves_out_metadata() -> None:
    schema = {
        "description": "An action.",
        "properties": {"metadata": {"type": "object"}, "x": {"type": "integer"}},
        "required": ["x"],
    }
    spec = core.step_spec(schema)
    assert (spec.name, spec.tool, [p.name for p in spec.params]) == ("step", None, ["x"])
    assert spec.description.endswith("An action.")


def test_reset_parameters_and_filter() -> None:
    assert core.reset_parameters({"action": {}}, {"name": "x"}) == frozenset({"seed", "episode_id"})
    assert core.reset_parameters({"reset": {"properties": {"level": {}}}}, None) == frozenset({"level"})
    assert core.reset_parameters(None, {"reset_parameters": ["a", "b"]}) == frozenset({"a", "b"})
    assert core.reset_parameters({"reset": {"additionalProperties": True}}, None) is None
    kept, dropped = core.filter_reset(
        {"seed": 1, "prompt": "p", "answer": 2, "episode_id": None}, {"seed", "episode_id"}
    )
    assert (kept, dropped) == ({"seed": 1}, ["answer", "prompt"])
    assert core.filter_reset({"x": 1}, None) == ({"x": 1}, [])


def test_renderers() -> None:
    assert core.render_observation({"echoed_message": "hi", "message_length": 2, "done": False}) == "hi"
    assert core.render_observation({"text": "t", "message": "m"}) == "t\nm"  # every text field, in order
    assert core.render_observation({"message": "m", "status": "ok", "n": 3}) == "m\nstatus: ok"
    assert core.render_observation({"message": ""}) == '{"message":""}'  # no text: the fields as JSON
    assert core.render_observation({}) == ""
    assert core.render_observation({}, {"status": "ready", "step": 1}) == "status: ready"
    assert core.render_observation({"count": 1, "reward": 1.0, "metadata": {"a": 1}}) == '{"count":1}'
    assert core.render_observation("plain") == "plain"
    assert core.render_tool_result(ToolResult(content=[{"type": "text", "text": "42"}], data=42)) == "42"
    assert core.render_tool_result(ToolResult(data={"a": 1})) == '{"a":1}'
    assert core.render_tool_result(ToolResult()) == "(no output)"
    assert core.render_tool_result(ToolResult(content=[{"type": "text", "text": "bad"}], is_error=True)) == "Error: bad"


def test_core_imports_no_transformers() -> None:
    code = "import openenv._core.trl, openenv.sync, sys; print('transformers' in sys.modules, 'trl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ------------------------------------------------------------------ flavours


@pytest.fixture(scope="module")
def tools_server() -> Iterator[EnvServer]:
    with EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0, max_sessions=8) as server:
        yield server


def test_sync_class_is_plain_and_aio_class_is_coroutines(tools_server: Any) -> None:
    import asyncio

    cls = sync.environment_factory(tools_server.url)
    try:
        assert not inspect.iscoroutinefunction(cls.add) and not inspect.iscoroutinefunction(cls.reset)
        assert inspect.signature(cls.__init__).parameters.keys() == {"self"}
    finally:
        cls.close()

    async def main() -> None:
        acls = await aio.environment_factory(tools_server.url)
        try:
            assert inspect.iscoroutinefunction(acls.add) and inspect.iscoroutinefunction(acls.get_reward)
            # reset is a plain function: a coroutine on the loop, the text from a worker thread (TRL's async trainer)
            assert inspect.isfunction(acls.reset) and not inspect.iscoroutinefunction(acls.reset)
            env = acls()
            await env.reset()
            assert await env.add(2, 3) == "5"
        finally:
            await acls.close()

    asyncio.run(main())


def test_class_is_closed_at_interpreter_exit(tools_server: Any) -> None:
    code = (
        "import sys; from openenv.sync import environment_factory\n"
        f"cls = environment_factory({tools_server.url!r}); env = cls(); env.reset(); print(env.add(1, 2))\n"
    )
    # the earlier tests' sessions end a moment after their clients close: start from none
    _wait_until(lambda: tools_server.active_sessions == 0)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "3"
    assert "Traceback" not in out.stderr
    # the exiting interpreter closed its session (the server frees the slot a moment later)
    _wait_until(lambda: tools_server.active_sessions == 0)


def _wait_until(check: Any, timeout: float = 10.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "condition never became true"
        time.sleep(0.02)


# ------------------------------------------------------------------ transformers reads back the declared schema


def _transformers_get_json_schema() -> Any:
    """transformers' own reader of tool schemas (the ``trl-test`` dependency group: nox installs it)."""
    return pytest.importorskip(
        "transformers.utils", reason="needs transformers: the trl-test dependency group (nox -s tests installs it)"
    ).get_json_schema


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property schema allows, ignoring null (pydantic's anyOf or transformers' nullable)."""
    if "anyOf" in schema:
        return set().union(*(_types(s) for s in schema["anyOf"])) - {"null"}
    kind = schema.get("type")
    if isinstance(kind, list):
        return set(kind) - {"null"}
    if kind is None and "enum" in schema:
        return {type(v).__name__.replace("str", "string") for v in schema["enum"] if v is not None}
    return {kind} if kind else set()


def _assert_same(generated: dict[str, Any], declared: dict[str, Any], description: str | None = None) -> None:
    params = generated["parameters"]
    assert sorted(params["properties"]) == sorted(declared.get("properties", {}))
    assert sorted(params.get("required", [])) == sorted(declared.get("required", []))
    for name, prop in declared.get("properties", {}).items():
        got = params["properties"][name]
        assert _types(got) == _types(prop), name
        if "enum" in prop:
            assert got["enum"] == prop["enum"], name
        if "description" in prop:
            assert got["description"] == prop["description"], name
        else:
            assert got["description"], name
        assert bool(got.get("nullable")) == ("null" in json.dumps(prop.get("anyOf", []))), name
        if "items" in prop:
            assert got["items"]["type"] == prop["items"]["type"], name
    if description is not None:
        assert generated["description"] == description


def test_get_json_schema_reads_back_the_declared_tools() -> None:
    get_json_schema = _transformers_get_json_schema()
    with EnvServer(GuessEnv, host="127.0.0.1", port=0) as server:
        cls = sync.environment_factory(server.url)
        try:
            env = cls()
            for tool in cls.tools:
                generated = get_json_schema(getattr(env, tool.name))["function"]
                assert generated["name"] == tool.name
                _assert_same(generated, tool.input_schema, core.split_description(tool.description)[0])
                assert generated["return"]["type"] == "string"
        finally:
            cls.close()


def test_get_json_schema_reads_back_the_action(echo_server: Any, counter_server: Any) -> None:
    get_json_schema = _transformers_get_json_schema()
    for server in (echo_server, counter_server):
        cls = sync.environment_factory(server.url)
        try:
            generated = get_json_schema(cls().step)["function"]
            action = json.loads(__import__("httpx").get(server.url + "/schema").text)["action"]
            action["properties"].pop("metadata")
            _assert_same(generated, action)
        finally:
            cls.close()


def test_example_runs_without_trl() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "rewards:" in out.stdout


# -- rendering observations shaped like OpenEnv's own environments (envs/*/models.py), as their
# servers send them: the observation without reward/done/metadata, the metadata beside it.


class _Msg(pydantic.BaseModel):
    sender_id: int
    content: str
    category: str


class TextArenaLikeObservation(pydantic.BaseModel):
    """textarena_env's observation: ``prompt`` is the game id when the game sends no PROMPT message."""

    prompt: str
    messages: list[_Msg] = pydantic.Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = pydantic.Field(default_factory=list)
    info: dict[str, Any] = pydantic.Field(default_factory=dict)


class ChessLikeObservation(pydantic.BaseModel):
    fen: str = ""
    legal_moves: list[str] = pydantic.Field(default_factory=list)
    is_check: bool = False
    result: str | None = None


class Connect4LikeObservation(pydantic.BaseModel):
    board: list[list[int]] = pydantic.Field(default_factory=list)
    legal_actions: list[int] = pydantic.Field(default_factory=list)


class OpenSpielLikeObservation(pydantic.BaseModel):
    info_state: list[float]
    legal_actions: list[int]
    game_phase: str = "playing"
    current_player_id: int = 0
    opponent_last_action: int | None = None


GAME = "[GAME] You are Player 0. Guess the number between 1 and 20. Submit guesses as [number]."


def test_render_textarena_shape_keeps_the_game_messages() -> None:
    reset = TextArenaLikeObservation(
        prompt="GuessTheNumber-v0",
        messages=[_Msg(sender_id=-1, content=GAME, category="MESSAGE")],
        legal_players=[0],
    ).model_dump()
    text = core.render_observation(reset, {"env_id": "GuessTheNumber-v0", "turn": 0})
    assert text == f"GuessTheNumber-v0\n{GAME}"
    step = TextArenaLikeObservation(
        prompt="GuessTheNumber-v0",
        messages=[
            _Msg(sender_id=0, content="[10]", category="MESSAGE"),
            _Msg(sender_id=-1, content="[GAME] The target number is lower than 10.", category="MESSAGE"),
        ],
    ).model_dump()
    assert core.render_observation(step) == "GuessTheNumber-v0\n[10]\n[GAME] The target number is lower than 10."
    chat = {"prompt": "p", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    assert core.render_observation(chat) == "p\na\nb"  # {role, content} messages: their contents, in order
    same = {"prompt": GAME, "messages": [{"sender_id": -1, "content": GAME, "category": "PROMPT"}]}
    assert core.render_observation(same) == GAME  # a line is not repeated


def test_render_mcp_echo_reset_uses_its_metadata_words() -> None:
    # echo_env (MCP) resets with Observation(metadata={"status": "ready", "message": "Echo environment ready!"})
    text = core.render_observation({}, {"status": "ready", "message": "Echo environment ready!"})
    assert text == "Echo environment ready!\nstatus: ready"
    inner = {"metadata": {"message": "Echo environment ready!"}}  # metadata inside the observation (0.3 servers)
    assert core.render_observation(inner) == "Echo environment ready!"
    echoed = ToolResult(content=[{"type": "text", "text": "hi"}], data="hi", reward=0.2)  # its echo_message tool
    assert core.render_tool_result(echoed) == "hi"


def test_render_chess_connect4_openspiel_keep_every_field() -> None:
    start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
    chess = ChessLikeObservation(fen=start, legal_moves=["e2e4", "d2d4"]).model_dump()
    assert core.render_observation(chess) == f'{{"fen":"{start}","legal_moves":["e2e4","d2d4"],"is_check":false}}'
    over = ChessLikeObservation(fen=start, legal_moves=[], result="1-0").model_dump()
    assert core.render_observation(over) == f'{{"fen":"{start}","legal_moves":[],"is_check":false,"result":"1-0"}}'
    connect4 = Connect4LikeObservation(board=[[0] * 7 for _ in range(6)], legal_actions=list(range(7))).model_dump()
    text = core.render_observation(connect4, {"status": "your move"})
    assert text == "status: your move\n" + json.dumps(connect4, separators=(",", ":"))  # metadata words, then data
    spiel = OpenSpielLikeObservation(info_state=[0.0, 1.0], legal_actions=[0, 1, 2]).model_dump()
    text = core.render_observation(spiel)
    assert text == '{"info_state":[0.0,1.0],"legal_actions":[0,1,2],"game_phase":"playing","current_player_id":0}'


def test_reset_text_is_separated_from_the_prompt() -> None:
    assert core.reset_text("Echo environment ready!") == "\n\nEcho environment ready!"
    prompt = "Use the tools."
    assert prompt + (core.reset_text("ready") or "") == "Use the tools.\n\nready"  # what TRL builds
    assert core.reset_text("\nalready apart") == "\nalready apart"
    assert core.reset_text("") == "" and core.reset_text(None) is None


def test_the_trl_guide_shows_the_script_ci_trains_with() -> None:
    """docs/guides/trl.md's training script is examples/trl_train.py, word for word (`nox -s trl` runs that file)."""
    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "guides" / "trl.md").read_text(encoding="utf-8")
    marker = guide.index("`nox -s trl` runs this same file (examples/trl_train.py) -->")
    start = guide.index("```python\n", marker) + len("```python\n")
    block = guide[start : guide.index("```\n", start)]
    assert block == (root / "examples" / "trl_train.py").read_text(encoding="utf-8")


def test_the_trl_guide_shows_the_async_trainer_script_ci_runs() -> None:
    """The guide's async-trainer script is examples/trl_async_train.py, word for word (`nox -s trl` imports it)."""
    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "guides" / "trl.md").read_text(encoding="utf-8")
    marker = guide.index("this file's make_environments (examples/trl_async_train.py) -->")
    start = guide.index("```python\n", marker) + len("```python\n")
    block = guide[start : guide.index("```\n", start)]
    assert block == (root / "examples" / "trl_async_train.py").read_text(encoding="utf-8")
