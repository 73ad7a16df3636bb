# GENERATED from tests/_async/test_openenv_envs.py by scripts/run_unasync.py -- DO NOT EDIT.
"""Environments in OpenEnv's own layout (``tests/openenv_envs``), served by openenv-core 0.3.0.

Each test runs twice: served from the 0.3.0 venv (``interop``) and from the
environment's Docker image (``docker``); see the ``openenv_envs`` fixture.
Typed tests use the mirrors of the environments' models in
``tests/openenv_models.py`` (the environments' own models import openenv.core).
"""

from __future__ import annotations

import functools
import random
from typing import Any

import httpx
import pytest

from openenv.sync import (
    CapacityReached,
    Codec,
    Env,
    EnvPool,
    ExecutionError,
    InvalidAction,
    InvalidActionType,
    PoolError,
    ServerValidationError,
    ToolResult,
)

from ..conftest import OPENENV_ENV_CAPACITY
from ..helpers_sync import gather
from ..openenv_models import DuelState, GameOverObservation, GuessState, MoveAction, ResignAction, RoundObservation

DUEL = Codec(action=MoveAction | ResignAction, observation=RoundObservation | GameOverObservation, state=DuelState)
GUESS_STATE: Codec[Any, Any, GuessState] = Codec(state=GuessState)


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


def _answer(result: Any) -> str:
    text: str = result.observation["result"]["data"]
    return text


def _binary_search(env: Any) -> tuple[int, list[float], bool]:
    """Play guess by bisection through plain steps; return (number, rewards, done)."""
    low, high, rewards = 1, 100, []
    while True:
        number = (low + high) // 2
        result = env.step(_call("guess", number=number))
        rewards.append(result.reward)
        answer = _answer(result)
        if answer.startswith("correct"):
            return number, rewards, result.done
        assert not result.done
        if answer == "higher":
            low = number + 1
        else:
            assert answer == "lower"
            high = number - 1


# --------------------------------------------------------------------------- mcp_guess


def test_guess_generic_reset_step_state(openenv_envs: Any) -> None:
    url = openenv_envs.url("mcp_guess")
    with Env(url) as env:
        result = env.reset(seed=7)
        assert result.observation["message"].startswith("Guess a number between 1 and 100")
        assert (result.observation["max_steps"], result.reward, result.done) == (8, 0.0, False)
        assert (env.state())["step_count"] == 0
        number, rewards, done = _binary_search(env)
        # reset(seed=...) picks the number deterministically (random.Random(seed), as the env documents)
        assert number == random.Random(7).randint(1, 100)
        assert done and rewards[-1] == 1.0 and rewards[:-1] == [-0.1] * (len(rewards) - 1)
        state = env.state()
        assert (state["step_count"], state["solved"], len(state["guesses"])) == (len(rewards), True, len(rewards))
        # a finished episode: more calls score nothing and stay done
        after = env.step(_call("guess", number=number))
        assert (after.reward, after.done, _answer(after)) == (0.0, True, "the episode is over: reset to play again")
        # the same seed replays the same game
        env.reset(seed=7)
        assert _binary_search(env) == (number, rewards, True)


