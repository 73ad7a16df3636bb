"""``python -m openenv``: see `openenv._cli` (one module per command)."""

from openenv._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
