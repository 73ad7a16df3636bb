"""Sans-IO core shared by both twins: frames, models, URL rules, errors, codecs, the session's decisions.

Nothing in this package opens a socket, starts a process, reads a clock or a
file, imports an IO library (websockets, httpx, docker) or configures
logging; ``tests/test_core_imports.py`` checks the imports.  Two exceptions,
both at the caller's request: ``ClientOptions`` checks that a CA bundle path
exists and loads it into an ``ssl.SSLContext`` on first use, and a few
defaults are read from environment variables (``OPENENV_CLIENT_MODE``,
``SSL_CERT_FILE``).  Clock reads (``Deadline``) and filesystem reads (what
``from_env`` was given) live in ``openenv._blocking``; translating
websockets/httpx errors lives in ``openenv._adapters``.
"""
