"""The command line (``python -m openenv``): run / schema / tools against real servers on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from openenv._cli import main
from openenv.server import EnvServer
from openenv.server.tools_demo import ToolsDemoEnvironment

from .envs import BOOT, ChessEnv, WalkEnv

ServerFactory = Callable[..., EnvServer]


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- run: the built-in echo ----------------------------------------------------------------


def test_run_without_target_is_the_echo_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "run")
    assert code == 0
    assert "started an in-process echo server on http://127.0.0.1:" in err
    lines = out.splitlines()
    assert lines[0].startswith("reset: observation=")
    assert [line.split(" action=")[1].split(" observation")[0] for line in lines[1:6]] == [
        json.dumps({"message": f"hello {n}"}) for n in range(1, 6)
    ]
    assert "5 steps, mean step latency" in out
    assert "call_tool add(a=2, b=40) -> data=42" in out


def test_run_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "run", "--json", "--steps", "2")
    assert code == 0
    records = _json_lines(out)
    assert [r["type"] for r in records] == ["reset", "step", "step", "tools", "tool"]  # the same demo as plain run
    assert records[2] == {
        "type": "step",
        "step": 2,
        "action": {"message": "hello 2"},
        "observation": {"metadata": {"step": 2}, "echoed_message": "hello 2", "message_length": 7},
        "reward": 0.7,
        "done": False,
    }
    assert records[3]["tools"] == ["add", "fail", "greet"] and records[3]["demo"] == "tools"
    assert {k: records[4][k] for k in ("name", "arguments", "data", "reward", "done", "demo")} == {
        "name": "add",
        "arguments": {"a": 2, "b": 40},
        "data": 42,
        "reward": 1.0,
        "done": False,
        "demo": "tools",
    }


def test_run_echo_url_default_action_comes_from_the_schema(
    capsys: pytest.CaptureFixture[str], echo_server: EnvServer
) -> None:
    code, out, _ = _run(capsys, "run", echo_server.url, "--json", "--steps", "1")
    assert code == 0
    records = _json_lines(out)
    assert records[0] == {"type": "default_action", "action": {"message": ""}, "from": "schema"}
    assert [r["type"] for r in records[1:]] == ["reset", "step"] and records[2]["action"] == {"message": ""}
    code, out, _ = _run(capsys, "run", echo_server.url, "--steps", "1")
    assert out.splitlines()[0] == (
        'no --action given: each step sends {"message": ""}, built from the environment\'s action schema '
        f"(GET /schema; python -m openenv schema {echo_server.url} shows it); choose with --action JSON"
    )


def test_long_observations_are_truncated(capsys: pytest.CaptureFixture[str], counter_server: EnvServer) -> None:
    code, out, _ = _run(capsys, "run", counter_server.url, "--action", '{"delta": 1, "size": 5000}')
    assert code == 0
    step = out.splitlines()[1]
    assert len(step) < 400
    assert "... (" in step and "chars)" in step
    assert "reward=1 done=False" in step


# -- run: an environment whose action is not {"message"} -----------------------------------


def test_run_with_one_action_repeated(capsys: pytest.CaptureFixture[str], server_factory: ServerFactory) -> None:
    server = server_factory(WalkEnv)
    action = '{"direction": "right", "distance": 2}'
    code, out, _ = _run(capsys, "run", server.url, "--action", action, "--steps", "4", "--seed", "3", "--json")
    assert code == 0
    records = _json_lines(out)
    assert records[0]["observation"]["metadata"] == {"seed": 3}
    assert [(r["type"], r.get("observation", {}).get("position")) for r in records] == [
        ("reset", 0),
        ("step", 2),
        ("step", 4),  # done: the other two steps are not sent
    ]
    assert records[-1]["done"] is True and records[-1]["reward"] == 1.0


def test_run_actions_in_order_from_files_and_reset_kwargs(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory(WalkEnv)
    left = tmp_path / "left.json"
    left.write_text('{"direction": "left", "distance": 3}')
    code, out, _ = _run(
        capsys,
        "run",
        server.url,
        "--reset-kwargs",
        '{"start": -5, "episode_id": "e1"}',
        "--action",
        '{"direction": "right"}',
        "--action",
        f"@{left}",
        "--action",
        '{"direction": "right", "distance": 2}',
        "--json",
    )
    assert code == 0
    positions = [r["observation"]["position"] for r in _json_lines(out)]
    assert positions == [-5, -4, -7, -5]


def test_run_builds_the_default_action_from_the_schema(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory
) -> None:
    server = server_factory(WalkEnv)
    code, out, _ = _run(capsys, "run", server.url)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith('no --action given: each step sends {"direction": "right"}, built from')
    assert lines[2].startswith('step 1: action={"direction": "right"} observation=')
    assert lines[4].endswith("reward=1 done=True")
    assert "episode done after 3 of 5 steps" in out
    assert "3 steps, mean step latency" in out


def test_run_steps_zero_only_resets(capsys: pytest.CaptureFixture[str], server_factory: ServerFactory) -> None:
    server = server_factory(WalkEnv)
    code, out, _ = _run(capsys, "run", server.url, "--steps", "0", "--json")
    assert code == 0
    assert [r["type"] for r in _json_lines(out)] == ["reset"]


def test_run_without_a_buildable_default_names_the_fields(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory
) -> None:
    server = server_factory(ChessEnv)
    code, out, err = _run(capsys, "run", server.url)
    assert code == 2
    assert out == ""
    assert "move: a string matching ^[a-h][1-8][a-h][1-8]$" in err
    assert f"python -m openenv run {server.url} --action " in err
    assert '\'{"move": "<a string matching ^[a-h][1-8][a-h][1-8]$>"}\'' in err
    assert "Traceback" not in err
    # and the action it asks for works. (The first run held the server's one session while it asked for
    # tools; the server frees it just after that client's close returns, and a loaded CI run started the
    # second run inside that moment: the command waits for the slot, --capacity-timeout)
    code, out, err = _run(capsys, "run", server.url, "--action", '{"move": "e2e4"}', "--json")
    assert code == 0, err
    assert _json_lines(out)[1]["observation"]["position"] == 1


# -- a server at capacity: the commands wait for a session (--capacity-timeout) ------------------


@contextlib.contextmanager
def release_when_the_wait_starts(monkeypatch: pytest.MonkeyPatch, release: Callable[[], None]) -> Iterator[None]:
    """Call ``release()`` (in a thread) once the command says it waits for a session.

    Not after a fixed delay: on a loaded machine the command's first call could come after
    such a release, and the wait under test would never happen.
    """
    from openenv._cli import _common

    note = _common._Out.note
    threads: list[threading.Thread] = []

    def note_then_release(self: Any, text: str) -> None:
        note(self, text)
        if "at capacity" in text and not threads:
            threads.append(threading.Thread(target=release))
            threads[0].start()

    monkeypatch.setattr(_common._Out, "note", note_then_release)
    try:
        yield
    finally:
        for thread in threads:
            thread.join()


@pytest.mark.parametrize("command", ["run", "tools"])
def test_a_command_waits_for_a_one_session_server_to_free_its_slot(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openenv.server.echo import EchoEnvironment
    from openenv.sync import Env

    server = server_factory(EchoEnvironment, max_sessions=1)
    holder = Env.from_env(server.url)  # another client holds the one session until the command waits for it
    holder.reset()
    try:
        with release_when_the_wait_starts(monkeypatch, holder.close):
            code, out, err = _run(capsys, command, server.url, "--json")
    finally:
        holder.close()
    assert code == 0, err
    assert "the server is at capacity (Server at capacity: 1/1 sessions active" in err
    assert "waiting up to 10 s for a session to come free (--capacity-timeout)" in err
    assert err.count("waiting up to") == 1 and "error" not in err
    if command == "run":
        assert [r["type"] for r in _json_lines(out)] == ["default_action", "reset"] + ["step"] * 5
    else:
        assert json.loads(out) == []


def test_capacity_timeout_bounds_the_wait_and_names_the_remedy(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory
) -> None:
    from openenv.server.echo import EchoEnvironment
    from openenv.sync import Env

    server = server_factory(EchoEnvironment, max_sessions=1)
    with Env.from_env(server.url) as holder:  # held for the whole test
        holder.reset()
        start = time.monotonic()
        code, out, err = _run(capsys, "run", server.url, "--capacity-timeout", "0.3")
        waited = time.monotonic() - start
        assert code == 1 and out == ""
        assert "waiting up to 0.3 s for a session to come free" in err
        assert "error: Server at capacity: 1/1 sessions active" in err
        assert "still full after waiting --capacity-timeout=0.3 s with backoff (code: CAPACITY_REACHED)" in err
        assert "hint: the server serves 1 session at a time, all taken by other clients" in err
        assert "(MAX_CONCURRENT_ENVS=N, or serve --max-sessions N)" in err and "Traceback" not in err
        assert 0.3 <= waited < 10
        # 0: the old answer at once, no wait announced
        code, out, err = _run(capsys, "run", server.url, "--capacity-timeout", "0", "--json")
        assert code == 1
        assert "waiting" not in err and "still full" not in err
        assert _json_lines(out) == [
            {
                "type": "error",
                "error": "CapacityReached",
                "message": "Server at capacity: 1/1 sessions active. Cannot accept new connections. "
                "(code: CAPACITY_REACHED)",
            }
        ]
        # the schema is read over HTTP: it needs no session, so a full server shows it at once
        code, out, err = _run(capsys, "schema", server.url, "--capacity-timeout", "0", "--json")
        assert code == 0, err
        assert json.loads(out)["action"]["properties"]["message"]["type"] == "string"
        assert holder.step({"message": "still mine"}).observation["echoed_message"] == "still mine"


# -- run: errors -------------------------------------------------------------------------------


def test_validation_error_prints_the_server_message(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory
) -> None:
    server = server_factory(WalkEnv)
    code, out, err = _run(capsys, "run", server.url, "--action", '{"direction": "up", "distance": 9}')
    assert code == 1
    assert out.startswith("reset:")
    assert "error: step 1: " in err
    assert "VALIDATION_ERROR" in err
    assert "direction: Input should be 'right' or 'left'" in err
    assert "distance: Input should be less than or equal to 3" in err
    assert f"python -m openenv schema {server.url}" in err
    assert "Traceback" not in err


def test_errors_in_json_mode_are_a_record_too(capsys: pytest.CaptureFixture[str], counter_server: EnvServer) -> None:
    code, out, err = _run(capsys, "run", counter_server.url, "--action", '{"delta": 99}', "--json")
    assert code == 1
    records = _json_lines(out)
    assert records[-1]["type"] == "error"
    assert records[-1]["error"] == "ExecutionError"
    assert "boom: delta 99 is cursed" in records[-1]["message"]
    assert "error: step 1: boom: delta 99 is cursed" in err


def test_unreachable_target(capsys: pytest.CaptureFixture[str], free_port: int) -> None:
    code, _, err = _run(capsys, "run", f"http://127.0.0.1:{free_port}")
    assert code == 1
    assert err.startswith("error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--action", "{nope"], "--action '{nope' is not valid JSON"),
        (["--action", "[1, 2]"], "--action must be a JSON object"),
        (["--action", "@/nonexistent/action.json"], "cannot read '/nonexistent/action.json'"),
        (["--action", "{}", "--action", "{}", "--steps", "3"], "--steps 3 but 2 --action values"),
        (["--reset-kwargs", "3"], "--reset-kwargs must be a JSON object"),
        (["--tool", "add", "--args", "{bad"], "--args '{bad' is not valid JSON"),
    ],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], counter_server: EnvServer, argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "run", counter_server.url, *argv)
    assert code == 2
    assert out == ""
    assert message in err


def test_args_without_tool_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--args", "{}"])
    assert info.value.code == 2
    assert "--args must follow its --tool NAME" in capsys.readouterr().err


# -- run: tools -------------------------------------------------------------------------------


@pytest.fixture
def tools_server(server_factory: ServerFactory) -> EnvServer:
    return server_factory(
        ToolsDemoEnvironment, max_sessions=4
    )  # consecutive runs: a closed session frees its slot a moment later


def test_run_tool_calls(capsys: pytest.CaptureFixture[str], tools_server: EnvServer) -> None:
    code, out, _ = _run(
        capsys,
        "run",
        tools_server.url,
        "--tool",
        "add",
        "--args",
        '{"a": 2, "b": 40}',
        "--tool",
        "greet",
        "--args",
        '{"name": "Ada", "punctuation": "?"}',
        "--json",
    )
    assert code == 0
    records = _json_lines(out)
    assert [r["type"] for r in records] == ["reset", "tool", "tool"]  # tools only: no steps
    assert records[1]["name"] == "add" and records[1]["arguments"] == {"a": 2, "b": 40}
    assert records[1]["data"] == 42 and "42" in records[1]["text"]
    assert "Ada?" in records[2]["text"]


def test_run_tools_and_actions_keep_their_order(capsys: pytest.CaptureFixture[str], tools_server: EnvServer) -> None:
    code, out, _ = _run(
        capsys,
        "run",
        tools_server.url,
        "--action",
        "{}",
        "--tool",
        "add",
        "--args",
        '{"a": 1, "b": 1}',
        "--action",
        "{}",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[1].startswith("step 1: action={}")
    assert lines[2].startswith('tool add(a=1, b=1) -> data=2 text="2"')
    assert lines[3].startswith("step 2: action={}")


def test_run_tool_errors(capsys: pytest.CaptureFixture[str], tools_server: EnvServer) -> None:
    code, _, err = _run(capsys, "run", tools_server.url, "--tool", "fail", "--args", '{"message": "nope, sorry"}')
    assert code == 1
    assert 'error: tool fail(message="nope, sorry"): ' in err and "nope, sorry" in err
    code, _, err = _run(capsys, "run", tools_server.url, "--tool", "ad")
    assert code == 2  # bad usage: a tool the environment does not have
    assert "no tool 'ad' (did you mean 'add'?); its tools: add, fail, greet" in err and "Traceback" not in err


# -- schema and tools ---------------------------------------------------------------------------


def test_schema_pretty(capsys: pytest.CaptureFixture[str], server_factory: ServerFactory) -> None:
    server = server_factory(WalkEnv)
    code, out, _ = _run(capsys, "schema", server.url)
    assert code == 0
    assert "action (WalkAction):" in out
    assert '  direction  "right" | "left"' in out
    assert "[required]" in out
    assert "integer (>= 1 and <= 3)" in out and "[default 1]" in out
    assert "observation (WalkObservation):" in out and "state (State):" in out
    assert 'default action: {"direction": "right"}' in out


def test_schema_pretty_without_a_default(capsys: pytest.CaptureFixture[str], server_factory: ServerFactory) -> None:
    server = server_factory(ChessEnv)
    code, out, _ = _run(capsys, "schema", server.url)
    assert code == 0
    assert "from and to squares, e.g. e2e4" in out
    assert "no default action (needs a value for: move)" in out


def test_schema_json(capsys: pytest.CaptureFixture[str], server_factory: ServerFactory) -> None:
    from .envs import WalkAction, WalkObservation

    server = server_factory(WalkEnv)
    code, out, _ = _run(capsys, "schema", server.url, "--json")
    assert code == 0
    schema = json.loads(out)
    assert schema["action"] == WalkAction.model_json_schema()
    assert schema["observation"] == WalkObservation.model_json_schema()


def test_tools_pretty(capsys: pytest.CaptureFixture[str], tools_server: EnvServer) -> None:
    code, out, _ = _run(capsys, "tools", tools_server.url)
    assert code == 0
    assert "add: Add two integers." in out
    assert "    a: integer [required]" in out
    assert "greet: Greet someone by name." in out
    assert '    punctuation: string [default "!"]' in out
    assert f'call one: python -m openenv run {tools_server.url} --tool add --args \'{{"a": 0, "b": 0}}\'' in out


def test_tools_json(capsys: pytest.CaptureFixture[str], tools_server: EnvServer) -> None:
    code, out, _ = _run(capsys, "tools", tools_server.url, "--json")
    assert code == 0
    tools = {t["name"]: t for t in json.loads(out)}
    assert sorted(tools) == ["add", "fail", "greet"]
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert tools["add"]["description"] == "Add two integers."


def test_tools_of_an_environment_without_tools(capsys: pytest.CaptureFixture[str], echo_server: EnvServer) -> None:
    code, out, err = _run(capsys, "tools", echo_server.url)
    assert code == 0
    assert "this environment has no MCP tools" in out and "Traceback" not in err


# -- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "schema", "tools", "serve", "prune"])
def test_every_command_has_help_with_examples(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text
    assert f"python -m openenv {command}" in text


def test_run_help_names_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    for option in (
        "--action JSON",
        "--steps N",
        "--seed",
        "--reset-kwargs JSON",
        "--tool NAME",
        "--args JSON",
        "--json",
    ):
        assert option in text


# -- as a real process ---------------------------------------------------------------------------


def test_python_m_openenv_run(server_factory: ServerFactory) -> None:
    server = server_factory(WalkEnv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv",
            "run",
            server.url,
            "--action",
            '{"direction": "right", "distance": 3}',
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    records = _json_lines(proc.stdout)
    assert [r["type"] for r in records] == ["reset", "step"]
    assert records[1]["done"] is True
    bad = subprocess.run(
        [sys.executable, "-m", "openenv", "run", server.url, "--action", '{"direction": 1}'],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert bad.returncode == 1
    assert "VALIDATION_ERROR" in bad.stderr and "direction" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_run_without_a_schema_asks_for_actions(
    capsys: pytest.CaptureFixture[str], script_server: Callable[..., Any]
) -> None:
    from .envs import reply_ok

    server = script_server(reply_ok)  # WebSocket only: GET /schema is not served
    code, out, err = _run(capsys, "run", server.url)
    assert code == 2
    assert out == ""
    assert "the action schema cannot be read" in err
    assert f"run {server.url} --action" in err
    code, out, _ = _run(capsys, "run", server.url, "--action", "{}", "--json")
    assert code == 0
    assert [r["type"] for r in _json_lines(out)] == ["reset", "step"]


@pytest.mark.docker
def test_run_and_schema_start_a_docker_image_and_clean_up(
    capsys: pytest.CaptureFixture[str], docker_engine: Any
) -> None:
    from .conftest import ECHO_IMAGE

    code, out, err = _run(capsys, "run", ECHO_IMAGE, "--steps", "2", "--seed", "1", "--json")
    assert code == 0, err
    assert f"started {ECHO_IMAGE} in " in err
    records = _json_lines(out)
    assert [r["type"] for r in records] == ["default_action", "reset", "step", "step"]
    assert records[0]["action"] == records[2]["action"] == {"message": ""}  # built from the image's /schema
    code, out, err = _run(capsys, "schema", f"docker:{ECHO_IMAGE}", "--json")
    assert code == 0, err
    assert json.loads(out)["action"]["required"] == ["message"]
    # the docker_engine fixture fails the session if a container was left behind


@pytest.mark.docker
def test_run_on_openenvs_own_mcp_environment(capsys: pytest.CaptureFixture[str], docker_engine: Any) -> None:
    from .conftest import OPENENV_ENV_IMAGES

    guess, duel = OPENENV_ENV_IMAGES["mcp_guess"], OPENENV_ENV_IMAGES["duel"]
    boot = ("--ready-timeout", str(BOOT))  # openenv-core's stack: see BOOT
    # served by openenv-core 0.3.0; its action schema is CallToolAction (tool_name required)
    code, out, err = _run(capsys, "run", guess, "--steps", "1", *boot)
    assert code == 0, err
    assert out.startswith("tools: guess, hint; no --action or --tool given, so each step calls hint()")
    assert "tool hint() -> " in out and "tool_name" not in out
    code, out, err = _run(capsys, "run", guess, "--action", '{"type": "call_tool", "tool_name": ""}', *boot)
    assert code == 1  # its answer: an observation whose error says "Unknown tool: ''"
    assert "the environment reported an error: tool_not_found: Unknown tool: ''" in err
    code, out, err = _run(capsys, "run", duel, "--tool", "nosuch", *boot)
    assert code == 2 and "this environment has no MCP tools" in err


# -- targets: one resolver, bad usage exits 2 ----------------------------------------------------


@pytest.mark.parametrize("command", ["run", "schema", "tools"])
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("./does-not-exist", "'./does-not-exist': no such directory"),
        ("/data/no-such-env", "'/data/no-such-env': no such directory"),
        ("htp://host", "unsupported scheme 'htp'"),
        ("my-env", "a Docker image needs its tag: my-env:latest"),
        ("{empty}", "this directory is not an OpenEnv environment (no openenv.yaml, no server/app.py)"),
    ],
)
def test_every_command_reads_targets_by_the_one_resolver(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, target: str, message: str
) -> None:
    if target == "{empty}":
        target = str(tmp_path)
    code, out, err = _run(capsys, command, target)
    assert code == 2, err  # bad usage, before anything starts
    assert out == "" and message in err and "Traceback" not in err


def test_run_a_checkout_with_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "loud.py").write_text(
        "from openenv.server.echo import EchoEnvironment\n\n"
        "class LoudEcho(EchoEnvironment):\n"
        "    def step(self, action):\n"
        "        action.message = action.message.upper()\n"
        "        return super().step(action)\n"
    )
    command = f"{sys.executable} -m openenv serve loud:LoudEcho --host {{host}} --port {{port}}"
    code, out, err = _run(
        capsys, "run", str(tmp_path), "--command", command, "--action", '{"message": "quiet"}', "--ready-timeout", "60"
    )
    assert code == 0, err
    assert '"echoed_message": "QUIET"' in out


def test_checkout_remedies_name_the_command_line_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("app: nowhere_such_module.app:app\n")
    env = {**os.environ, "PATH": str(tmp_path / "no-uv-here")}  # no uv: nothing can run it
    proc = subprocess.run(
        [sys.executable, "-m", "openenv", "run", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    assert proc.returncode == 1, proc.stderr
    assert "hint: on the command line, --install creates the checkout's .venv" in proc.stderr
    assert "--command 'CMD'" in proc.stderr and "Traceback" not in proc.stderr


# -- MCP environments -------------------------------------------------------------------------


def test_run_on_an_mcp_environment_calls_a_tool_it_can_build(
    capsys: pytest.CaptureFixture[str], tools_server: EnvServer
) -> None:
    code, out, err = _run(capsys, "run", tools_server.url, "--steps", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        "tools: add, fail, greet; no --action or --tool given, so each step calls add(a=0, b=0) "
        "(choose with --tool NAME --args JSON)"
    )
    assert [line.split(" -> ")[0] for line in lines[2:4]] == ["tool add(a=0, b=0)"] * 2
    assert "2 tool calls, mean latency" in out
    code, out, _ = _run(capsys, "run", tools_server.url, "--steps", "1", "--json")
    assert [r["type"] for r in _json_lines(out)] == ["tools", "reset", "tool"]


class _Code(BaseModel):
    code: str = Field(pattern="^[a-z]{3}$")


def test_run_on_mcp_tools_it_cannot_build_says_which_tool_to_pass(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory
) -> None:
    from openenv.server import tool
    from openenv.server.echo import EchoEnvironment

    class Picky(EchoEnvironment):
        @tool
        def pick(self, code: _Code) -> str:
            """Pick a code (no default matches its pattern)."""
            return code.code

    server = server_factory(Picky)
    code, out, err = _run(capsys, "run", server.url)
    assert code == 2, err
    assert out == ""
    assert "this environment has MCP tools (pick) and no tool's arguments can be built from its schema" in err
    assert f"run {server.url} --tool pick --args" in err


def test_tool_on_an_environment_without_tools(capsys: pytest.CaptureFixture[str], echo_server: EnvServer) -> None:
    code, out, err = _run(capsys, "run", echo_server.url, "--tool", "nosuch")
    assert code == 2
    assert out == ""
    assert "--tool nosuch: this environment has no MCP tools; send actions with --action JSON" in err
    assert "Extra inputs" not in err


def test_an_error_observation_exits_non_zero(capsys: pytest.CaptureFixture[str], tools_server: EnvServer) -> None:
    # OpenEnv's MCP environments answer a bad call with an observation whose `error` says so
    action = '{"type": "call_tool", "tool_name": ""}'
    code, out, err = _run(capsys, "run", tools_server.url, "--action", action, "--action", action)
    assert code == 1
    assert out.count("step ") == 1  # stopped at the first error
    assert "error: step 1: the environment reported an error: invalid_args: call_tool needs a tool_name" in err
    code, out, _ = _run(capsys, "run", tools_server.url, "--action", action, "--json")
    assert code == 1 and _json_lines(out)[-1]["type"] == "error"


# -- messages ---------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"openenv-twin {version('openenv-twin')}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--steps", "abc"], "argument --steps: expected a whole number >= 0, not 'abc'"),
        (["run", "--steps", "-1"], "argument --steps: must be >= 0, not -1"),
        (["run", "--seed", "x"], "argument --seed: expected a whole number, not 'x'"),
        (["run", "--ready-timeout", "soon"], "argument --ready-timeout: expected a number of seconds, not 'soon'"),
        (["serve", "echo", "--port", "http"], "argument --port: expected a whole number >= 0, not 'http'"),
        (["serve", "echo", "--idle-timeout", "x"], "argument --idle-timeout: expected a number of seconds"),
        (["rn"], "invalid choice: 'rn'"),
        (["rn"], "(did you mean 'run'?)"),
        (["shcema"], "(did you mean 'schema'?)"),
        (["run", "--acton", "{}"], "unrecognized arguments: --acton (did you mean '--action'?)"),
    ],
)
def test_argument_errors_are_readable_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "_positive_or_zero" not in err


def test_an_option_the_client_refuses_is_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("app: server.app:app\n")
    for command in ("run", "schema", "tools"):
        code, _, err = _run(capsys, command, str(tmp_path), "--ready-timeout", "0")
        assert code == 2, err
        assert "ready_timeout must be a positive number of seconds" in err


def test_json_hints_fit_their_option(capsys: pytest.CaptureFixture[str], counter_server: EnvServer) -> None:
    code, _, err = _run(capsys, "run", counter_server.url, "--reset-kwargs", "seed=1")
    assert code == 2
    assert "e.g. --reset-kwargs '{\"seed\": 1}'" in err and "message" not in err


def test_bad_max_concurrent_envs_is_usage(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "many")
    code, _, err = _run(capsys, "serve", "echo", "--port", "0")
    assert code == 2
    assert "MAX_CONCURRENT_ENVS must be an integer, not 'many'" in err
    monkeypatch.setenv("MAX_CONCURRENT_ENVS", "0")
    code, _, err = _run(capsys, "serve", "echo", "--port", "0")
    assert code == 2
    assert err == "error: MAX_CONCURRENT_ENVS must be at least 1 (sessions at a time), not 0\n"


def test_a_port_out_of_range_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "echo", "--port", "99999"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --port: a TCP port is 0 to 65535 (0: any free port), not 99999" in err
    assert "Traceback" not in err and "OverflowError" not in err


def test_numbers_and_counts_read_well(capsys: pytest.CaptureFixture[str], echo_server: EnvServer) -> None:
    code, out, _ = _run(capsys, "run", echo_server.url, "--action", '{"message": "hello 2"}')
    assert code == 0
    step = out.splitlines()[1]
    assert step.endswith("reward=0.7 done=False")
    assert "1 step, mean step latency" in out and "1 steps" not in out
    code, out, _ = _run(capsys, "run", echo_server.url, "--action", '{"message": "hello 2"}', "--json")
    assert _json_lines(out)[1]["reward"] == 0.7  # exact in --json: the echo's 7 / 10


def test_run_help_says_the_demo_starts_a_second_server(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "starts a second in-process server (the built-in tool environment)" in text
    assert "--install" in text and "--command CMD" in text


# -- what a newcomer sees (issue #31) ------------------------------------------------------------


def _cli(*argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen(
        [sys.executable, "-m", "openenv", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_ctrl_c_during_a_long_run_is_one_line_and_exit_130_and_its_memory_does_not_grow_with_steps() -> None:
    """SIGINT to the real CLI process: exit 130, one line, no traceback; ``--steps 10^8`` starts at once."""
    import signal

    proc = _cli("run", "--steps", "100000000")
    try:
        assert proc.stdout is not None
        started = time.monotonic()
        first = proc.stdout.readline()  # the reset line
        step = proc.stdout.readline()
        # the old plan built a list of 10^8 steps first (800 MB, seconds) before step 1
        assert first.startswith("reset: ") and step.startswith("step 1: "), (first, step)
        assert time.monotonic() - started < BOOT
        assert _rss_mib(proc.pid) < 150
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=BOOT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = [line for line in err.splitlines() if not line.startswith("started an in-process echo server")]
    assert lines == ["interrupted"]


LOST_CTRL_C = """\
class Finalized:
    def __del__(self):
        raise KeyboardInterrupt  # as SIGINT would, landing while the collector runs a finalizer

