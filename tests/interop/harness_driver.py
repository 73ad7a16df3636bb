"""Run in a venv with the released openenv 0.10.0 AND our package: OpenEnv's harness drives our sessions.

    python harness_driver.py [DOCS_BLOCK]

Serves our echo environment (no MCP tools: one ``action`` tool from its
action schema) and the MCP tools demo (``openenv.server.tools_demo``) on
127.0.0.1, builds ``harness_factory`` over each, in both flavours, and lets
OpenEnv 0.10's own ``MCPHarnessAdapter.run_white_box`` (and its
``build_harness_rollout_func``) drive them with a scripted ``model_step``
standing in for the model; the factory pickled into a spawned process; and
DOCS_BLOCK (the TRL guide's harness example, its ``http://localhost:8000``
replaced by the echo server's URL) run as a script.  Prints one JSON object:
what OpenEnv saw.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import json
import multiprocessing
import os
import pickle
import runpy
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openenv.aio as ours_aio
import openenv.sync as ours
from openenv.server import EnvServer, tool
from openenv.server.echo import EchoEnvironment
from openenv.server.tools_demo import ToolsDemoEnvironment

#: what of OpenEnv importing our facades and servers loaded: nothing (it is imported when harness_factory is called)
OPENENV_AT_IMPORT = sorted(m for m in sys.modules if m == "openenv.core" or m.startswith("openenv.core."))

from openenv.core.harness import (  # type: ignore[import-untyped, unused-ignore]  # noqa: E402
    HarnessRunLimits,
    MCPHarnessAdapter,
    ModelStepResult,
    ResourceSession,
    ResourceSessionFactory,
    _resolve_env_reward,
    build_harness_rollout_func,
)
from openenv.core.llm_client import LLMResponse, ToolCall  # type: ignore[import-untyped, unused-ignore]  # noqa: E402

out: dict[str, Any] = {"openenv_at_import": OPENENV_AT_IMPORT}
LIMITS = HarnessRunLimits(max_turns=6)


def scripted(turns: list[list[tuple[str, dict[str, Any]]]], seen: list[Any]) -> Callable[..., Any]:
    """A ``model_step``: each turn asks for the next list of tool calls; then it answers with text only."""
    script = list(turns)

    def model_step(messages: list[dict[str, Any]], tools: list[Any], sampling: dict[str, Any]) -> Any:
        seen.append({"messages": len(messages), "tools": [t.name for t in tools], "last": messages[-1]})
        calls = script.pop(0) if script else []
        tool_calls = [ToolCall(id=f"c{len(seen)}_{i}", name=name, args=args) for i, (name, args) in enumerate(calls)]
        return ModelStepResult(response=LLMResponse(content="" if calls else "done", tool_calls=tool_calls))

    return model_step


def until(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def rollout(session: Any, turns: list[list[tuple[str, dict[str, Any]]]]) -> dict[str, Any]:
    seen: list[Any] = []
    result = MCPHarnessAdapter().run_white_box(scripted(turns, seen), session, LIMITS)
    verify = session.verify(result.messages)
    return {
        "first": seen[0]["last"]["content"],
        "tools": seen[0]["tools"],
        "tool_messages": [m["content"] for m in result.messages if m.get("role") == "tool"],
        "trace": [
            {"name": e.tool_name, "done": e.result.done, "error": e.result.error, "metadata": e.result.metadata}
            for e in result.tool_trace
        ],
        "done": result.done,
        "turns": result.metrics["turns"],
        "verify": {"env_reward": verify.env_reward, "done": verify.done, "metrics": verify.metrics},
        "resolved": _resolve_env_reward(result, verify),
    }


TOOLS_TURNS: list[list[tuple[str, dict[str, Any]]]] = [
    [("add", {"a": 2, "b": 3}), ("greet", {"name": "harness"})],
    [("add", {"a": "two", "b": 3})],  # a failed call: the demo scores it 0.0, the text says why
    [("nope", {})],  # not a tool: OpenEnv's convention, KeyError (the adapter does not catch it)
]


STARTED = threading.Event()  # the blocking tool is running on the server
RELEASE = threading.Event()  # lets it return


class BlockingTools(ToolsDemoEnvironment):
    """The tools demo plus ``wait()``, which blocks until the driver releases it (a call in flight)."""

    @tool
    def wait(self) -> str:
        """Block until released."""
        STARTED.set()
        RELEASE.wait(60)
        return "released"


def close_in_flight(url: str) -> dict[str, Any]:
    """TRL's harness worker on stop: ``close()`` from another thread while a call is in flight."""
    factory = ours.harness_factory(url)
    session = factory.create("x")
    seen: dict[str, Any] = {}

    def call() -> None:
        try:
            seen["result"] = session.call_tool("wait", {})
        except Exception as exc:  # noqa: BLE001 - what the caller gets is the point
            seen["raised"] = type(exc).__name__

    caller = threading.Thread(target=call)
    caller.start()
    STARTED.wait(60)
    start = time.monotonic()
    session.close()
    caller.join(60)
    seen["ended_in"] = time.monotonic() - start
    RELEASE.set()
    factory.close()
    return seen


