"""The Ascend recipe through its installer contract, against the real engine.

Huawei's CANN installer is login-gated, so the image is built with the stand-in of
tests/fixtures/fake-cann-toolkit (the real installer's command line; an empty toolkit tree with the
real `set_env.sh` and `ascend_toolkit_install.info`), pre-staged in a download cache under its real
file name and pinned by sha256, exactly as a site stages the real one. The shipped
`ascend-cann8.0` recipe is used through a test-only recipe that extends it
(fixtures/recipes/ascend-stand-in.yaml.j2): a local base image instead of ubuntu:22.04, demofw in
place of PyTorch 2.1 (GitHub is unreachable and the build would take hours). `--until configure`
stops after the build script has sourced `set_env.sh` and configured the framework; torch_npu itself
is never built (its `git` source needs GitHub): its build environment is checked in the builder image.

Hygiene: everything the builds create carries this session's installer sha256 (the stand-in has a
session stamp): the builder image tag, the build-dir and compile-cache volumes and the untagged
stage image that ran the installer are removed at the end. Budget: about 3-6 minutes on 2 busy cores
with buildctl/base:bookworm present (the apt and venv layers are shared with demo-cpu).
"""

from __future__ import annotations

import contextlib
import hashlib
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

import jinja2
import pytest
from conftest import TEST_NAMESPACE
from docker import errors as derr

from buildctl import engine, recipe, render
from buildctl.pipeline import engine_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STAND_IN = FIXTURES / "fake-cann-toolkit"
CANN = "8.0.0"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
SESSION = uuid.uuid4().hex[:8]
TIMEOUT = 30 * 60


@dataclass
class Run:
    proc: subprocess.CompletedProcess
    payload: dict

    def explain(self) -> str:
        return f"exit {self.proc.returncode}\n--- stderr\n{self.proc.stderr[-5000:]}\n--- stdout\n{self.proc.stdout[-3000:]}"


@dataclass
class Session:
    root: Path
    cache: Path  # the download cache with the stand-in installer
    installer: Path
    sha256: str
    recipe: Path

    def invoke(self, *args: str) -> Run:
        exe = Path(sys.executable).with_name("invoke")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]
        env = {**os.environ, "BUILDCTL_ARTIFACTS": str(self.root / "artifacts"), "TMPDIR": str(self.root / "tmp"),
               "PYTHONUNBUFFERED": "1"}
        proc = subprocess.run([*cmd, "-r", str(ROOT), *args, "--json"], cwd=self.root / "cwd", env=env,
                              capture_output=True, text=True, timeout=TIMEOUT)
        payload = {}
        with contextlib.suppress(ValueError):
            payload = json.loads(proc.stdout) if proc.stdout.strip() else {}
        return Run(proc, payload)

    def build(self, recipe_file: Path, *extra: str) -> Run:
        return self.invoke("build", "--recipe", str(recipe_file), "--network", NETWORK, "--ca-cert", CA_BUNDLE,
                           "--download-cache", str(self.cache), *extra)


def make_installer(out: Path, stamp: str) -> Path:
    proc = subprocess.run(["sh", str(STAND_IN / "make_installer.sh"), CANN, str(out), "x86_64", stamp],
                          capture_output=True, text=True, check=True)
    return Path(proc.stdout.strip())


