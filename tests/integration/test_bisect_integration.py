"""`invoke bisect` for real: every step an `invoke build` on the engine, the search, the skips, the log.

The history is made here: the bundled demo (examples/demofw) as commit 0 of a git repository in a
temporary folder, then 16 commits. Commit 11 brings a compile error (an undefined name in
csrc/ops/sub.cpp) that stays; commits 9 and 12 each break the configure (a FATAL_ERROR in
CMakeLists.txt, taken back by the next commit): a failure of another step than the compile error's, so
those steps are skipped, not counted bad. The other commits touch README.md or a comment. The
repository is served by `git http-backend` on loopback (git_http.py) behind a --git-mirror of an
upstream URL that does not resolve, so the recipe's source URL (and so the artifact keys) is the same
whatever port the server got; the build containers reach it with --network host.

| test | what | builds | seconds: quiet machine / loaded (load 8) |
|---|---|---|---|
| commits | `--until compile` between commit 0 and 16: commit 11, two skipped (9, 12) | 7 | 114 / 684 (the first, cold: 86 / 548) |
| replay | the same command again: every step from the log, nothing built | 0 | 0.8 / 1.4 |
| set axis | `--axis set:framework.source.ref` over commits 6..13 (shas): steps the commit bisect built are reused, the ends built | 2 | 13 / 47 |
| patches | a recipe with 5 patches on the demo, the 3rd breaks the compile: Ctrl-C during the 2nd build, then the same command: patch 3 | 4 (+1 stopped) | - / 139 |
| test | `--test` (a Python check in the runtime image) between commits 4 and 7 (commit 6 changes the package), the engine given twice: two steps at a time | 4 + 4 tests | 62 / 143 |
| bad input | ends swapped, a ref the history lacks, a --good end that fails (its build reused): exit 2 | 0 | 4 / 4 |

The module: about 5 minutes on a quiet 2-core machine, 17 on one loaded with other builds (1,027 s). A
fresh test session starts with an empty compile cache (its own namespace): the first build of the
module is the cold one; the demo builds of later modules with the same flags then start warm.

The tests share one artifacts root (module scope) and run in this order: the later ones reuse what the
first built (its log and the compile cache), as a user's second bisect would.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE, default_sigint
from git_http import GitServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEMOFW = ROOT / "examples" / "demofw"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SITE = ["--network", os.environ.get("BUILDCTL_NETWORK") or "host",
        *(["--ca-cert", str(CA_BUNDLE)] if CA_BUNDLE.is_file() else [])]
UPSTREAM = "https://git.bisect-demo.invalid/"
BISECT_TIMEOUT = 3600
FIRST_BAD, CONFIGURE_BROKEN = 11, (9, 12)
# The demo's one memory-hungry unit is left out: the bisect is about the steps, not the compiler.
LIGHT = ["--set", "build.features.USE_HEAVY_UNIT=false"]


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bisect", "GIT_AUTHOR_EMAIL": "bisect@example.invalid",
           "GIT_COMMITTER_NAME": "bisect", "GIT_COMMITTER_EMAIL": "bisect@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


BREAK_CONFIGURE = 'message(FATAL_ERROR "demo: configure broken on purpose")\n'
BREAK_COMPILE = "int dfw_broken_on_purpose() { return this_name_is_not_declared; }\n"


def make_history(work: Path) -> list[str]:
    """The demo's history: commit 0 as shipped, then 16 commits; the shas, oldest first."""
    repo = work / "demofw"
    shutil.copytree(DEMOFW, repo, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "demofw as shipped")
    cmake, sub = repo / "CMakeLists.txt", repo / "csrc" / "ops" / "sub.cpp"
    for n in range(1, 17):
        if n == 6:  # a change of the Python package (test_bisect_with_a_test_command looks for it)
            (repo / "demofw" / "bisect_mark.py").write_text("CHANGED_IN = 6\n")
            subject = "demofw: add bisect_mark"
        elif n in CONFIGURE_BROKEN:
            _edit(cmake, "project(demofw LANGUAGES C CXX)\n", "project(demofw LANGUAGES C CXX)\n" + BREAK_CONFIGURE)
            subject = "cmake: break the configure"
        elif n - 1 in CONFIGURE_BROKEN:
            _edit(cmake, BREAK_CONFIGURE, "")
            subject = "cmake: take the configure break back"
        elif n == FIRST_BAD:
            sub.write_text(sub.read_text() + BREAK_COMPILE)
            subject = "ops: a compile error"
        elif n % 3 == 0:
            with (repo / "csrc" / "ops" / "add.cpp").open("a") as f:  # one unit compiles again
                f.write(f"// rev {n}\n")
            subject = f"ops: comment {n}"
        else:
            with (repo / "README.md").open("a") as f:
                f.write(f"\nnote {n}\n")
            subject = f"readme: note {n}"
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", subject)
    shas = _git(repo, "rev-list", "--reverse", "main").split()
    assert len(shas) == 17
    served = work / "served"
    served.mkdir()
    _git(work, "clone", "-q", "--bare", str(repo), str(served / "demofw.git"))
    return shas


