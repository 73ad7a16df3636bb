"""A small OpenEnv-protocol server for Python environments.

Subclass :class:`Environment`, then serve it with :class:`EnvServer` (in a
background thread, e.g. in tests) or :func:`serve` (blocking)::

    from openenv.server import EnvServer
    from openenv.server.echo import EchoEnvironment

    with EnvServer(EchoEnvironment) as srv:
        ...  # connect a client to srv.url

From a shell: ``python -m openenv serve MODULE:FACTORY`` (or ``serve echo``).
See :mod:`openenv.server.app` for what is served and how it differs from the
reference server.
"""

from openenv._core.models import Action, Observation, State

from .app import EnvServer, serve
from .environment import Environment
from .tools import tool

__all__ = ["Environment", "EnvServer", "serve", "tool", "Action", "Observation", "State"]
