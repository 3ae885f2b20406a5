"""Guards on the way into a build, without an engine: reserved build.env names, Docker-valid recipe
names, the key lock's holder note and timeout, the engine-object namespace, the OOM retry rule.

Each hostile case was dangerous before its guard (say how in the test) and is refused after it with
one line naming the thing and the fix (exit 2 for bad input).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from invoke_here import invoke_here

from buildctl import engine, recipe, render
from buildctl.errors import InputError, RecipeError
from buildctl.pipeline import engine_names
from buildctl.pipeline.stages import compile as compile_stage
from buildctl.recipe.fields import RESERVED_BUILD_ENV
from buildctl.settings import Settings
from buildctl.store import artifacts

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "templates" / "build.sh.j2"
FRAGMENT = ROOT / "recipes" / "fragments" / "demofw.yaml"


def invoke(*args: str, cwd: Path, env: dict | None = None):
    return invoke_here("-r", str(ROOT), *args, cwd=cwd, env=env)


# ---------------------------------------------------------------------------------------------- build.env


def test_reserved_names_cover_every_variable_the_build_script_sets():
    """RESERVED_BUILD_ENV lists every variable templates/build.sh.j2 assigns itself (not the
    provider/contract ones it writes from data, which build.env may deliberately override)."""
    assigned = set()
    for line in TEMPLATE.read_text().splitlines():
        if not line.lstrip().startswith("#"):
            assigned |= set(re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]*)=", line))
    assert {"SRC", "OUT", "VENV", "VIRTUAL_ENV", "PATH", "MAX_JOBS", "CCACHE_DIR"} <= assigned
    # the compiler flags the script appends its prefix map to: a recipe's own value is kept
    appended = {"CFLAGS", "CXXFLAGS", "CUDAFLAGS", "HIPFLAGS", "CPPFLAGS"}
    assert assigned - set(RESERVED_BUILD_ENV) == appended
    # and buildctl's own settings it reads from the container's environment
    read = set(re.findall(r"\$\{?(BUILDCTL_[A-Z0-9_]+)", TEMPLATE.read_text()))
    assert read and read - set(RESERVED_BUILD_ENV) == set()


def test_build_env_out_would_empty_the_root(tmp_path):
    """Why OUT is reserved: rendered without the check, `OUT=/` is exported after the script's own
    `OUT="$WORK/out"` and before `rm -rf "${OUT:?}"/*`, which then expands to `rm -rf //*`."""
    spec = recipe.load("demo-cpu")
    unchecked = spec.model_copy(update={"build": spec.build.model_copy(update={"env": {"OUT": "/"}})})
    script = render.render(unchecked).files["build.sh"]
    lines = script.splitlines()
    own, override = lines.index('OUT="$WORK/out"'), lines.index("export OUT=/")
    wipe = lines.index('rm -rf "${OUT:?}"/*')
    assert own < override < wipe
    # what the shell makes of the line, with the script's own assignments (echo, never rm)
    prelude = "\n".join(ln for ln in lines[:wipe] if re.match(r"(export )?OUT=", ln))
    expanded = subprocess.run(["bash", "-c", prelude + '\necho rm -rf "${OUT:?}"/*'], capture_output=True,
                              text=True, cwd=tmp_path).stdout
    assert expanded.startswith("rm -rf //")


@pytest.mark.parametrize("name", RESERVED_BUILD_ENV)
def test_every_reserved_name_is_refused_in_one_line(name):
    with pytest.raises(RecipeError) as info:
        recipe.load("demo-cpu", [f"build.env.{name}=/"])
    msg = str(info.value)
    assert "\n" not in msg and f"{name} is reserved" in msg and f"fix: remove {name} from build.env" in msg


def test_unreserved_build_env_still_works():
    spec = recipe.load("demo-cpu", ["build.env.CFLAGS=-O1", "build.env.CUDAHOSTCXX=/usr/bin/g++-12"])
    assert "export CFLAGS=-O1" in render.render(spec).files["build.sh"]


def test_cli_refuses_build_env_out_with_exit_2_and_writes_nothing(tmp_path):
    proc = invoke("render", "--recipe", "demo-cpu", "--set", "build.env.OUT=/", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "OUT is reserved" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------- names


def _recipe_file(tmp_path: Path, file_name: str, name: str | None = None) -> Path:
    path = tmp_path / file_name
    path.write_text(f"extends: {FRAGMENT}\n" + (f"name: {name!r}\n" if name is not None else ""))
    return path


@pytest.mark.parametrize("bad", ["MyCuda+nccl", "Demo", "a..b", "a__b", "-a", "a-", ".a", "a+b", "a/b", "x" * 65])
def test_docker_invalid_recipe_names_are_refused_at_load(tmp_path, bad):
    """Before, `MyCuda+nccl` loaded, rendered and failed only at the image build: Docker said
    "repository name must be lowercase" (tag) and "invalid characters for a local volume name"."""
    with pytest.raises(RecipeError) as info:
        recipe.load(str(_recipe_file(tmp_path, "r.yaml", bad)))
    msg = str(info.value)
    assert "\n" not in msg and "name:" in msg and "not a name Docker accepts" in msg and "fix:" in msg


def test_a_file_name_docker_rejects_is_refused_with_a_suggestion(tmp_path):
    with pytest.raises(RecipeError, match=r"'MyCuda\+nccl' is not a name Docker accepts.*e\.g\. 'mycuda-nccl'"):
        recipe.load(str(_recipe_file(tmp_path, "MyCuda+nccl.yaml")))


def test_cli_refuses_a_docker_invalid_name_with_exit_2(tmp_path):
    path = _recipe_file(tmp_path, "MyCuda+nccl.yaml")
    proc = invoke("build", "--recipe", str(path), "--no-verify", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MyCuda+nccl.yaml"]  # nothing rendered or built


@pytest.mark.parametrize("good", ["a", "demo-cpu", "cuda12.1-nccl2.18-debug", "a.b_c-d", "x" * 64])
def test_docker_valid_names_load(tmp_path, good):
    assert recipe.load(str(_recipe_file(tmp_path, "r.yaml", good))).name == good


def test_every_shipped_recipe_has_a_valid_name():
    for path in recipe.list_recipes():
        recipe.load(str(path))


# ---------------------------------------------------------------------------------------------- key lock


class Clock:
    """artifacts' `time` for the lock's waits: sleep() moves monotonic() on at once."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def test_key_lock_says_who_holds_it_and_gives_up_after_the_timeout(tmp_path, monkeypatch):
    """Before, a second build of a key blocked in flock() with no word and no end. (The waits are on a
    clock of the test's: the poll's sleeps are counted, not slept.)"""
    clock = Clock()
    monkeypatch.setattr(artifacts, "time", clock)
    waited: list[str] = []
    with artifacts.key_lock("demo-cpu", "k" * 16, tmp_path):
        note = json.loads((tmp_path / "demo-cpu" / f".{'k' * 16}.lock").read_text())
        assert note["pid"] == os.getpid() and note["host"] and note["started"] and note["key"] == "k" * 16
        with pytest.raises(artifacts.LockTimeout) as info:
            with artifacts.key_lock("demo-cpu", "k" * 16, tmp_path, timeout=1, on_wait=waited.append):
                pytest.fail("got a lock that is held")
    msg = str(info.value)
    assert "\n" not in msg and f"pid {os.getpid()}" in msg and "since" in msg and "fix:" in msg
    assert len(waited) == 1 and f"pid {os.getpid()}" in waited[0]
    # it polled until the timeout was up, and no longer
    assert clock.now >= 1 and clock.sleeps == round(1 / artifacts.LOCK_POLL_S)
    # released: the next one gets it at once
    with artifacts.key_lock("demo-cpu", "k" * 16, tmp_path, timeout=0):
        pass


