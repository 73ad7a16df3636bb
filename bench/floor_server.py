"""The raw websockets floors of the server section: the echo exchange by hand, nothing else.

``python bench/floor_server.py --mode asyncio|threads``: websockets' asyncio or
threading server on 127.0.0.1 and an ephemeral port, ``/ws`` only, no
capacity, validation, pydantic or strict-JSON checks. Each text frame is
``json.loads``-ed; ``reset`` and ``step`` get the observation frame our echo
environment would send (``json.dumps``), anything else an error frame. No
permessage-deflate (like our server when the client does not ask: the bench's
clients do not). When it listens it prints ``serving echo (floor MODE) on
http://127.0.0.1:PORT`` on stderr, the line ``bench/run.py`` waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

OBS_RESET = json.dumps(
    {
        "type": "observation",
        "data": {
            "observation": {"echoed_message": "Echo environment ready!", "message_length": 0, "metadata": {}},
            "reward": 0.0,
            "done": False,
        },
    }
)


def answer(raw: Any, state: dict[str, int]) -> str:
    msg = json.loads(raw)
    kind = msg.get("type")
    if kind == "step":
        state["n"] += 1
        text = msg["data"]["message"]
        obs = {"echoed_message": text, "message_length": len(text), "metadata": {"step": state["n"]}}
        return json.dumps(
            {"type": "observation", "data": {"observation": obs, "reward": len(text) * 0.1, "done": False}}
        )
    if kind == "reset":
        state["n"] = 0
        return OBS_RESET
    if kind == "state":
        return json.dumps({"type": "state", "data": {"episode_id": None, "step_count": state["n"]}})
    return json.dumps({"type": "error", "data": {"message": f"Unknown message type: {kind}", "code": "UNKNOWN_TYPE"}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["asyncio", "threads"], required=True)
    parser.add_argument("--max-sessions", type=int, default=0, help="ignored (no capacity)")
    args = parser.parse_args()
    if args.mode == "asyncio":
        from websockets.asyncio.server import ServerConnection, serve

        async def handler(ws: ServerConnection) -> None:
            state = {"n": 0}
            async for raw in ws:
                if raw == '{"type":"close"}':
                    return
                await ws.send(answer(raw, state))

        async def run() -> None:
            async with serve(handler, "127.0.0.1", 0, compression=None, max_size=2**24) as server:
                port = server.sockets[0].getsockname()[1]
                print(f"serving echo (floor asyncio) on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
                await server.serve_forever()

        asyncio.run(run())
    else:
        from websockets.sync.server import ServerConnection as SyncConnection
        from websockets.sync.server import serve as sync_serve

        def sync_handler(ws: SyncConnection) -> None:
            state = {"n": 0}
            for raw in ws:
                if raw == '{"type":"close"}':
                    return
                ws.send(answer(raw, state))

        with sync_serve(sync_handler, "127.0.0.1", 0, compression=None, max_size=2**24) as server:
            port = server.socket.getsockname()[1]
            print(f"serving echo (floor threads) on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
            server.serve_forever()


if __name__ == "__main__":
    main()
