"""A griffe extension: render the Sphinx/RST leftovers in the docstrings as Markdown.

The sources use Google-style docstrings, with a few reStructuredText habits:

* roles such as ``:class:`~openenv.SessionLost``` or ``:meth:`connect``` become
  code spans wrapped in an *optional* autoref: a link when the target is
  documented on the site, plain code otherwise (never a build warning);
* ``openenv.X`` (the facades' shared names: errors, models, codecs; ``openenv``
  itself is a namespace package with no ``X``) resolves to ``openenv.sync.X``,
  the page where those shared objects are documented;
* a literal block introduced by ``::`` becomes a fenced Python block.

Loaded by mkdocstrings-python (``extensions:`` in mkdocs.yml); it changes only
the docstrings griffe hands to the renderer, never the sources.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from griffe import Extension, Object

_ROLE = re.compile(r":(?:py:)?(class|exc|meth|func|mod|attr|data|obj|const):`(~?)([^`<]+?)`")
# names re-exported by both facades: documented once, as openenv.sync.NAME
_FLAVOUR_NAMES = {"Env", "Provider", "ServerProvider", "DockerProvider", "ProcessProvider"}


def _target(path: str, obj: Object) -> str:
    """The identifier a role's text points at, as the site documents it."""
    path = path.strip().lstrip(".")
    parts = path.split(".")
    if parts[0] == "openenv" and len(parts) >= 2:
        if parts[1] in ("providers",) and len(parts) == 3:
            return f"openenv.sync.{parts[2]}"
        if parts[1] not in ("sync", "aio", "server") and not parts[1].startswith("_"):
            return "openenv.sync." + ".".join(parts[1:])
        return path
    if len(parts) == 1:
        # relative: a member of the documented class (or of the module)
        owner = obj if obj.is_class or obj.is_module else obj.parent
        if owner is not None:
            if parts[0] in owner.members or owner.is_class:
                return f"{owner.path}.{parts[0]}"
    if parts[0] in _FLAVOUR_NAMES:
        return "openenv.sync." + path
    return path


def _roles(text: str, obj: Object) -> str:
    def replace(match: re.Match[str]) -> str:
        role, tilde, raw = match.groups()
        raw = raw.strip()
        shown = raw.split(".")[-1] if tilde else raw
        if role in ("meth", "func") and not shown.endswith(")"):
            shown += "()"
        ident = _target(raw.rstrip("()"), obj)
        return f'<autoref identifier="{ident}" optional><code>{shown}</code></autoref>'

    return _ROLE.sub(replace, text)


def _literal_blocks(text: str) -> str:
    """``Text::`` + indented block -> ``Text:`` + a fenced python block."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.strip().startswith((">>>", "#")):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            indent = len(line) - len(line.lstrip())
            block: list[str] = []
            k = j
            while k < len(lines) and (not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) > indent):
                block.append(lines[k])
                k += 1
            while block and not block[-1].strip():
                block.pop()
                k -= 1
            if block:
                head = line.rstrip()[:-2].rstrip()
                pad = " " * indent
                if head.strip():
                    # a lone word ("Example::") would read as a Google section title
                    out.append(head + ":" if " " in head.strip() else f"{pad}**{head.strip()}**")
                    out.append("")
                out.append(pad + "```python")
                out.extend(pad + row if row.strip() else "" for row in textwrap.dedent("\n".join(block)).splitlines())
                out.append(pad + "```")
                i = k
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class SphinxRoles(Extension):
    """Rewrite Sphinx roles and RST literal blocks of every docstring into Markdown."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is None:
            return
        value = docstring.value
        if "::" in value:
            value = _literal_blocks(value)
        if ":`" in value:
            value = _roles(value, obj)
        docstring.value = value
