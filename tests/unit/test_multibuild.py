"""multibuild's pure parts: what a child build gets from this command's settings (no engine)."""

import json
import os
import sys
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import recipe
from buildctl.errors import InputError
from buildctl.scaleout import multibuild, plan
from buildctl.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def _job_settings(job: dict) -> Settings:
    return Settings.model_validate(job["settings"])


def test_child_jobs_carry_the_settings_and_their_own_engine(monkeypatch):
    monkeypatch.setenv("BUILDCTL_CACHE_URL", "redis://:pw-from-env@cache:6379/0")  # taken into the settings
    chosen = Settings.from_cli(ca_cert=["/etc/ca.pem", "/etc/ca2.pem"], network="host", no_verify=True,
                               engine=["unix:///a.sock", "ssh://builder"], jobs="4")
    placement = plan.plan([plan.Job("demo-cpu", "cpu", 60.0)],
                          [plan.EngineCapacity("ssh://builder", 2, 8 << 30, frozenset({"cpu"}))])[0]
    build, verify = multibuild.child_jobs(placement, "demo-cpu", ["build.type=Debug"], {"ssh://builder": "ssh://builder"},
                                          chosen)
    assert verify is None and (build["task"], build["engine"], build["sets"]) == ("build", "ssh://builder",
                                                                                  ["build.type=Debug"])
    child = _job_settings(build)
    assert child.engines == ("ssh://builder",)  # a child builds on its one engine
    assert child.ca_certs == ("/etc/ca.pem", "/etc/ca2.pem") and child.network == "host"
    assert child.no_verify and child.jobs == "4" and child.cache_url == "redis://:pw-from-env@cache:6379/0"


def test_a_flag_wins_over_its_variable_in_the_childs_settings(monkeypatch):
    monkeypatch.setenv("BUILDCTL_NETWORK", "bridge")
    monkeypatch.setenv("BUILDCTL_ENGINES", "unix:///a.sock ssh://builder")
    placement = plan.plan([plan.Job("demo-cpu", "cpu", 60.0)],
                          [plan.EngineCapacity("local", 2, 8 << 30, frozenset({"cpu"}))])[0]
    build, _ = multibuild.child_jobs(placement, "demo-cpu", [], {"local": ""}, Settings.from_cli("build", network="host"))
    assert _job_settings(build).network == "host" and _job_settings(build).engines == ()  # "": DOCKER_HOST's


def test_outcomes_print_as_json_with_where_each_build_ran(capsys):
    ok = multibuild.Outcome("demo-cpu", "unix:///a.sock", None, ok=True, seconds=61.0, key="k", artifact="/art/k")
    bad = multibuild.Outcome("broken", "ssh://b", None, ok=False, error="build of broken failed in step source")
    multibuild.print_outcomes([ok, bad], as_json=True, out=None)
    out = capsys.readouterr().out
    assert '"ok": false' in out and '"engine": "ssh://b"' in out and '"verified_on": null' in out


def test_the_plan_costs_a_recipe_by_its_last_compile(tmp_path):
    old, new = tmp_path / "demo-cpu" / "k1", tmp_path / "demo-cpu" / "k2"
    for folder, seconds in ((old, 999.0), (new, 30.0)):
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(f'{{"recipe": "demo-cpu", "key": "{folder.name}", "wheels": [], '
                                              f'"durations_s": {{"compile": {seconds}}}, "max_jobs": 2}}')
    os.utime(old / "manifest.json", (1, 1))
    assert multibuild.last_manifest(tmp_path, "demo-cpu").durations_s["compile"] == 30.0
    assert multibuild.last_manifest(tmp_path, "never-built") is None
    (new / "manifest.json").write_text("{not json")
    assert multibuild.last_manifest(tmp_path, "demo-cpu") is None


def gpu_placement():
    """A CUDA recipe built on a CPU engine, its verification planned on the GPU engine."""
    job = plan.Job("demo-cuda13", "cuda", 120.0)
    engines = [plan.EngineCapacity("ssh://cpu-box", 8, 32 << 30, frozenset({"cpu"})),
               plan.EngineCapacity("tcp://gpu-box:2376", 2, 8 << 30, frozenset({"cpu", "cuda"}))]
    [placement] = plan.plan([job], engines)
    assert (placement.engine, placement.verify_on) == ("ssh://cpu-box", "tcp://gpu-box:2376")
    return placement