Finalized()  # collected at once: Python reports the interrupt as "Exception ignored" and goes on
import time

time.sleep(30)  # what runs next: the interrupt, sent again, ends it
raise ImportError("the interrupt was lost")
"""


def test_a_ctrl_c_that_lands_in_a_finalizer_still_ends_the_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python cannot raise a KeyboardInterrupt inside a finalizer: it prints a traceback and goes on.
    The command line raises it again at once: one line and 130, as for any Ctrl-C."""
    (tmp_path / "lost_ctrl_c.py").write_text(LOST_CTRL_C)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(threading.enumerate())
    started = time.monotonic()
    code, out, err = _run(capsys, "serve", "lost_ctrl_c:factory")
    assert (code, out, err) == (130, "", "interrupted\n")
    assert time.monotonic() - started < 20  # at once, not after the module's sleep
    assert set(threading.enumerate()) <= before  # its helper thread ended


def test_ctrl_c_while_tools_waits_for_a_full_server_is_one_line(server_factory: ServerFactory) -> None:
    """``tools URL`` waiting for a session of a full server: SIGINT ends it with one line and 130."""
    import signal

    from openenv.server.echo import EchoEnvironment
    from openenv.sync import Env

    server = server_factory(EchoEnvironment, max_sessions=1)
    with Env(server.url) as holder:
        holder.reset()
        proc = _cli("tools", server.url, "--capacity-timeout", "120")
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            while line and "waiting up to" not in line:
                line = proc.stderr.readline()
            assert "waiting up to 120 s" in line
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=BOOT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted"