def test_a_pool_plays_several_guess_games_at_once(openenv_envs: Any) -> None:
    url = openenv_envs.url("mcp_guess")
    seeds = [3, 5, 8, 13]
    with EnvPool(url, size=len(seeds)) as pool:
        results = pool.reset(seed=seeds)
        assert all(r.observation["message"].startswith("Guess a number") for r in results)
        low, high = [1] * len(seeds), [100] * len(seeds)
        found: list[int | None] = [None] * len(seeds)
        for _ in range(8):  # bisection needs at most 7 guesses
            ids = [i for i, number in enumerate(found) if number is None]
            if not ids:
                break
            guesses = [(low[i] + high[i]) // 2 for i in ids]
            results = pool.step([_call("guess", number=g) for g in guesses], ids=ids)
            for i, guess, result in zip(ids, guesses, results, strict=True):
                answer = _answer(result)
                if answer.startswith("correct"):
                    found[i] = guess
                    assert result.done and result.reward == 1.0
                elif answer == "higher":
                    low[i] = guess + 1
                else:
                    high[i] = guess - 1
        # each session played its own game: the number its seed picks
        assert found == [random.Random(seed).randint(1, 100) for seed in seeds]


def test_a_pool_waits_while_an_openenv_server_is_full(openenv_envs: Any) -> None:
    # OpenEnv's servers accept the WebSocket, then send CAPACITY_REACHED and close it: the
    # refusal comes with the first reset, which waits with backoff like opening does
    url = openenv_envs.url("mcp_guess")
    # connect_timeout: a margin for a loaded machine (the server makes each session's environment in a thread of
    # its own as it opens, and 16 at once beside CI's other lanes kept a handshake waiting past 10 s), not the subject
    with EnvPool(url, size=OPENENV_ENV_CAPACITY, connect_timeout=60) as full:
        full.reset()
        late = EnvPool(url, capacity_timeout=0.3)
        with pytest.raises(PoolError, match="capacity_timeout=0.3") as info:
            with late:
                late.reset()
        assert isinstance(info.value.errors[0], CapacityReached)
        waiting = EnvPool(url, capacity_timeout=60)

        def open_and_reset() -> Any:
            with waiting:
                return waiting.reset(seed=[1])

        def free_the_server() -> None:
            full.close()

        results, _ = gather(open_and_reset, free_the_server, stagger=0.5)
        assert not isinstance(results, BaseException), results
        assert results[0].observation["message"].startswith("Guess a number")


def test_pools_sharing_an_openenv_server_take_turns(openenv_envs: Any) -> None:
    # OpenEnv's server refuses a session beyond its capacity with the first reset. Two pools of more than half
    # of it, reset at once, each kept what it had reset while it waited for the rest, so that when both held a
    # part they waited until capacity_timeout; each now lets go of its places there while it waits: they take turns
    url = openenv_envs.url("mcp_guess")
    size = OPENENV_ENV_CAPACITY // 2 + 1

    def one_pool(n: int) -> int:
        with EnvPool(url, size=size, capacity_timeout=120, connect_timeout=60) as pool:
            results = pool.reset(seed=[n] * size)
            assert all(r.observation["message"].startswith("Guess a number") for r in results)
            assert pool.metrics.failures == 0
        return n

    assert gather(*[functools.partial(one_pool, n) for n in range(2)], stagger=0) == [0, 1]


def test_guess_ends_after_max_steps_and_hints_cost_a_step(openenv_envs: Any) -> None:
    with Env(openenv_envs.url("mcp_guess"), codec=GUESS_STATE) as env:
        env.reset(seed=3, max_steps=3)
        target = random.Random(3).randint(1, 100)
        hint = env.step(_call("hint"))
        assert (_answer(hint), hint.reward, hint.done) == ("even" if target % 2 == 0 else "odd", 0.0, False)
        wrong = 1 if target != 1 else 2
        first = env.step(_call("guess", number=wrong))
        assert (first.reward, first.done) == (-0.1, False)
        last = env.step(_call("guess", number=wrong))
        assert (last.reward, last.done) == (-0.1, True)
        state = env.state()
        assert isinstance(state, GuessState)
        assert (state.step_count, state.hints, state.guesses, state.solved) == (3, 1, [wrong, wrong], False)
        assert state.total_reward == pytest.approx(-0.2)
        # listing tools is not a step
        listed = env.step({"type": "list_tools"})
        assert sorted(t["name"] for t in listed.observation["tools"]) == ["guess", "hint"]
        assert (env.state()).step_count == 3


def test_guess_tools_through_step(openenv_envs: Any) -> None:
    """``list_tools``/``call_tool`` in simulation mode go through ``step``: reward, done and step_count move."""
    with Env(openenv_envs.url("mcp_guess")) as env:
        env.reset(seed=11)
        tools = env.list_tools()
        assert sorted(t.name for t in tools) == ["guess", "hint"]
        assert (env.get_tool("guess")).input_schema["required"] == ["number"]
        target = random.Random(11).randint(1, 100)
        hint = env.call_tool("hint")
        assert isinstance(hint, ToolResult)
        assert (hint.text, hint.is_error, hint.reward, hint.done) == (
            "even" if target % 2 == 0 else "odd",
            False,
            0.0,
            False,
        )
        wrong = env.call_tool("guess", number=target + 1 if target < 100 else target - 1)
        assert (wrong.data, wrong.reward, wrong.done) == ("lower" if target < 100 else "higher", -0.1, False)
        right = env.call_tool("guess", number=target)
        assert (right.data, right.reward, right.done) == (f"correct: the number was {target}", 1.0, True)
        assert (env.state())["step_count"] == 3


# --------------------------------------------------------------------------- duel


def test_duel_generic(openenv_envs: Any) -> None:
    with Env(openenv_envs.url("duel")) as env:
        result = env.reset(seed=1)
        assert result.observation == {
            "kind": "round",
            "round": 0,
            "you": None,
            "opponent": None,
            "round_winner": None,
            "your_hp": 3,
            "opponent_hp": 3,
        }
        result = env.step({"type": "move", "stance": "strike"})
        assert result.observation["kind"] == "round" and result.observation["you"] == "strike"
        assert result.reward in (0.1, -0.1, 0.0) and not result.done
        with pytest.raises(ServerValidationError):
            env.step({"type": "move", "stance": "dance"})
        with pytest.raises(ServerValidationError):
            env.step({"type": "jump"})
        result = env.step({"type": "resign", "reason": "tired"})
        assert result.observation["kind"] == "game_over"
        assert (result.observation["winner"], result.observation["reason"]) == ("opponent", "resigned")
        assert (result.reward, result.done) == (-1.0, True)
        state = env.state()
        assert (state["step_count"], state["finished"], len(state["history"])) == (2, True, 1)
        with pytest.raises(ExecutionError, match="the duel is over"):
            env.step({"type": "move", "stance": "guard"})


def test_duel_typed_with_a_union_of_actions(openenv_envs: Any) -> None:
    url = openenv_envs.url("duel")
    with Env(url, codec=DUEL) as env, Env(url, codec=DUEL) as twin:
        first = env.reset(seed=5, hp=2)
        assert isinstance(first.observation, RoundObservation) and first.observation.your_hp == 2
        twin.reset(seed=5, hp=2)
        stances = ["strike", "guard", "feint"]
        rounds = 0
        while True:
            stance = stances[rounds % 3]
            result = env.step(MoveAction(stance=stance))  # type: ignore[arg-type]
            # the same seed and moves give the same duel (dicts validate to the matching member)
            assert twin.step({"type": "move", "stance": stance}) == result
            rounds += 1
            if result.done:
                break
            assert isinstance(result.observation, RoundObservation)
            assert result.observation.round == rounds
        over = result.observation
        assert isinstance(over, GameOverObservation)
        assert over.reason == "knockout" and over.rounds == rounds
        assert (over.winner, result.reward) in (("you", 1.0), ("opponent", -1.0))
        state = env.state()
        assert isinstance(state, DuelState) and state.finished and state.winner == over.winner
        assert len(state.history) == rounds
        # a bad action never leaves the client
        with pytest.raises(InvalidAction) as info:
            twin.step({"type": "move", "stance": "dance"})
        assert info.value.errors  # pydantic's errors travel on it
        with pytest.raises(InvalidActionType, match="MoveAction"):  # also a TypeError
            twin.step(state)
        twin.reset(seed=2)
        resigned = twin.step(ResignAction(reason="enough"))
        assert isinstance(resigned.observation, GameOverObservation)
        assert (resigned.observation.reason, resigned.observation.message) == ("resigned", "you resigned: enough")


def test_duel_schema_describes_both_actions(openenv_envs: Any) -> None:
    url = openenv_envs.url("duel")
    with httpx.Client(trust_env=False) as http:
        schema = (http.get(url + "/schema")).json()
    action = schema["action"]
    assert action["discriminator"]["propertyName"] == "type"
    assert sorted(action["$defs"]) == ["MoveAction", "ResignAction"]
    assert action["$defs"]["MoveAction"]["properties"]["stance"]["enum"] == ["strike", "guard", "feint"]
    observation = schema["observation"]
    assert observation["discriminator"]["propertyName"] == "kind"
    assert sorted(observation["$defs"]) == ["GameOverObservation", "RoundObservation"]
    # a client typed from the schema plays too
    env = Env.from_schema(url)
    try:
        env.reset(seed=4)
        result = env.step({"type": "resign"})
        assert (result.reward, result.done) == (-1.0, True)
    finally:
        env.close()