def test_no_verify_verifies_nowhere_not_even_on_the_gpu_engine(monkeypatch):
    monkeypatch.delenv("BUILDCTL_NO_VERIFY", raising=False)
    placement = gpu_placement()
    urls = {"ssh://cpu-box": "ssh://cpu-box", "tcp://gpu-box:2376": "tcp://gpu-box:2376"}
    build, verify = multibuild.child_jobs(placement, "demo-cuda13", [], urls, Settings.from_cli("build"))
    assert _job_settings(build).no_verify and (verify["task"], verify["engine"]) == ("verify", "tcp://gpu-box:2376")
    assert _job_settings(verify).engines == ("tcp://gpu-box:2376",)
    chosen = Settings.from_cli("build", no_verify=True)
    build, verify = multibuild.child_jobs(placement, "demo-cuda13", [], urls, chosen)
    assert verify is None  # no verification on the GPU engine
    assert _job_settings(build).no_verify  # nor in the build
    assert multibuild.verification_engine(placement, chosen) is None  # --json's verified_on: null


@pytest.mark.parametrize(("recipes", "labels", "selected"), [
    (["ascend-cann8.0"], ["ascend"], ["ascend-cann8.0"]),  # the label adds nothing new: not "no recipe has it"
    (["recipes/demo-cpu.yaml"], ["demo"], ["demo-cpu", "demo-cuda13", "demo-rocm", "demo-skbuild-cpu"]),  # a path and a label: once
    (["demo-cpu", "recipes/demo-cpu.yaml"], [], ["demo-cpu"]),  # a name and a path of one recipe
    (["cpu"], ["demo"], ["cpu", "demo-cpu", "demo-cuda13", "demo-rocm", "demo-skbuild-cpu"]),  # the union, --recipe first
])
def test_recipe_and_label_select_the_union_each_recipe_once(recipes, labels, selected, monkeypatch):
    monkeypatch.chdir(REPO)
    assert [recipe.load(arg).name for arg in multibuild.select(recipes, labels)] == selected


def test_build_with_a_recipe_path_and_its_label_gets_past_the_selection(tmp_path):
    """`invoke build --recipe recipes/demo-cpu.yaml --label demo` goes on to the engines (none in the unit
    tests), instead of "demo-cpu is selected twice"."""
    proc = invoke_here("-r", str(REPO), "build", "--recipe", str(REPO / "recipes" / "demo-cpu.yaml"), "--label", "demo",
                       "--no-preflight", cwd=tmp_path, env={"COLUMNS": "300", "BUILDCTL_DEBUG": ""})
    assert proc.returncode == 1 and "selected twice" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("error: no engine answered"), proc.stderr


def test_a_label_no_recipe_has_is_refused_with_or_without_recipes():
    for recipes in ([], ["demo-cpu"]):
        with pytest.raises(InputError, match="--label no-such-label: no recipe has it"):
            multibuild.select(recipes, ["no-such-label"])


class _RecordedChild:
    """subprocess.Popen for multibuild's children: records the command, environment and what the child
    reads on stdin, and answers as a build that published."""

    calls: list[dict] = []

    def __init__(self, cmd, env=None, stdin=None, **kw):
        import io

        self.record = {"cmd": list(cmd), "env": dict(os.environ if env is None else env), "stdin": ""}
        _RecordedChild.calls.append(self.record)
        record = self.record

        class Stdin(io.StringIO):
            def close(self):
                record["stdin"] = self.getvalue()
                super().close()

        self.stdin = Stdin() if stdin is not None and stdin != -3 else None  # -3: subprocess.DEVNULL
        self.stdout = io.StringIO('{"ok": true, "key": "k", "artifact": "/a/demo-cpu/k"}')
        self.stderr = io.StringIO("[compile] ...\n")
        self.returncode = 0

    def wait(self, timeout=None):
        return 0