@pytest.fixture(scope="module")
def session(tmp_path_factory, docker_client, base_image) -> Iterator[Session]:
    root = tmp_path_factory.mktemp("ascend")
    for d in ("cwd", "tmp", "cache"):
        (root / d).mkdir()
    installer = make_installer(root / "cache", f"session-{SESSION}")
    assert installer.name == f"Ascend-cann-toolkit_{CANN}_linux-x86_64.run"
    sha = hashlib.sha256(installer.read_bytes()).hexdigest()
    demofw = root / "demofw"
    shutil.copytree(ROOT / "examples" / "demofw", demofw,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so", "hip"))
    name = f"itest-ascend-{SESSION}"
    text = jinja2.Template((FIXTURES / "recipes" / "ascend-stand-in.yaml.j2").read_text(),
                           undefined=jinja2.StrictUndefined).render(
        name=name, ascend_recipe=ROOT / "recipes" / "ascend-cann8.0.yaml", demofw=demofw, sha256=sha,
        url=f"https://ascend-repo.invalid/CANN/CANN%20{CANN}/{installer.name}")
    recipe_file = root / f"{name}.yaml"
    recipe_file.write_text(text)
    s = Session(root, root / "cache", installer, sha, recipe_file)
    started = time.time()
    before_volumes = {v.name for v in docker_client.volumes.list()}
    yield s
    spec = recipe.load(str(recipe_file))
    for img in docker_client.images.list(name=f"buildctl/{name}"):
        for tag in img.tags:
            with contextlib.suppress(derr.NotFound, derr.APIError):
                docker_client.images.remove(tag)
    work_prefix = engine_names.work_volume_name(name, "", TEST_NAMESPACE)  # the session's namespace
    key_volumes = [v.name for v in docker_client.volumes.list() if v.name.startswith(work_prefix)]
    _, cache_volume = engine_names.volume_names(spec, "x", TEST_NAMESPACE)
    for vol in [*key_volumes, cache_volume]:
        if vol not in before_volumes:
            with contextlib.suppress(derr.NotFound, derr.APIError):
                docker_client.api.remove_volume(vol)
    # the untagged stage image that ran this session's installer (its RUN line names the sha256)
    for img in docker_client.images.list(filters={"dangling": True}):
        with contextlib.suppress(derr.NotFound, derr.APIError):
            if img.attrs.get("Created", "") and sha in json.dumps(docker_client.api.history(img.id)):
                docker_client.images.remove(img.id)
    assert time.time() >= started


@pytest.fixture(scope="module")
def image_build(session) -> Run:
    """The Ascend recipe built up to configure: the image (with the installer stage), then the build
    script: source step, CANN's set_env.sh sourced, demofw configured."""
    return session.build(session.recipe, "--until", "configure")


def builder_image(run: Run) -> str:
    return engine_names.image_tag(run.payload["recipe"], run.payload["key"], TEST_NAMESPACE)  # the session's namespace


def test_the_image_is_built_with_the_pre_staged_installer_and_never_downloads(session, image_build):
    run = image_build
    assert run.proc.returncode == 0 and run.payload.get("ok") is True, run.explain()
    log = (Path(run.payload["out_dir"]) / "build.log").read_text()
    name = session.installer.name
    assert f"buildctl: using pre-staged {name} (sha256 verified)" in log  # host: cache checked
    assert f"buildctl: using pre-staged {name}\n" in log  # in the image build: buildctl-fetch took it
    assert "buildctl: downloading" not in log
    # the installer ran with the recipe's command line, and the stage's own check found set_env.sh
    assert f"[Toolkit] [INFO] Ascend-cann-toolkit {CANN} install success, installed in: /usr/local/Ascend/ascend-toolkit/{CANN}" in log
    # the build script: the manifest's CANN version probe and the sourced environment
    assert f"cann={CANN}\n" in log
    assert ("buildctl: CANN environment: ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest "
            "ASCEND_OPP_PATH=/usr/local/Ascend/ascend-toolkit/latest/opp") in log
    assert "-- Build files have been written to:" in log  # demofw configured after set_env.sh
    assert "buildctl: stopped after configure" in log


def test_torch_npu_build_environment_in_the_builder_image(image_build, docker_client, test_labels):
    """What Ascend/pytorch's ci/build.sh and setup.py read, checked in the builder image after the
    shipped recipe's own pre-build line: `python$PY_VERSION` (the version the recipe's post-build
    line computes), cmake >= 3.12 and make (setup.py's CMake + Makefile build), a C++ compiler, git,
    and CANN's environment from set_env.sh (ASCEND_TOOLKIT_HOME and ASCEND_HOME_PATH on the
    installed tree, its lib64 on LD_LIBRARY_PATH, its python/site-packages on PYTHONPATH). torch
    itself is not there: it would be the PyTorch wheel this recipe builds first."""
    assert image_build.proc.returncode == 0, image_build.explain()
    spec = recipe.load(image_build.proc.args[image_build.proc.args.index("--recipe") + 1])
    frag = next(f for f in render.render(spec).fragments if f.provider == "ascend-cann-installer")
    script = "\n".join([
        "set -eu",
        *frag.pre_build,  # the recipe's own line: set +u; . .../set_env.sh; set -u
        'py="$(python -c \'import sys;print(f"{sys.version_info[0]}.{sys.version_info[1]}")\')"',
        'echo "PY_VERSION=$py python=$(command -v "python$py")"',
        'echo "cmake=$(cmake --version | head -n1 | cut -d" " -f3) make=$(command -v make) cxx=$(command -v g++) git=$(command -v git)"',
        'echo "ASCEND_TOOLKIT_HOME=$ASCEND_TOOLKIT_HOME ASCEND_HOME_PATH=$ASCEND_HOME_PATH"',
        'test -d "$ASCEND_TOOLKIT_HOME/lib64" && test -d "$ASCEND_OPP_PATH" && test -d "$TOOLCHAIN_HOME"',
        'case ":$LD_LIBRARY_PATH:" in *":$ASCEND_TOOLKIT_HOME/lib64:"*) echo "lib64 on LD_LIBRARY_PATH";; esac',
        'case ":$PYTHONPATH:" in *":$ASCEND_TOOLKIT_HOME/python/site-packages:"*) echo "site-packages on PYTHONPATH";; esac',
        'sed -n "s/^version=/installed version=/p" "$ASCEND_TOOLKIT_HOME"/*-linux/ascend_toolkit_install.info',
    ])
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            builder_image(image_build), ["/bin/bash", "-c", script], network_mode="none", labels=test_labels
        ),
    )
    assert res.exit_code == 0, res.log[-3000:]
    out = res.log
    assert "PY_VERSION=3.11 python=/opt/venv/bin/python3.11" in out
    cmake = next(ln for ln in out.splitlines() if ln.startswith("cmake="))
    assert tuple(int(x) for x in cmake.split()[0].split("=")[1].split(".")[:2]) >= (3, 12)
    assert "make=/usr/bin/make" in cmake and "cxx=/usr/bin/g++" in cmake and "git=/usr/bin/git" in cmake
    home = "/usr/local/Ascend/ascend-toolkit/latest"
    assert f"ASCEND_TOOLKIT_HOME={home} ASCEND_HOME_PATH={home}" in out
    assert "lib64 on LD_LIBRARY_PATH" in out and "site-packages on PYTHONPATH" in out
    assert f"installed version={CANN}" in out


