"""tests/unit use no Docker engine: every test here runs with DOCKER_HOST at a socket that does not
exist (its subprocesses too), so one that reaches for an engine fails here instead of passing on a
machine that happens to run one. A test that sets DOCKER_HOST itself (monkeypatch) still can.

A run of tests/unit alone spreads over two processes (pytest-xdist) unless told otherwise (-n N, -n 0):
about 70 tests start the real `invoke` CLI as a user would, and on two cores that halves the wall time
(~35 s to ~19 s). Runs that include tests/integration stay in one process: those share one engine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if (getattr(config.option, "numprocesses", "absent") is not None or hasattr(config, "workerinput")
            or (os.cpu_count() or 1) < 2):
        return  # xdist absent, -n given, a worker already, or one core
    paths = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    if paths and all(p == UNIT or UNIT in p.parents for p in paths):
        config.option.numprocesses = 2

NO_ENGINE = "unix:///nonexistent/buildctl-unit-tests-use-no-engine.sock"


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
