"""OpenEnv 0.10's harness rollout API (``openenv.core.harness``) driving ``harness_factory``'s sessions.

``harness_driver.py`` runs in the ``providers-0.10.0`` venv (the released
``openenv==0.10.0`` and our checkout, editable, beside it: built once by
``test_openenv_providers.py``'s fixture, reused here), against our real
embedded servers: OpenEnv's ``MCPHarnessAdapter.run_white_box`` and
``build_harness_rollout_func`` with a scripted ``model_step``, both flavours.
One driver run (a released ``openenv.core`` import costs 5 s), plus a spawned
child that unpickles a factory (5 s more); the TRL guide's example runs in it too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import record
from .test_openenv_providers import providers_python  # noqa: F401 - the venv fixture, shared

# a group of its own: it runs beside test_openenv_providers.py on another worker (the venv fixture's file lock
# lets one of them build the venv, the other waits for it)
pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("interop-openenv-harness")]

DRIVER = Path(__file__).with_name("harness_driver.py")
GUIDE = Path(__file__).parents[2] / "docs" / "guides" / "trl.md"
MARKER = (
    "<!-- docs: skip needs openenv==0.10.0 installed beside this package; "
    "tests/interop/test_openenv_harness.py runs this block (nox -s interop) -->"
)


def _docs_block() -> str:
    """The TRL guide's harness example (the ``python`` block right after `MARKER`), as a reader pastes it."""
    text = GUIDE.read_text()
    after = text[text.index(MARKER) + len(MARKER) :].lstrip("\n")
    assert after.startswith("```python\n"), "the harness example must follow its marker"
    return after[len("```python\n") : after.index("\n```\n")] + "\n"


@pytest.fixture(scope="module")
def driven(providers_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(providers_python), str(DRIVER), _docs_block()],
        capture_output=True,
        text=True,
        timeout=900,  # 20 s on a quiet machine; beside CI's other lanes it took 237-352 s, and once over 300 s
        env=env,
        cwd=tmp_path_factory.mktemp("harness"),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_sync_factory_is_openenvs(driven: dict[str, Any]) -> None:
    """The sync factory and its sessions are OpenEnv's ABCs; a session holds one server session until closed."""
    assert driven["openenv_at_import"] == []  # openenv.sync / openenv.aio import no OpenEnv, even where it is
    assert driven["sync_is_factory"] and driven["sync_is_session"]
    # the dataset row's prompt, with the reset's rendered text appended as TRL appends it
    assert driven["sync_initial"] == [{"role": "user", "content": 'Add 2 and 3.\n\n{"tool_calls":0}'}]
    assert driven["sync_sessions_open"] == 1
    assert driven["sync_sessions_after_close"] and driven["sync_sessions_after_factory_close"]
    assert "Unknown tool: 'nope'" in driven["sync_unknown_tool"] and "add, fail, greet" in driven["sync_unknown_tool"]
    record("ours (sync)", "openenv 0.10.0 ResourceSessionFactory", "harness_factory(url)")


def test_run_white_box_mcp_tools(driven: dict[str, Any]) -> None:
    """MCPHarnessAdapter.run_white_box over the MCP tools demo: text, step rewards, a failed call's 0.0 and error."""
    run = driven["sync_tools"]
    assert run["tools"] == ["add", "fail", "greet"]
    assert run["tool_messages"][:2] == ["5", "Hello, harness!"]
    assert run["tool_messages"][2].startswith("Error: ") and "valid integer" in run["tool_messages"][2]
    assert [e["metadata"]["step_reward"] for e in run["trace"]] == [1.0, 1.0, 0.0]
    assert [e["metadata"]["reward"] for e in run["trace"]] == [1.0, 2.0, 2.0]  # the episode's, so far
    assert [e["error"] is not None for e in run["trace"]] == [False, False, True]
    assert run["verify"] == {"env_reward": 2.0, "done": False, "metrics": {"tool_calls": 3, "tool_errors": 1}}
    assert run["resolved"] == 2.0  # OpenEnv's _resolve_env_reward: the trace and verify agree
    # OpenEnv's build_harness_rollout_func: create, run, verify, resolve, close, for each prompt
    assert driven["sync_rollout_func"]["env_reward"] == [1.0, 1.0]
    record("ours (sync)", "openenv 0.10.0 MCPHarnessAdapter.run_white_box", "MCP tools, rewards, errors")


def test_run_white_box_action_schema(driven: dict[str, Any]) -> None:
    """An environment without MCP tools: one ``action`` tool (``step`` is reserved by OpenEnv), each call a step."""
    run = driven["sync_echo"]
    assert run["tools"] == ["action"]
    assert run["first"] == "Echo environment ready!"
    assert run["tool_messages"] == ["hello", "hi"]
    assert [e["metadata"]["step_reward"] for e in run["trace"]] == [0.5, 0.2]
    assert run["verify"]["env_reward"] == pytest.approx(0.7) and run["resolved"] == pytest.approx(0.7)
    assert driven["sync_echo_after"]


def test_aio_factory_driven_from_worker_threads(driven: dict[str, Any]) -> None:
    """The aio factory: made on a loop; OpenEnv's synchronous harness runs in worker threads, the IO on the loop."""
    assert driven["aio_is_factory"]
    runs = driven["aio_echo"]
    assert [r["first"] for r in runs] == [f"task {i}\n\nEcho environment ready!" for i in range(3)]
    assert [r["tool_messages"] for r in runs] == [["x", "abc"], ["xx", "abc"], ["xxx", "abc"]]
    assert [r["resolved"] for r in runs] == pytest.approx([0.4, 0.5, 0.6])
    assert driven["aio_sessions_open"] == 3 and driven["aio_sessions_after"]
    # the three harness threads are asyncio.to_thread's: the sessions themselves add none
    assert driven["aio_threads_added"] <= 3
    assert "openenv.sync.harness_factory" in driven["aio_no_loop"]
    record("ours (async)", "openenv 0.10.0 MCPHarnessAdapter.run_white_box", "from worker threads")


def test_close_from_another_thread_ends_a_call_in_flight(driven: dict[str, Any]) -> None:
    """As TRL's harness worker does on stop: the call in flight raises SessionLost at once; nothing stays open."""
    seen = driven["close_in_flight"]
    assert seen.get("raised") == "SessionLost" and "result" not in seen
    assert seen["ended_in"] < 3.0  # IN_TIME: the tool itself would block for 60 s
    assert driven["close_in_flight_after"]


def test_factory_pickles_into_a_spawned_process(driven: dict[str, Any]) -> None:
    """Pickled (by its class's recipe) into a spawned process and called there, as TRL's HarnessRolloutWorker does."""
    child = driven["spawned"]
    assert child["is_factory"] and child["first"] == "in a child\n\nEcho environment ready!"
    assert child["tool_messages"] == ["child"] and child["resolved"] == 0.5
    assert driven["spawned_after"]
    record("ours (sync)", "openenv 0.10.0 ResourceSessionFactory", "pickled into a spawned process")


def test_the_guides_example_runs(driven: dict[str, Any]) -> None:
    """docs/guides/trl.md's harness example, run as written against an echo server; it prints what it says."""
    assert driven["docs_printed"] == ["['action']", "hello", "0.5"]
    assert driven["docs_after"]
