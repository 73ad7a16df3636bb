"""``python -m openenv``: see `openenv._cli` (one module per command)."""

import sys

if __name__ == "__main__":
    try:
        from openenv._cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line is still loading
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    raise SystemExit(main())