def test_tools_without_a_target_lists_the_demo_s_tools(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "tools")
    assert code == 0, err
    assert "started an in-process server of the built-in tool environment" in err
    assert out.splitlines()[0] == "add: Add two integers."
    assert "greet: Greet someone by name." in out and "no MCP tools" not in out
    code, out, err = _run(capsys, "run", "--tool", "add", "--args", '{"a": 1, "b": 2}', "--json")
    assert code == 0, err  # and `run --tool` without a target calls it there, as `tools` shows
    assert [(r["type"], r.get("data")) for r in _json_lines(out)] == [("reset", None), ("tool", 3)]


def test_the_tools_demo_scores_its_calls(capsys: pytest.CaptureFixture[str]) -> None:
    from openenv.server import EnvServer
    from openenv.sync import Env, ToolError

    with EnvServer(ToolsDemoEnvironment, host="127.0.0.1", port=0) as server, Env(server.url) as env:
        env.reset()
        result = env.call_tool("add", a=2, b=40)
        assert (result.data, result.reward, result.done) == (42, 1.0, False)
        with pytest.raises(ToolError) as info:
            env.call_tool("fail", message="boom")
        assert (info.value.reward, info.value.done) == (0.0, False)
    code, out, _ = _run(capsys, "run")
    assert code == 0 and "call_tool add(a=2, b=40) -> data=42 text='42' reward=1 done=False" in out


def test_every_tool_error_hints_at_tools(capsys: pytest.CaptureFixture[str], server_factory: ServerFactory) -> None:
    server = server_factory(ToolsDemoEnvironment)
    for args in ('{"a": 1}', '{"a": 1, "b": "x"}'):
        code, _, err = _run(capsys, "run", server.url, "--tool", "add", "--args", args)
        assert code == 1, err
        assert f"hint: python -m openenv tools {server.url} shows the tools and their parameters" in err
    code, _, err = _run(capsys, "run", server.url, "--tool", "fail", "--args", '{"message": "boom"}')
    assert code == 1 and "python -m openenv tools" in err


def test_schema_prints_descriptions_as_plain_text(
    capsys: pytest.CaptureFixture[str], server_factory: ServerFactory
) -> None:
    from openenv._cli.inspect import _plain

    assert _plain("The ``episode_id`` of :class:`~openenv.sync.Env`, `x` and **y**") == (
        "The episode_id of openenv.sync.Env, x and y"
    )
    code, out, _ = _run(capsys, "schema")
    assert code == 0 and "``" not in out and ":class:" not in out
