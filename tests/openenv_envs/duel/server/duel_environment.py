"""A duel against a seeded opponent: rock-paper-scissors with hit points.

Each ``MoveAction`` is a round: the opponent picks a stance from a
``random.Random(seed)`` stream, the round's loser loses 1 HP (reward +0.1 for
a won round, -0.1 for a lost one, 0 for a draw).  At 0 HP the duel ends with a
``GameOverObservation`` (reward +1.0 for a win, -1.0 for a loss), as it does
after ``max_rounds`` (the one with more HP wins) or on a ``ResignAction``
(reward -1.0).  Stepping a finished duel is an error: reset first.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation

try:  # as a package (duel.server...) or from the env folder (uvicorn server.app:app)
    from ..models import (
        BEATS,
        MAX_ROUNDS,
        STANCES,
        START_HP,
        DuelState,
        GameOverObservation,
        MoveAction,
        ResignAction,
        RoundObservation,
    )
except ImportError:
    from models import (
        BEATS,
        MAX_ROUNDS,
        STANCES,
        START_HP,
        DuelState,
        GameOverObservation,
        MoveAction,
        ResignAction,
        RoundObservation,
    )


class DuelEnvironment(Environment):
    """One session's duel."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._rng = random.Random(0)
        self._max_rounds = MAX_ROUNDS
        self._state = DuelState(episode_id=None, step_count=0)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        hp: int = START_HP,
        max_rounds: int = MAX_ROUNDS,
        **kwargs: Any,
    ) -> RoundObservation:
        if hp < 1 or max_rounds < 1:
            raise ValueError("hp and max_rounds must be at least 1")
        self._rng = random.Random(seed)
        self._max_rounds = max_rounds
        self._state = DuelState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, your_hp=hp, opponent_hp=hp)
        return RoundObservation(your_hp=hp, opponent_hp=hp, reward=0.0)

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        state = self._state
        if state.finished:
            raise RuntimeError(f"the duel is over ({state.winner} won): reset to duel again")
        if state.episode_id is None:
            raise RuntimeError("no duel yet: reset first")
        state.step_count += 1
        if isinstance(action, ResignAction):
            return self._finish(
                "opponent", "resigned", f"you resigned: {action.reason}" if action.reason else "you resigned"
            )
        if not isinstance(action, MoveAction):
            raise TypeError(f"a duel action is a MoveAction or a ResignAction, not {type(action).__name__}")
        theirs = self._rng.choice(STANCES)
        state.history.append([action.stance, theirs])
        if BEATS[action.stance] == theirs:
            state.opponent_hp -= 1
            winner, reward = "you", 0.1
        elif BEATS[theirs] == action.stance:
            state.your_hp -= 1
            winner, reward = "opponent", -0.1
        else:
            winner, reward = "draw", 0.0
        if state.opponent_hp == 0:
            return self._finish("you", "knockout")
        if state.your_hp == 0:
            return self._finish("opponent", "knockout")
        if state.step_count >= self._max_rounds:
            leader = (
                "you"
                if state.your_hp > state.opponent_hp
                else "opponent"
                if state.opponent_hp > state.your_hp
                else "draw"
            )
            return self._finish(leader, "rounds")
        return RoundObservation(
            round=state.step_count,
            you=action.stance,
            opponent=theirs,
            round_winner=winner,
            your_hp=state.your_hp,
            opponent_hp=state.opponent_hp,
            reward=reward,
        )

    def _finish(self, winner: str, reason: str, message: str = "") -> GameOverObservation:
        state = self._state
        state.finished = True
        state.winner = winner
        reward = {"you": 1.0, "opponent": -1.0, "draw": 0.0}[winner]
        return GameOverObservation(
            winner=winner,
            reason=reason,
            rounds=state.step_count,
            your_hp=state.your_hp,
            opponent_hp=state.opponent_hp,
            message=message or (f"{winner} won by {reason}" if winner != "draw" else "a draw"),
            reward=reward,
            done=True,
        )

    @property
    def state(self) -> DuelState:
        return self._state
