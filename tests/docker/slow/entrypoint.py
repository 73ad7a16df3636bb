"""Sleep OPENENV_TEST_DELAY seconds, then exec the echo server (it becomes PID 1)."""

import os
import signal
import sys
import time

delay = float(os.environ.get("OPENENV_TEST_DELAY", "3"))
# PID 1 ignores SIGTERM unless it installs a handler: stop at once while sleeping.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
print(f"slow: starting the server in {delay:g}s", file=sys.stderr, flush=True)
time.sleep(delay)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
argv = ["python", "-m", "openenv", "serve", "echo", "--host", "0.0.0.0", "--port", "8000"]
os.execvp(argv[0], argv)
