"""tests/unit use no Docker engine: every test here runs with DOCKER_HOST at a socket that does not
exist (its subprocesses too), so one that reaches for an engine fails here instead of passing on a
machine that happens to run one. A test that sets DOCKER_HOST itself (monkeypatch) still can.

A run of tests/unit alone spreads over two processes (pytest-xdist), a file to a process (--dist loadfile:
a module's shared results, such as the rendered recipes, are made once), unless told otherwise (-n N,
-n 0). The tests are CPU-bound in this process (the commands run in it, tests/invoke_here.py): on two
idle cores two processes finish sooner, though each collects the suite and imports what it needs (about
a quarter more CPU in all; on a machine already busy they gain nothing). Runs that include
tests/integration stay in one process: those share one engine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent
# The session's namespace (tests/conftest.py set it): what a test hands a build, as the CLI hands down
# BUILDCTL_NAMESPACE (the library reads no environment)
TEST_NAMESPACE = os.environ["BUILDCTL_NAMESPACE"]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if (getattr(config.option, "numprocesses", "absent") is not None or hasattr(config, "workerinput")
            or (os.cpu_count() or 1) < 2):
        return  # xdist absent, -n given, a worker already, or one core
    paths = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    if paths and all(p == UNIT or UNIT in p.parents for p in paths):
        config.option.numprocesses = 2
        if config.option.dist == "no":
            config.option.dist = "loadfile"

NO_ENGINE = "unix:///nonexistent/buildctl-unit-tests-use-no-engine.sock"


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)


@pytest.fixture(autouse=True)
def _no_git_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """No git server either: a ref of a URL that is not file:// (the shipped recipes' GitHub refs) is
    answered with a commit made of the URL and the ref, as a server would answer (store/git_refs.py resolves
    every ref before the key); a file:// repository a test made is asked for real."""
    import hashlib

    from buildctl.store import git_refs

    real = git_refs.ls_remote

    def answer(url: str, ref: str, site=None, *, environ) -> str:
        if url.startswith("file://"):
            return real(url, ref, site, environ=environ)
        return hashlib.sha1(f"{url} {ref}".encode()).hexdigest()

    monkeypatch.setattr(git_refs, "ls_remote", answer)
