"""The raw floors of the server section: the echo exchange by hand, nothing else.

``python bench/floor_server.py --mode asyncio|threads``: websockets' asyncio or
threading server; ``--mode uvicorn``: a bare ASGI app (the ASGI messages by
hand, no framework) under uvicorn with the settings of ``bench/asgi_server.py``
and ``bench/released_server.py``, the ceiling of any ASGI app on it. On
127.0.0.1 and an ephemeral port, ``/ws`` only, no
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
    parser.add_argument("--mode", choices=["asyncio", "threads", "uvicorn"], required=True)
    parser.add_argument("--max-sessions", type=int, default=0, help="ignored (no capacity)")
    args = parser.parse_args()
    if args.mode == "uvicorn":
        _uvicorn_floor()
    elif args.mode == "asyncio":
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


async def _asgi_echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The echo exchange as a bare ASGI app: ``/ws`` only (anything else: 404, or 403 before the handshake)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["path"] != "/ws" or (await receive())["type"] != "websocket.connect":
        await send({"type": "websocket.close", "code": 1000})
        return
    await send({"type": "websocket.accept"})
    state = {"n": 0}
    while True:
        message = await receive()
        raw = message.get("text")
        if raw is None:  # websocket.disconnect (or binary: not the echo's)
            return
        if raw == '{"type":"close"}':
            await send({"type": "websocket.close", "code": 1000, "reason": ""})
            return
        await send({"type": "websocket.send", "text": answer(raw, state)})


def _uvicorn_floor() -> None:
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_asgi_echo, log_level="warning", access_log=False))
    original_startup = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original_startup(sockets=sockets)
        print(f"serving echo (floor uvicorn) on http://127.0.0.1:{port}", file=sys.stderr, flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
