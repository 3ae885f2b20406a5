"""Two builds of one recipe with different settings, started at the same moment, against the real
engine: each publishes its own files.

A Release and a Debug build of demo-cpu run in two threads released together by a barrier (the real
pipeline: render, image, compile, publish; verification off). Each artifact must hold what its own
key was computed from: the manifest's build type, the build script baked into its builder image
(`export DEBUG=1` only in the Debug one), and the rendered copy in build/demo-cpu/<key>/.

How the old code misbehaved: both builds rendered into the same build/demo-cpu/ before taking the
key lock, so the one that rendered last supplied the Dockerfile and build script of both images; a
Release artifact was published with a Debug build script baked into its builder image (or the
reverse), under the Release key, and the two builder images were the same image.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE

from buildctl import engine, recipe, ui
from buildctl.pipeline import pipeline, stages

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
BUILD_TYPES = ("Release", "Debug")


def test_release_and_debug_of_one_recipe_at_once_publish_their_own_files(tmp_path, base_image, docker_client,
                                                                          test_labels):
    src = tmp_path / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    opts = stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, verify=False, render_root=tmp_path / "build", artifacts_root=tmp_path / "artifacts")
    specs = {t: recipe.load("demo-cpu", [f"framework.source.path={src}", f"build.type={t}"],
                            site={"network": NETWORK, "ca_certs": [CA_BUNDLE]}) for t in BUILD_TYPES}
    start = threading.Barrier(len(specs))
    results: dict[str, pipeline.BuildResult] = {}
    errors: dict[str, BaseException] = {}

    def build(build_type: str) -> None:
        try:
            start.wait()
            results[build_type] = pipeline.run(specs[build_type], opts, ui.View())
        except BaseException as e:  # reported below, with the other thread's outcome
            errors[build_type] = e

    threads = [threading.Thread(target=build, args=(t,)) for t in BUILD_TYPES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == {}, errors
    keys = {t: r.key for t, r in results.items()}
    assert len(set(keys.values())) == 2, keys
    builders = set()
    for build_type, result in results.items():
        m = result.manifest
        assert result.cached is False and m.key == result.key and m.build_type == build_type
        assert (result.artifact / "recipe.resolved.yaml").read_text().count(f"type: {build_type}") == 1
        # the build script baked into the builder image is this build's own
        script = engine.run_container(
            docker_client,
            engine.ContainerSpec(
                m.images.builder,
                ["cat", "/usr/local/bin/buildctl-build"],
                network_mode="none",
                labels=test_labels,
            ),
        )
        assert script.exit_code == 0, script.log
        assert ("export DEBUG=1" in script.log) is (build_type == "Debug"), (build_type, result.key)
        # and so is the rendered copy left under its key
        placed = (tmp_path / "build" / "demo-cpu" / result.key / "build.sh").read_text()
        assert ("export DEBUG=1" in placed) is (build_type == "Debug")
        assert placed.strip() == script.log.strip()
        builders.add(m.images.builder)
    assert len(builders) == 2
    # each build's private render folder is gone
    assert sorted(p.name for p in (tmp_path / "build").glob(".tmp-*")) == []