def test_key_lock_held_by_another_process_is_named(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from buildctl.store import artifacts\n"
         "with artifacts.key_lock('demo-cpu', 'k' * 16, Path(sys.argv[1])):\n"
         "    print('held', flush=True); sys.stdin.readline()\n", str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(artifacts.LockTimeout, match=rf"pid {child.pid} on host "):
            with artifacts.key_lock("demo-cpu", "k" * 16, tmp_path, timeout=0):  # named at the first try
                pass
    finally:
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=60)


# ---------------------------------------------------------------------------------------------- namespace


def test_namespace_default_root_keeps_todays_names(tmp_path, monkeypatch):
    monkeypatch.delenv("BUILDCTL_NAMESPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert artifacts.namespace(Path("artifacts")) == artifacts.namespace(tmp_path / "artifacts") == "default"
    spec = recipe.load("demo-cpu")
    assert engine_names.volume_names(spec, "0" * 16, "default")[0] == f"buildctl-work-demo-cpu-{'0' * 16}"
    assert engine_names.image_tag("demo-cpu", "0" * 16, "default") == f"buildctl/demo-cpu:{'0' * 16}"
    assert engine_names.image_tag("demo-cpu", "0" * 16, "default", "runtime") == f"buildctl/demo-cpu:runtime-{'0' * 16}"


def test_namespace_of_another_root_is_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("BUILDCTL_NAMESPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    a, b = artifacts.namespace(tmp_path / "ci" / "artifacts"), artifacts.namespace(tmp_path / "Team Builds")
    assert a != b and "default" not in (a, b)
    assert re.fullmatch(r"artifacts-[0-9a-f]{8}", a) and re.fullmatch(r"team-builds-[0-9a-f]{8}", b)
    assert artifacts.namespace(tmp_path / "ci" / "artifacts") == a  # stable
    spec = recipe.load("demo-cpu")
    work, cache = engine_names.volume_names(spec, "0" * 16, a)
    assert work == f"buildctl-work-{a}-demo-cpu-{'0' * 16}" and cache.startswith(f"buildctl-cache-{a}-ccache-")
    assert engine_names.image_tag("demo-cpu", "0" * 16, a) == f"buildctl/demo-cpu:{a}-{'0' * 16}"
    assert engine_names.compile_container_name("demo-cpu", "0" * 16, a) == f"buildctl-compile-{a}-demo-cpu-{'0' * 16}"


def test_explicit_namespace_wins_and_is_validated(tmp_path):
    assert artifacts.namespace(tmp_path, explicit="ci-nightly") == artifacts.namespace(explicit="ci-nightly") == "ci-nightly"
    for bad in ("CI", "a b", "-a", "a/b", "x" * 33):
        with pytest.raises(InputError, match="BUILDCTL_NAMESPACE") as info:
            artifacts.namespace(explicit=bad)
        assert "\n" not in str(info.value)


def test_tests_run_in_a_namespace_of_their_own():
    """conftest: the README's main job (default namespace) and the tests never share engine state; the CLI
    hands the session's BUILDCTL_NAMESPACE down (Settings.namespace), as the tests hand TEST_NAMESPACE."""
    ns = artifacts.namespace(explicit=Settings.from_env(os.environ).namespace)
    assert ns == TEST_NAMESPACE and ns.startswith("test-") and ns != artifacts.DEFAULT_NAMESPACE


# ---------------------------------------------------------------------------------------------- OOM retry


def _result(code: int, oom: bool = False, timed_out: bool = False) -> engine.ContainerResult:
    return engine.ContainerResult(code, oom, "", "cid", (), timed_out)


KILLED_LOG = "[12/40] Building CXX object x.o\n"
OOM_LOG = "g++: fatal error: Killed signal terminated program cc1plus\n"


@pytest.mark.parametrize("result, log, attempt, jobs, retry", [
    (_result(137), KILLED_LOG, 0, 8, False),  # docker kill: 137, no OOMKilled (old: retried)
    (_result(137, oom=True), KILLED_LOG, 0, 8, True),  # the engine says OOM
    (_result(1), OOM_LOG, 0, 8, True),  # the compiler says it was killed for memory
    (_result(137, oom=True), KILLED_LOG, 1, 4, False),  # only once
    (_result(137, oom=True), KILLED_LOG, 0, 1, False),  # nothing to halve
    (_result(137, timed_out=True), OOM_LOG, 0, 8, False),  # a timeout is never retried
])
def test_retry_with_fewer_jobs_only_for_memory(result, log, attempt, jobs, retry):
    assert compile_stage.retry_with_fewer_jobs(result, log, attempt, jobs) is retry
