"""tests/unit use no Docker engine: every test here runs with DOCKER_HOST at a socket that does not
exist (its subprocesses too), so one that reaches for an engine fails here instead of passing on a
machine that happens to run one. A test that sets DOCKER_HOST itself (monkeypatch) still can."""

from __future__ import annotations

import pytest

NO_ENGINE = "unix:///nonexistent/buildctl-unit-tests-use-no-engine.sock"


@pytest.fixture(autouse=True)
def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