def test_a_child_build_gets_its_job_on_stdin_never_on_its_command_line_or_in_its_environment(monkeypatch):
    """Issue 35, item 10: the children were `invoke build` subprocesses with this command's settings written
    back into BUILDCTL_* variables and its --set values on their command lines (readable in /proc), and
    multibuild stripped the settings' variables under their upper-case names only while settings.py reads
    them in any case: a lowercase `buildctl_engines` made every child take the multi-engine path again,
    without end. Now the child gets its recipe, --set values, this command's Settings and its engine on
    stdin; its command line is the module alone and its environment the one this command was given."""
    token = "k5e3cret9tok"
    monkeypatch.setenv("buildctl_engines", "unix:///a.sock unix:///b.sock")
    before = dict(os.environ)
    chosen = Settings.from_cli("build", cache_url=f"redis://:{token}@cache:6379/0", network="host")
    assert chosen.engines == ("unix:///a.sock", "unix:///b.sock")
    _RecordedChild.calls = []
    monkeypatch.setattr(multibuild.subprocess, "Popen", _RecordedChild)
    placement = plan.plan([plan.Job("demo-cpu", "cpu", 60.0)],
                          [plan.EngineCapacity("unix:///b.sock", 2, 8 << 30, frozenset({"cpu"}))])[0]
    outcome = multibuild.Outcome("demo-cpu", placement.engine, None)
    sets = [f"framework.source.git=https://ci:{token}@git.example/o/demofw.git"]
    multibuild.run_one(placement, "demo-cpu", sets, {"unix:///b.sock": "unix:///b.sock"}, chosen, outcome,
                       lambda: None)
    assert outcome.ok and outcome.artifact == "/a/demo-cpu/k", outcome
    [call] = _RecordedChild.calls
    assert not any(token in arg or "--set" in arg or "demo-cpu" in arg for arg in call["cmd"]), call["cmd"]
    assert call["env"] == before, {k: v for k, v in call["env"].items() if before.get(k) != v}
    job = json.loads(call["stdin"])
    assert (job["recipe"], job["sets"], job["engine"]) == ("demo-cpu", sets, "unix:///b.sock")
    child = Settings.model_validate(job["settings"])  # the child reads no setting from its environment
    assert child.engines == ("unix:///b.sock",) and child.network == "host" and child.cache_url == chosen.cache_url


def test_the_child_builds_on_its_one_engine_whatever_its_environment_says(tmp_path):
    """The child process itself, with a lowercase buildctl_engines naming two engines in its environment:
    it builds its recipe on the engine of its job (here one that does not exist: one line naming it),
    never the multi-engine path ("no engine answered", or children of its own)."""
    import subprocess
    import sys

    job = {"task": "build", "recipe": "demo-cpu", "sets": [], "engine": "unix:///nonexistent/c.sock",
           "no_preflight": True, "settings": Settings.from_cli("build", engine=["unix:///nonexistent/c.sock"],
                                                                 no_verify=True).model_dump(mode="json")}
    env = {**os.environ, "buildctl_engines": "unix:///nonexistent/a.sock unix:///nonexistent/b.sock",
           "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"), "BUILDCTL_DEBUG": ""}
    proc = subprocess.run([sys.executable, "-m", "buildctl.cli.child"], input=json.dumps(job), env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("error: the Docker engine is not running: /nonexistent/c.sock"), \
        proc.stderr


FAKE_CHILD = r"""
import json, sys
job = json.loads(sys.stdin.read())
print("[fetch] ...", file=sys.stderr)
print("", file=sys.stderr)
print("\x1b[31mcloning\x1b[0m " + job["recipe"], file=sys.stderr)
print("[compile] ...", file=sys.stderr)
print(sys.argv[1])
"""


@pytest.mark.parametrize(("stdout", "payload"), [('{"ok": true, "key": "k"}', {"ok": True, "key": "k"}),
                                                 ("[1, 2]", None), ("Traceback (most recent", None), ("", None)])
def test_a_childs_steps_lines_and_json_are_read_as_it_runs(monkeypatch, stdout, payload):
    """One reader for every child build (a multi-recipe build's, a bisect step's): its job on stdin, each step
    it starts and each other non-blank line as they come, without terminal controls; its JSON object, or None."""
    monkeypatch.setattr(multibuild, "CHILD", [sys.executable, "-c", FAKE_CHILD, stdout])
    seen: list[tuple[str, str]] = []
    proc = multibuild.start_child({"recipe": "demo-cpu"}, own_session=True)
    got = multibuild.follow_child(proc, lambda s: seen.append(("step", s)), lambda ln: seen.append(("line", ln)))
    assert got == payload and proc.returncode == 0
    assert seen == [("step", "fetch"), ("line", "cloning demo-cpu"), ("step", "compile")]
