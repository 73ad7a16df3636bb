"""Print recognisable lines to stderr and exit with code 3.

At once by default; after ``OPENENV_TEST_EXIT_DELAY`` seconds when that is set
(so a test can see the container running first, then exited).
"""

import os
import sys
import time

print("exits: starting (test image)", file=sys.stderr, flush=True)
time.sleep(float(os.environ.get("OPENENV_TEST_EXIT_DELAY", "0") or 0))
print("Traceback (most recent call last): simulated", file=sys.stderr)
print("fatal: cannot load environment (test image)", file=sys.stderr, flush=True)
sys.exit(3)
