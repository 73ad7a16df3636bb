"""A small OpenEnv-protocol server for Python environments.

Subclass [`Environment`][openenv.server.Environment], then serve it with [`EnvServer`][openenv.server.EnvServer] (in a
background thread, e.g. in tests) or [`serve()`][openenv.server.serve] (blocking):

```python
from openenv.server import EnvServer
from openenv.server.echo import EchoEnvironment

with EnvServer(EchoEnvironment) as srv:
    ...  # connect a client to srv.url
```

From a shell: ``python -m openenv serve MODULE:FACTORY`` (or ``serve echo``).
See `openenv.server.app` for what is served and how it differs from the
reference server.
"""

from openenv._core.models import Action, Observation, State

from .app import EnvServer, serve
from .environment import Environment
from .tools import tool

__all__ = ["Environment", "EnvServer", "serve", "tool", "Action", "Observation", "State"]
