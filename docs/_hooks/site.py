"""MkDocs hooks (mkdocs.yml ``hooks:``): pages generated at build time, so they cannot drift.

* ``reference/cli.md`` is rendered from the argparse parser of
  ``openenv._cli.build_parser()``: the help of every command and subcommand.
* ``<!-- include: PATH [demote=N] [optional] -->`` in a page is replaced by the
  file ``PATH`` (relative to the repository root), with its headings demoted by
  ``N`` levels; a missing ``optional`` file becomes a short note, any other
  missing file fails the build.
* ``<!-- version -->`` in a page becomes the version in ``pyproject.toml``,
  which the footer shows too.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
_INCLUDE = re.compile(r"^<!--\s*include:\s*(?P<path>\S+)(?P<flags>[^>]*?)\s*-->\s*$", re.MULTILINE)


def cli_markdown() -> str:
    """The command-line reference, from the live parser."""
    os.environ["COLUMNS"] = "88"  # argparse wraps help to the terminal width: make it stable
    from openenv._cli import build_parser

    parser = build_parser()
    lines = [
        "# Command line",
        "",
        "`python -m openenv` (also installed as `openenv-twin`). This page is generated at build time",
        "from the argument parser in `openenv._cli`, so it always matches the installed version.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    lines += _subcommands(parser, "python -m openenv", 2)
    return "\n".join(lines) + "\n"


def _subcommands(parser: argparse.ArgumentParser, prefix: str, level: int) -> list[str]:
    lines: list[str] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            command = f"{prefix} {name}"
            lines += [f"{'#' * level} `{name}`" + " { #" + command.replace(" ", "-").replace(".", "") + " }", ""]
            if helps.get(name):
                lines += [str(helps[name]).rstrip(".").capitalize() + ".", ""]
            lines += ["```text", sub.format_help().rstrip(), "```", ""]
            lines += _subcommands(sub, command, level + 1)
    return lines


def _include(match: re.Match[str]) -> str:
    rel = match.group("path")
    flags = match.group("flags").split()
    demote = 0
    for flag in flags:
        if flag.startswith("demote="):
            demote = int(flag.split("=", 1)[1])
    path = ROOT / rel
    if not path.is_file():
        if "optional" in flags:
            return f'!!! note "Not produced yet"\n\n    `{rel}` does not exist in this checkout yet.\n'
        raise FileNotFoundError(f"include: {rel} does not exist")
    text = path.read_text(encoding="utf-8")
    if demote:
        text = re.sub(r"^(#{1,6}) ", lambda m: "#" * min(6, len(m.group(1)) + demote) + " ", text, flags=re.MULTILINE)
    return text.rstrip() + "\n"


_VERSION = re.compile(r'^version\s*=\s*"(?P<version>[^"]+)"', re.MULTILINE)


def project_version() -> str:
    """``[project] version`` of pyproject.toml (the source of truth; the docs may build from a checkout)."""
    match = _VERSION.search((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if not match:
        raise ValueError("pyproject.toml has no [project] version")
    return match.group("version")


def on_config(config: Any) -> Any:
    version = project_version()
    config["copyright"] = f"openenv-twin {version}" + (
        f" &middot; {config['copyright']}" if config["copyright"] else ""
    )
    return config


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/cli.md", content=cli_markdown()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return _INCLUDE.sub(_include, markdown).replace("<!-- version -->", project_version())
