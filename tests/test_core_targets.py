"""The one target resolver (`openenv._core.targets`), without IO: a table of targets and what they name."""

from __future__ import annotations

from typing import Any

import pytest

from openenv._core.errors import CheckoutNotRunnable, InvalidURL
from openenv._core.targets import Target, check_checkout, is_path_shaped, resolve_target

DIRS = {"/home/me/envs/chess", "my_env", "owner/name", "/home/me/here"}


def _resolve(text: Any, **kwargs: Any) -> Target:
    def expand(path: str) -> str:
        path = path.replace("~", "/home/me", 1) if path.startswith("~") else path
        if path == ".":
            return "/home/me/here"
        return path if path.startswith("/") else "/home/me/here/" + path.removeprefix("./")

    return resolve_target(text, is_dir=DIRS.__contains__, expand=expand, **kwargs)


@pytest.mark.parametrize(
    ("text", "kind", "target"),
    [
        ("http://127.0.0.1:8000", "url", "http://127.0.0.1:8000"),
        ("https://owner-env.hf.space/", "url", "https://owner-env.hf.space"),
        ("ws://10.0.0.2:9000/ws", "url", "ws://10.0.0.2:9000"),
        ("localhost:8000", "url", "http://localhost:8000"),
        ("127.0.0.1:8000", "url", "http://127.0.0.1:8000"),
        ("my-env:latest", "image", "my-env:latest"),
        ("echo-env:v1.2", "image", "echo-env:v1.2"),
        ("ghcr.io/team/env:v1", "image", "ghcr.io/team/env:v1"),
        ("localhost:5000/team/env:dev", "image", "localhost:5000/team/env:dev"),
        ("owner/env:latest", "image", "owner/env:latest"),
        ("env@sha256:" + "a" * 64, "image", "env@sha256:" + "a" * 64),
        ("docker:my-env", "image", "my-env"),
        ("docker:registry.hf.space/openenv-echo-env:latest", "image", "registry.hf.space/openenv-echo-env:latest"),
        ("openenv/echo_env", "image", "registry.hf.space/openenv-echo-env:latest"),
        ("space:openenv/echo_env", "image", "registry.hf.space/openenv-echo-env:latest"),
        ("~/envs/chess", "checkout", "/home/me/envs/chess"),
        ("/home/me/envs/chess", "checkout", "/home/me/envs/chess"),
        (".", "checkout", "/home/me/here"),
        ("my_env", "checkout", "my_env"),  # an existing directory, written without ./
        ("owner/name", "checkout", "owner/name"),  # an existing directory wins over the Space id
    ],
)
def test_what_a_target_names(text: str, kind: str, target: str) -> None:
    where = _resolve(text)
    assert (where.kind, where.target) == (kind, target)


def test_a_space_without_docker_is_its_hosted_url() -> None:
    where = _resolve("openenv/echo_env", use_docker=False)
    assert where == Target("url", "https://openenv-echo-env.hf.space", space="openenv/echo_env")
    assert _resolve("Org/Env", tag="v2", registry="reg.example:5000").target == "reg.example:5000/org-env:v2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("./does-not-exist", r"'./does-not-exist': no such directory \(/home/me/here/does-not-exist\)"),
        ("../nope", "no such directory"),
        ("/data/no-such-env", r"'/data/no-such-env': no such directory \(/data/no-such-env\)"),
        ("~/no-such-env", r"no such directory \(/home/me/no-such-env\)"),
        ("htp://host", "unsupported scheme 'htp'"),
        ("http://", "has no host"),
        ("my-env", r"a Docker image needs its tag: my-env:latest, or docker:my-env; a directory: ./my-env"),
        ("not a thing", "is not a server URL.*Docker image.*Space id.*checkout directory"),
        ("", "a target must be"),
        (None, "a target must be"),
        ("docker:", "docker: needs an image reference"),
        ("space:nope", "not a Hugging Face Space id"),
    ],
)
def test_what_names_nothing_says_why(text: Any, message: str) -> None:
    with pytest.raises(InvalidURL, match=message):
        _resolve(text)


def test_path_shapes() -> None:
    assert all(is_path_shaped(t) for t in ("./x", "../x", "/x", "~", "~/x", ".", ".."))
    assert not any(is_path_shaped(t) for t in ("x", "owner/name", "img:tag", "http://h"))


def test_a_directory_that_is_not_an_environment() -> None:
    check_checkout("/d", is_environment=True, command_given=False)
    check_checkout("/d", is_environment=False, command_given=True)  # the command knows how to run it
    with pytest.raises(
        CheckoutNotRunnable, match=r"this directory is not an OpenEnv environment \(no openenv.yaml, no server/app.py\)"
    ):
        check_checkout("/d", is_environment=False, command_given=False)
