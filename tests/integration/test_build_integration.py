"""`invoke build` end to end against the real Docker engine: the demo recipes built for real.

What a user checks after `invoke build`, asserted on real builds (never skipped: without an engine
these tests fail with buildctl's one-line error):

* each demo recipe (CPU, CUDA 13 from PyPI, and a test-only recipe that installs CUDA from a
  pre-staged stand-in runfile) builds ONCE per module through the real CLI
  (`invoke -r <repo> build ... --json`, cwd a temporary folder, BUILDCTL_ARTIFACTS a temporary
  artifacts root, the source a snapshot of examples/demofw taken when the module starts, so that
  edits during the run change no key), and the tests read what it left: exit 0, the JSON, the wheel
  and its sha256, manifest.json, build.log, the stored verification report;
* each wheel imports and computes in a FRESH container of the recipe's runtime image (no network);
* an unchanged second `invoke build` is a no-op: cached, and no container of its key is started
  (docker events: no mount of its build-dir volume, no container of its runtime image);
* a changed source file changes the key, rebuilds, and the compile cache hits (> 0) in the manifest;
* SIGTERM and Ctrl-C during the compile leave no container, no artifact and no staging folder;
  the same build then succeeds;
* two builds of one key at once serialise: both succeed, one builds, one finds the artifact;
* credentials in proxy URLs never reach an image layer, the image history, the manifest, the logs
  or the output (see test_proxy_credentials_never_persist for how the proxy is really used).

Engine hygiene (the engine is shared with other builds): the builds run in the session's own
namespace (conftest sets BUILDCTL_NAMESPACE), so they never find the user's build directories,
compile caches or image tags, and whatever they create there is removed when the session ends.
The module also removes, by the artifact key a build reported, what did not exist before it ran:
the build-dir volumes; the image tags of every key but the two demo recipes' own builds (kept until
the session ends); the compile-cache volume of the runfile recipe; and the untagged stage images
that only this session's inputs made (reusable stage images stay, as after any build: they are the
layer cache later builds reuse). Containers are never left behind by buildctl itself (asserted).

Budget: about 10-20 minutes on 2 cores with the base image present (the CUDA builds dominate).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import import_budget
import jinja2
import pytest
from conftest import TEST_NAMESPACE, default_sigint, remove_namespace_objects
from docker import errors as derr

from buildctl import engine, recipe, urls
from buildctl.pipeline import engine_names, resume, stages
from buildctl.pipeline.stages import prepare
from buildctl.verify import report as rep

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]  # the build cluster (.ci/services.sh)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEMOFW = ROOT / "examples" / "demofw"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
SITE_ARGS = ["--network", NETWORK, "--ca-cert", CA_BUNDLE]
BUILD_TIMEOUT = 45 * 60  # one cold build on a loaded 2-core host; a hang fails instead of blocking CI
SESSION = uuid.uuid4().hex[:8]
# The verification wheelhouse (nvidia-ml-py, cuobjdump) is cached here between sessions.
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"


def invoke_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("invoke")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]
    return [*base, "-r", str(ROOT)]


# ---------------------------------------------------------------------------------------------- runs


@dataclass
class BuildRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    started: float  # wall clock (time.time()), for docker events
    ended: float
    artifacts_root: Path
    payload: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    def explain(self) -> str:
        return (f"`invoke {' '.join(self.args)}` exit {self.returncode}\n--- stderr (tail)\n"
                f"{self.stderr[-6000:]}\n--- stdout (tail)\n{self.stdout[-3000:]}")

    def ok(self) -> BuildRun:
        assert self.returncode == 0, self.explain()
        assert self.payload.get("ok") is True, self.explain()
        return self

    @property
    def key(self) -> str:
        return self.payload["key"]

    @property
    def artifact(self) -> Path:
        return Path(self.payload["artifact"])

    @property
    def manifest(self) -> dict:
        return json.loads((self.artifact / "manifest.json").read_text())

    @property
    def wheel(self) -> Path:
        return self.artifact / self.manifest["wheels"][0]["file"]


class Workspace:
    """A temporary working directory (cwd of every build: build/<recipe>/ lands here) and its
    artifacts roots; records every (recipe, key) a build reported, for the clean-up."""

    def __init__(self, root: Path):
        self.root = root
        self.cwd = root / "cwd"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.tmp = root / "tmp"  # TMPDIR of the builds: their temporary folders must not outlive them
        self.tmp.mkdir(exist_ok=True)
        # Every build compiles a snapshot of examples/demofw taken now (`--set framework.source.path`,
        # the shipped recipe otherwise unchanged; the key is over content, so it is the key of the
        # same tree built in place): edits to the working tree during the run change nothing here.
        self.src = copy_source(root / "demofw", DEMOFW)
        self.built: set[tuple[str, str]] = set()
        self.canonical: set[tuple[str, str]] = set()  # builds of the shipped demo recipes: tags kept
        self.unique_recipes: set[str] = set()  # test-only recipe names: everything of theirs goes
        self.cache_volumes: set[str] = set()  # compile-cache volumes of test-only recipes
        # (image-build log, marker): untagged stage images whose history has the marker are ours
        self.stage_images: list[tuple[list[str], str]] = []
        self.started = time.time()

    def artifacts_root(self, name: str) -> Path:
        return self.root / f"artifacts-{name}"

    def env(self, artifacts_root: Path) -> dict[str, str]:
        env = dict(os.environ)
        for var in ("BUILDCTL_NO_VERIFY", "BUILDCTL_KEEP_CONTAINER", "BUILDCTL_JOBS", "BUILDCTL_MEMORY"):
            env.pop(var, None)
        env.update(BUILDCTL_ARTIFACTS=str(artifacts_root), BUILDCTL_CACHE=str(VERIFY_CACHE),
                   TMPDIR=str(self.tmp), PYTHONUNBUFFERED="1")
        return env

    def args(self, recipe_name: str, *extra: str, json_out: bool = True) -> list[str]:
        # a later --set of the same field (a test's own source copy) wins
        return ["build", "--recipe", recipe_name, *SITE_ARGS, "--set", f"framework.source.path={self.src}", *extra,
                *(["--json"] if json_out else [])]

    def build(self, recipe_name: str, *extra: str, artifacts: str = "main", timeout: float = BUILD_TIMEOUT,
              env: dict[str, str] | None = None) -> BuildRun:
        root = self.artifacts_root(artifacts)
        args = self.args(recipe_name, *extra)
        t0 = time.time()
        proc = subprocess.run([*invoke_cmd(), *args], cwd=self.cwd, env={**self.env(root), **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        run = BuildRun(args, proc.returncode, proc.stdout, proc.stderr, t0, time.time(), root)
        self.record(run)
        return run

    def spawn(self, recipe_name: str, *extra: str, artifacts: str, json_out: bool = True) -> subprocess.Popen:
        return subprocess.Popen([*invoke_cmd(), *self.args(recipe_name, *extra, json_out=json_out)], cwd=self.cwd,
                                env=self.env(self.artifacts_root(artifacts)), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE if json_out else subprocess.STDOUT, text=True,
                                start_new_session=True, preexec_fn=default_sigint)

    def record(self, run: BuildRun) -> None:
        with contextlib.suppress(ValueError):
            run.payload = json.loads(run.stdout) if run.stdout.strip() else {}
        if run.payload.get("key"):
            self.built.add((run.payload["recipe"], run.payload["key"]))




def copy_source(dest: Path, origin: Path) -> Path:
    """A copy of demofw's source without build outputs (what `framework.source.path` then points at)."""
    shutil.copytree(origin, dest, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    return dest


def change_source(src: Path, rel: str) -> str:
    """Append a function with a unique name: the preprocessed TU changes, so the compile cache misses it."""
    marker = f"dfw_itest_{uuid.uuid4().hex[:12]}"
    with (src / rel).open("a") as fh:
        fh.write(f"\nnamespace dfw {{ int {marker}() {{ return {len(marker)}; }} }}  // test-only change\n")
    return marker


# ---------------------------------------------------------------------------------------------- engine


def namespace() -> str:
    """The session's namespace (conftest sets BUILDCTL_NAMESPACE; the builds inherit it)."""
    return TEST_NAMESPACE


def work_volume(recipe_name: str, key: str) -> str:
    return engine_names.work_volume_name(recipe_name, key, namespace())


def tag(recipe_name: str, key: str, target: str = "builder") -> str:
    return engine_names.image_tag(recipe_name, key, namespace(), target)


def containers_on_volume(client: docker.DockerClient, volume: str) -> list:
    return client.containers.list(all=True, filters={"volume": volume})


def container_creates(client: docker.DockerClient, since: float, until: float) -> list[dict]:
    """Container create events labelled buildctl=1 in [since, until]."""
    events = client.events(since=since, until=until, decode=True,
                           filters={"type": "container", "event": "create", "label": "buildctl=1"})
    return list(events)


def containers_of_key(client, recipe_name: str, key: str, run: BuildRun) -> tuple[list, list]:
    """Engine events during `run` that belong to builds of `key`: mounts of its build-dir volume
    (compile containers) and creations of containers of its runtime image (verification)."""
    since, until = run.started, run.ended + 1
    # (the engine mounts a container's volumes for each copy in or out, too: count containers)
    mounts = sorted({e["Actor"]["Attributes"]["container"] for e in client.events(
        since=since, until=until, decode=True, filters={"type": "volume", "event": "mount"})
        if e["Actor"]["ID"] == work_volume(recipe_name, key)})
    creates = [e["Actor"]["ID"] for e in container_creates(client, since, until)
               if e["Actor"]["Attributes"].get("image") == tag(recipe_name, key, "runtime")]
    return mounts, creates


def run_in(client, image: str, script: str, labels: dict, *, inputs=None, network: str = "none") -> engine.ContainerResult:
    res = engine.run_container(
        client,
        engine.ContainerSpec(
            image, ["/bin/sh", "-c", script], inputs=inputs, network_mode=network, labels=labels
        ),
    )
    assert res.exit_code == 0, f"in {image}:\n{res.log[-4000:]}"
    return res


def result_json(log: str) -> dict:
    line = next(ln for ln in reversed(log.splitlines()) if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def ws(tmp_path_factory, docker_client, base_image) -> Iterator[Workspace]:
    """The module's workspace; removes what its builds created in the engine (by reported key)."""
    before_volumes = {v.name for v in docker_client.volumes.list()}
    before_tags = {t for img in docker_client.images.list() for t in img.tags}
    w = Workspace(tmp_path_factory.mktemp("build-integration"))
    yield w
    leftovers = [c.name for c in docker_client.containers.list(all=True, filters={"label": "buildctl=1"})
                 if any(c.labels.get("buildctl.recipe") == r for r, _ in w.built)
                 and any(m.get("Name") == work_volume(r, k) for m in c.attrs.get("Mounts", []) for r, k in w.built)]
    for recipe_name, key in sorted(w.built):
        _remove_volume(docker_client, work_volume(recipe_name, key), before_volumes)
        if (recipe_name, key) not in w.canonical:
            for ref in (tag(recipe_name, key), tag(recipe_name, key, "runtime")):
                _remove_tag(docker_client, ref, before_tags)
    for name in sorted(w.cache_volumes):
        _remove_volume(docker_client, name, before_volumes)
    for log, marker in w.stage_images:
        remove_stage_images(docker_client, log, marker, w.started)
    assert not leftovers, f"build containers left behind: {leftovers}"


def _remove_volume(client, name: str, before: set[str]) -> None:
    if name in before:
        return
    with contextlib.suppress(derr.NotFound, derr.APIError):
        client.api.remove_volume(name)


def _remove_tag(client, tag: str, before: set[str]) -> None:
    if tag in before:
        return
    with contextlib.suppress(derr.NotFound, derr.APIError):
        client.images.remove(tag)  # not forced: an image in use, or with other tags, stays


def note_cache_volume(w: Workspace, recipe_file: str, key: str) -> None:
    """Remember the compile-cache volume of a test-only recipe's build, for the clean-up (named by
    the pipeline itself; removed only when it did not exist before the module ran)."""
    spec = recipe.load(recipe_file)
    w.cache_volumes.add(engine_names.volume_names(spec, key, namespace())[1])


# ---------------------------------------------------------------------------------------------- builds


@pytest.fixture(scope="module")
def demo_cpu(ws) -> BuildRun:
    run = ws.build("demo-cpu")
    ws.canonical |= {("demo-cpu", run.payload["key"])} if run.payload.get("key") else set()
    return run


@pytest.fixture(scope="module")
def demo_cuda13(ws) -> BuildRun:
    run = ws.build("demo-cuda13")
    ws.canonical |= {("demo-cuda13", run.payload["key"])} if run.payload.get("key") else set()
    return run


RUNFILE_DIR = FIXTURES / "fake-cuda-runfile"
RUNFILE_CUDA = "13.0.2"  # the stand-in reports CUDA 13.0; the real compiler behind it is PyPI's 13.2


@dataclass
class Runfile:
    path: Path
    sha256: str
    cuda_version: str  # what the stand-in's nvcc reports: major.minor


@pytest.fixture(scope="module")
def stand_in_runfile(tmp_path_factory) -> Runfile:
    """The stand-in runfile (tests/fixtures/fake-cuda-runfile/make_runfile.sh) in a download-cache
    folder under its own name (cuda_<version>_<driver>_linux.run), with its sha256."""
    cache = tmp_path_factory.mktemp("download-cache")
    out = subprocess.run(["sh", str(RUNFILE_DIR / "make_runfile.sh"), RUNFILE_CUDA, str(cache)], check=True,
                         capture_output=True, text=True).stdout.strip()
    path = Path(out)
    assert path.parent == cache and path.name.startswith(f"cuda_{RUNFILE_CUDA}_") and path.name.endswith("_linux.run")
    # A line after its `exit 0` makes this session's copy unique, so the image's runfile stage
    # really runs (fetch + install) instead of coming from the layer cache of an earlier session.
    with path.open("a") as fh:
        fh.write(f"# buildctl test session {SESSION}\n")
    return Runfile(path, hashlib.sha256(path.read_bytes()).hexdigest(), RUNFILE_CUDA.rsplit(".", 1)[0])


@pytest.fixture(scope="module")
def runfile_build(ws, stand_in_runfile) -> BuildRun:
    """A test-only recipe (fixtures/recipes/demo-runfile.yaml.j2, rendered into the workspace):
    demofw with CUDA from the pre-staged stand-in runfile. Its URL is fake (.invalid), so the build
    can only pass without downloading. The stand-in's nvcc delegates compilation to the real CUDA 13
    nvcc from PyPI (FAKE_CUDA_REAL_NVCC), installed into the build venv with the same pins as
    demo-cuda13."""
    from buildctl.render import providers
    from buildctl.render.providers import cuda as cuda_provider

    name = f"itest-runfile-{SESSION}"
    ws.unique_recipes.add(name)
    real = recipe.load("demo-cuda13")
    template = jinja2.Template((FIXTURES / "recipes" / "demo-runfile.yaml.j2").read_text(),
                               undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    path = ws.root / "recipes" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(template.render(
        name=name, fragment=ROOT / "recipes" / "fragments" / "demofw.yaml", cuda_version=RUNFILE_CUDA,
        url=f"https://developer.download.invalid/compute/cuda/{RUNFILE_CUDA}/local_installers/{stand_in_runfile.path.name}",
        sha256=stand_in_runfile.sha256,
        real_nvcc_packages=[f"{p}=={real.toolchain.cuda.pip_release}" for p in cuda_provider.PIP_PACKAGES],
        real_nvcc=f"{providers.site_packages(real)}/nvidia/cu{real.toolchain.cuda.version.split('.')[0]}/bin/nvcc"))
    run = ws.build(str(path), "--download-cache", str(stand_in_runfile.path.parent))
    if run.payload.get("key"):
        # its toolchain (the runfile's sha256) is this session's own: so is its compile cache
        note_cache_volume(ws, str(path), run.payload["key"])
    # the image stage's log (beside the artifact, or in the failure's repro bundle)
    for log in run.artifacts_root.glob("**/build.log"):
        ws.stage_images.append((log.read_text().splitlines(), stand_in_runfile.sha256))
    return run


@pytest.fixture(scope="module")
def demo_skbuild_cpu(ws) -> BuildRun:
    """The demo turned scikit-build-core (PyTorch 2.14+'s frontend): built by the real backend from PyPI."""
    run = ws.build("demo-skbuild-cpu")
    ws.canonical |= {("demo-skbuild-cpu", run.payload["key"])} if run.payload.get("key") else set()
    return run


@pytest.fixture(scope="module")
def demo_skbuild_cuda13(ws) -> BuildRun:
    run = ws.build("demo-skbuild-cuda13")
    ws.canonical |= {("demo-skbuild-cuda13", run.payload["key"])} if run.payload.get("key") else set()
    return run


BUILDS = {"demo-cpu": "demo_cpu", "demo-cuda13": "demo_cuda13", "runfile": "runfile_build",
          "demo-skbuild-cpu": "demo_skbuild_cpu", "demo-skbuild-cuda13": "demo_skbuild_cuda13"}


# demo-cpu's build is part of the engine matrix (docs/engines.md): build, publish and verify on every engine
@pytest.fixture(params=[pytest.param(b, marks=pytest.mark.engines) if b == "demo-cpu" else b for b in BUILDS])
def build(request) -> BuildRun:
    return request.getfixturevalue(BUILDS[request.param])


# ---------------------------------------------------------------------------------------------- what a user checks


EXPECT = {
    # build fixture -> (recipe name prefix, cuda_arch, toolchain pins read from the image, arch list, nccl)
    "demo-cpu": dict(cuda_arch=[], toolchain={}, arch_list=[], nccl=None, version="0.1.0+cpu"),
    "demo-cuda13": dict(cuda_arch=["8.0", "9.0"], toolchain={"cuda": "13.2", "nccl": "2.28.9"},
                        arch_list=["sm_80", "sm_90"], nccl=[2, 28, 9], version="0.1.0+cu132"),
    "runfile": dict(cuda_arch=["8.0", "9.0"], toolchain={"cuda": RUNFILE_CUDA.rsplit(".", 1)[0]},
                    arch_list=["sm_80", "sm_90"], nccl=None, version="0.1.0"),
    "demo-skbuild-cpu": dict(cuda_arch=[], toolchain={}, arch_list=[], nccl=None, version="0.1.0+cpu.skbuild"),
    "demo-skbuild-cuda13": dict(cuda_arch=["8.0", "9.0"], toolchain={"cuda": "13.2", "nccl": "2.30.7"},
                                arch_list=["sm_80", "sm_90"], nccl=[2, 30, 7], version="0.1.0+cu132.skbuild"),
}
FRONTENDS = {"demo-skbuild-cpu": "scikit-build-core", "demo-skbuild-cuda13": "scikit-build-core"}


def test_the_frontend_comes_from_the_tree_and_the_manifest_says_which(build: BuildRun, request):
    """demofw's setup.py tree is built by setuptools, the same tree turned scikit-build-core (PyTorch
    2.14's switch) by the real scikit-build-core: the wheel's WHEEL file says which packed it, and the
    manifest records both (issue 17)."""
    build.ok()
    name = request.node.callspec.params["build"]
    expected = FRONTENDS.get(name, "setuptools")
    frontend = build.manifest["frontend"]
    assert frontend["name"] == expected, frontend
    with zipfile.ZipFile(build.artifact / build.manifest["wheels"][0]["file"]) as z:
        wheel_file = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
    generator = re.search(r"^Generator: (.+)$", wheel_file, re.M).group(1)
    assert generator == frontend["generator"] and generator.startswith(expected), generator
    if expected == "scikit-build-core":
        assert frontend["version"] == "1.1.2" and generator == "scikit-build-core 1.1.2"
        log = (build.artifact / "build.log").read_text()
        assert "buildctl: frontend scikit-build-core" in log and "ninja: no work to do." in log  # the wheel step
        assert "setup.py" not in log


def test_the_configure_gate_held_and_the_manifest_records_what_cmake_decided(build: BuildRun, request):
    """issue 34: every demo build passed the configure gate, and its manifest records the facts fact by fact
    (what the recipe asks, what CMake decided, where CMake recorded it)."""
    build.ok()
    section = build.manifest["configure"]
    assert section["ok"] is True and section["mismatches"] == 0 and section["judged"] >= 5, section
    rows = {r["fact"]: r for r in section["rows"]}
    for fact in ("Python", "NumPy", "build type", "compiler launcher"):
        assert rows[fact]["status"] == "ok", rows[fact]
    exp = EXPECT[request.node.callspec.params["build"]]
    assert (rows["USE_CUDA"]["asked"], rows["USE_CUDA"]["decided"]) == (("ON", "ON") if exp["cuda_arch"] else
                                                                        ("OFF", "OFF"))
    if exp["cuda_arch"]:
        assert rows["CUDA version"]["status"] == rows["CUDA archs"]["status"] == "ok", rows
        assert rows["CUDA archs"]["decided"] == "8.0 9.0" and rows["CUDA version"]["decided"] == exp["toolchain"]["cuda"]
    if exp["nccl"]:
        assert rows["NCCL version"]["decided"] == exp["toolchain"]["nccl"] and rows["NCCL library"]["status"] == "ok"
    assert "buildctl: configure gate: " in (build.artifact / "build.log").read_text()


def test_until_configure_on_scikit_build_core_prints_the_cmake_summary(ws, demo_skbuild_cpu):
    """`--until configure` on the scikit-build-core tree: its sdist hook configures into build/ and the
    summary is shown, as on setup.py's --cmake-only."""
    demo_skbuild_cpu.ok()
    run = ws.build("demo-skbuild-cpu", "--set", "build.type=Debug", "--until", "configure", artifacts="skb-until")
    assert run.returncode == 0 and run.payload["until"] == "configure", run.explain()
    assert run.payload["configure"]["CMAKE_BUILD_TYPE"] == "Debug", run.payload["configure"]
    assert run.payload["ninja"]["steps"] == 0
    gate = {r["fact"]: r for r in run.payload["gate"]["rows"]}  # the gate judged the Debug configure too
    assert run.payload["gate"]["ok"] is True and gate["build type"]["decided"] == "Debug", gate
    ws.built.add(("demo-skbuild-cpu", run.payload["key"]))


def test_until_image_builds_the_toolchain_image_with_a_source_still_to_pin(ws, demo_cpu, docker_client):
    """`--until image` with the framework source's digest a placeholder (as pytorch2.15-cuda13.2 ships it):
    the builder image is built (here: found in the layer cache) and named; nothing is fetched or compiled."""
    demo_cpu.ok()
    run = ws.build("demo-cpu", "--set", "framework.source=null", "--set",
                   "framework.source.tarball.url=http://127.0.0.1:9/demofw.tar.gz", "--set",
                   f'framework.source.tarball.sha256="{"0" * 64}"', "--until", "image", artifacts="until-image")
    assert run.returncode == 0 and run.payload["until"] == "image", run.explain()
    assert run.payload["image"] == tag("demo-cpu", run.payload["key"]), run.payload
    assert docker_client.images.get(run.payload["image"]).labels["buildctl.recipe"] == "demo-cpu"
    assert containers_on_volume(docker_client, work_volume("demo-cpu", run.payload["key"])) == []
    ws.built.add(("demo-cpu", run.payload["key"]))
    full = ws.build("demo-cpu", "--set", "framework.source=null", "--set",
                    "framework.source.tarball.url=http://127.0.0.1:9/demofw.tar.gz", "--set",
                    f'framework.source.tarball.sha256="{"0" * 64}"', artifacts="until-image")
    assert full.returncode == 2 and "placeholder sha256 for demofw.tar.gz" in full.stderr, full.explain()


def test_build_exits_0_with_json_and_a_wheel_matching_the_manifest(build: BuildRun, request):
    build.ok()
    version = EXPECT[request.node.callspec.params["build"]]["version"]
    p = build.payload
    assert p["cached"] is False and p["manifest"]["key"] == p["key"]
    assert build.artifact == build.artifacts_root / p["recipe"] / p["key"]
    assert re.fullmatch(r"[0-9a-f]{16}", p["key"])
    m = build.manifest
    assert m == p["manifest"]
    assert len(m["wheels"]) == 1
    w = m["wheels"][0]
    # the stack's local label in the name; the platform the repair chose (docs/portable-wheels.md)
    assert re.fullmatch(rf"demofw-{re.escape(version)}-cp311-cp311-manylinux_2_\d+_x86_64\.whl", w["file"]), w["file"]
    assert build.wheel.is_file() and build.wheel.stat().st_size == w["bytes"]
    assert hashlib.sha256(build.wheel.read_bytes()).hexdigest() == w["sha256"]
    assert sorted(p.name for p in build.artifacts_root.rglob(".tmp-*")) == []


def test_manifest_records_what_was_built(request, ws, build: BuildRun, docker_client):
    build.ok()
    exp = EXPECT[request.node.callspec.params["build"]]
    m = build.manifest
    name = m["recipe"]
    assert name == build.payload["recipe"]
    # the spec hash is over the resolved recipe without site settings: loading it again gives it
    spec_path = build.args[build.args.index("--recipe") + 1]
    sets = [build.args[i + 1] for i, a in enumerate(build.args) if a == "--set"]
    assert m["spec_sha256"] == recipe.spec_hash(recipe.load(spec_path, sets))
    assert m["build_type"] == "Release"
    assert m["cuda_arch"] == exp["cuda_arch"]
    assert m["framework"] == "demofw"
    assert m["source"]["kind"] == "path" and Path(m["source"]["path"]) == ws.src
    assert "commit" in m["source"] and "ref" in m["source"]
    tc = m["toolchain"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", tc["gcc"]) and re.fullmatch(r"\d+\.\d+(\.\d+)?", tc["cmake"])
    assert tc["python"].startswith("3.11.")
    for k, v in exp["toolchain"].items():
        assert tc[k] == v, (k, tc)
    for k in {"cuda", "nccl"} - set(exp["toolchain"]):
        assert k not in tc, tc
    durations = m["durations_s"]
    for stage in ("fetch", "image", "configure", "compile", "wheel"):
        assert isinstance(durations[stage], (int, float)) and durations[stage] >= 0, durations
    assert durations["compile"] > 0
    cc = m["compile_cache"]
    assert cc["tool"] == "ccache" and cc["hits"] + cc["misses"] > 0
    assert cc["hit_rate"] == round(cc["hits"] / (cc["hits"] + cc["misses"]), 3)
    version, info = docker_client.version(), docker_client.info()
    assert m["engine"]["server_version"] == version["Version"]
    assert m["engine"]["api_version"] == version["ApiVersion"]
    assert m["engine"]["cpus"] == info["NCPU"] and m["engine"]["memory_bytes"] == info["MemTotal"]
    assert m["engine"]["storage_driver"] == info["Driver"]
    assert m["host"]["cpus"] == os.cpu_count() and m["host"]["platform"]
    assert m["images"]["builder"] == docker_client.images.get(tag(name, m["key"])).id
    assert m["namespace"] == namespace()
    assert isinstance(m["max_jobs"], int) and m["max_jobs"] >= 1
    assert m["resolved_recipe"]["name"] == name
    assert (build.artifact / "recipe.resolved.yaml").read_text().startswith("name: " + name)
    # what apt installed in the builder image (issue 41: recorded, never pinned), as dpkg says it
    assert re.fullmatch(r"\d[\w.+~:-]*", m["apt"]["libc6"]) and "build-essential" in m["apt"], sorted(m["apt"])[:20]


def test_toolchain_in_manifest_is_what_the_builder_image_reports(request, build: BuildRun, docker_client, test_labels):
    """The manifest's versions were read in the image: run the same tools in its builder image again."""
    build.ok()
    m = build.manifest
    res = run_in(docker_client, m["images"]["builder"],
                 'echo "gcc=$(gcc -dumpfullversion)"; echo "cmake=$(cmake --version | head -n1 | cut -d" " -f3)"; '
                 'if command -v nvcc >/dev/null; then nvcc --version | sed -n "s/.*release \\([0-9.]*\\),.*/cuda=\\1/p"; fi',
                 test_labels)
    seen = dict(ln.split("=", 1) for ln in res.log.splitlines() if "=" in ln)
    assert {k: m["toolchain"].get(k) for k in seen} == seen


def test_build_log_is_stored_complete(build: BuildRun):
    build.ok()
    log = (build.artifact / "build.log").read_text()
    assert "buildctl: MAX_JOBS=" in log  # fetch stage
    assert "Successfully built" in log or "Successfully tagged" in log  # image stage
    assert "-- Build files have been written" in log  # configure
    assert re.search(r"^\[\d+/\d+\] ", log, re.M)  # ninja's compile lines
    assert "buildctl: wheel ready" in log  # the end of the build script


def test_verification_report_is_stored_beside_the_artifact(build: BuildRun):
    build.ok()
    report = rep.load_report(build.artifact / "report.json")
    assert report.ok and build.payload["verification"]["ok"] is True
    assert report.wheel["sha256"] == build.manifest["wheels"][0]["sha256"]
    assert report.mode == "container"
    # verified in the staging folder, then published: the report names the published wheel (issue 34)
    assert report.wheel["path"] == str(build.wheel) and report.files["json"] == str(build.artifact / "report.json")
    # the demo has no torch.compile: its report says so, in one line, instead of an empty matrix
    assert "_torch.compile matrix: skipped (demofw is not torch)_" in (build.artifact / "report.md").read_text()


def test_wheel_works_in_a_fresh_container(request, build: BuildRun, docker_client, test_labels):
    """Install the published wheel into a fresh container of the recipe's runtime image (no network)
    and use it: import, add, and for CUDA builds the compiled arch list and the NCCL it loads."""
    build.ok()
    build_id = request.node.callspec.params["build"]
    exp = EXPECT[build_id]
    runtime = tag(build.payload["recipe"], build.key, "runtime")
    probe = (
        "import json, demofw, demofw.cuda as c\n"
        "out = {'version': demofw.__version__, 'add': demofw.add(2, 3), 'add_list': demofw.add([1, 2], [3, 4]),\n"
        "       'file': demofw.__file__, 'cuda_built': c.is_built(), 'arch_list': c.get_arch_list()}\n"
        "if c.nccl.is_available():\n"
        "    out['nccl'] = list(c.nccl.version())\n"
        "print('RESULT ' + json.dumps(out))\n"
    )
    script = ("set -e; python -m pip install -q --no-index --no-deps --no-compile /in/" + build.wheel.name +
              "; cd /tmp; python -c \"$PROBE\"")
    res = engine.run_container(
        docker_client,
        engine.ContainerSpec(
            runtime,
            ["/bin/sh", "-c", script],
            env={"PROBE": probe},
            inputs={f"/in/{build.wheel.name}": build.wheel},
            network_mode="none",
            labels=test_labels,
        ),
    )
    assert res.exit_code == 0, res.log[-4000:]
    got = result_json(res.log)
    assert got["version"] == exp["version"] and got["add"] == 5 and got["add_list"] == [4, 6]
    assert "/site-packages/demofw/" in got["file"]
    assert got["cuda_built"] is bool(exp["arch_list"])
    assert got["arch_list"] == exp["arch_list"]
    assert got.get("nccl") == exp["nccl"]


def test_demo_cpu_wheel_is_repaired_to_the_manylinux_tag_its_floor_allows(demo_cpu):
    """The repair (issue 19): a manylinux tag no lower than the glibc floor the manifest records, the
    floors read from the wheel's ELF files, and the wheel imports in a bare bookworm image (the base
    image and its Python only) in the stored report's `portable` check."""
    demo_cpu.ok()
    section = demo_cpu.manifest["portability"]
    assert section["repaired"] is True and section["reason"] is None, section
    assert section["wheel"] == demo_cpu.wheel.name and section["tool"] == "auditwheel 6.8.2"
    policy = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", section["tag"])
    assert policy and demo_cpu.wheel.name.endswith(f"-{section['tag']}.whl"), section
    floor = tuple(int(p) for p in section["glibc"].split("."))
    assert (int(policy.group(1)), int(policy.group(2))) >= floor[:2] and floor <= (2, 36)  # bookworm's glibc
    assert re.fullmatch(r"3\.4\.\d+", section["glibcxx"]), section  # demofw is C++
    report = rep.load_report(demo_cpu.artifact / "report.json")
    portable = next(c for c in report.checks if c.name == "portable")
    assert portable.ok is True and "buildctl/verify-runtime:py3.11-" in portable.expected, portable
    assert f"tag {section['tag']}" in portable.detail


def test_demo_cuda13_wheel_vendors_nothing_of_cuda_or_the_driver(demo_cuda13):
    """The CUDA demo's wheel leaves NCCL to nvidia-nccl-cu13 (excluded, with the reason) and carries no
    libcuda, libcudart or libnccl; it imports in the bare image beside the nvidia-* wheels it runs with."""
    demo_cuda13.ok()
    with zipfile.ZipFile(demo_cuda13.wheel) as z:
        names = z.namelist()
    assert not [n for n in names if re.search(r"/lib(cuda|cudart|nccl|nvidia-)[^/]*\.so", n)], names
    section = demo_cuda13.manifest["portability"]
    assert section["repaired"] is True and section["tag"].startswith("manylinux_2_"), section
    nccl = next(e for e in section["excluded"] if e["soname"] == "libnccl.so.2")
    assert nccl["pattern"] == "libnccl.so*" and "nvidia-*" in nccl["reason"], section
    assert not [v for v in section["vendored"] if re.match(r"lib(cuda|cudart|nccl|nvidia-)", v["soname"])]
    report = rep.load_report(demo_cuda13.artifact / "report.json")
    assert next(c for c in report.checks if c.name == "portable").ok is True


def test_a_library_left_out_of_the_wheel_fails_the_bare_image_check_by_name(ws):
    """A demo linked against a library the bare image lacks (libgomp: in the builder image with the
    compiler, not in a base image with only Python), kept out of the wheel by build.wheel.exclude and
    installed in the recipe's runtime image: the wheel works in its runtime image, verification fails on
    the `portable` check alone, naming the library and its package, and the artifact is not published
    (issue 34): nothing in the store says "built"; the wheel, its manifest and the report are kept in the
    failure's folder to look at."""
    run = ws.build("demo-cpu", "--set", "build.env.LDFLAGS=-Wl,--no-as-needed -lgomp",
                   "--set", 'build.wheel.exclude=["libgomp.so*"]', "--set", "packages.runtime=[libgomp1]",
                   artifacts="gomp")
    assert run.returncode == 1 and run.payload.get("ok") is False, run.explain()
    assert run.payload["published"] is False, run.explain()
    assert not list(run.artifacts_root.glob("demo-cpu/*/manifest.json"))  # the store holds nothing of it
    assert run.artifact.parent == run.artifacts_root / "failures", run.artifact  # kept, outside the store
    section = run.manifest["portability"]
    gomp = next(e for e in section["excluded"] if e["soname"] == "libgomp.so.1")
    assert gomp["reason"] == "listed in build.wheel.exclude" and gomp["package"].startswith("libgomp1 "), section
    report = rep.load_report(run.artifact / "report.json")
    portable = next(c for c in report.checks if c.name == "portable")
    assert portable.ok is False and portable.actual == "missing libgomp.so.1", portable
    assert portable.detail.startswith("libgomp.so.1 missing (Debian package libgomp1 "), portable
    assert "left out of the wheel: listed in build.wheel.exclude" in portable.detail
    assert [c.name for c in report.checks if c.ok is False] == ["portable"], report.checks
    assert "checks failed: libgomp.so.1 missing (Debian package libgomp1 " in run.payload["error"]  # the line read first


def test_a_feature_cmake_drops_stops_the_build_after_configure(ws, demo_cuda13):
    """The configure gate (issue 34): demo-cuda13 with an nvcc that is not there configures as PyTorch
    does ("nvcc not found. Not compiling with CUDA", USE_CUDA OFF) and carried on to compile and publish a
    CPU wheel; now the build stops after configure, exit 1, with one line for USE_CUDA: what the recipe
    asked, what CMake decided, the configure log's line that says why, and the fix. Nothing is compiled or
    published; the repro bundle replays the configure. Cost: the builder image comes from demo-cuda13's
    layers (only the build script's layer is new) and the configure takes seconds."""
    demo_cuda13.ok()  # its image layers are the cache this build reuses
    run = ws.build("demo-cuda13", "--set", "build.env.CMAKE_CUDA_COMPILER=/nonexistent/nvcc", artifacts="gate")
    print(f"configure gate refusal: {run.seconds:.1f} s from `invoke build` to exit")
    assert run.returncode == 1 and run.payload.get("ok") is False, run.explain()
    assert run.payload["error"] == "build of demo-cuda13 failed in step configure (exit 1)", run.explain()
    lines = [ln.strip() for ln in run.stderr.splitlines()]
    use_cuda = [ln for ln in lines if ln.startswith("USE_CUDA: asked ON")]
    assert len(use_cuda) == 1, run.explain()
    assert "CMake decided OFF" in use_cuda[0] and "nvcc not found" in use_cuda[0], use_cuda
    assert "Not compiling with CUDA" in use_cuda[0] and "fix:" in use_cuda[0], use_cuda
    assert "/nonexistent/nvcc" in use_cuda[0].partition("fix:")[2], use_cuda  # the fix names the override
    assert run.payload["diagnosis"]["id"] == "configure-gate", run.payload["diagnosis"]
    durations = run.payload["durations_s"]
    assert "configure" in durations and "compile" not in durations and "publish" not in durations, durations
    assert not list(run.artifacts_root.glob("demo-cuda13/*/manifest.json"))  # nothing published
    bundle = Path(run.payload["bundle"])
    data = json.loads((bundle / "bundle.json").read_text())
    assert data["step"] == "configure" and data["env"].get("BUILDCTL_UNTIL") == "configure", data
    table = json.loads((bundle / "configure-gate.json").read_text())  # the gate's whole table beside it
    assert table["mismatches"] == 1 and {r["fact"]: r["status"] for r in table["rows"]}["CUDA version"] == \
        "off with USE_CUDA", table
    log = (bundle / "build.log").read_text()
    assert "buildctl: step configure" in log and "buildctl: step compile" not in log  # nothing compiled


@pytest.mark.engines
def test_second_identical_build_is_a_no_op_and_starts_no_container(ws, demo_cpu, docker_client):
    demo_cpu.ok()
    again = ws.build("demo-cpu").ok()
    p = again.payload
    assert p["cached"] is True and p["key"] == demo_cpu.key and p["artifact"] == demo_cpu.payload["artifact"]
    assert p["manifest"] == demo_cpu.manifest
    assert p["verification"]["ok"] is True  # the stored report, not a new run
    assert set(p["durations_s"]) <= {"fetch", "total"}, p["durations_s"]
    # No container of this build started: no compile (it would mount the key's build-dir volume) and
    # no verification (it would run the key's runtime image). Other builds may share the engine, so
    # only what belongs to this key counts.
    assert containers_of_key(docker_client, "demo-cpu", demo_cpu.key, again) == ([], [])


@pytest.mark.engines
def test_a_release_no_op_after_a_debug_build_verifies_and_publishes_the_release_wheel(ws, demo_cpu, tmp_path):
    """Issue 41: `invoke verify --recipe R` and `invoke publish --recipe R` took the recipe's newest artifact: after
    a Debug build, the Release request's no-op verified and published the Debug wheel. They take the artifact of
    the key the request names."""
    release = demo_cpu.ok()
    debug = ws.build("demo-cpu", "--set", "build.type=Debug", "--no-verify").ok()
    assert debug.payload["key"] != release.payload["key"]
    again = ws.build("demo-cpu").ok()
    assert again.payload["cached"] and again.payload["key"] == release.payload["key"]
    request = ["--recipe", "demo-cpu", "--set", f"framework.source.path={ws.src}"]
    env = ws.env(ws.artifacts_root("main"))
    verified = subprocess.run([*invoke_cmd(), "verify", *request, "--network", NETWORK, "--json"], cwd=ws.cwd, env=env,
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert verified.returncode == 0, verified.stderr[-3000:]
    assert Path(json.loads(verified.stdout)["wheel"]["path"]).parent.name == release.payload["key"], verified.stdout[-2000:]
    published = subprocess.run([*invoke_cmd(), "publish", *request, "--to", str(tmp_path / "index"), "--json"],
                               cwd=ws.cwd, env=env, capture_output=True, text=True, timeout=600)
    assert published.returncode == 0, published.stderr[-3000:]
    rows = json.loads(published.stdout)["wheels"]
    assert rows and {Path(r["artifact"]).name for r in rows} == {release.payload["key"]}, rows


def test_a_no_op_build_loads_only_what_it_runs(ws, demo_cpu):
    """The no-op itself, as `invoke build --no-verify` runs it (issue 23): it asks the engine for the base
    image over its socket, without docker-py, and loads none of the stages it skips, verification or the
    failure path (tests/import_budget.py; the unit test checks the same list on the path's modules)."""
    demo_cpu.ok()
    env = {**ws.env(ws.artifacts_root("main")), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run([*invoke_cmd(), *ws.args("demo-cpu", "--no-verify")], cwd=ws.cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and json.loads(proc.stdout)["key"] == demo_cpu.key, proc.stderr[-4000:]
    assert json.loads(proc.stdout)["cached"] is True
    assert import_budget.heavy_among(import_budget.imported(proc.stderr)) == []


MEMO_SKIPS = ("buildctl.recipe.schema", "buildctl.render", "buildctl.store.manifest", "jinja2")


@pytest.mark.engines
def test_a_repeated_no_op_is_answered_from_the_memo_until_a_recipe_file_changes(ws, demo_cpu, tmp_path):
    """The no-op memo (issue 23): the second identical no-op prints what the first printed (times aside)
    without loading the recipe schema, the renderer or the manifest model; a recipe file edited since (here a
    comment: same key) is a miss, answered by the full path, which finds the same artifact."""
    demo_cpu.ok()
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    env = {**ws.env(ws.artifacts_root("main")), "PYTHONPROFILEIMPORTTIME": "1"}

    def no_op(*extra: str, json_out: bool = True) -> tuple[str, set[str]]:
        args = ws.args(str(recipes / "demo-cpu.yaml"), "--no-verify", *extra, json_out=json_out)
        proc = subprocess.run([*invoke_cmd(), *args], cwd=ws.cwd, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]
        imported = import_budget.imported(proc.stderr)
        return proc.stdout, {m for m in imported if m.startswith(MEMO_SKIPS)}

    def same(text: str) -> str:
        return re.sub(r"\d+\.\d+s|\"(fetch|total)\": [\d.]+", "T", text)

    full, full_loaded = no_op()
    memo, memo_loaded = no_op()
    assert full_loaded and not memo_loaded, memo_loaded
    a, b = json.loads(full), json.loads(memo)
    assert a["cached"] is b["cached"] is True and a["key"] == b["key"] == demo_cpu.key
    assert {**a, "durations_s": None} == {**b, "durations_s": None}
    plain_full, _ = no_op(json_out=False)
    plain_memo, plain_loaded = no_op(json_out=False)
    assert not plain_loaded and same(plain_memo) == same(plain_full) and "up to date" in plain_memo
    with (recipes / "fragments" / "demofw.yaml").open("a") as fh:
        fh.write("# edited after the memo was written\n")
    again, again_loaded = no_op()
    assert again_loaded and json.loads(again)["key"] == demo_cpu.key and json.loads(again)["cached"] is True


@pytest.mark.engines
def test_a_memory_limit_goes_to_an_engine_that_enforces_it_and_is_refused_by_one_that_would_ignore_it(
        ws, demo_cpu, docker_client):
    """`--memory` on an engine that cannot limit memory (rootless Podman on cgroup v1 ignores the limit:
    the compile would run unlimited and an OOM kill go unreported) is refused in one line, exit 2, before
    anything is built; an engine that limits memory takes it (here up to the configure step)."""
    demo_cpu.ok()
    kind = engine.kind_of(docker_client)
    run = ws.build("demo-cpu", "--memory", "2g", "--until", "configure", artifacts="memory")
    if kind.memory_limits:
        assert run.returncode == 0 and run.payload["until"] == "configure", run.explain()
        return
    assert run.returncode == 2 and run.stdout.strip() == "", run.explain()
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        f"error: --memory 2g: this {kind.name} engine cannot limit a container's memory ({kind.why_no_memory_limits}), "
        "the limit would be ignored; fix: build without --memory (BUILDCTL_MEMORY), or use an engine that limits "
        "memory (rootful, or cgroup v2 with delegation)"] == run.stderr.strip().splitlines()[-1:], run.explain()
    assert not run.artifacts_root.exists() or not any(run.artifacts_root.rglob("manifest.json"))
    assert containers_of_key(docker_client, "demo-cpu", demo_cpu.key, run) == ([], [])  # nothing ran


def test_a_deleted_or_corrupted_wheel_is_never_up_to_date(ws, demo_cpu):
    """Issue 31: a wheel deleted from a published artifact, or corrupted in place (same size, bytes flipped),
    was answered "up to date" by the next build, twice (the full path and the no-op memo). A copy of the demo
    artifact in a store of its own (same key, same build directory: the rebuild resumes it): `--dry-run` names
    the wheel, the build says why and builds it again, and the wheel it publishes is the one its manifest
    records."""
    demo_cpu.ok()
    root = ws.artifacts_root("vouch")
    copy = root / "demo-cpu" / demo_cpu.key
    shutil.copytree(demo_cpu.artifact, copy)
    for _ in range(2):  # the full path, then the memo it wrote
        assert ws.build("demo-cpu", "--no-verify", artifacts="vouch").ok().payload["cached"] is True
    wheel = copy / demo_cpu.wheel.name
    for damage in ("corrupted", "deleted"):
        if damage == "deleted":
            wheel.unlink()
        else:
            with wheel.open("r+b") as fh:
                fh.seek(wheel.stat().st_size // 2)
                fh.write(b"\xde\xad")
        dry = subprocess.run([*invoke_cmd(), *ws.args("demo-cpu", "--dry-run")], cwd=ws.cwd, env=ws.env(root),
                             capture_output=True, text=True, timeout=120)
        looked = json.loads(dry.stdout)
        assert dry.returncode == 0 and looked["up_to_date"] is False and looked["key"] == demo_cpu.key, dry.stderr
        assert [c["kind"] for c in looked["changed"]] == ["artifact"] and wheel.name in looked["changed"][0]["change"]
        run = ws.build("demo-cpu", "--no-verify", artifacts="vouch").ok()
        assert run.payload["cached"] is False and run.key == demo_cpu.key, damage
        assert f"{wheel.name} is {'missing' if damage == 'deleted' else 'not the wheel its manifest records'}" \
            in (run.artifact / "build.log").read_text(), run.explain()
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == run.manifest["wheels"][0]["sha256"]


def test_changed_source_file_rebuilds_with_compile_cache_hits(ws, demo_cpu, tmp_path, docker_client):
    demo_cpu.ok()
    src = copy_source(tmp_path / "demofw", ws.src)
    change_source(src, "csrc/ops/add.cpp")
    run = ws.build("demo-cpu", "--set", f"framework.source.path={src}").ok()
    assert run.payload["cached"] is False and run.key != demo_cpu.key
    m = run.manifest
    assert m["source"]["path"] == str(src)
    # The new key has a new (empty) build directory: every file compiles again, through the
    # compile cache the first build filled; only the changed file misses.
    cc = m["compile_cache"]
    assert cc["hit_rate"] > 0 and cc["hits"] > 0 and cc["misses"] >= 1, cc
    assert run.payload["verification"]["ok"] is True
    # (and the no-op test's detector sees a real build: two compile containers, the configure the gate
    # reads and the compile that resumes it, and one verification)
    mounts, creates = containers_of_key(docker_client, "demo-cpu", run.key, run)
    assert len(mounts) == 2 and len(creates) == 1, (mounts, creates)


def test_key_covers_what_changes_the_output_and_nothing_else(ws, tmp_path, base_image):
    """Keys as `invoke build` computes them (fetch stage only: no image, no container)."""
    def key(sets=(), site=None) -> str:
        spec = recipe.load("demo-cpu", [f"framework.source.path={ws.src}", *sets], site=site)
        opts = stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build", artifacts_root=tmp_path / "artifacts")
        run = stages.Run.of(spec, opts, client=engine.connect(environ=os.environ))
        prepared = prepare.prepare(run, prepare.render_files(run))
        shutil.rmtree(prepared.context_dir)
        return prepared.key

    plain = key()
    assert key() == plain  # stable
    # site settings do not change the output
    assert key(site={"network": "host", "http_proxy": "http://proxy.invalid:3128/", "ca_certs": [CA_BUNDLE]}) == plain
    # recipe changes do
    changed = {key(["build.type=Debug"]), key(["build.features.USE_HEAVY_UNIT=false"]),
               key(["python.packages=[numpy, cmake, ninja, six]"])}
    assert plain not in changed and len(changed) == 3
    # and so does the source (content, not location)
    src = copy_source(tmp_path / "src", ws.src)
    assert key([f"framework.source.path={src}"]) == plain
    change_source(src, "csrc/ops/sub.cpp")
    assert key([f"framework.source.path={src}"]) != plain


# ---------------------------------------------------------------------------------------------- interruption


class Lines:
    """Lines of a subprocess's output, read in a thread; `wait_for` polls with a deadline."""

    def __init__(self, stream):
        self.q: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def wait_for(self, pattern: str, deadline: float) -> re.Match:
        rx = re.compile(pattern)
        for line in self.seen:
            if m := rx.search(line):
                return m
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            self.seen.append(line)
            if m := rx.search(line):
                return m
        raise AssertionError(f"no line matching {pattern!r}; output so far:\n" + "\n".join(self.seen[-60:]))

    def rest(self, timeout: float = 30) -> str:
        self.thread.join(timeout)
        while True:
            try:
                line = self.q.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        return "\n".join(self.seen)


def poll(condition, deadline: float, what: str, interval: float = 0.2):
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


@pytest.mark.parametrize(("how", "recipe_name"), [("SIGTERM", "demo-cpu"), ("Ctrl-C", "demo-cpu"),
                                                  ("SIGTERM", "demo-skbuild-cpu")])
def test_interrupted_build_leaves_no_container_and_no_artifact(ws, demo_cpu, docker_client, tmp_path, how,
                                                               recipe_name, request):
    """Stop a build while it compiles (a changed source, so it really compiles): SIGTERM to the
    process (a CI runner, `timeout`), or SIGINT to its process group (Ctrl-C in a terminal); then the
    same command resumes it. Also on the scikit-build-core tree (its patch applied again over the
    volume's tree: the files it creates are there from the first run)."""
    (demo_cpu if recipe_name == "demo-cpu" else request.getfixturevalue("demo_skbuild_cpu")).ok()
    src = copy_source(tmp_path / "demofw", ws.src)
    change_source(src, "csrc/heavy/heavy_unit.cpp")  # the slowest unit, compiled first: a long window
    name = f"interrupt-{how.lower()}-{recipe_name}"
    root = ws.artifacts_root(name)
    proc = ws.spawn(recipe_name, "--set", f"framework.source.path={src}", "--no-verify", artifacts=name, json_out=False)
    lines = Lines(proc.stdout)
    try:
        deadline = time.monotonic() + BUILD_TIMEOUT
        tagged = re.escape(tag(recipe_name, "KEY")).replace("KEY", "([0-9a-f]{16})")
        key = lines.wait_for(rf"Successfully tagged {tagged}\b", deadline).group(1)
        ws.built.add((recipe_name, key))
        lines.wait_for(r"^==> compile: running", deadline)  # CMake is done, ninja runs
        volume = work_volume(recipe_name, key)
        running = poll(lambda: [c for c in containers_on_volume(docker_client, volume) if c.status == "running"],
                       time.monotonic() + 60, "the compile container")
        assert len(running) == 1
        container = running[0]
        assert container.labels.get("buildctl") == "1" and container.labels.get("buildctl.recipe") == recipe_name
        if how == "SIGTERM":
            os.kill(proc.pid, signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = lines.rest()
    assert rc != 0, out[-3000:]
    assert rc == 130 and "interrupted" in out, out[-3000:]
    assert "==> wheel" not in out  # it was stopped in the compile, not after it
    with pytest.raises(derr.NotFound):
        docker_client.containers.get(container.id)
    assert containers_on_volume(docker_client, volume) == []
    assert [c.name for c in engine.list_buildctl_containers(docker_client, {"buildctl.recipe": recipe_name})
            if c.id == container.id] == []
    assert not (root / recipe_name / key).exists()
    assert sorted(p.name for p in root.rglob(".tmp-*")) == []
    assert sorted(p.name for p in ws.tmp.glob("buildctl-out-*")) == []
    assert sorted(p.name for p in (ws.cwd / "build").glob(".tmp-*")) == []  # the build's private render
    # What the stop cost: the compilers in flight (docker top just before the container went away).
    record_file = root / recipe_name / f".{key}.interrupted.json"
    record = json.loads(record_file.read_text())
    assert f"interrupted at {record['at_step'] or 'an unknown step'}" in out
    assert all(p["command"] in resume.COMPILERS for p in record["in_flight"]), record
    assert record["lost_core_s"] == sum(p["elapsed_s"] for p in record["in_flight"])
    # and the next build of the same key succeeds (resuming the build directory)
    again = ws.build(recipe_name, "--set", f"framework.source.path={src}", "--no-verify", artifacts=name).ok()
    assert again.key == key and again.payload["cached"] is False
    assert (root / recipe_name / key / "manifest.json").is_file()
    assert sorted(p.name for p in root.rglob(".tmp-*")) == []
    # The manifest says where it resumed; the record moved into it.
    resumed = again.manifest["resumed"]
    assert resumed["interrupted"] == record and not record_file.exists()
    if "steps_built_before" in resumed:  # only when a step had finished before the stop
        assert 0 < resumed["steps_built_before"] < resumed["steps_total"]


# ---------------------------------------------------------------------------------------------- concurrency


def test_two_builds_of_one_key_at_once_serialise(ws, demo_cpu, docker_client):
    """Two `invoke build` of the same key into one (empty) artifacts root at the same time: one
    builds and publishes, the other waits on the key's lock and then finds the artifact."""
    demo_cpu.ok()
    t0 = time.time()
    procs = [ws.spawn("demo-cpu", "--no-verify", artifacts="concurrent") for _ in range(2)]
    outs = [p.communicate(timeout=BUILD_TIMEOUT) for p in procs]
    t1 = time.time()
    runs = []
    for p, (stdout, stderr) in zip(procs, outs, strict=True):
        run = BuildRun(["build", "demo-cpu"], p.returncode, stdout, stderr, t0, t1, ws.artifacts_root("concurrent"))
        ws.record(run)
        runs.append(run.ok())
    assert {r.key for r in runs} == {demo_cpu.key}
    assert sorted(r.payload["cached"] for r in runs) == [False, True]
    root = ws.artifacts_root("concurrent") / "demo-cpu"
    assert sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock")) == [demo_cpu.key]
    m = runs[0].manifest
    assert runs[1].manifest == m
    assert hashlib.sha256(runs[0].wheel.read_bytes()).hexdigest() == m["wheels"][0]["sha256"]
    mounts, _ = containers_of_key(docker_client, "demo-cpu", demo_cpu.key, runs[0])
    assert len(mounts) == 2, mounts  # one configure and one compile: the second build did not compile again


# ---------------------------------------------------------------------------------------------- secrets


class CredentialProxy:
    """A tiny HTTP proxy on 127.0.0.1 that requires Basic proxy credentials: CONNECT tunnels (https)
    and absolute-URI requests (http) from clients that present them; 407 for the rest."""

    def __init__(self, user: str, password: str):
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.authorized: list[str] = []
        self.rejected: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.sock.close()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, _, body = head.partition(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, _ = request_line.split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
            if headers.get("proxy-authorization") != self.expected:
                self.rejected.append(f"{method} {target}")
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                             b"Proxy-Authenticate: Basic realm=\"itest\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self.authorized.append(f"{method} {target}")
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=60)
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if body:
                    upstream.sendall(body)
            else:
                from urllib.parse import urlsplit

                u = urlsplit(target)
                upstream = socket.create_connection((u.hostname, u.port or 80), timeout=60)
                path = (u.path or "/") + (f"?{u.query}" if u.query else "")
                kept = [h for h in header_lines if h.split(":", 1)[0].strip().lower()
                        not in ("proxy-authorization", "proxy-connection", "connection")]
                upstream.sendall("\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""])
                                 .encode("latin-1") + body)
            self._pipe(conn, upstream)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        with b:
            socks = [a, b]
            while True:
                readable, _, _ = select.select(socks, [], [], 120)
                if not readable:
                    return
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)


def _scan_image_export(client, image: str, needle: bytes) -> int:
    """Bytes of `docker save IMAGE` scanned for `needle` (every layer, config and history); fails on a hit."""
    seen, tail = 0, b""
    for chunk in client.api.get_image(image, chunk_size=1 << 21):
        data = tail + chunk
        assert needle not in data, f"{needle!r} found in the exported image {image} near byte {seen}"
        tail = data[-len(needle):]
        seen += len(chunk)
    return seen


def test_proxy_credentials_never_persist(ws, demo_cpu, docker_client):
    """Credentials in the proxy URLs reach neither an image layer, the image history, the manifest,
    the logs nor the command output, in a build that really used them.

    How the proxy is really used: a local proxy (CredentialProxy, on 127.0.0.1; the build uses
    --network host) accepts only requests that carry the token. `invoke build --http-proxy URL
    --https-proxy URL` (URL = http://itest:<token>@127.0.0.1:<port>/) of demo-cpu with one extra,
    session-unique build requirement: its venv layer is new, so `pip install` in the image build must
    go through the proxy with the token (asserted: the proxy saw authorised CONNECTs). The whole
    pipeline runs (image, compile with the proxy in the container's environment, publish, verify
    with the runtime image built through the proxy). Then the token is searched in: the command's
    output, every file of the artifacts root (manifest, build.log, report, resolved recipe) and of
    the rendered build folder, the history and config of the builder and runtime images and of the
    intermediate images of the build, and every byte of the exported builder and runtime images
    (`docker save`: all layers).
    """
    demo_cpu.ok()  # its layers and compile cache make this build quicker, not different
    token = f"s3cr3tT0k{uuid.uuid4().hex}"
    marker = f"six>=0.0.{time.time_ns()}"  # a new venv layer: pip must run, through the proxy
    proxy = CredentialProxy("itest", token)
    url = f"http://itest:{token}@127.0.0.1:{proxy.port}/"
    try:
        run = ws.build("demo-cpu", "--set", f"python.packages=[numpy, cmake, ninja, '{marker}']",
                       "--http-proxy", url, "--https-proxy", url, artifacts="secrets")
    finally:
        proxy.close()
    logs = [p.read_text() for p in run.artifacts_root.glob("**/build.log")]
    for text in logs:
        ws.stage_images.append((text.splitlines(), marker))
    run.ok()
    assert any(r.startswith("CONNECT ") for r in proxy.authorized), \
        f"pip did not go through the proxy; authorised {proxy.authorized}, rejected {proxy.rejected}"
    assert token not in run.stdout and token not in run.stderr
    site = run.manifest["resolved_recipe"]["site"]
    assert site["http_proxy"] == site["https_proxy"] == f"http://***@127.0.0.1:{proxy.port}/"
    searched = [p for p in [*run.artifacts_root.rglob("*"), *(ws.cwd / "build" / "demo-cpu").rglob("*")] if p.is_file()]
    assert {"manifest.json", "build.log", "report.json", "recipe.resolved.yaml"} <= {p.name for p in searched}
    assert [str(p) for p in searched if token.encode() in p.read_bytes()] == []
    log = "\n".join(logs)
    assert re.search(r"^Successfully installed .*\bsix-", log, re.M)  # the venv step ran, not cached
    images = [run.manifest["images"]["builder"], tag("demo-cpu", run.key, "runtime")]
    for img in [*images, *(i.id for i in stage_images(docker_client, log.splitlines()))]:
        assert token not in json.dumps(docker_client.api.history(img)), img
        assert token not in json.dumps(docker_client.api.inspect_image(img)), img
    for img in images:
        assert _scan_image_export(docker_client, img, token.encode()) > 0


# a step's image in the build log: Docker's classic builder " ---> 0123456789ab", Podman's "--> 0123456789a"
_STEP_ID = re.compile(r"^ ?--?-> ([0-9a-f]{11,12})$")


def stage_images(client, log: list[str]) -> list:
    """The images of the steps of a classic image build, from its log (" ---> <id>" lines)."""
    found = []
    for line in log:
        m = _STEP_ID.match(line)
        if m:
            with contextlib.suppress(derr.NotFound):
                found.append(client.images.get(m.group(1)))
    return found


def remove_stage_images(client, log: list[str], marker: str, since: float) -> None:
    """Remove the untagged images of a build's other stages (a multi-stage classic build leaves
    them behind) that were created since `since` and whose history names `marker`: the layers that
    only this session's inputs made. Removing a leaf removes its untagged parents."""
    from datetime import datetime

    for img in reversed(stage_images(client, log)):
        created = img.attrs.get("Created", "")
        with contextlib.suppress(derr.NotFound, derr.APIError, ValueError):
            if img.tags or datetime.fromisoformat(created[:26].rstrip("Z") + "+00:00").timestamp() < since - 1:
                continue
            if marker in json.dumps(client.api.history(img.id)):
                client.images.remove(img.id)


# ---------------------------------------------------------------------------------------------- runfile path


def test_runfile_path_uses_the_pre_staged_stand_in_and_never_downloads(runfile_build, stand_in_runfile, docker_client,
                                                                       test_labels):
    run = runfile_build.ok()
    name = stand_in_runfile.path.name
    log = (run.artifact / "build.log").read_text()
    assert f"buildctl: using pre-staged {name} (sha256 verified)" in log  # host: download cache checked
    assert re.search(rf"^buildctl: using pre-staged {re.escape(name)}$", log, re.M)  # in the image build
    assert "buildctl: downloading" not in log
    # the image build's own check ran the installed toolkit's nvcc
    assert f"Cuda compilation tools, release {stand_in_runfile.cuda_version}," in log
    m = run.manifest
    assert m["toolchain"]["cuda"] == stand_in_runfile.cuda_version
    assert m["pins"]["cuda"] == RUNFILE_CUDA
    # the builder image has the stand-in's toolkit where the runfile was told to put it, and the
    # CUDA code was compiled for real (the stand-in's nvcc hands compiling to PyPI's CUDA 13 nvcc)
    res = run_in(docker_client, m["images"]["builder"],
                 "set -e; cat /usr/local/cuda/version.json; readlink -f /usr/local/cuda; "
                 "/usr/local/cuda/bin/nvcc --version | tail -n 2", test_labels)
    assert f'"version" : "{RUNFILE_CUDA}"' in res.log and '"name" : "buildctl fake CUDA runfile"' in res.log
    assert f"/usr/local/cuda-{stand_in_runfile.cuda_version}" in res.log
    report = rep.load_report(run.artifact / "report.json")
    assert report.probe["framework"]["arch_list"] == ["sm_80", "sm_90"]


# ---------------------------------------------------------------------------------------------- a build cluster
# demo-cuda13 over .ci/services.sh's sccache-dist cluster (a scheduler, two servers, all on this machine),
# against the module's local build of the same key (demo_cuda13).

DIST_WARNING = "buildctl: warning: distributed compile"


@pytest.fixture(scope="module")
def dist_namespace(docker_client) -> Iterator[str]:
    """A namespace of the cluster's builds: an empty compile cache, so that every unit compiles."""
    name = f"{TEST_NAMESPACE}-dist"
    yield name
    remove_namespace_objects(docker_client, name)


@pytest.fixture(scope="module")
def cluster_build(ws, services, demo_cuda13, dist_namespace) -> BuildRun:
    """demo-cuda13 cold, every compile on the cluster (--dist-local-jobs 0), the scheduler's token in
    BUILDCTL_DIST_SCHEDULER."""
    return ws.build("demo-cuda13", "--no-verify", "--dist-local-jobs", "0", artifacts="dist",
                    env={"BUILDCTL_NAMESPACE": dist_namespace, "BUILDCTL_DIST_SCHEDULER": services.dist_scheduler})


def _token(services) -> str:
    return urls.dist_token(services.dist_scheduler)


def test_the_cluster_compiles_the_cu_and_cpp_units_into_the_local_builds_wheel(cluster_build, demo_cuda13, services):
    run = cluster_build.ok()
    m, local = run.manifest, demo_cuda13.ok().manifest
    d = m["dist"]
    assert d["state"] == "used" and d["servers"] == 2 and d["local_jobs"] == 0, d
    # every unit ccache did not find went to the cluster, and every compile sccache ran there ran remotely
    assert d["units"].get("cluster", 0) >= m["compile_cache"]["misses"] > 0 and "local" not in d["units"], d
    assert d["fell_back"] == 0 and "left" not in d and not d.get("retried_locally"), d
    kinds = d["by_kind"]  # nvcc's device compiles (cicc, ptxas) and the host compiles (gcc), .cu and .cpp alike
    assert kinds.get("ptx [cicc]", 0) >= 2 and kinds.get("cubin [ptxas]", 0) >= 2 and kinds.get("c++ [gcc]", 0) > 20, kinds
    # (what sccache could not send, e.g. CMake's compiler checks, it compiled here: counted by kind, not remote)
    assert sum(kinds.values()) - 5 <= d["remote"] <= sum(kinds.values()) and d["remote"] == sum(d["by_server"].values()), d
    log = (run.artifact / "build.log").read_text()
    assert f"buildctl: distributed compile: {d['remote']} compiles ran on the cluster" in log
    assert DIST_WARNING not in log
    # the same key, the same wheel, byte for byte
    assert run.key == demo_cuda13.key and m["wheels"][0]["sha256"] == local["wheels"][0]["sha256"]
    token = _token(services)
    assert token not in run.stdout + run.stderr
    for f in run.artifacts_root.rglob("*"):
        if f.is_file():
            assert token.encode() not in f.read_bytes(), f


def test_with_the_scheduler_stopped_the_demo_builds_locally_with_one_warning(ws, demo_cuda13, services):
    """Nothing answers at the scheduler's address: one warning, and the build goes on here (the module's
    build directory of the key: resumed). Its token is shown nowhere."""
    with socket.socket() as s:  # bound, never listening: a connect is refused, as with a stopped scheduler
        s.bind(("127.0.0.1", 0))
        stopped = services.dist_scheduler.rsplit(":", 1)[0] + f":{s.getsockname()[1]}"
        run = ws.build("demo-cuda13", "--no-verify", "--dist-scheduler", stopped, artifacts="dist-stopped").ok()
    output = run.stdout + run.stderr
    log = (run.artifact / "build.log").read_text()
    assert log.count(DIST_WARNING) == 1 and "did not answer (Connection refused); compiling locally" in log, log[-3000:]
    assert run.manifest["dist"]["state"] == "unreachable" and run.key == demo_cuda13.key
    assert run.manifest["wheels"][0]["sha256"] == demo_cuda13.manifest["wheels"][0]["sha256"]
    assert _token(services) not in output


def test_a_server_killed_mid_compile_leaves_the_rest_to_this_machine_with_one_warning(ws, cluster_build, dist_namespace,
                                                                                     tmp_path, private_cluster):
    """A private scheduler with one server, killed as the compile starts: what was on it compiles here, the
    build leaves the cluster with one warning line and finishes. (Two units changed against the cluster
    build: its compile cache has the rest, so only they compile.)"""
    cluster = private_cluster
    src = copy_source(tmp_path / "demofw", DEMOFW)
    change_source(src, "csrc/cuda/kernels.cu")
    change_source(src, "csrc/ops/add.cpp")
    args = [*ws.args("demo-cuda13", "--no-verify", "--dist-local-jobs", "0", "--set", f"framework.source.path={src}",
                     json_out=False)]
    env = {**ws.env(ws.artifacts_root("dist-killed")), "BUILDCTL_NAMESPACE": dist_namespace,
           "BUILDCTL_DIST_SCHEDULER": cluster.url}
    build = subprocess.Popen([*invoke_cmd(), *args], cwd=ws.cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    lines, killed = [], False
    for line in build.stdout:
        lines.append(line)
        if not killed and re.search(r"Building (CUDA|CXX) object", line):  # ninja started compiling
            cluster.servers[0].kill()
            cluster.servers[0].wait()
            killed = True
    output = "".join(lines)
    assert build.wait(timeout=BUILD_TIMEOUT) == 0, output[-6000:]
    assert killed, output[-3000:]
    assert output.count(DIST_WARNING) == 1, output[-4000:]
    manifest = json.loads(next(ws.artifacts_root("dist-killed").glob("demo-cuda13/*/manifest.json")).read_text())
    d = manifest["dist"]
    assert d["state"] == "used" and d.get("left") and (d.get("fell_back") or d["units"].get("again")), d
    assert manifest["wheels"][0]["sha256"] and urls.dist_token(cluster.url) not in output
