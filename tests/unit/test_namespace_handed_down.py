"""A build's artifacts root and engine-object namespace are the values its options hold (issue 42): the CLI
reads BUILDCTL_ARTIFACTS and BUILDCTL_NAMESPACE and hands them down; the library never reads them itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from buildctl import recipe
from buildctl.pipeline import stages
from buildctl.pipeline.engine_names import image_tag, volume_names
from buildctl.store import artifacts


@pytest.fixture
def other_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The process's environment names another namespace and another root than the options do."""
    monkeypatch.setenv("BUILDCTL_NAMESPACE", "ns-from-env")
    monkeypatch.setenv("BUILDCTL_ARTIFACTS", str(tmp_path / "env-artifacts"))


@pytest.mark.usefixtures("other_environment")
def test_a_build_names_its_engine_objects_in_the_namespace_its_options_give(tmp_path):
    opts = stages.BuildOptions(environ=os.environ, artifacts_root=tmp_path / "artifacts", namespace="ns-x",
                               render_root=tmp_path / "build")
    run = stages.Run.of(recipe.load("demo-cpu"), opts)
    assert run.namespace == "ns-x"
    assert image_tag(run.spec.name, "k1", run.namespace) == "buildctl/demo-cpu:ns-x-k1"
    assert all(name.startswith("buildctl-") and "ns-x-" in name for name in volume_names(run.spec, "k1", run.namespace))


@pytest.mark.usefixtures("other_environment")
def test_without_a_namespace_a_build_takes_its_roots_not_the_environments(tmp_path):
    root = tmp_path / "artifacts"
    run = stages.Run.of(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, artifacts_root=root,
                                                                     render_root=tmp_path / "build"))
    assert run.namespace == artifacts.namespace(root) != "ns-from-env"
    assert run.namespace.startswith("artifacts-")


@pytest.mark.usefixtures("other_environment")
def test_the_store_without_a_root_means_the_checkout_relative_default_not_the_environments():
    assert artifacts.artifact_dir("demo-cpu", "k1") == artifacts.DEFAULT_ARTIFACTS_DIR / "demo-cpu" / "k1"
    assert artifacts.namespace() == artifacts.DEFAULT_NAMESPACE
