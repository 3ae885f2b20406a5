"""`invoke build --check-reproducible` against the real engine (docs/reproducible.md).

* demo-cpu: built, then built again from a fresh build directory at another path without compile cache:
  the two wheels have the same sha256, exit 0, and the manifest records it with SOURCE_DATE_EPOCH;
* a test recipe that stamps the build's clock into a generated file and its build path into a compiled
  string (tests/fixtures/nondeterministic/): exit 1, a one-line reason naming both members with the kind
  of difference, and the same in --json and in the manifest.

--no-verify: verification is the other tests' subject, and leaves the wheels as they are. The source is
a snapshot of examples/demofw (edits to the tree during the run change no key). What the builds make in
the engine is in the session's namespace, removed when the session ends (conftest); the rebuild's own
build directory is removed by the check itself (asserted).
Budget: about 2-4 minutes per test on 2 cores (each compiles demofw twice, the second time without cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE

from buildctl import engine
from buildctl.pipeline import engine_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
STAMPS_RECIPE = ROOT / "tests" / "fixtures" / "nondeterministic" / "demo-cpu-build-stamps.yaml"
SITE_ARGS = ["--network", os.environ.get("BUILDCTL_TEST_NETWORK", "host"),
             "--ca-cert", os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")]


def check(tmp_path: Path, recipe: str) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """`invoke build --recipe R --check-reproducible --json` in a workspace of its own: (process, JSON, cwd)."""
    cwd, src = tmp_path / "cwd", tmp_path / "demofw"
    cwd.mkdir()
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    exe = Path(sys.executable).with_name("invoke")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]
    env = {**os.environ, "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"), "TMPDIR": str(tmp_path)}
    for var in ("BUILDCTL_NO_VERIFY", "BUILDCTL_KEEP_CONTAINER", "BUILDCTL_CACHE_URL"):
        env.pop(var, None)
    proc = subprocess.run([*cmd, "-r", str(ROOT), "build", "--recipe", recipe, *SITE_ARGS,
                           "--set", f"framework.source.path={src}", "--check-reproducible", "--no-verify", "--json"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=45 * 60)
    explain = f"exit {proc.returncode}\n--- stderr\n{proc.stderr[-6000:]}\n--- stdout\n{proc.stdout[-3000:]}"
    assert proc.stdout.strip(), explain
    return proc, json.loads(proc.stdout), cwd


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_rebuild_volume(docker_client, payload: dict, tmp_path: Path) -> bool:
    name = engine_names.rebuild_volume_name(payload["recipe"], payload["key"], TEST_NAMESPACE)
    return name not in {v.name for v in engine.list_buildctl_volumes(docker_client)}


def test_demo_cpu_builds_the_same_wheel_twice(tmp_path, base_image, docker_client):
    proc, payload, cwd = check(tmp_path, "demo-cpu")
    assert proc.returncode == 0 and payload["ok"] is True, proc.stderr[-6000:]
    repro = payload["reproducible"]
    published = Path(payload["artifact"]) / payload["manifest"]["wheels"][0]["file"]
    second = cwd / repro["second_build"]["wheel"]
    # what a user checks: the two files, byte for byte
    assert second.is_file() and second.parent != published.parent
    assert sha256(published) == sha256(second) == repro["comparison"]["first"]["sha256"]
    assert repro["identical"] is True and repro["comparison"]["differences"] == []
    # the second build: another path, a fresh build dir, no compile cache (ccache never ran: no hit, no miss)
    assert repro["second_build"]["build_dir"] == "/rebuild/work/src"
    stats = dict(line.split("\t") for line in (second.parent / "cache-stats.txt").read_text().splitlines()
                 if line.count("\t") == 1)
    assert (stats.get("direct_cache_hit"), stats.get("preprocessed_cache_hit"), stats.get("cache_miss")) == (
        "0", "0", "0"), stats
    assert "build dir /rebuild/work/src/build" in (second.parent / "build.log").read_text()  # setup.py's line
    # the manifest of the published artifact records the date and the result
    manifest = json.loads((Path(payload["artifact"]) / "manifest.json").read_text())
    assert manifest["source_date_epoch"] == 315532800  # a path source: 1980-01-01
    assert manifest["reproducible"]["identical"] is True
    with zipfile.ZipFile(published) as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert no_rebuild_volume(docker_client, payload, tmp_path)


def test_a_build_time_and_a_build_path_are_caught_and_named(tmp_path, base_image, docker_client):
    proc, payload, _ = check(tmp_path, str(STAMPS_RECIPE))
    assert proc.returncode == 1 and payload["ok"] is False, proc.stderr[-6000:]
    so = next(n for n in zipfile.ZipFile(Path(payload["artifact"]) / payload["manifest"]["wheels"][0]["file"]).namelist()
              if n.endswith(".so"))
    # the one-line reason names the members and the kind of each difference
    reason = payload["error"]
    assert "\n" not in reason and reason.startswith("the two builds' wheels differ: ")
    assert f"{so} (paths)" in reason and "demofw/version.py (timestamps)" in reason
    assert proc.stderr.rstrip().splitlines()[-1] == f"error: {reason}"
    by_member = {d["member"]: d for d in payload["reproducible"]["comparison"]["differences"]}
    assert by_member[so]["kinds"] == ["paths"]
    assert "/rebuild/work/src (0x first, 1x second), /work/src (1x first, 0x second)" in by_member[so]["detail"]
    assert by_member["demofw/version.py"]["kinds"] == ["timestamps"]
    assert by_member["demofw/version.py"]["detail"].startswith("embedded date '20")
    record = next(m for m in by_member if m.endswith(".dist-info/RECORD"))
    assert by_member[record]["detail"] == f"the recorded hashes of {so}, demofw/version.py"
    assert set(by_member) == {so, "demofw/version.py", record}
    manifest = json.loads((Path(payload["artifact"]) / "manifest.json").read_text())
    assert manifest["reproducible"]["identical"] is False and manifest["reproducible"]["reason"] == reason
    assert no_rebuild_volume(docker_client, payload, tmp_path)
