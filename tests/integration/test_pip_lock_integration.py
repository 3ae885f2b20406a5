"""Issue 41, on the real engine: what pip installs into the builder venv. Two PEP 503 folder indexes on
loopback serve the same version of a package as two different files (a mirror that rebuilt it). Without a
lock the two indexes give two keys (pip chooses: the index is keyed); with the recipe's lock the build is
refused at the image step, in a diagnosis that names the package (pip --require-hashes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from publish_helpers import make_wheel, serve_folder, sha256

from buildctl import recipe
from buildctl.render import pip_lock, rendering

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")


def folder_index(root: Path, body: str) -> Path:
    """A static PEP 503 index serving bctl-demo 1.0 as one wheel (its bytes made by `body`)."""
    wheel = make_wheel(root / "files", "bctl-demo", "1.0", body=body)
    page = root / "simple" / "bctl-demo" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../files/{wheel.name}#sha256={sha256(wheel)}">{wheel.name}</a>\n')
    return wheel


def invoke(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("invoke")
    return subprocess.run([str(exe), "-r", str(ROOT), *args], capture_output=True, text=True, env=env, timeout=900,
                          cwd=ROOT)


def test_two_indexes_give_two_keys_without_a_lock_and_a_refusal_with_one(tmp_path):
    wheel_a = folder_index(tmp_path / "index-a", "VALUE = 1\n")
    folder_index(tmp_path / "index-b", "VALUE = 2\n")  # the same name and version, another file
    recipes = tmp_path / "recipes"
    (recipes / "locks").mkdir(parents=True)
    path = recipes / "lock-demo.yaml"
    path.write_text(f"extends: {ROOT / 'recipes' / 'demo-cpu.yaml'}\npython:\n  packages: [numpy, cmake, ninja, bctl-demo]\n")
    spec = recipe.load(str(path), ["python.lock="])
    # the lock as `invoke lock` writes it against index A (only bctl-demo in its body: the build stops there)
    facts = pip_lock.made_for(spec.python.version, *rendering.builder_requirements(spec))
    (recipes / "locks" / "lock-demo.txt").write_text(
        pip_lock.header(facts, "index A") + f"bctl-demo==1.0 \\\n    --hash=sha256:{sha256(wheel_a)}\n")
    env = {**os.environ, "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"), "COLUMNS": "200"}
    with serve_folder(tmp_path / "index-a") as url_a, serve_folder(tmp_path / "index-b") as url_b:
        keys = []
        for url in (url_a, url_b):
            look = invoke("build", "--recipe", str(path), "--set", "python.lock=", "--dry-run", "--json",
                          "--pip-index-url", url + "simple", env=env)
            assert look.returncode == 0, look.stderr
            found = json.loads(look.stdout)
            assert found["pip"].startswith("no pip lock for lock-demo: pip chooses the builder venv's versions from "
                                           f"{url}simple (keyed)"), found
            keys.append(found["key"])
        assert keys[0] != keys[1]

        refused = invoke("build", "--recipe", str(path), "--until", "image", "--json", "--network", NETWORK,
                         "--pip-index-url", url_b + "simple", env=env)
    assert refused.returncode == 1, refused.stderr[-3000:]
    payload = json.loads(refused.stdout)
    log = (Path(payload["bundle"]) / "build.log").read_text(errors="replace") if payload.get("bundle") else ""
    shown = "\n".join(line for line in log.splitlines() if "sha256" in line or "bctl" in line)[-3000:]
    assert payload["diagnosis"]["id"] == "checksum-mismatch", payload
    assert "bctl-demo==1.0" in payload["diagnosis"]["cause"], (payload["diagnosis"], shown)
    assert f"expected {sha256(wheel_a)[:12]}…" in payload["diagnosis"]["cause"]