class Workspace:
    def __init__(self, cwd: Path, server: GitServer, shas: list[str], docker_client) -> None:
        self.cwd, self.server, self.shas, self.docker_client = cwd, server, shas, docker_client

    @property
    def artifacts(self) -> Path:
        return self.cwd / "artifacts"

    def source(self, ref: str = "main") -> list[str]:
        return ["--set", f"framework.source={{git: '{UPSTREAM}demofw.git', ref: {ref}}}",
                "--git-mirror", f"{UPSTREAM}={self.server.url}"]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("BUILDCTL_JOBS", "BUILDCTL_MEMORY", "BUILDCTL_BASE_IMAGE", "BUILDCTL_KEEP_CONTAINER",
                            "BUILDCTL_ENGINES", "BUILDCTL_GIT_MIRROR")}
        env.update(BUILDCTL_ARTIFACTS=str(self.artifacts), BUILDCTL_CACHE=str(ROOT / ".cache" / "buildctl-test"))
        return env

    def invoke(self, *args: str, timeout: float = BISECT_TIMEOUT) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args], cwd=self.cwd,
                              env=self._env(), capture_output=True, text=True, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args], cwd=self.cwd,
                                env=self._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_sigint)

    def bisect(self, *args: str, expect_rc: int = 0) -> tuple[dict | None, subprocess.CompletedProcess, float]:
        t0 = time.monotonic()
        proc = self.invoke("bisect", "--recipe", "demo-cpu", *LIGHT, *SITE, *args)
        took = time.monotonic() - t0
        assert proc.returncode == expect_rc, _show(proc)
        data = json.loads(proc.stdout) if expect_rc == 0 and "--json" in args else None
        return data, proc, took


def _show(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-8000:]}"


@pytest.fixture(scope="module")
def ws(tmp_path_factory, base_image, docker_client):
    work = tmp_path_factory.mktemp("bisect")
    shas = make_history(work)
    with GitServer(work / "served") as server:
        yield Workspace(work, server, shas, docker_client)


def _by_label(data: dict) -> dict[str, dict]:
    return {s["label"]: s for s in data["steps"]}


