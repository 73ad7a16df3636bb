"""Environments and raw servers used by the tests (flavour-neutral, hand-written)."""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel as BaseModelForEnvs
from pydantic import Field
from websockets.sync.server import Server, ServerConnection, serve

from openenv._core.models import Action, Observation, State
from openenv.server import Environment, tool
from openenv.server.tools import CallToolAction, ListToolsAction

#: A deadline (message, connect or idle timeout, in seconds) that whatever a test expects *in time* meets on a
#: loaded CI machine: four suites side by side on two cores took over 0.3 s for a fresh session's first reply, and
#: over 1.4 s for an HTTP call and a WebSocket round trip to a uvicorn server.
IN_TIME = 3.0
#: How long a step that a test wants *timed out* sleeps on the server: well past :data:`IN_TIME`.
TOO_LATE = 6.0
#: How long a test waits for a released OpenEnv server (openenv-core's stack: FastAPI, gradio, ...) to come up, in a
#: fresh interpreter or a container: another deadline to meet.  Idle, one boots in 5 s and five at once in 12 s; in
#: CI, beside three other suites and the TRL step, two containers missed 90 s.  Waiting long costs nothing unless
#: the server is broken, and a server that exits fails at once.
BOOT = 240.0


class BasicCounterAction(Action):
    delta: int = Field(le=100)


class BasicCounterObservation(Observation):
    count: int = 0
    note: str = ""


class CounterState(State):
    total: int = 0


class BasicCounterEnv(Environment[BasicCounterAction, BasicCounterObservation, CounterState]):
    """Counts; ``delta == 99`` raises.  ``tests/interop/released_apps.py`` mirrors it for the released servers."""

    action_type: ClassVar[type[BasicCounterAction]] = BasicCounterAction
    observation_type: ClassVar[type[BasicCounterObservation]] = BasicCounterObservation
    state_type = CounterState

    def __init__(self) -> None:
        self._state = CounterState()
        self._count = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, start: int = 0) -> BasicCounterObservation:
        self._state = CounterState(episode_id=episode_id or "ep", step_count=0, total=start)
        self._count = start
        return self.observation_type(count=start, note=f"seed={seed}", metadata={"reset": True})

    def step(self, action: BasicCounterAction) -> BasicCounterObservation:
        if action.delta == 99:
            raise RuntimeError("boom: delta 99 is cursed")
        extra = self._extra(action)
        self._count += action.delta
        self._state.step_count += 1
        self._state.total = self._count
        meta: dict[str, Any] = {"step": self._state.step_count} if action.delta else {}
        return self.observation_type(
            count=self._count, reward=action.delta, done=self._count >= 10, metadata=meta, **extra
        )

    def _extra(self, action: BasicCounterAction) -> dict[str, Any]:
        """Runs before the count changes; returns extra observation fields."""
        return {}

    @property
    def state(self) -> CounterState:
        return self._state


class CounterAction(BasicCounterAction):
    sleep: float = 0.0
    size: int = 0


class CounterObservation(BasicCounterObservation):
    blob: str = ""


class CounterEnv(BasicCounterEnv):
    """:class:`BasicCounterEnv` plus ``sleep`` (delays the step) and ``size`` (pads the observation's ``blob``)."""

    action_type = CounterAction
    observation_type = CounterObservation
    SUPPORTS_CONCURRENT_SESSIONS = True

    def _extra(self, action: BasicCounterAction) -> dict[str, Any]:
        assert isinstance(action, CounterAction)
        if action.sleep:
            time.sleep(action.sleep)
        return {"blob": "x" * action.size}


class PeakEnv(CounterEnv):
    """:class:`CounterEnv` that records the most steps ever running at once, over all its sessions."""

    lock = threading.Lock()
    running = 0
    peak = 0
    #: the same, counting only steps with a ``sleep``
    sleeping = 0
    sleep_peak = 0

    def _extra(self, action: BasicCounterAction) -> dict[str, Any]:
        cls = PeakEnv
        sleeps = bool(getattr(action, "sleep", 0))
        with cls.lock:
            cls.running += 1
            cls.peak = max(cls.peak, cls.running)
            cls.sleeping += sleeps
            cls.sleep_peak = max(cls.sleep_peak, cls.sleeping)
        try:
            return super()._extra(action)
        finally:
            with cls.lock:
                cls.running -= 1
                cls.sleeping -= sleeps


class ToolCallObservation(Observation):
    """What OpenEnv's ``CallToolObservation`` looks like: ``tool_name`` is required."""

    tool_name: str
    result: Any = None
    error: dict[str, Any] | None = None


