"""A griffe extension: show the values of ``DEFAULTS.x`` parameter defaults, not the expression.

The connection options' defaults are defined once, on ``openenv._core.options.DEFAULTS``,
and the constructors' signatures read them from there.  Static analysis would render
``connect_timeout: float | None = DEFAULTS.connect_timeout``; readers want ``= 10.0``.
"""

from __future__ import annotations

from typing import Any

from griffe import Extension, Function, Object


class ResolveDefaults(Extension):
    """Replace ``DEFAULTS.<name>`` defaults by the value of that option."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if not isinstance(obj, Function):
            return
        from openenv._core.options import DEFAULTS

        for parameter in obj.parameters:
            text = str(parameter.default) if parameter.default is not None else ""
            if text.startswith("DEFAULTS."):
                parameter.default = repr(getattr(DEFAULTS, text.split(".", 1)[1]))
