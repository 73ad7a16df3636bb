"""The ASGI app: one session per server (``max_sessions=1``, the default of OpenEnv's servers too)."""

import os
import sys
import time

from openenv.server.asgi import create_app

from .solo_environment import SoloEnvironment

app = create_app(SoloEnvironment, max_sessions=1)

if os.environ.get("SOLO_ECHO_START_DELAY"):  # a server that is slow to come up (tests/_async/test_servers.py)
    time.sleep(float(os.environ["SOLO_ECHO_START_DELAY"]))

if os.environ.get("SOLO_ECHO_IMPORTS"):  # who imported the app: the checkout's probe (python -c) or a server
    with open(os.environ["SOLO_ECHO_IMPORTS"], "a") as out:
        out.write(("probe" if sys.argv[0] == "-c" else "server") + "\n")