class ScoredToolsEnv(Environment[Action, ToolCallObservation, State]):
    """An MCP environment that scores tool calls inside the step loop, as OpenEnv MCP environments do.

    ``guess(n)``: each call is a step; ``n == 7`` scores 1.0 and ends the
    episode, any other guess scores 0.0.  Its ``/schema`` observation is the
    step's (``tool_name`` required), which its reset observation is not.
    """

    action_type = Action
    observation_type = ToolCallObservation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:  # type: ignore[override]
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        return Observation(metadata={"ready": True})

    def step(self, action: Action) -> ToolCallObservation:
        self._state.step_count += 1
        return ToolCallObservation(tool_name="", metadata={"plain_step": True})

    def step_tool(self, action: ListToolsAction | CallToolAction) -> Observation:
        observation = super().step_tool(action)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            result = getattr(observation, "result", None) or {}
            right = result.get("data") == "right"
            observation.reward = 1.0 if right else 0.0
            observation.done = right
        return observation

    @property
    def state(self) -> State:
        return self._state

    @tool
    def guess(self, n: int) -> str:
        """Guess the number."""
        return "right" if n == 7 else "wrong"


class PenaltyToolsEnv(Environment[Action, Observation, State]):
    """An MCP environment that penalises failed tool calls, as agent-RL environments do.

    Every ``call_tool`` through the step loop is a step (``step_count`` moves).
    A call that fails (the tool raised, an unknown tool, bad arguments) scores
    ``-1.0``; the second failure of an episode ends it.  ``add(a, b)`` scores
    ``0.5``; ``fail(message)`` always raises.
    """

    action_type = Action
    observation_type = Observation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True
    MAX_FAILURES = 2

    def __init__(self) -> None:
        self._state = State()
        self._failures = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        self._failures = 0
        return Observation(metadata={"message": "Call add(a, b). Failed calls cost 1.0."})

    def step(self, action: Action) -> Observation:
        self._state.step_count += 1
        return Observation()

    def step_tool(self, action: ListToolsAction | CallToolAction) -> Observation:
        observation = super().step_tool(action)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            if getattr(observation, "error", None):
                self._failures += 1
                observation.reward = -1.0
                observation.done = self._failures >= self.MAX_FAILURES
            else:
                observation.reward = 0.5
        return observation

    @property
    def state(self) -> State:
        return self._state

    @tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool
    def fail(self, message: str) -> None:
        """Always raises ``RuntimeError(message)``."""
        raise RuntimeError(message)


class ArenaMessage(BaseModelForEnvs):
    sender_id: int
    content: str
    category: str = "MESSAGE"


class ArenaObservation(Observation):
    """The shape of OpenEnv's textarena observation: ``prompt`` is the game id, the game's words are in ``messages``."""

    prompt: str
    messages: list[ArenaMessage] = Field(default_factory=list)
    current_player_id: int = 0


class ArenaAction(Action):
    message: str = Field(description="Your move, e.g. [10].")


class ArenaEnv(Environment[ArenaAction, ArenaObservation, State]):
    """Guess the number (7), TextArena style: feedback in ``messages``; metadata holds the game id."""

    action_type = ArenaAction
    observation_type = ArenaObservation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> ArenaObservation:
        self._state = State(episode_id=episode_id or "arena")
        game = ArenaMessage(sender_id=-1, content="[GAME] Guess the number between 1 and 10, as [n].")
        return ArenaObservation(prompt="GuessTheNumber-v0", messages=[game], metadata={"env_id": "GuessTheNumber-v0"})

    def step(self, action: ArenaAction) -> ArenaObservation:
        self._state.step_count += 1
        right = action.message.strip() == "[7]"
        feedback = "[GAME] Correct!" if right else "[GAME] Wrong."
        messages = [ArenaMessage(sender_id=0, content=action.message), ArenaMessage(sender_id=-1, content=feedback)]
        return ArenaObservation(prompt="GuessTheNumber-v0", messages=messages, reward=1.0 if right else 0.0, done=right)

    @property
    def state(self) -> State:
        return self._state


# -- an OpenEnv-style client (the shape of an environment's client.py), without openenv-core

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")
StateT = TypeVar("StateT")


@dataclass
class ReleasedStepResult(Generic[ObsT]):
    """The released ``openenv.core.client_types.StepResult`` (a dataclass without metadata)."""

    observation: ObsT
    reward: float | None = None
    done: bool = False


class ReleasedEnvClient(Generic[ActT, ObsT, StateT]):
    """Stands for ``openenv.core.env_client.EnvClient``: its ``__init__`` would open connections."""

    def __init__(self, base_url: str) -> None:
        raise AssertionError("an adopted client's __init__ must never run")


