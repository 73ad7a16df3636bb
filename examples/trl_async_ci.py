"""TRL's async trainer's real rollout loop with the generated classes, on CPU, with nothing from a model hub.

``nox -s trl`` runs it after ``examples/trl_ci.py``.  TRL 1.16's
``AsyncGRPOTrainer`` hands its rollouts to an ``AsyncRolloutWorker``, which
pickles the environment classes into a child process started with ``spawn``,
where ``_AsyncRolloutLoop`` keeps rollouts in flight on one event loop and
generates through a vLLM server's ``/v1/completions``.  vLLM needs a GPU, so
here a small HTTP server on 127.0.0.1 answers ``/v1/completions`` as vLLM does
(``token_ids``, ``logprobs.token_logprobs``) from the tiny steered model of
``examples/trl_ci.py``; the worker and its loop are TRL's own, unmodified (only
its "is vLLM installed" check is told yes).

The environments: the guide's ``make_environments`` (``examples/trl_async_train.py``:
``openenv.aio`` classes for the echo environment and an MCP tools environment
whose failed calls cost ``-1.0``), plus an ``openenv.sync`` class of the tools
environment, all in one multi-environment dict.  It checks the rewards TRL
computed per environment (the penalty included), the tool calls counted at the
servers, and that nothing is left once the worker has stopped; then that an
``openenv.aio`` class given to ``GRPOTrainer`` fails with the error that names
the class to give it instead.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trl_async_train  # noqa: E402  (the guide's script)
from trl_ci import Calculator, CountingEcho, build_model, build_tokenizer, check, idle  # noqa: E402

import openenv.sync  # noqa: E402
from openenv.server import EnvServer  # noqa: E402

if __name__ == "__mp_main__":  # the rollout process: if TRL has to terminate it, say where it was
    import faulthandler
    import signal

    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)

IN_FLIGHT = 8
SAMPLES = 8  # rollouts to collect: each row of the dataset twice (a group of 2)


class Completions(BaseHTTPRequestHandler):
    """``POST /v1/completions`` as vLLM answers it, from the steered tiny model (``prompt``: token ids)."""

    model: Any = None
    lock = threading.Lock()
    calls = 0
    #: set once the rollouts are in: every answer is then the end-of-turn token alone, so the rollouts
    #: still in flight finish at once and the rollout process stops within TRL's 15 s
    ending = False

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if self.path != "/v1/completions":
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = torch.tensor([request["prompt"]])
        tokens, logprobs = [int(self.model.generation_config.eos_token_id)], [0.0]  # once ending
        with Completions.lock, torch.no_grad():
            if not Completions.ending:
                Completions.calls += 1
                out = self.model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=int(request.get("max_tokens", 64)),
                    do_sample=False,
                    output_scores=True,
                    return_dict_in_generate=True,
                    stopping_criteria=[lambda *args, **kwargs: Completions.ending],  # cut short when ending
                )
                tokens = out.sequences[0, prompt.shape[1] :].tolist()
                scores = [torch.log_softmax(score[0].float(), -1) for score in out.scores]
                logprobs = [float(score[t]) for score, t in zip(scores, tokens, strict=True)]
        body = json.dumps({"choices": [{"token_ids": tokens, "logprobs": {"token_logprobs": logprobs}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def dataset() -> Dataset:
    rows = [
        ("Say hello.", "echo"),
        ("Please add 2 and 3.", "tools"),
        ("Divide 1 by zero.", "tools"),  # a failed tool call: the environment scores it -1.0
        ("Please add 2 and 3.", "sync"),
    ]
    return Dataset.from_list([{"prompt": [{"role": "user", "content": c}], "environment": e} for c, e in rows])


def main() -> None:
    t0 = time.monotonic()
    threads_before = {t.ident for t in threading.enumerate()}
    from accelerate.state import PartialState
    from trl.experimental.async_grpo import async_rollout_worker as arw

    PartialState()  # as the trainer does: accelerate's logging needs it

    arw.is_vllm_available = lambda *args, **kwargs: True  # the endpoint below stands in for vLLM's server
    tokenizer = build_tokenizer()
    Completions.model = build_model(tokenizer)
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    endpoint.daemon_threads = False  # server_close() waits for the requests under way (a model call among them)
    serving = threading.Thread(target=endpoint.serve_forever, name="completions")
    serving.start()
    try:
        with (
            EnvServer(CountingEcho, host="127.0.0.1", port=0, max_sessions=IN_FLIGHT + 2) as echo,
            EnvServer(Calculator, host="127.0.0.1", port=0, max_sessions=2 * IN_FLIGHT + 4) as calc,
        ):
            environments = asyncio.run(trl_async_train.make_environments(echo.url, calc.url))
            environments["sync"] = openenv.sync.environment_factory(calc.url, name="SyncTools")
            worker = arw.AsyncRolloutWorker(
                model_name="tiny",
                dataset=dataset(),
                reward_funcs=[],  # each environment's get_reward is its reward column
                processing_class=tokenizer,
                eos_token_ids=[tokenizer.eos_token_id],
                environment_factory=environments,
                num_generations=2,
                max_inflight_tasks=IN_FLIGHT,
                vllm_server_url=f"http://127.0.0.1:{endpoint.server_address[1]}",
                max_tokens=64,
                max_tool_calling_iterations=2,
                child_ready_timeout=240,
            )
            print(f"async: ready to start the rollout process in {time.monotonic() - t0:.1f} s")
            worker.start()  # pickles the classes into the spawned child, where the loop runs
            child = worker._process
            print(
                f"async: the rollout loop's child (pid {child.pid if child else '?'}) is ready at "
                f"{time.monotonic() - t0:.1f} s"
            )
            try:
                samples = [worker.rollout_buffer.get(timeout=240) for _ in range(SAMPLES)]
                print(f"async: {SAMPLES} rollouts at {time.monotonic() - t0:.1f} s")
            finally:
                Completions.ending = True
                stop(worker)
            exitcode = child.exitcode if child is not None else None
            report(samples, echo, calc, exitcode)
            wrong_trainer(environments["echo"], tokenizer)
            asyncio.run(trl_async_train.close({k: v for k, v in environments.items() if k != "sync"}))
            environments["sync"].close()
    finally:
        endpoint.shutdown()
        endpoint.server_close()
        serving.join()
    time.sleep(0.2)
    ours = [t for t in threading.enumerate() if t.ident not in threads_before and t.is_alive() and not t.daemon]
    check(not ours, f"async: nothing left running (non-daemon threads: {[t.name for t in ours]})")
    print(f"trl_async_ci: {SAMPLES} rollouts of TRL's async rollout loop in {time.monotonic() - t0:.0f} s")


#: Seconds the rollout process gets to end by itself once told to stop. TRL's own ``stop()`` waits 15 s, then
#: terminates it; on a CI machine running four suites side by side its exit (a process that imported torch
#: tearing down) took 7 s under 6 busy processes and more than 15 s once, while 1.7 s when idle.
STOP_GRACE = 120.0


def stop(worker: Any) -> None:
    """``worker.stop()``, reading what the child still sends meanwhile: a child exits only once its queues are read.

    The child is told to stop as ``worker.stop()`` does, and given ``STOP_GRACE`` seconds to end by
    itself before ``worker.stop()`` (which would terminate it after 15 s) runs.
    """
    stopping = threading.Event()

    def drain() -> None:
        while not stopping.is_set():
            for queue in (worker.rollout_buffer, worker.metrics_queue):
                try:
                    queue.get(timeout=0.05)
                except Exception:  # queue.Empty
                    pass

    reader = threading.Thread(target=drain, name="drain")
    reader.start()
    try:
        child = worker._process
        if child is not None and child._popen is not None:
            worker._stop_event_mp.set()  # what worker.stop() does first
            started = time.monotonic()
            child.join(STOP_GRACE)
            print(f"async: the rollout process ended {time.monotonic() - started:.1f} s after it was told to stop")
        worker.stop()
    finally:
        stopping.set()
        reader.join()


def wrong_trainer(cls: Any, tokenizer: Any) -> None:
    """The ``openenv.aio`` class given to ``GRPOTrainer``: its first reset says which class to give it instead."""
    import tempfile

    import trl_train
    from trl import GRPOTrainer

    with tempfile.TemporaryDirectory() as output_dir:
        trainer = GRPOTrainer(
            model=build_model(tokenizer),
            processing_class=tokenizer,
            train_dataset=trl_train.make_dataset(["Say hello."] * 2),
            environment_factory=cls,
            args=trl_train.make_config(output_dir, max_steps=1),
        )
        try:
            trainer.train()
            error = ""
        except TypeError as exc:
            error = str(exc)
    print(f"async: GRPOTrainer with the openenv.aio class: TypeError: {error}")
    check("openenv.sync.environment_factory" in error, "async: the aio class under GRPOTrainer says what to give it")


def report(samples: list[Any], echo: EnvServer, calc: EnvServer, exitcode: int | None) -> None:
    rewards: dict[tuple[str, str], list[float]] = defaultdict(list)
    calls = []
    for sample in samples:
        text = sample.prompt[-1]["content"]
        if isinstance(text, list):
            text = " ".join(part.get("text", "") for part in text)
        for column in ("Echo", "Tools", "SyncTools"):
            value = sample.metrics.get(f"rewards/{column}", math.nan)
            if not math.isnan(value):
                rewards[(column, text.split("\n")[0])].append(value)
        calls.append(sample.metrics.get("tools/call_frequency", 0.0))
    for (column, prompt), values in sorted(rewards.items()):
        print(f"async: rewards/{column} for {prompt!r}: {values}")
    print(
        f"async: tool calls per rollout {sorted(set(calls))}; at the servers: echo {CountingEcho.steps} steps, "
        f"tools {Calculator.calls}; completions served {Completions.calls}"
    )
    check({c for c, _ in rewards} == {"Echo", "Tools", "SyncTools"}, "async: every environment of the dict was used")
    check(all(v == [0.5] * len(v) for (c, _), v in rewards.items() if c == "Echo"), "async: echo's reward (0.5)")
    check(
        all(v == [(-1.0 if "zero" in p else 1.0)] * len(v) for (c, p), v in rewards.items() if c != "Echo"),
        "async: the tools' rewards: 1.0 for add, -1.0 for the failed divide (the penalty reached TRL)",
    )
    check(set(calls) == {1.0}, "async: one tool call per rollout")
    check(
        CountingEcho.steps >= 2 and Calculator.calls["ok"] >= 4 and Calculator.calls["failed"] >= 2,
        "async: the tool calls reached the servers",
    )
    check(exitcode == 0, f"async: the rollout process ended by itself (exit code {exitcode})")
    check(idle(echo, calc), "async: no session left open after the rollout process ended")


if __name__ == "__main__":
    main()