def test_a_tampered_installer_is_refused_by_its_checksum(session, tmp_path):
    """A copy of the installer with one line added after its header: the line runs as root when
    the installer does (shown below on this host), and the file keeps its name, its size class and a
    valid payload, so only the recipe's sha256 stands between it and the image. The build stops in
    fetch, before any Docker call, with one line naming the file and both digests."""
    cache = tmp_path / "cache"
    cache.mkdir()
    tampered = cache / session.installer.name
    marker = tmp_path / "tampered-code-ran"
    lines = session.installer.read_bytes().split(b"\n")
    # after the shebang and the comment block, before the installer's own code; the payload's line
    # number moves by one, so the tamperer adjusts it too (the installer verifies the payload)
    at = next(i for i, ln in enumerate(lines) if ln.startswith(b"CANN_VERSION="))
    lines.insert(at, f"touch {marker}".encode())
    payload_line = next(i for i, ln in enumerate(lines) if ln.startswith(b"PAYLOAD_LINE="))
    lines[payload_line] = b"PAYLOAD_LINE=%d" % (int(lines[payload_line].split(b"=")[1]) + 1)
    tampered.write_bytes(b"\n".join(lines))
    # dangerous: run as the image build would, it installs fine and runs the added line
    run = subprocess.run(["sh", str(tampered), "--install", "--quiet", f"--install-path={tmp_path / 'Ascend'}"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert marker.exists() and (tmp_path / "Ascend/ascend-toolkit/set_env.sh").is_file()
    got = hashlib.sha256(tampered.read_bytes()).hexdigest()
    assert got != session.sha256

    res = session.invoke("build", "--recipe", str(session.recipe), "--network", NETWORK, "--ca-cert", CA_BUNDLE,
                         "--download-cache", str(cache), "--until", "configure")
    assert res.proc.returncode != 0, res.explain()
    p = res.payload
    assert p.get("ok") is False
    assert p["error"] == f"build of {session.recipe.stem} failed in step fetch (exit 1)", p["error"]
    diag = p["diagnosis"]
    assert diag["id"] == "checksum-mismatch"
    # (the diagnosis shortens long evidence lines; the line itself names the file and both digests)
    assert diag["evidence"][0].startswith(f"buildctl: sha256 mismatch for {tampered.name}: expected {session.sha256}, "
                                          f"got {got} (pre-staged ")
    assert set(p["durations_s"]) <= {"fetch", "total"}, "nothing after fetch ran (no image build)"
