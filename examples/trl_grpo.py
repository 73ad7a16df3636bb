"""Train on an OpenEnv environment with TRL's GRPO, here driven by a FAKE trainer (no GPU, no TRL needed).

``environment_factory`` writes the environment class TRL wants: ``cls()``,
``reset(**row)``, one tool method per environment tool (or a ``step`` method
built from the action schema), and the episode's ``reward``.  The real
training script, with TRL's ``GRPOTrainer``, is ``examples/trl_train.py``
(the TRL guide's; ``nox -s trl`` runs it on CPU with a tiny local model).

Below, ``fake_grpo`` does what the trainer does with the class, and a scripted
"model" picks the tool calls.  Run it::

    python examples/trl_grpo.py                # an in-process echo server
    python examples/trl_grpo.py URL_OR_IMAGE   # an echo server anywhere Env.from_env reaches

(The scripted "model" only speaks the echo's ``step(message=...)``: on an
environment whose class has no such method, the script says so and stops.)
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any

from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment
from openenv.sync import environment_factory

DATASET = [
    {"prompt": [{"role": "user", "content": "Say: hello world"}], "seed": 1},
    {"prompt": [{"role": "user", "content": "Say: reinforcement learning"}], "seed": 2},
]


def scripted_model(prompt: str, observation: str | None, generation: int) -> list[dict[str, Any]]:
    """A stand-in for the policy: generation ``g`` echoes the first ``g + 1`` words of the prompt."""
    words = prompt.split(":", 1)[-1].split()
    return [{"name": "step", "arguments": {"message": word}} for word in words[: generation + 1]]


def fake_grpo(factory: Callable[[], Any], dataset: list[dict[str, Any]], num_generations: int = 4) -> None:
    """What ``GRPOTrainer(environment_factory=...)`` does with the class, minus the model and the update."""
    environments = [factory() for _ in range(num_generations)]  # one instance per generation, reused
    # TRL's tool discovery: the public functions of the class, except reset and get_reward
    names = [
        name
        for name, _ in inspect.getmembers(type(environments[0]), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    print("tools offered to the model:", names)
    if "step" not in names or "message" not in inspect.signature(type(environments[0]).step).parameters:
        raise SystemExit(
            "this example's scripted model only calls step(message=...), the echo's action; this environment "
            f"offers {names}: write the model's calls for it in scripted_model()"
        )
    for row in dataset:
        rewards = []
        for generation, env in enumerate(environments):
            observation = env.reset(**row)  # the whole row: columns reset does not take are dropped
            for call in scripted_model(row["prompt"][-1]["content"], observation, generation):
                text = getattr(env, call["name"])(**call["arguments"])  # the tool's answer goes back to the model
                print(f"  gen {generation}: {call['name']}({call['arguments']}) -> {text!r}")
            rewards.append(round(env.get_reward(), 3))
        print("rewards:", rewards)  # GRPO turns these into advantages within the group


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("websockets").setLevel(logging.WARNING)
    logging.getLogger("openenv.server").setLevel(logging.WARNING)
    if argv:
        EchoEnv = environment_factory(argv[0])
        try:
            fake_grpo(EchoEnv, DATASET)
        finally:
            EchoEnv.close()
        return
    with EnvServer(EchoEnvironment, host="127.0.0.1", port=0, max_sessions=8) as server:
        EchoEnv = environment_factory(server.url)  # the server needs a session per instance (4 here)
        try:
            print(inspect.signature(EchoEnv.step))
            fake_grpo(EchoEnv, DATASET)
        finally:
            EchoEnv.close()


if __name__ == "__main__":
    main(sys.argv[1:])
