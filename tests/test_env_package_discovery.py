"""Which installed ``openenv-*`` distributions count as environment packages (`installed_env_packages`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv._blocking.sources import installed_env_packages
from openenv.sync import Env, InvalidURL

from .env_packages import install_env_package


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(folder)):
            del sys.modules[name]


def _dist_info(folder: Path, package: str, files: list[str], editable: bool = False) -> None:
    info = folder / f"{package.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("".join(f"{name},,\n" for name in [*files, f"{info.name}/METADATA"]))
    if editable:
        (info / "direct_url.json").write_text(json.dumps({"url": "file:///src", "dir_info": {"editable": True}}))


def test_a_plugin_whose_module_is_another_distributions_is_no_environment(site: Path) -> None:
    # openenv-sprites (an OpenEnv provider plugin) ships openenv_sprites/, while `sprites` is the module of the
    # sprites SDK: it is no environment package, and from_env("sprites") must not become an image to pull
    (site / "openenv_sprites").mkdir()
    (site / "openenv_sprites" / "__init__.py").write_text("")
    _dist_info(site, "openenv-sprites", ["openenv_sprites/__init__.py"])
    (site / "sprites").mkdir()
    (site / "sprites" / "__init__.py").write_text("")
    _dist_info(site, "sprites-py", ["sprites/__init__.py"])
    install_env_package(site, "openenv-counter-env", "counter_env", "", "name: counter_env\n")
    names = sorted(package.package for package in installed_env_packages())
    assert "openenv-counter-env" in names and "openenv-sprites" not in names
    with pytest.raises(InvalidURL) as info:
        Env.from_env("sprites")
    assert "sprites (openenv-sprites)" not in str(info.value)


def test_an_editable_install_is_found_where_its_module_lives(site: Path, tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "editable_env").mkdir(parents=True)
    (source / "editable_env" / "__init__.py").write_text("")
    (source / "editable_env" / "openenv.yaml").write_text("name: editable_env\nimage: editable-env:1\n")
    sys.path.insert(0, str(source))
    try:
        _dist_info(site, "openenv-editable-env", ["__editable__.openenv_editable_env-0.1.0.pth"], editable=True)
        found = {package.package: package for package in installed_env_packages()}
        assert "openenv-editable-env" in found
        # an older editable install (an egg-link: no PEP 610 record) still counts, by its module's manifest
        (site / "openenv_editable_env-0.1.0.dist-info" / "direct_url.json").unlink()
        assert "openenv-editable-env" in {package.package for package in installed_env_packages()}
    finally:
        sys.path.remove(str(source))
