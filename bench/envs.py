"""Benchmark environments served by ``python -m openenv serve bench.envs:FACTORY``.

``BlobEnvironment`` is the echo environment plus a large ``blob`` field in
every step observation: ``BENCH_BLOB_BYTES`` characters (default 1 MiB) of
base64 text made from seeded pseudo-random bytes, the way a screenshot travels
in a JSON observation. It is built once per server process, so the server's
per-step cost is serialising it, the same for every client.  Random bytes
keep deflate honest: a run of one repeated character would compress to nothing.

``SleepEnvironment`` is the echo environment whose ``step`` first sleeps
``BENCH_SLEEP_MS`` milliseconds (default 5) with ``time.sleep``: a stand-in for
an environment that spends its step waiting (a sandbox exec, a simulator, an
LLM judge). It declares ``blocking = True``, so our server runs each
session's calls on that session's own worker thread: the sleeps of different
sessions overlap (and release the GIL); what a client gains by keeping many
sessions in flight shows against it.

``BlockingEchoEnvironment`` is the echo environment declared blocking (the
default for an environment that says nothing): the server section's
"blocking" variant, one thread hop per call.
"""

from __future__ import annotations

import base64
import os
import random
import time
from functools import cache

from openenv.server.echo import EchoAction, EchoEnvironment, EchoObservation

__all__ = ["BlobObservation", "BlobEnvironment", "SleepEnvironment", "BlockingEchoEnvironment", "blob"]


@cache
def blob(size: int) -> str:
    """``size`` characters of base64 text from seeded random bytes."""
    raw = random.Random(1234).randbytes(size * 3 // 4 + 3)
    return base64.b64encode(raw).decode("ascii")[:size]


class BlobObservation(EchoObservation):
    """The echo observation plus ``blob``."""

    blob: str = ""


class BlobEnvironment(EchoEnvironment):
    """Echo, with a ``BENCH_BLOB_BYTES``-character ``blob`` in every step observation."""

    observation_type = BlobObservation  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self._blob = blob(int(os.environ.get("BENCH_BLOB_BYTES", str(1 << 20))))

    def step(self, action: EchoAction) -> BlobObservation:  # type: ignore[override]
        echoed = super().step(action)
        return BlobObservation(**echoed.model_dump(), blob=self._blob)


class SleepEnvironment(EchoEnvironment):
    """Echo, sleeping ``BENCH_SLEEP_MS`` milliseconds (default 5) in every ``step``."""

    blocking = True  # it sleeps: a worker thread per session

    def __init__(self) -> None:
        super().__init__()
        self._sleep = float(os.environ.get("BENCH_SLEEP_MS", "5")) / 1000

    def step(self, action: EchoAction) -> EchoObservation:
        time.sleep(self._sleep)
        return super().step(action)


class BlockingEchoEnvironment(EchoEnvironment):
    """Echo declared blocking (the default for an environment): served with a worker thread per session."""

    blocking = True