def test_bisect_over_commits_finds_the_compile_error_and_skips_the_configure_breaks(ws):
    md = ws.cwd / "summary.md"
    data, proc, took = ws.bisect(*ws.source(), "--good", ws.shas[0], "--bad", "main", "--until", "compile",
                                 "--json", "--markdown", str(md))
    first = ws.shas[FIRST_BAD]
    assert data["exact"] and data["first"]["label"] == first[:12], data
    assert data["first"]["subject"] == "ops: a compile error"
    steps = _by_label(data)
    skipped = {ws.shas[n][:12] for n in CONFIGURE_BROKEN}
    assert data["skipped"]["count"] == 2 and {s["label"] for s in data["skipped"]["steps"]} == skipped, data["skipped"]
    for label in skipped:
        assert steps[label]["result"] == "skip" and "fails in configure" in steps[label]["why"], steps[label]
        assert "not as the failing end (compile" in steps[label]["why"]
    assert steps[ws.shas[0][:12]]["result"] == "good" and steps[ws.shas[16][:12]]["result"] == "bad"
    assert steps[ws.shas[10][:12]]["result"] == "good" and steps[first[:12]]["result"] == "bad"
    assert data["built"] == len(data["steps"]) == 7, [s["label"] for s in data["steps"]]  # 2 ends + 5
    fs = data["failing_step"]
    assert fs["failure"]["step"] == "compile" and fs["repro"].startswith("invoke repro ")
    assert any("this_name_is_not_declared" in line for line in fs["first_error"]), fs["first_error"]
    assert Path(fs["bundle"]).is_dir() and (Path(fs["bundle"]) / "bundle.json").is_file()
    assert fs["build"].startswith("invoke build --recipe demo-cpu") and first in fs["build"]
    assert any(isinstance(s["cache"], dict) and s["cache"]["hits"] > 0 for s in data["steps"]), data["steps"]
    log = Path(data["log"])
    assert log.parent == ws.artifacts / ".bisect" and json.loads(log.read_text())["state"] == "finished"
    text = md.read_text()
    assert text.startswith(f"### invoke bisect: first bad commit: {first[:12]} ops: a compile error")
    assert "| 9 |" in text and "fails in configure" in text
    print(f"\ncommits bisect: {took:.0f} s, steps {[(s['label'][:7], s['result'], s['seconds']) for s in data['steps']]}")

    # A second run replays from the log: nothing built, the same answer, in seconds.
    again, proc, took = ws.bisect(*ws.source(), "--good", ws.shas[0], "--bad", "main", "--until", "compile")
    assert took < 60, took
    assert "first bad commit: " + first[:12] in proc.stdout and "not built again" in proc.stderr, _show(proc)
    assert "building (key" not in proc.stderr
    print(f"replay: {took:.1f} s")


def test_bisect_over_a_set_axis_reuses_the_steps_built_before(ws):
    values = ",".join(ws.shas[6:14])
    data, proc, took = ws.bisect(*ws.source(), "--axis", "set:framework.source.ref", "--values", values,
                                 "--until", "compile", "--json")
    assert data["exact"] and data["first"]["label"] == ws.shas[FIRST_BAD], data
    by_source = {s["label"]: s["source"] for s in data["steps"]}
    assert by_source[ws.shas[6]] == "built" and by_source[ws.shas[13]] == "built", by_source  # the new ends
    assert any(source == "found" for source in by_source.values()), by_source  # the commit bisect's
    print(f"\nset axis: {took:.0f} s, {data['built']} built of {len(data['steps'])}")


def _series(changes: list[tuple[str, str, str, str]]) -> dict[str, str]:
    """A patch series: each patch made against the tree the ones before it left."""
    tree: dict[str, str] = {}
    out = {}
    for name, rel, old, new in changes:
        before = tree.get(rel) or (DEMOFW / rel).read_text()
        after = before.replace(old, new, 1)
        assert before != after, (rel, old)
        tree[rel] = after
        out[name] = "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                                 f"a/{rel}", f"b/{rel}"))
    return out


