"""``python -m openenv``: see :mod:`openenv.cli`."""

from openenv.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
