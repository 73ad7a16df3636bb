"""The TRL guide's script (``examples/trl_train.py``) with the real GRPOTrainer, on CPU, with nothing from a model hub.

``nox -s trl`` runs it.  It builds a tiny tokenizer (a byte-level BPE trained
here, with TRL's own Qwen 2.5 chat template) and a tiny random Qwen2 model
whose ``forward`` is steered towards scripted replies, so that it emits real
tool calls (``<tool_call>{...}</tool_call>``) that TRL parses and runs; TRL
itself is unmodified.  Then it trains 2 steps each:

1. on the embedded echo environment (no MCP tools: the generated ``step`` tool);
2. on an MCP tools environment whose failed tool calls cost ``-1.0``;
3. on both at once: ``environment_factory={"echo": ..., "tools": ...}`` and a
   dataset ``environment`` column (TRL's multi-environment mode);

and checks that the tool calls reached the servers, that the rewards TRL
logged are the environments' (the failed calls' penalty included), and that
nothing is left running.  It prints the figures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from a hub: a download attempt fails loudly
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers  # noqa: E402
from tokenizers import decoders as tk_decoders  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402
from trl import GRPOTrainer  # noqa: E402
from trl.chat_template_utils import qwen2_5_chat_template  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trl_train  # noqa: E402  (the guide's script)

from openenv._core.models import Action, Observation, State  # noqa: E402
from openenv.server import Environment, EnvServer, tool  # noqa: E402
from openenv.server.echo import EchoEnvironment  # noqa: E402
from openenv.server.tools import CallToolAction, ListToolsAction  # noqa: E402
from openenv.sync import environment_factory  # noqa: E402

# ------------------------------------------------------------------ the environments


class CountingEcho(EchoEnvironment):
    """The built-in echo environment, counting the steps that reach it."""

    steps = 0
    lock = threading.Lock()

    def step(self, action: Any) -> Any:
        with CountingEcho.lock:
            CountingEcho.steps += 1
        return super().step(action)


class Calculator(Environment[Action, Observation, State]):
    """MCP tools ``add`` (scores 1.0 when right) and ``divide``; a failed tool call costs -1.0."""

    action_type = Action
    observation_type = Observation
    state_type = State
    SUPPORTS_CONCURRENT_SESSIONS = True
    calls: dict[str, int] = {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def __init__(self) -> None:
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        return Observation(metadata={"message": "Use the calculator tools. A failed call costs 1.0."})

    def step(self, action: Action) -> Observation:
        self._state.step_count += 1
        return Observation()

    def step_tool(self, action: ListToolsAction | CallToolAction) -> Observation:
        observation = super().step_tool(action)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            failed = getattr(observation, "error", None) is not None
            observation.reward = -1.0 if failed else 1.0
            with Calculator.lock:
                Calculator.calls["failed" if failed else "ok"] += 1
        return observation

    @property
    def state(self) -> State:
        return self._state

    @tool
    def add(self, a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool
    def divide(self, a: float, b: float) -> float:
        """Divide a by b."""
        return a / b


# ------------------------------------------------------------------ a tiny model that calls tools

#: (a word of the user's prompt, the assistant's first reply); after a tool answer it says "Done."
SCRIPTS = [
    ("hello", '<tool_call>\n{"name": "step", "arguments": {"message": "hello"}}\n</tool_call>'),
    ("add", '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'),
    ("zero", '<tool_call>\n{"name": "divide", "arguments": {"a": 1, "b": 0}}\n</tool_call>'),
]
FINAL = "Done."
END = "<|im_end|>"
ASSISTANT = "<|im_start|>assistant\n"


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on a few lines here, with TRL's Qwen 2.5 chat template."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk_decoders.ByteLevel()
    corpus = [reply for _, reply in SCRIPTS] + [FINAL, qwen2_5_chat_template] * 3
    corpus += ['{"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": ']
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("<|im_start|>", END, "<|endoftext|>")])
    tok.add_tokens([AddedToken(t, special=False) for t in ("<tool_call>", "</tool_call>")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token="<|endoftext|>")
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


class ScriptedQwen2(Qwen2ForCausalLM):
    """A random tiny Qwen2 whose next-token logits are steered towards the scripted reply for its context."""

    tokenizer: Any = None
    seen: list[str] = []  # every context it started a reply in (what the model read)

    def forward(self, input_ids: Any = None, **kwargs: Any) -> Any:
        out = super().forward(input_ids=input_ids, **kwargs)
        if input_ids is None or self.tokenizer is None or torch.is_grad_enabled():
            return out  # training passes are left alone: only generation (no grad) is steered
        steered = torch.full_like(out.logits[:, -1, :], -1e4)
        for row, ids in enumerate(input_ids.tolist()):
            steered[row, self._next_token(ids)] = 1e4
        out.logits[:, -1, :] = steered  # the position being generated
        return out

    def _next_token(self, ids: list[int]) -> int:
        tokenizer = self.tokenizer
        text = tokenizer.decode([i for i in ids if i != tokenizer.pad_token_id], skip_special_tokens=False)
        head, _, said = text.rpartition(ASSISTANT)
        if not said:
            ScriptedQwen2.seen.append(head)
        user = head.rpartition("<|im_start|>user\n")[2]
        if "<tool_response>" in user:
            reply = FINAL
        else:
            reply = next((r for word, r in SCRIPTS if word in user), FINAL)
        reply += END
        if not reply.startswith(said):
            return int(tokenizer.convert_tokens_to_ids(END))
        rest = reply[len(said) :]
        if not rest or rest.startswith(END):  # done (a finished row of the batch is still fed along)
            return int(tokenizer.convert_tokens_to_ids(END))
        return int(tokenizer.encode(rest, add_special_tokens=False)[0])


def build_model(tokenizer: PreTrainedTokenizerFast) -> ScriptedQwen2:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=False,
    )
    model = ScriptedQwen2(config)
    model.tokenizer = tokenizer
    model.generation_config.use_cache = False  # the steering reads the whole context each step
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


# ------------------------------------------------------------------ the runs


def logged(trainer: Any, key: str) -> list[float]:
    """The values TRL logged under ``key``, one per step."""
    return [float(entry[key]) for entry in trainer.state.log_history if key in entry]


def idle(*servers: EnvServer) -> bool:
    """Whether every session has ended (the server ends one once it has read the client's close)."""
    deadline = time.monotonic() + 10.0
    while any(server.active_sessions for server in servers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(server.active_sessions for server in servers)


def check(condition: bool, what: str) -> None:
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        raise SystemExit(f"trl_ci: {what}")


def main() -> None:
    t0 = time.monotonic()
    threads_before = {t.ident for t in threading.enumerate()}
    tokenizer = build_tokenizer()
    sessions = trl_train.BATCH_SIZE
    with (
        EnvServer(CountingEcho, host="127.0.0.1", port=0, max_sessions=sessions) as echo,
        EnvServer(Calculator, host="127.0.0.1", port=0, max_sessions=sessions) as calc,
    ):
        # 1. the echo environment, through the guide's own train()
        trainer = trl_train.train(echo.url, build_model(tokenizer), ["Say hello."] * 2, processing_class=tokenizer)
        rewards = logged(trainer, "rewards/CountingEcho/mean")
        calls = logged(trainer, "tools/call_frequency")
        print(f"echo: {CountingEcho.steps} steps reached the server; rewards {rewards}; tool calls/rollout {calls}")
        check(CountingEcho.steps >= 2 * trl_train.BATCH_SIZE, "echo: every rollout's tool call reached the server")
        check(rewards == [0.5, 0.5], "echo: TRL logged the environment's reward (0.1 per echoed character)")
        check(idle(echo), "echo: no session left open")
        read = next(c for c in ScriptedQwen2.seen if "Say hello." in c)
        print("echo: the prompt the model read ends with", repr(read[read.index("Say hello.") :]))
        check("Say hello.\n\nEcho environment ready!" in read, "echo: the reset text is apart from the prompt")
        check("<tool_response>\nhello\n</tool_response>" in ScriptedQwen2.seen[-1], "echo: the tool's answer")

        # 2. MCP tools: half the prompts make the model divide by zero, a failed call the environment scores -1.0
        prompts = ["Please add 2 and 3.", "Divide 1 by zero."]  # every batch holds both (2 prompts x 2 rollouts)
        trainer = trl_train.train(calc.url, build_model(tokenizer), prompts, tokenizer)
        rewards = logged(trainer, "rewards/Calculator/mean")
        failures = logged(trainer, "tools/failure_frequency")
        print(f"tools: calls {Calculator.calls}; rewards {rewards}; tool failures/rollout (raised) {failures}")
        check(Calculator.calls["ok"] >= 4 and Calculator.calls["failed"] >= 4, "tools: both tools reached the server")
        check(rewards == [0.0, 0.0], "tools: logged mean = (2 x 1.0 + 2 x -1.0) / 4: the penalty reached TRL")
        check(idle(calc), "tools: no session left open")
        read = next(c for c in reversed(ScriptedQwen2.seen) if "Divide 1 by zero.\n\n" in c)
        check("Divide 1 by zero.\n\nUse the calculator tools." in read, "tools: the reset's metadata words were read")
        answer = next(c for c in reversed(ScriptedQwen2.seen) if "<tool_response>\nError: " in c)
        print("tools: the failed call's answer:", repr(answer[answer.rindex("<tool_response>") :][:120]))

        # 3. both at once: TRL's multi-environment mode, the dataset's `environment` column picks one per row
        Echo = environment_factory(echo.url, name="Echo")
        Calc = environment_factory(calc.url, name="Calc")
        before = (CountingEcho.steps, sum(Calculator.calls.values()))
        try:
            dataset = Dataset.from_list(
                [
                    {"prompt": [{"role": "user", "content": "Say hello."}], "environment": "echo"},
                    {"prompt": [{"role": "user", "content": "Divide 1 by zero."}], "environment": "calc"},
                ]
            )
            with tempfile.TemporaryDirectory() as output_dir:
                trainer = GRPOTrainer(
                    model=build_model(tokenizer),
                    processing_class=tokenizer,
                    train_dataset=dataset,
                    environment_factory={"echo": Echo, "calc": Calc},
                    args=trl_train.make_config(output_dir),
                )
                trainer.train()
        finally:
            Echo.close()
            Calc.close()
        after = (CountingEcho.steps, sum(Calculator.calls.values()))
        echo_rewards, calc_rewards = logged(trainer, "rewards/Echo/mean"), logged(trainer, "rewards/Calc/mean")
        print(f"multi: steps/calls {before} -> {after}; rewards Echo {echo_rewards}, Calc {calc_rewards}")
        check(after[0] > before[0] and after[1] > before[1], "multi: each environment got its rows' tool calls")
        check(echo_rewards == [0.5, 0.5] and calc_rewards == [-1.0, -1.0], "multi: each environment's own reward")
        check(idle(echo, calc), "multi: no session left open")
    time.sleep(0.2)
    ours = [t for t in threading.enumerate() if t.ident not in threads_before and t.is_alive() and not t.daemon]
    check(not ours, f"nothing left running (non-daemon threads: {[t.name for t in ours]})")
    print(f"trl_ci: 3 trainings of 2 steps in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
