# GENERATED from src/openenv/_async/__init__.py by scripts/run_unasync.py -- DO NOT EDIT.
"""The hand-written client (the source of the generated blocking twin)."""

from .env import Env
from .foreign import OpenEnvProvider
from .harness import HarnessSession, HarnessSessionFactory, harness_factory
from .pool import EnvPool
from .pool_checkout import PoolCheckout
from .providers import CheckoutProvider, DockerProvider, ProcessProvider, Provider, ServerProvider
from .ray import RayProvider
from .trl import TRLEnvironment, environment_factory

__all__ = [
    "Env",
    "EnvPool",
    "PoolCheckout",
    "Provider",
    "ServerProvider",
    "DockerProvider",
    "ProcessProvider",
    "CheckoutProvider",
    "OpenEnvProvider",
    "RayProvider",
    "TRLEnvironment",
    "environment_factory",
    "harness_factory",
    "HarnessSessionFactory",
    "HarnessSession",
]
