"""README's Supported line states the support matrix: the noxfile's Pythons and pyproject's floors.

That the noxfile's LOWEST pins are those floors is the noxfile's own check (``_check_lowest``,
run by ``nox -s lint`` and by every matrix leg): it is not repeated here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _noxfile_constant(name: str) -> object:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(value)
    raise AssertionError(f"noxfile.py defines no {name}")


def _floors() -> dict[str, str]:
    """``name -> floor`` from the ``>=`` specifiers of [project].dependencies (no tomllib on 3.10)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^\[project\].*?^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "pyproject.toml: no [project].dependencies list"
    return dict(re.findall(r'^\s*"([A-Za-z0-9_.-]+)>=([0-9][^",;]*)', block.group(1), re.M))


def test_readme_supported_line_matches() -> None:
    legs = _noxfile_constant("MATRIX_LEGS")
    assert isinstance(legs, list)
    pythons = sorted({py for py, *_ in legs}, key=lambda v: tuple(map(int, v.split("."))))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = next((p for p in readme.split("\n\n") if p.startswith("Supported")), None)
    assert paragraph is not None, "README.md: no 'Supported' paragraph in the Installing section"
    line = " ".join(paragraph.split())
    assert f"Python {pythons[0]}" in line and pythons[-1] in line, f"README's {line!r} does not name {pythons}"
    for name, floor in _floors().items():
        assert f"{name} >= {floor}" in line, f"README's Supported line does not state {name} >= {floor}"
