"""TRL's shapes of use against an environment in OpenEnv's layout (``tests/openenv_envs/mcp_guess``).

* ``environment_factory``: a class built with no arguments that opens a sync
  ``Env``; ``reset(**kwargs)`` returns a string; its public methods are the
  tools (``env.call_tool``); ``self.reward`` is read after the episode.  Several
  instances are made at once against one server, reset on the main thread, and
  their tool calls run one rollout after another.
* the async trainer: blocking ``openenv.sync.Env`` calls made inside a running
  event loop on the same thread (``asyncio.run(main())``).

Served from the 0.3.0 venv (``interop``) and from the image (``docker``).
The tool calls rely on ``call_tool`` going through ``step`` (reward and done on the result).
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

from openenv.sync import Env


def _make_factory(url: str) -> type:
    class GuessToolEnv:
        """What TRL's ``environment_factory`` builds: no constructor arguments."""

        def __init__(self) -> None:
            self.env = Env(url)
            self.reward = 0.0
            self.done = False

        def reset(self, **kwargs: Any) -> str:
            result = self.env.reset(**kwargs)
            self.reward, self.done = 0.0, False
            message: str = result.observation["message"]
            return message

        def guess(self, number: int) -> str:
            """Guess the secret number.

            Args:
                number: the guess, from 1 to 100.
            """
            result = self.env.call_tool("guess", number=number)
            self.reward += result.reward or 0.0
            self.done = result.done
            return result.text

        def hint(self) -> str:
            """Whether the secret number is even or odd."""
            result = self.env.call_tool("hint")
            self.reward += result.reward or 0.0
            self.done = result.done
            return result.text

        def close(self) -> None:
            self.env.close()

    return GuessToolEnv


def _rollout(tools: Any) -> int:
    """A scripted 'model': bisect with the ``guess`` tool until the episode ends."""
    low, high, calls = 1, 100, 0
    while not tools.done:
        assert calls < 10, "the episode never ended: done must come back on the tool results"
        number = (low + high) // 2
        answer = tools.guess(number)
        calls += 1
        if answer == "higher":
            low = number + 1
        elif answer == "lower":
            high = number - 1
    return calls


def test_environment_factory_shape(openenv_envs: Any) -> None:
    factory = _make_factory(openenv_envs.url("mcp_guess"))
    seeds = [1, 2, 3, 4, 5, 6]  # the server allows 16 sessions
    envs = [factory() for _ in seeds]
    try:
        prompts = [env.reset(seed=seed) for env, seed in zip(envs, seeds, strict=True)]
        assert all(p.startswith("Guess a number between 1 and 100") for p in prompts)
        calls = [_rollout(env) for env in envs]
        for env, seed, n in zip(envs, seeds, calls, strict=True):
            assert env.done
            assert abs(env.reward - (1.0 - 0.1 * (n - 1))) < 1e-9
            state = env.env.state()
            assert (state["step_count"], state["solved"]) == (n, True)
            assert state["guesses"][-1] == random.Random(seed).randint(1, 100)  # each session its own game
        # the next episode on the same instances
        assert envs[0].reset(seed=1) == prompts[0] and envs[0].reward == 0.0
        assert envs[0].hint() in ("even", "odd")
    finally:
        for env in envs:
            env.close()


def test_sync_env_inside_a_running_event_loop(openenv_envs: Any) -> None:
    url = openenv_envs.url("mcp_guess")
    outcome: dict[str, Any] = {}

    async def main() -> None:
        asyncio.get_running_loop()  # a loop runs on this thread while the blocking client is used
        env = Env(url)
        other = Env(url)
        try:
            env.reset(seed=9)
            other.reset(seed=10)
            first = env.step({"type": "call_tool", "tool_name": "guess", "arguments": {"number": 50}})
            await asyncio.sleep(0)  # the loop keeps running between calls
            tool = other.call_tool("hint")
            outcome["first"] = (first.reward, first.done)
            outcome["hint"] = tool.text
            outcome["state"] = env.state()["step_count"]
            outcome["tools"] = sorted(t.name for t in other.list_tools())
        finally:
            env.close()
            other.close()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(120)  # a hang guard, not a timing assertion
    assert not worker.is_alive(), "the blocking client deadlocked inside a running event loop"
    assert "error" not in outcome, outcome.get("error")
    target = random.Random(9).randint(1, 100)
    assert outcome["first"] == ((1.0, True) if target == 50 else (-0.1, False))
    assert outcome["hint"] in ("even", "odd")
    assert outcome["state"] == 1
    assert outcome["tools"] == ["guess", "hint"]
