"""Shared by tests/unit and tests/integration; imports nothing that talks to a Docker engine.

tests/unit: no engine at all (tests/unit/conftest.py points DOCKER_HOST at a socket that does not exist).
tests/integration: the real engine and real servers (tests/integration/conftest.py); never skipped.
A test file directly in tests/ stops the run (pytest would not collect it). The helper modules both
import (verify_fixtures, hostile_zips, publish_helpers, demofw_helpers, repro_helpers) live here,
importable through pyproject's `pythonpath = ["tests"]`.

* BUILDCTL_NAMESPACE: set for the whole session (and the commands it runs) to a namespace of its
  own, so the builds of the tests never share a build directory, a compile cache or an image tag
  with the user's builds (the README's main job, then the tests, on one machine) nor with another
  test session on the same engine. tests/integration/conftest.py removes what buildctl created in it
  when the session ends.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

# Set at import, before any test runs, so that every build of the session and its subprocesses use it.
TEST_NAMESPACE = f"test-{uuid.uuid4().hex[:10]}"
os.environ["BUILDCTL_NAMESPACE"] = TEST_NAMESPACE


def pytest_configure(config: pytest.Config) -> None:
    """A test file directly in tests/ would not be collected by `pytest` (testpaths names the two
    folders): refuse to run until it is moved where it belongs."""
    stray = sorted(Path(__file__).parent.glob("test_*.py"))
    if stray:
        raise pytest.UsageError(
            f"tests/{stray[0].name} is directly in tests/, where pytest does not look; fix: git mv it to "
            "tests/unit/ (no Docker engine at all) or tests/integration/ (the real engine or servers)"
        )


# The publish tests' folders (tests/unit/test_publish.py, tests/integration/test_publish_integration.py).
@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An artifacts root, as BUILDCTL_ARTIFACTS names one."""
    return tmp_path / "artifacts"


@pytest.fixture
def wheel_dir(tmp_path: Path) -> Path:
    return tmp_path / "wheels"
