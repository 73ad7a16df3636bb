"""Train a model with TRL's GRPOTrainer on an OpenEnv environment (the TRL guide's script).

Start the environment's server with room for every rollout of a generation
batch, then train::

    python -m openenv serve echo --port 8000 --max-sessions 4 &
    python examples/trl_train.py http://127.0.0.1:8000 Qwen/Qwen3-0.6B

CI runs this same code with a tiny local model (``examples/trl_ci.py``).
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from openenv.sync import environment_factory

NUM_GENERATIONS = 2  # rollouts per prompt (GRPO's group)
BATCH_SIZE = 4  # rollouts per generation batch: the server needs this many sessions


def make_dataset(prompts: list[str], **columns: Any) -> Dataset:
    """One row per prompt; other columns reach the environment's reset (when it takes them)."""
    rows = [{"prompt": [{"role": "user", "content": text}], **columns} for text in prompts]
    return Dataset.from_list(rows)


def make_config(output_dir: str, max_steps: int = 2) -> GRPOConfig:
    return GRPOConfig(
        output_dir=output_dir,
        num_generations=NUM_GENERATIONS,
        per_device_train_batch_size=BATCH_SIZE,
        max_completion_length=128,
        max_steps=max_steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=not torch.cuda.is_available(),  # this script also runs without a GPU
        bf16=torch.cuda.is_available(),
    )


def train(target: str, model: Any, prompts: list[str], processing_class: Any = None, max_steps: int = 2) -> Any:
    """Train ``model`` for ``max_steps`` steps on the environment at ``target``; returns the trainer."""
    Environment = environment_factory(target)  # one tool method per MCP tool, or `step` from the action schema
    try:
        with tempfile.TemporaryDirectory() as output_dir:
            trainer = GRPOTrainer(
                model=model,  # a model id, or a model object
                processing_class=processing_class,  # None: the model's own tokenizer
                train_dataset=make_dataset(prompts),
                environment_factory=Environment,  # the reward comes from Environment.get_reward()
                args=make_config(output_dir, max_steps),
            )
            trainer.train()
    finally:
        Environment.close()  # ends every session (also done at interpreter exit)
    return trainer


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"
    model = sys.argv[2] if len(sys.argv) > 2 else "Qwen/Qwen3-0.6B"
    trainer = train(target, model, ["Call the step tool with the message 'hello'."] * 8)
    for entry in trainer.state.log_history:
        print(entry)
