"""Installed environment packages, written as pip writes them (a ``*.dist-info`` with ``METADATA`` and ``RECORD``).

``install_env_package(folder, "openenv-counter-env", "counter_env", ...)`` lays out the
distribution and its module under ``folder``; put ``folder`` on ``sys.path`` (as
site-packages is) and ``importlib.metadata`` finds it, as ``AutoEnv`` would.
"""

from __future__ import annotations

from pathlib import Path


def install_env_package(folder: Path, package: str, module: str, client: str = "", manifest: str = "") -> None:
    """Write ``package``: its module ``module``, ``client`` as ``client.py``, ``manifest`` as ``openenv.yaml``."""
    root = folder / module
    root.mkdir(parents=True)
    files = {f"{module}/__init__.py": ""}
    if client:
        files[f"{module}/client.py"] = client
    if manifest:
        files[f"{module}/openenv.yaml"] = manifest
    for name, text in files.items():
        (folder / name).write_text(text)
    info = folder / f"{package.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1.0\n")
    record = [f"{name},," for name in files] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
