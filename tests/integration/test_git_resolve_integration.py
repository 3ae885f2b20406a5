"""The resolve step of a git source for real (issue 41): the demo framework as a git repository served by
`git http-backend` on loopback (git_http.py) behind a --git-mirror of an upstream URL that does not resolve,
built from `main`; then `main` moves on the server. `--dry-run --offline` answers from the last resolution
(the artifact built, said in one line); `--dry-run` asks the server (one git ls-remote), names a new key
and, in `changed`, the source commit old -> new. One demo build (--no-verify, the heavy unit left out):
about a minute on a quiet 2-core machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from git_http import GitServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
UPSTREAM = "https://git.resolve-demo.invalid/"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # a site's TLS inspection, as the bisect tests take it
SITE = ["--network", os.environ.get("BUILDCTL_NETWORK") or "host",
        *(["--ca-cert", str(CA_BUNDLE)] if CA_BUNDLE.is_file() else [])]
LIGHT = ["--set", "build.features.USE_HEAVY_UNIT=false"]


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_a_moved_branch_gives_a_new_key_naming_the_commit(tmp_path, base_image):
    repo = tmp_path / "demofw"
    shutil.copytree(DEMOFW, repo, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "demofw as shipped")
    served = tmp_path / "served"
    served.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(served / "demofw.git"))
    old = _git(repo, "rev-parse", "HEAD")
    env = {k: v for k, v in os.environ.items() if k not in ("BUILDCTL_BASE_IMAGE", "BUILDCTL_GIT_MIRROR")}
    env.update(BUILDCTL_ARTIFACTS=str(tmp_path / "artifacts"), BUILDCTL_CACHE=str(ROOT / ".cache" / "buildctl-test"))

    with GitServer(served) as server:
        source = ["--set", f"framework.source={{git: '{UPSTREAM}demofw.git', ref: main}}",
                  "--git-mirror", f"{UPSTREAM}={server.url}"]

        def invoke(*args: str) -> dict:
            proc = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(ROOT), "build", "--recipe",
                                   "demo-cpu", *LIGHT, *SITE, *source, "--json", *args], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=1200)
            assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
            return json.loads(proc.stdout)

        built = invoke("--no-verify")
        assert built["manifest"]["source"]["commit"] == old  # the commit the key was taken over, checked out
        assert built["manifest"]["resolved_recipe"]["framework"]["source"]["commit"] == old

        (repo / "README.md").write_text((repo / "README.md").read_text() + "\nmoved\n")
        _git(repo, "commit", "-q", "-am", "readme: moved")
        new = _git(repo, "rev-parse", "HEAD")
        _git(repo, "push", "-q", str(served / "demofw.git"), "main")

        offline = invoke("--dry-run", "--offline")
        assert offline["key"] == built["key"] and offline["up_to_date"]
        assert len(offline["resolved"]) == 1 and "--offline" in offline["resolved"][0] and old[:12] in \
            offline["resolved"][0]

        moved = invoke("--dry-run")
        assert moved["key"] != built["key"] and not moved["up_to_date"]
        assert moved["resolved"] == [f"buildctl: main of {UPSTREAM}demofw.git is {new[:12]} (git ls-remote)"]
        assert {"kind": "source", "name": "framework.source.commit", "change": f"{old[:12]} -> {new[:12]}"} \
            in moved["changed"]


def test_an_edit_made_while_a_local_source_builds_does_not_reach_its_wheel(tmp_path, base_image):
    """The demo as a local source folder: once the key is taken (the image step starts), a line is added to
    the package's __init__.py. The wheel is built from the snapshot taken at the key: the line is not in it,
    and the tree as it is now has another key."""
    import zipfile

    src = tmp_path / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    env = {k: v for k, v in os.environ.items() if k not in ("BUILDCTL_BASE_IMAGE",)}
    env.update(BUILDCTL_ARTIFACTS=str(tmp_path / "artifacts"), BUILDCTL_CACHE=str(ROOT / ".cache" / "buildctl-test"))
    args = [sys.executable, "-m", "invoke", "--search-root", str(ROOT), "build", "--recipe", "demo-cpu", *LIGHT,
            *SITE, "--set", f"framework.source={{path: '{src}'}}", "--json"]
    proc = subprocess.Popen([*args, "--no-verify"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    edited = False
    err = []
    for line in proc.stderr:
        err.append(line)
        if line.startswith("[image]") and not edited:  # the key was taken: the snapshot is made
            init = src / "demofw" / "__init__.py"
            init.write_text(init.read_text() + "EDITED_AFTER_THE_KEY = 1\n")
            edited = True
    out = proc.stdout.read()
    assert proc.wait(timeout=1200) == 0, f"{out[-3000:]}\n{''.join(err)[-6000:]}"
    assert edited
    built = json.loads(out)
    wheels = list(Path(built["artifact"]).glob("demofw-*.whl"))
    with zipfile.ZipFile(wheels[0]) as whl:
        assert b"EDITED_AFTER_THE_KEY" not in whl.read("demofw/__init__.py")
    now = subprocess.run([*args, "--dry-run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert now.returncode == 0, now.stderr[-3000:]
    assert json.loads(now.stdout)["key"] != built["key"]