def main(docs_block: str) -> None:
    with (
        EnvServer(ToolsDemoEnvironment, max_sessions=4) as tools_server,
        EnvServer(EchoEnvironment, max_sessions=4) as echo,
        EnvServer(EchoEnvironment, max_sessions=2) as child_echo,  # the spawned process's alone
    ):
        # ---------------------------------------------------------------- pickled into a spawned process
        # (TRL's HarnessRolloutWorker pickles its harness_session_factory, a callable returning a factory, into a
        # process it starts with spawn): the factory pickles as its class's recipe and reaches the server from there
        pickled = ours.harness_factory(child_echo.url)
        child = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        spawned = child.submit(in_child, pickle.dumps(pickled))

        # ---------------------------------------------------------------- openenv.sync
        factory = ours.harness_factory(tools_server.url)
        out["sync_is_factory"] = isinstance(factory, ResourceSessionFactory)
        session = factory.create({"prompt": [{"role": "user", "content": "Add 2 and 3."}], "seed": 7}, episode_id="e1")
        out["sync_is_session"] = isinstance(session, ResourceSession)
        out["sync_initial"] = session.initial_messages()
        out["sync_sessions_open"] = tools_server.active_sessions
        try:
            rollout(session, TOOLS_TURNS)
        except KeyError as exc:
            out["sync_unknown_tool"] = str(exc)
        session.close()
        session = factory.create("Add 2 and 3.")
        out["sync_tools"] = rollout(session, TOOLS_TURNS[:2])
        session.close()
        out["sync_sessions_after_close"] = until(lambda: tools_server.active_sessions == 0)
        # OpenEnv's own TRL-compatible rollout function: create, run_white_box, verify, _resolve_env_reward, close
        func = build_harness_rollout_func(
            session_factory=factory,
            harness_adapter=MCPHarnessAdapter(),
            model_step_builder=lambda trainer, session: scripted([[("add", {"a": 1, "b": 1})]], []),
            limits=LIMITS,
        )
        built = func(["p1", [{"role": "user", "content": "p2"}]], None)
        out["sync_rollout_func"] = {"env_reward": built["env_reward"], "verify_metrics": built["verify_metrics"]}
        factory.close()
        out["sync_sessions_after_factory_close"] = until(lambda: tools_server.active_sessions == 0)

        echo_factory = ours.harness_factory(echo.url)
        with echo_factory:
            session = echo_factory.create(None, seed=1)
            out["sync_echo"] = rollout(session, [[("action", {"message": "hello"})], [("action", {"message": "hi"})]])
            session.close()
        out["sync_echo_after"] = until(lambda: echo.active_sessions == 0)

        # ---------------------------------------------------------------- openenv.aio
        async def aio_part() -> None:
            factory = await ours_aio.harness_factory(echo.url)
            out["aio_is_factory"] = isinstance(factory, ResourceSessionFactory)
            # three rollouts at once: the sessions live on this loop; OpenEnv's synchronous harness runs in
            # worker threads, and each session call runs on the loop
            sessions = [await factory.create({"prompt": f"task {i}"}, seed=i) for i in range(3)]
            threads_before = threading.active_count()
            turns = [[[("action", {"message": "x" * (i + 1)})], [("action", {"message": "abc"})]] for i in range(3)]
            runs = [asyncio.to_thread(rollout, s, t) for s, t in zip(sessions, turns, strict=True)]
            results = await asyncio.gather(*runs)
            out["aio_threads_added"] = threading.active_count() - threads_before  # asyncio's to_thread workers only
            out["aio_echo"] = results
            out["aio_sessions_open"] = echo.active_sessions
            for s in sessions:
                await s.close()
            await factory.close()
            out["aio_loop_session"] = sessions[0]

        asyncio.run(aio_part())
        out["aio_sessions_after"] = until(lambda: echo.active_sessions == 0)
        # with its loop gone, the aio session refuses plain calls and says what to use instead
        try:
            out.pop("aio_loop_session").call_tool("action", {"message": "late"})
        except TypeError as exc:
            out["aio_no_loop"] = str(exc)

        # ---------------------------------------------------------------- close() while a call is in flight
        with EnvServer(BlockingTools, max_sessions=2) as blocking:
            out["close_in_flight"] = close_in_flight(blocking.url)
            out["close_in_flight_after"] = until(lambda: blocking.active_sessions == 0)

        # the spawned process's rollout (started first: its import of OpenEnv overlaps the parts above)
        out["spawned"] = spawned.result(timeout=300)
        child.shutdown()
        pickled.close()
        out["spawned_after"] = until(lambda: child_echo.active_sessions == 0)

        # ---------------------------------------------------------------- the TRL guide's example, as written
        if docs_block:
            script = Path(tempfile.mkdtemp()) / "harness_example.py"
            script.write_text(docs_block.replace("http://localhost:8000", echo.url))
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                runpy.run_path(str(script), run_name="__main__")
            out["docs_printed"] = printed.getvalue().splitlines()
            out["docs_after"] = until(lambda: echo.active_sessions == 0)
    print(json.dumps(out, default=str))


def in_child(pickled: bytes) -> dict[str, Any]:
    """In a spawned process: unpickle the factory, call it as TRL does, and run one rollout."""
    factory = pickle.loads(pickled)()
    session = factory.create("in a child", seed=3)
    try:
        run = rollout(session, [[("action", {"message": "child"})]])
    finally:
        session.close()
    factory.close()
    return {"is_factory": isinstance(factory, ResourceSessionFactory), "pid": os.getpid(), **run}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
