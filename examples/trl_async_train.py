"""Train with TRL's AsyncGRPOTrainer on OpenEnv environments (the TRL guide's async-trainer script).

TRL's async trainer generates with a vLLM server (a GPU) and runs up to
``max_inflight_tasks`` rollouts at once on one event loop, in a child process
it starts with ``spawn``: the environment classes are pickled into it.  Give it
the classes of ``openenv.aio.environment_factory``: their tools are coroutines
that run on that loop, with no thread per session.  Start the servers with a
session for every rollout in flight, then train::

    python -m openenv serve echo --port 8001 --max-sessions 16 &
    python -m openenv serve openenv.server.tools_demo:ToolsDemoEnvironment --port 8002 --max-sessions 16 &
    CUDA_VISIBLE_DEVICES=1 trl vllm-serve --model Qwen/Qwen3-0.6B &
    python examples/trl_async_train.py http://127.0.0.1:8001 http://127.0.0.1:8002 Qwen/Qwen3-0.6B

CI runs ``make_environments`` and TRL's real rollout loop with a tiny local
model (``examples/trl_async_ci.py``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from typing import Any

from datasets import Dataset

from openenv.aio import environment_factory

MAX_INFLIGHT = 16  # rollouts in flight: each server needs this many sessions


async def make_environments(echo_url: str, tools_url: str) -> dict[str, Any]:
    """TRL's multi-environment mode: the dataset's ``environment`` column picks one per row."""
    echo = await environment_factory(echo_url, name="Echo")  # an environment without tools: a `step` tool
    tools = await environment_factory(tools_url, name="Tools")  # one tool per MCP tool
    return {"echo": echo, "tools": tools}


def make_dataset() -> Dataset:
    rows = [
        {
            "prompt": [{"role": "user", "content": "Call the step tool with the message 'hello'."}],
            "environment": "echo",
        },
        {"prompt": [{"role": "user", "content": "Add 2 and 3 with the add tool."}], "environment": "tools"},
    ]
    return Dataset.from_list(rows * 8)


def train(environments: dict[str, Any], model: str) -> Any:
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    with tempfile.TemporaryDirectory() as output_dir:
        trainer = AsyncGRPOTrainer(
            model=model,
            train_dataset=make_dataset(),
            environment_factory=environments,  # pickled into TRL's rollout process: rebuilt there
            args=AsyncGRPOConfig(
                output_dir=output_dir, max_inflight_tasks=MAX_INFLIGHT, max_steps=10, report_to="none"
            ),
        )
        trainer.train()
    return trainer


async def close(environments: dict[str, Any]) -> None:
    for cls in environments.values():
        await cls.close()  # this process's sessions (the rollout process closes its own at exit)


if __name__ == "__main__":
    echo_url, tools_url, model = sys.argv[1:4]
    environments = asyncio.run(make_environments(echo_url, tools_url))
    try:
        train(environments, model)
    finally:
        asyncio.run(close(environments))
