"""Listen on :8000; every request answers 503 (unhealthy forever). Exits promptly on SIGTERM."""

import http.server
import json
import signal
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "unhealthy", "detail": "never ready (test image)"}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, fmt: str, *args: object) -> None:
        pass


# PID 1 gets no default SIGTERM action: exit explicitly.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
server = http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Handler)
server.daemon_threads = True
print("never: listening on 0.0.0.0:8000, /health answers 503 forever", file=sys.stderr, flush=True)
server.serve_forever()