class CounterClient(ReleasedEnvClient[CounterAction, CounterObservation, CounterState]):
    """An environment's ``client.py`` in OpenEnv's shape, for ``CounterEnv``."""

    def _step_payload(self, action: CounterAction) -> dict[str, Any]:
        return {"delta": action.delta}

    def _parse_result(self, payload: dict[str, Any]) -> ReleasedStepResult[CounterObservation]:
        obs = payload.get("observation", {})
        observation = CounterObservation(
            count=obs["count"],
            note=obs.get("note", ""),
            done=payload.get("done", False),
            reward=payload.get("reward"),
            metadata=obs.get("metadata", {}),
        )
        return ReleasedStepResult(
            observation=observation, reward=payload.get("reward"), done=payload.get("done", False)
        )

    def _parse_state(self, payload: dict[str, Any]) -> CounterState:
        return CounterState(
            episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0), total=payload["total"]
        )


class ScriptServer:
    """A raw WebSocket server on 127.0.0.1 that answers each frame with ``reply(frame)``.

    ``reply`` returns a str/bytes to send, ``None`` to stay silent, or a list of them.
    """

    def __init__(self, reply: Callable[[str], Any]) -> None:
        self.reply = reply
        self.received: list[str] = []
        self.headers: list[Any] = []
        self._server: Server = serve(self._handler, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.port = self._server.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def _handler(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.headers.append(ws.request.headers)
        try:
            for message in ws:
                self.received.append(message if isinstance(message, str) else repr(message))
                out = self.reply(message if isinstance(message, str) else message.decode("latin-1"))
                for item in out if isinstance(out, list) else [out]:
                    if item is not None:
                        ws.send(item)
        except Exception:
            pass

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


class RefusingAtResetServer:
    """A WebSocket server on 127.0.0.1 that refuses a session beyond ``capacity`` as OpenEnv's does.

    OpenEnv's server (openenv-core 0.3.0) accepts every WebSocket, then sends
    ``CAPACITY_REACHED`` (with ``active_sessions`` and ``max_sessions``) and
    closes it when it is full: a client learns it with its first reset.  A
    session that got in answers a reset with its keyword arguments as the
    observation (``{"kwargs": {...}}``) and any other request with
    `reply_ok`; its place is free again when its WebSocket ends.
    ``on_refused(n)``, when set, is called (on the server's thread) with the
    number of refusals so far, each time it refuses one.
    """

    def __init__(self, capacity: int, on_refused: Callable[[int], None] | None = None) -> None:
        self.capacity = capacity
        self.on_refused = on_refused
        self.active = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._server: Server = serve(self._handler, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.socket.getsockname()[1]}"

    def _handler(self, ws: ServerConnection) -> None:
        with self._lock:
            admitted = self.active < self.capacity
            if admitted:
                self.active += 1
            else:
                self.refused += 1
                refused = self.refused
        if not admitted:
            if self.on_refused is not None:
                self.on_refused(refused)
            full = f"Server at capacity ({self.capacity}/{self.capacity} sessions)"
            details = {"active_sessions": self.capacity, "max_sessions": self.capacity}
            ws.send(json.dumps({"type": "error", "data": {"message": full, "code": "CAPACITY_REACHED", **details}}))
            ws.close()
            return
        try:
            for message in ws:
                text = message if isinstance(message, str) else message.decode()
                frame = json.loads(text)
                if frame.get("type") == "reset":
                    observation = {"kwargs": frame.get("data") or {}}
                    ws.send(json.dumps({"type": "observation", "data": {"observation": observation, "done": False}}))
                else:
                    ws.send(reply_ok(text))
        except Exception:
            pass
        finally:
            with self._lock:
                self.active -= 1

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(5)


def reply_ok(frame: str) -> str:
    """A well-behaved minimal reply for any request frame."""
    kind = json.loads(frame).get("type")
    if kind == "state":
        return json.dumps({"type": "state", "data": {"episode_id": None, "step_count": 0}})
    return json.dumps({"type": "observation", "data": {"observation": {}, "reward": None, "done": False}})


class WalkAction(Action):
    """Walk along a line; the goal is at 3."""

    direction: Literal["right", "left"]
    distance: int = Field(default=1, ge=1, le=3)


class WalkObservation(Observation):
    position: int = 0


class WalkEnv(Environment[WalkAction, WalkObservation, State]):
    """A tiny game whose action is not ``{"message"}``: reach position 3 (reward 1 there, done)."""

    action_type = WalkAction
    observation_type = WalkObservation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True
    GOAL = 3

    def __init__(self) -> None:
        self._state = State()
        self._position = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, start: int = 0) -> WalkObservation:
        self._state = State(episode_id=episode_id or "walk", step_count=0)
        self._position = start
        return WalkObservation(position=start, metadata={"seed": seed})

    def step(self, action: WalkAction) -> WalkObservation:
        self._state.step_count += 1
        self._position += action.distance if action.direction == "right" else -action.distance
        done = self._position >= self.GOAL
        return WalkObservation(position=self._position, reward=1.0 if done else 0.0, done=done)

    @property
    def state(self) -> State:
        return self._state


class GuessObservation(Observation):
    prompt: str = ""


class GuessEnv(Environment[Action, GuessObservation, State]):
    """Guess the secret number (7 unless reset gives ``secret``); tool calls score in step.

    ``guess`` rewards a hit with 1.0 (and ends the episode) and a miss with -0.1;
    ``hint`` and ``search`` score nothing.  The scoring happens in ``step_tool``,
    the server hook for tool calls that come through the step loop (clients in
    simulation mode); tool calls in ``mcp`` frames are not steps and never score.
    """

    observation_type = GuessObservation
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()
        self._secret = 7
        self._score: tuple[float | None, bool] = (None, False)

    def reset(self, seed: int | None = None, episode_id: str | None = None, secret: int = 7) -> GuessObservation:
        self._state = State(episode_id=episode_id or "ep", step_count=0)
        self._secret = secret
        return GuessObservation(prompt="Guess a number from 1 to 10.")

    def step(self, action: Action) -> GuessObservation:
        self._state.step_count += 1
        return GuessObservation()

    def step_tool(self, action: Any) -> Observation:
        base = getattr(super(), "step_tool")  # noqa: B009 - Environment.step_tool is merged from another branch
        observation: Observation = base(action)
        reward, done = self._score
        self._score = (None, False)
        observation.reward = reward
        observation.done = done
        return observation

    @property
    def state(self) -> State:
        return self._state

    @tool
    def guess(self, number: int = Field(description="Your guess, from 1 to 10.")) -> str:  # noqa: B008 - pydantic field info
        """Guess the secret number.

        Args:
            number: ignored here (the schema's description wins).
        """
        self._state.step_count += 1
        if number == self._secret:
            self._score = (1.0, True)
            return "Correct!"
        self._score = (-0.1, False)
        return "Higher." if number < self._secret else "Lower."

    @tool
    def hint(self) -> str:
        """A hint about the secret."""
        return "odd" if self._secret % 2 else "even"

    @tool
    def search(
        self,
        query: str = Field(description="What to look for."),  # noqa: B008 - pydantic field info
        mode: Literal["fast", "exact"] = Field("fast", description="How to match."),  # noqa: B008 - pydantic field info
        limit: int | None = Field(None, description="At most this many results."),  # noqa: B008 - pydantic field info
        tags: list[str] = Field(default_factory=list, description="Only results with these tags."),  # noqa: B008 - pydantic field info
        weight: float = 1.0,
        options: dict[str, Any] | None = None,
        verbose: bool = False,
    ) -> dict[str, Any]:
        """Search the (tiny) catalogue.

        Args:
            weight: how much to weigh the query.
        """
        return {"query": query, "mode": mode, "limit": limit, "tags": tags, "weight": weight, "verbose": verbose}


class ChessAction(Action):
    """A move in coordinate notation: no default can be built for it."""

    move: str = Field(pattern=r"^[a-h][1-8][a-h][1-8]$", description="from and to squares, e.g. e2e4")
    promotion: Literal["q", "r", "b", "n"] | None = None


class ChessEnv(Environment[ChessAction, WalkObservation, State]):
    """Accepts any well-formed move (the CLI test only needs its schema and validation)."""

    action_type = ChessAction
    observation_type = WalkObservation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> WalkObservation:
        self._state = State(episode_id=episode_id or "chess", step_count=0)
        return WalkObservation()

    def step(self, action: ChessAction) -> WalkObservation:
        self._state.step_count += 1
        return WalkObservation(position=self._state.step_count, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def one_replacement_never_listens(provider_class: Any, where: Path) -> Callable[[int], Any]:
    """A ``from_provider`` factory of one-session echo servers, each in a directory of its own under ``where``
    (``s<index>-<n>``, ``n`` counting that session's servers), except session 1's second: a process that
    never listens (its start waits for ``ready_timeout``). ``provider_class``: either flavour's ``ProcessProvider``.
    """
    made: list[int] = []

    def factory(index: int) -> Any:
        made.append(index)
        directory = where / f"s{index}-{made.count(index)}"
        directory.mkdir()
        if index == 1 and made.count(1) == 2:
            return provider_class([sys.executable, "-c", "import time; time.sleep(600)"], cwd=str(directory))
        return provider_class.for_environment("echo", max_sessions=1, cwd=str(directory))

    return factory