def test_bisect_over_a_patch_series_names_the_patch_that_breaks(ws):
    folder = ws.cwd / "patched"
    folder.mkdir()
    series = [
        ("0001-readme.patch", "README.md", "# ", "# (patched) "),
        ("0002-add-comment.patch", "csrc/ops/add.cpp", "// demofw.add:", "// (patched) demofw.add:"),
        ("0003-sub-breaks.patch", "csrc/ops/sub.cpp", "namespace dfw {", "namespace dfw {\n" + BREAK_COMPILE),
        ("0004-mul-comment.patch", "csrc/ops/mul.cpp", "namespace dfw {", "namespace dfw {\n// patched"),
        ("0005-readme-again.patch", "README.md", "# ", "# (patched again) "),
    ]
    for name, text in _series(series).items():
        (folder / name).write_text(text)
    recipe = folder / "demo-patched.yaml"
    recipe.write_text(f"extends: {ROOT / 'recipes' / 'demo-cpu.yaml'}\nframework:\n  patches:\n"
                      + "".join(f"    - file: {name}\n" for name, *_ in series))
    args = ["bisect", "--recipe", str(recipe), *LIGHT, *SITE, "--axis", "patches", "--until", "compile", "--json"]
    # Ctrl-C while a step builds: the step's build stops (its container removed), the log keeps the steps done.
    t0 = time.monotonic()
    first = ws.popen(*args)
    seen = []
    for line in first.stderr:
        seen.append(line)
        if seen and any(": good" in s for s in seen) and ": building (key" in line:
            first.send_signal(signal.SIGINT)
            break
    _, rest = first.communicate(timeout=600)
    assert first.returncode == 130, "".join(seen) + rest
    assert "interrupted: 1 step kept in the log" in rest and "the same command resumes" in rest, rest
    left = ws.docker_client.containers.list(all=True, filters={"label": [f"buildctl.namespace={TEST_NAMESPACE}"],
                                                              "name": "buildctl-compile-"})
    assert [c.name for c in left if "demo-patched" in c.name] == []
    proc = ws.invoke(*args)
    took = time.monotonic() - t0
    assert "none: logged (key" in proc.stderr, _show(proc)  # the step finished before Ctrl-C
    assert proc.returncode == 0, _show(proc)
    data = json.loads(proc.stdout)
    assert data["exact"] and data["first"]["label"] == "0003-sub-breaks.patch", data
    assert data["first"]["position"] == 3 and data["last_before"]["label"] == "0002-add-comment.patch"
    assert data["failing_step"]["failure"]["step"] == "compile"
    print(f"\npatches: {took:.0f} s, {data['built']} built")


def test_bisect_with_a_test_command_in_the_runtime_image_two_steps_at_a_time(ws):
    """The engine given twice: two steps in flight (the ends together, then the two left between them)."""
    check = "python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec(\"demofw.bisect_mark\") is not None)'"
    here = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    data, proc, took = ws.bisect(*ws.source(), "--good", ws.shas[4], "--bad", ws.shas[7], "--test", check, "--json",
                                 "--engine", here, "--engine", here)
    assert data["exact"] and data["first"]["label"] == ws.shas[6][:12], data
    assert data["failing_step"]["test_exit"] == 1
    assert all(s["test_exit"] in (0, 1) for s in data["steps"]), data["steps"]
    building = [line for line in proc.stderr.splitlines() if ": building (key" in line]
    assert len(building) == 4 and all(", on " in line for line in building), proc.stderr
    print(f"\n--test: {took:.0f} s, {data['built']} built")


def test_bad_input_is_one_line_and_exit_2(ws):
    _, proc, took = ws.bisect(*ws.source(), "--good", "main", "--bad", ws.shas[0], "--until", "compile", expect_rc=2)
    assert "is not an ancestor of --bad" in proc.stderr and "--first-good" in proc.stderr, _show(proc)
    assert "building" not in proc.stderr
    _, proc, _ = ws.bisect(*ws.source(), "--good", "no-such-tag", "--bad", "main", "--until", "compile", expect_rc=2)
    assert "--good no-such-tag: no such commit, branch or tag in https://git.bisect-demo.invalid/demofw.git" \
        in proc.stderr, _show(proc)
    # A --good end that fails (commit 12's configure): said with its reason; its build is the first test's.
    _, proc, took = ws.bisect(*ws.source(), "--good", ws.shas[12], "--bad", "main", "--until", "compile", expect_rc=2)
    assert f"--good {ws.shas[12][:12]} does not pass: fails in configure" in proc.stderr, _show(proc)
    assert took < 60, took
