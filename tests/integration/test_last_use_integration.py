"""Every path that uses an object stamps its last use, so that `invoke clean` keeps what is in daily use,
and a build that finds its artifact holds it against a clean running at that moment (issue 20, item 3
and the race of a cached build with clean).

One real demo-cpu `invoke build` (its own marker in build.env, so that its key, build-dir volume and
last image layers are its own), then each path that uses what it made: `--until`, `invoke verify
--recipe`, `--wheel` and `--image`, `invoke repro`, and a cached build with a clean at the moment it
reads its artifact. Each test sets the stamps of the objects that path uses N days back, as if nothing
had used them since, runs the path, and reads the stamps clean reads (`artifacts.last_use`): no clean
here ever looks beyond this module's artifacts root (the files-only clean of the race test).

Before (78f043d) only a full compile and a verification container stamped anything: the `--until`,
verify, repro and base-image assertions below failed, and the race test's clean removed the artifact
while the build read it (FileNotFoundError on its manifest.json).

Cost, measured three times on 2 cores busy with other builds (load 8-14), the base image present: the
module's build 570-670 s when the session's compile cache is cold (run alone; a demo-cpu build after it
in the same session took 65 s), then --until 3-10 s, verify --recipe 4-14 s, verify --image 3-7 s,
verify --wheel 43-132 s (the upper figures when the verification image is built too), repro 13-38 s
(its failing build included), the race 1-3 s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from docker import errors as derr

from buildctl import ui
from buildctl.cli.common import load_spec
from buildctl.pipeline import engine_names, pipeline
from buildctl.pipeline.stages import BuildOptions
from buildctl.store import artifacts

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"  # shared with test_build_integration
BASE = "buildctl/base:bookworm"  # demo-cpu's base image
DAY = 86400


@dataclass
class Built:
    cwd: Path
    root: Path
    sets: list[str]
    key: str
    artifact: Path

    def invoke(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        env = {**os.environ, "BUILDCTL_ARTIFACTS": str(self.root), "BUILDCTL_CACHE": str(VERIFY_CACHE),
               "BUILDCTL_DEBUG": "", "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
        for var in ("BUILDCTL_NO_VERIFY", "BUILDCTL_KEEP_CONTAINER", "BUILDCTL_JOBS", "BUILDCTL_MEMORY"):
            env.pop(var, None)
        exe = Path(sys.executable).with_name("invoke")
        return subprocess.run([str(exe), "-r", str(ROOT), *args], cwd=self.cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)

    def build_args(self, *extra: str) -> list[str]:
        return ["build", "--recipe", "demo-cpu", "--network", NETWORK, "--ca-cert", CA_BUNDLE,
                *(a for s in self.sets for a in ("--set", s)), *extra]


def namespace() -> str:
    return TEST_NAMESPACE  # the session's (tests/conftest.py sets BUILDCTL_NAMESPACE)


def image_id(client, ref: str) -> str:
    return client.images.get(ref).id


def aged(root: Path, kind: str, names: list[str], days: float) -> None:
    """Stamps `days` back: the last use recorded then (clean's first sight, or a use), none since."""
    artifacts.record_use({kind: names}, root)
    t = time.time() - days * DAY
    for name in names:
        os.utime(artifacts._stamp(root, kind, name), (t, t))


def used_since(root: Path, kind: str, name: str, t0: float) -> bool:
    stamp = artifacts.last_use(kind, name, root)
    return stamp is not None and stamp >= t0


def ok(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}"
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def built(tmp_path_factory, docker_client, base_image) -> Iterator[Built]:
    """demo-cpu built and verified for real in a root of this module's; its volumes and image tags go
    when the module ends (the session removes the rest of its namespace)."""
    work = tmp_path_factory.mktemp("last-use")
    src = work / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    sets = [f"framework.source.path={src}", f"build.env.BUILDCTL_TEST_RUN=lastuse-{uuid.uuid4().hex[:12]}"]
    b = Built(work / "cwd", work / "artifacts", sets, "", Path())
    b.cwd.mkdir()
    payload = ok(b.invoke(*b.build_args("--json")))
    b.key, b.artifact = payload["key"], Path(payload["artifact"])
    yield b
    spec, _ = load_spec("demo-cpu", sets, preflight=False)
    for volume in engine_names.volume_names(spec, b.key, namespace())[:1]:  # the compile cache is the session's
        try:
            docker_client.api.remove_volume(volume)
        except derr.APIError:
            pass
    for target in ("builder", "runtime"):
        try:
            docker_client.images.remove(engine_names.image_tag("demo-cpu", b.key, namespace(), target))
        except derr.APIError:
            pass


def test_until_build_stamps_its_build_dir_volume_builder_image_and_base_image(built, docker_client):
    """A build-dir volume used for 8 days by `--until` builds only, its builder image and its base image.
    Before: `--until` stamped nothing, so all three were 8 days unused to `invoke clean --older-than-days 7`."""
    spec, _ = load_spec("demo-cpu", built.sets, preflight=False)
    work, cache = engine_names.volume_names(spec, built.key, namespace())
    builder = image_id(docker_client, engine_names.image_tag("demo-cpu", built.key, namespace()))
    base = image_id(docker_client, BASE)
    aged(built.root, "volume", [work, cache], 8)
    aged(built.root, "image", [builder, base], 8)
    t0 = time.time()
    proc = built.invoke(*built.build_args("--until", "configure"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    for kind, name in (("volume", work), ("volume", cache), ("image", builder), ("image", base)):
        assert used_since(built.root, kind, name, t0), (kind, name)


def test_verify_recipe_stamps_the_runtime_image_and_its_base_image(built, docker_client):
    """`invoke verify --recipe` builds (or finds) the runtime image FROM the base. Before: the runtime
    image was stamped, its base image never: a base image used only through verification aged."""
    runtime = image_id(docker_client, engine_names.image_tag("demo-cpu", built.key, namespace(), "runtime"))
    base = image_id(docker_client, BASE)
    aged(built.root, "image", [runtime, base], 40)
    aged(built.root, "artifact", [f"demo-cpu/{built.key}"], 40)
    t0 = time.time()
    ok(built.invoke("verify", "--recipe", "demo-cpu", "--network", NETWORK, "--json",
                    *(a for s in built.sets for a in ("--set", s))))
    assert used_since(built.root, "image", base, t0)
    assert used_since(built.root, "image", runtime, t0) and used_since(built.root, "artifact", f"demo-cpu/{built.key}", t0)


def test_verify_image_stamps_the_image_by_id_whatever_name_it_is_given(built, docker_client):
    """`invoke verify --image` of buildctl's runtime image, named by a short id. Before: stamped under the
    name as given ("3f2a9c1b..."), which is neither its id nor a tag, so clean never saw the use."""
    runtime = image_id(docker_client, engine_names.image_tag("demo-cpu", built.key, namespace(), "runtime"))
    aged(built.root, "image", [runtime], 40)
    t0 = time.time()
    proc = built.invoke("verify", "--image", runtime.removeprefix("sha256:")[:12], "--python", "/opt/venv/bin/python",
                        "--module", "demofw", "--network", "none", "--json")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]  # demofw: not installed
    assert used_since(built.root, "image", runtime, t0)


def test_verify_wheel_stamps_the_verification_image_and_its_base_image(built, docker_client):
    """`invoke verify --wheel` runs a verification image built FROM the recipe's base image. Before: the
    verification image was stamped, the base image it is FROM never."""
    base = image_id(docker_client, BASE)
    aged(built.root, "image", [base], 40)
    before = {t for img in docker_client.images.list(name="buildctl/verify-runtime") for t in img.tags}
    manifest = json.loads((built.artifact / "manifest.json").read_text())
    t0 = time.time()
    try:
        ok(built.invoke("verify", "--recipe", "demo-cpu", "--wheel", str(built.artifact / manifest["wheels"][0]["file"]),
                        "--network", NETWORK, "--json", *(a for s in built.sets for a in ("--set", s))))
        assert used_since(built.root, "image", base, t0)
    finally:
        for img in docker_client.images.list(name="buildctl/verify-runtime"):
            for tag in set(img.tags) - before:  # made by this test: the shared one of other sessions stays
                docker_client.images.remove(tag)


def test_repro_stamps_its_bundle_and_the_images_it_replays_from(built, docker_client):
    """A build that fails in configure leaves a bundle; `invoke repro` of it rebuilds the builder image
    (a layer-cache hit: the build's very image) FROM the base image and reruns the step. Before: repro
    stamped nothing, neither the bundle (removed N days after clean first saw it) nor the images."""
    proc = built.invoke(*built.build_args("--set", "build.env.CXXFLAGS=-fno-such-option-for-buildctl", "--json"))
    assert proc.returncode == 1, proc.stderr[-4000:]
    bundle = Path(json.loads(proc.stdout)["bundle"])
    data = json.loads((bundle / "bundle.json").read_text())
    try:
        base = image_id(docker_client, BASE)
        name = f"failures/{bundle.name}"
        aged(built.root, "bundle", [name], 40)
        aged(built.root, "image", [data["image_id"], base], 40)
        t0 = time.time()
        proc = built.invoke("repro", str(bundle), "--json")
        assert proc.returncode == 1 and json.loads(proc.stdout)["reproduced"] is True, proc.stderr[-3000:]
        assert json.loads(proc.stdout)["same_image"] is True
        for kind, ref in (("bundle", name), ("image", data["image_id"]), ("image", base)):
            assert used_since(built.root, kind, ref, t0), (kind, ref)
    finally:
        for volume in data["volumes"]:
            if volume.startswith("buildctl-work-"):  # its build dir; the compile cache is the session's
                try:
                    docker_client.api.remove_volume(volume)
                except derr.APIError:
                    pass


def test_a_cached_build_holds_its_artifact_against_a_clean_at_that_moment(built, monkeypatch, tmp_path):
    """`invoke clean --keep-gb 0` run at the moment a cached `invoke build` has found its artifact and
    reads it. Before: the build read it outside the key lock, clean removed it under the build
    (FileNotFoundError on manifest.json). Now the build holds the lock shared until it has verified
    it: clean says the artifact is in use and leaves it; the build ends cached."""
    monkeypatch.setenv("BUILDCTL_ARTIFACTS", str(built.root))
    spec, _ = load_spec("demo-cpu", built.sets, site={"network": NETWORK}, preflight=False)
    cleans: list[dict] = []
    real_lookup = artifacts.lookup

    def lookup_then_clean(recipe: str, key: str, root=None, **options):
        found = real_lookup(recipe, key, root, **options)
        if found is not None and not cleans:
            proc = built.invoke("clean", "--keep-gb", "0", "--no-images", "--no-caches", "--no-containers", "--json")
            cleans.append(ok(proc))
        return found

    monkeypatch.setattr(artifacts, "lookup", lookup_then_clean)
    opts = BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=built.root, render_root=tmp_path / "build")
    result = pipeline.run(spec, opts, ui.QuietView())
    assert result.cached and result.key == built.key and result.report is not None
    assert (built.artifact / "manifest.json").is_file() and list(built.artifact.glob("*.whl"))
    [report] = cleans
    assert f"demo-cpu/{built.key}" not in {r["name"] for r in report["removed"]}
    assert {"kind": "artifact", "name": f"demo-cpu/{built.key}",
            "error": "a build of this key is running (its lock is held)"} in report["failed"]
