"""Drive a RELEASED OpenEnv client (run in its own venv); print one JSON object of results.

    python driver.py VERSION FLAVOUR SCENARIO URL [URL ...]

FLAVOUR: ``async`` (await the client), ``plain`` (0.10 dual-mode plain calls),
``sync`` (``.sync()`` wrapper).  SCENARIO: ``counter`` or ``tools``.
Each operation records its result or ``{"error": "<Type>: <message>"}``.
The scenario runs once per URL, one URL after the other, each on fresh client
objects (and, for ``async``, a fresh event loop); ``results`` has one entry per
URL, in order.  One interpreter serves all URLs: importing the released client
costs seconds, so the tests drive the released server and ours in one run.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from typing import Any


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "observation"):
        out = {"observation": value.observation, "reward": value.reward, "done": value.done}
        if hasattr(value, "metadata"):
            out["metadata"] = value.metadata
        return out
    return value


FLAVOUR = "async"


async def _resolve(value: Any) -> Any:
    if FLAVOUR == "plain" and hasattr(value, "_sync_result"):
        return value._sync_result()  # 0.10 dual-mode result used from sync code
    if FLAVOUR != "async" and inspect.iscoroutine(value):
        value.close()
        raise TypeError("this call is async-only in this flavour")
    if inspect.isawaitable(value):
        return await value
    return value


async def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return _plain(await _resolve(fn(*args, **kwargs)))
    except Exception as exc:  # recorded, compared across servers
        return {"error": f"{type(exc).__name__}: {exc}"}


def _open(cls: Any, url: str, flavour: str, **kwargs: Any) -> Any:
    client = cls(base_url=url, **kwargs)
    return client.sync() if flavour == "sync" else client


async def _maybe(value: Any) -> Any:
    return await _resolve(value)


async def counter(url: str, flavour: str) -> dict[str, Any]:
    from openenv.core.generic_client import GenericEnvClient

    out: dict[str, Any] = {}
    env = _open(GenericEnvClient, url, flavour)
    await _maybe(env.connect())
    out["reset"] = await _call(env.reset, seed=3, start=2, bogus=1)
    out["step"] = await _call(env.step, {"delta": 1})
    out["state"] = await _call(env.state)
    out["validation_error"] = await _call(env.step, {"delta": 1000})
    out["execution_error"] = await _call(env.step, {"delta": 99})
    out["state_after_errors"] = await _call(env.state)
    if hasattr(env, "new_session") and FLAVOUR != "plain":
        child = await _maybe(env.new_session())
        out["new_session_step"] = await _call(child.step, {"delta": 2})
        third = _open(GenericEnvClient, url, flavour)
        out["capacity"] = await _call(third.reset)
        await _call(third.close)
        await _call(child.close)
    else:
        second = _open(GenericEnvClient, url, flavour)
        await _call(second.reset)
        third = _open(GenericEnvClient, url, flavour)
        out["capacity"] = await _call(third.reset)
        await _call(third.close)
        await _call(second.close)
    out["close"] = await _call(env.close)
    return out


async def tools(url: str, flavour: str) -> dict[str, Any]:
    from openenv.core.mcp_client import MCPToolClient

    out: dict[str, Any] = {}
    env = _open(MCPToolClient, url, flavour)
    out["connect"] = await _call(env.connect)
    listed = await _call(env.list_tools)
    out["list_tools"] = (
        sorted(getattr(t, "name", None) or t["name"] for t in listed) if isinstance(listed, list) else listed
    )
    out["add"] = await _call(env.call_tool, "add", a=2, b=40)
    out["fail"] = await _call(env.call_tool, "fail", message="bad")
    out["close"] = await _call(env.close)
    return out


def main() -> None:
    global FLAVOUR
    version, flavour, scenario, *urls = sys.argv[1:]
    if not urls:
        raise SystemExit("usage: driver.py VERSION FLAVOUR SCENARIO URL [URL ...]")
    FLAVOUR = flavour
    run = {"counter": counter, "tools": tools}[scenario]
    results = []
    for url in urls:
        if flavour == "async":
            results.append(asyncio.run(run(url, flavour)))
        else:  # plain / .sync(): no running loop in this thread; _maybe/_call await nothing
            results.append(_run_blocking(run, url, flavour))
    print(json.dumps({"version": version, "flavour": flavour, "scenario": scenario, "results": results}, default=str))


def _run_blocking(run: Any, url: str, flavour: str) -> Any:
    # Drive the coroutine by hand: with blocking clients nothing inside awaits a real future.
    coro = run(url, flavour)
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("a blocking flavour awaited something")


if __name__ == "__main__":
    main()
