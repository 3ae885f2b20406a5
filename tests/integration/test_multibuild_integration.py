"""`invoke build` of several recipes over two real engines (A, and B of .ci/services.sh).

demo-cpu, a Debug variant and a recipe whose patch does not apply, with `--engine A --engine
ssh://B` (engine B through the local sshd, as a team reaches a build machine): the
plan spreads them over both engines, the two good builds publish and verify into the one local
artifacts folder, the broken one fails on its engine with a repro bundle that names that engine, and
its failure stops neither other build. The command exits 1 and its JSON says which build ran where.
The two lighter tests below, a build on A beside a failure on B and the doctor per engine (A, B and a
dead one), are part of the engine matrix (docs/engines.md): engine A is this session's engine, Docker 26
or rootless Podman there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE, remove_namespace_objects

from buildctl import engine

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "fanout"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")


def test_three_recipes_over_two_engines_one_failing(tmp_path, services, docker_client, engine_b, base_on_b):
    namespace = f"{TEST_NAMESPACE}-fan"
    root = tmp_path / "artifacts"
    cmd = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT), "build", "--json",
           "--recipe", "demo-cpu", "--recipe", str(FIXTURES / "fanout-debug.yaml"),
           "--recipe", str(FIXTURES / "fanout-broken.yaml"),
           "--engine", services.engine_a, "--engine", services.engine_b_ssh,
           "--network", NETWORK, "--ca-cert", CA_BUNDLE]
    env = {**os.environ, "BUILDCTL_ARTIFACTS": str(root), "BUILDCTL_NAMESPACE": namespace, "COLUMNS": "200"}
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=40 * 60,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        result = json.loads(proc.stdout)
        builds = {b["recipe"]: b for b in result["builds"]}
        assert result["ok"] is False and set(builds) == {"demo-cpu", "fanout-debug", "fanout-broken"}
        assert {b["engine"] for b in builds.values()} == {services.engine_a, services.engine_b_ssh}  # both used
        for name in ("demo-cpu", "fanout-debug"):  # built, published and verified, into the one store
            assert builds[name]["ok"], builds[name]
            artifact = Path(builds[name]["artifact"])
            assert artifact.parent.parent == root and (artifact / "report.json").is_file()
            manifest = json.loads((artifact / "manifest.json").read_text())
            assert manifest["build_type"] == ("Debug" if name == "fanout-debug" else "Release")
        broken = builds["fanout-broken"]
        assert broken["ok"] is False and "failed in step source" in broken["error"]
        bundle = json.loads((Path(broken["bundle"]) / "bundle.json").read_text())
        assert bundle["engine"] == broken["engine"]  # the bundle names where it failed
        assert proc.stderr.strip().splitlines()[-1] == f"error: 1 of 3 builds failed: fanout-broken on {broken['engine']}"
    finally:
        for client in (docker_client, engine_b):
            remove_namespace_objects(client, namespace)


@pytest.mark.engines
def test_a_build_on_this_engine_and_a_failure_on_engine_b_in_one_command(tmp_path, services, docker_client, engine_b,
                                                                          base_on_b):
    """The multi-engine path with this session's engine as engine A (in the engine matrix: Docker 26 or
    Podman): demo-cpu and the broken recipe with `--engine A --engine ssh://B`. Of two equal jobs the plan
    takes demo-cpu first (by name) to the first engine given: it builds, publishes and verifies on A, in the
    session's namespace (so from the build directory and compile cache that test_build_integration left:
    seconds, where the three-recipe test above compiles twice); the broken one fails on B, with a bundle
    that names B, and stops nothing else. Exit 1.
    The engines are also named by a lowercase `buildctl_engines` (read in any case, as every setting): before
    (19b4e6a, issue 35 item 10) each child, an `invoke build` with the settings written back into its
    environment, stripped BUILDCTL_ENGINES under its upper-case name only, took the multi-engine path again
    and started children of its own, without end (this test then timed out)."""
    root = tmp_path / "artifacts"
    cmd = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT), "build", "--json",
           "--recipe", "demo-cpu", "--recipe", str(FIXTURES / "fanout-broken.yaml"),
           "--engine", services.engine_a, "--engine", services.engine_b_ssh,
           "--network", NETWORK, "--ca-cert", CA_BUNDLE]
    env = {**os.environ, "BUILDCTL_ARTIFACTS": str(root), "COLUMNS": "200",
           "buildctl_engines": f"{services.engine_a} {services.engine_b_ssh}"}
    try:
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=15 * 60,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        builds = {b["recipe"]: b for b in json.loads(proc.stdout)["builds"]}
        demo, broken = builds["demo-cpu"], builds["fanout-broken"]
        assert demo["engine"] == services.engine_a and demo["ok"], demo
        artifact = Path(demo["artifact"])
        assert artifact.parent.parent == root and (artifact / "report.json").is_file()
        manifest = json.loads((artifact / "manifest.json").read_text())
        kind = engine.kind_of(docker_client)
        assert (manifest["engine"]["kind"], manifest["engine"]["server_version"]) == (kind.name, kind.version)
        assert broken["engine"] == services.engine_b_ssh and broken["ok"] is False
        assert "failed in step source" in broken["error"]
        assert json.loads((Path(broken["bundle"]) / "bundle.json").read_text())["engine"] == services.engine_b_ssh
    finally:
        remove_namespace_objects(engine_b, TEST_NAMESPACE)  # A's go with the session's namespace


@pytest.mark.engines
def test_doctor_reports_per_engine_and_fails_for_one_that_does_not_answer(services, docker_client, engine_b,
                                                                          base_on_b):
    """Each engine its own report; both hold the base image (engine B by base_on_b: doctor says "build: no"
    on an engine without it, as a build there would stop at it), and one that does not answer."""
    dead = "tcp://127.0.0.1:1"
    cmd = [str(Path(sys.executable).with_name("invoke")), "-r", str(ROOT), "doctor", "--recipe", "demo-cpu", "--json",
           "--engine", services.engine_a, "--engine", services.engine_b, "--engine", dead]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr[-2000:]
    reports = {r["engine_url"]: r for r in json.loads(proc.stdout)["engines"]}
    assert list(reports) == [services.engine_a, services.engine_b, dead]
    for url, client in ((services.engine_a, docker_client), (services.engine_b, engine_b)):  # each its own
        assert reports[url]["engine"]["ok"] and reports[url]["engine"]["cpus"] >= 1
        kind = engine.kind_of(client)  # the engine named as it is, with what it supports
        assert (reports[url]["engine"]["kind"], reports[url]["engine"]["version"]) == (kind.name, kind.version)
        assert reports[url]["engine"]["supports"]["memory_limits"] is kind.memory_limits
        [demo] = reports[url]["recipes"]
        assert demo["name"] == "demo-cpu" and demo["build"]["ok"], demo
        assert reports[url]["engine"]["base_images"]["buildctl/base:bookworm"]["state"] == "present"
    assert reports[dead]["engine"]["ok"] is False and "unreachable" in reports[dead]["engine"]["error"]
