"""multibuild's pure parts: what a child build gets from this command's settings (no engine)."""

import json
import os
import sys
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import recipe
from buildctl.cli.base import print_json
from buildctl.cli.child_command import CHILD
from buildctl.errors import InputError
from buildctl.pipeline import child_build
from buildctl.scaleout import multibuild, plan
from buildctl.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def fleet(urls: dict[str, str], chosen: Settings, sets=()) -> multibuild.Fleet:
    return multibuild.Fleet(tuple(sets), urls, chosen, CHILD)


def test_a_child_job_carries_the_settings_and_its_own_engine(monkeypatch):
    monkeypatch.setenv("BUILDCTL_CACHE_URL", "redis://:pw-from-env@cache:6379/0")  # taken into the settings
    chosen = Settings.from_cli(environ=os.environ, ca_cert=["/etc/ca.pem", "/etc/ca2.pem"], network="host", no_verify=True,
                               engine=["unix:///a.sock", "ssh://builder"], jobs="4")
    placement = plan.plan([plan.Job("demo-cpu", "cpu", 60.0)],
                          [plan.EngineCapacity("ssh://builder", 2, 8 << 30, frozenset({"cpu"}))])[0]
    build = multibuild.build_job(placement, "demo-cpu", fleet({"ssh://builder": "ssh://builder"}, chosen,
                                                              ["build.type=Debug"]))
    assert (build.task, build.engine_url, build.sets) == ("build", "ssh://builder", ("build.type=Debug",))
    assert child_build.Job.from_json(json.loads(json.dumps(build.to_json())), environ=os.environ) == build
    child = build.settings
    assert child.engines == ("ssh://builder",)  # a child builds on its one engine
    assert child.ca_certs == ("/etc/ca.pem", "/etc/ca2.pem") and child.network == "host"
    assert not build.verify and child.jobs == "4" and child.cache_url == "redis://:pw-from-env@cache:6379/0"


def test_a_flag_wins_over_its_variable_in_the_childs_settings(monkeypatch):
    monkeypatch.setenv("BUILDCTL_NETWORK", "bridge")
    monkeypatch.setenv("BUILDCTL_ENGINES", "unix:///a.sock ssh://builder")
    placement = plan.plan([plan.Job("demo-cpu", "cpu", 60.0)],
                          [plan.EngineCapacity("local", 2, 8 << 30, frozenset({"cpu"}))])[0]
    build = multibuild.build_job(placement, "demo-cpu", fleet({"local": ""}, Settings.from_cli("build", environ=os.environ, network="host")))
    assert build.settings.network == "host" and build.settings.engines == ()  # "": DOCKER_HOST's


def test_outcomes_print_as_json_with_where_each_build_ran(capsys):
    ok = multibuild.RecipeOutcome("demo-cpu", "unix:///a.sock", None, ok=True, seconds=61.0, key="k", artifact="/art/k")
    bad = multibuild.RecipeOutcome("broken", "ssh://b", None, ok=False, error="build of broken failed in step source")
    print_json(multibuild.outcomes_json([ok, bad]))
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


def test_a_gpu_recipe_is_verified_on_the_gpu_engine_and_with_no_verify_nowhere(monkeypatch):
    """Built on the CPU engine unverified, then the build's own artifact verified on the GPU engine; with
    --no-verify neither."""
    monkeypatch.delenv("BUILDCTL_NO_VERIFY", raising=False)
    placement = gpu_placement()
    urls = {"ssh://cpu-box": "ssh://cpu-box", "tcp://gpu-box:2376": "tcp://gpu-box:2376"}
    _RecordedChild.calls = []
    monkeypatch.setattr(child_build.subprocess, "Popen", _RecordedChild)
    outcome = multibuild.RecipeOutcome("demo-cuda13", placement.engine, placement.verify_on)
    multibuild.run_one(placement, "demo-cuda13", fleet(urls, Settings.from_cli("build", environ=os.environ)), outcome, lambda: None)
    build, verify = (child_build.Job.from_json(json.loads(c["stdin"]), environ=os.environ) for c in _RecordedChild.calls)
    assert not build.verify and build.engine_url == "ssh://cpu-box"
    assert (verify.task, verify.engine_url, verify.artifact) == ("verify", "tcp://gpu-box:2376", "/a/demo-cpu/k")
    assert outcome.ok
    chosen = Settings.from_cli("build", environ=os.environ, no_verify=True)
    _RecordedChild.calls = []
    multibuild.run_one(placement, "demo-cuda13", fleet(urls, chosen), outcome, lambda: None)
    [call] = _RecordedChild.calls  # no verification on the GPU engine
    assert not child_build.Job.from_json(json.loads(call["stdin"]), environ=os.environ).verify  # nor in the build
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
        events = [child_build.StepStarted("compile"), child_build.StepFinished("compile", 2.0),
                  child_build.Result(ok=True, key="k", artifact="/a/demo-cpu/k")]
        self.stdout = io.StringIO("".join(json.dumps(child_build.to_json(e)) + "\n" for e in events))
        self.stderr = io.StringIO("")
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
    chosen = Settings.from_cli("build", environ=os.environ, cache_url=f"redis://:{token}@cache:6379/0", network="host")
    assert chosen.engines == ("unix:///a.sock", "unix:///b.sock")
    _RecordedChild.calls = []
    monkeypatch.setattr(child_build.subprocess, "Popen", _RecordedChild)
    placement = plan.plan([plan.Job("demo-cpu", "cpu", 60.0)],
                          [plan.EngineCapacity("unix:///b.sock", 2, 8 << 30, frozenset({"cpu"}))])[0]
    outcome = multibuild.RecipeOutcome("demo-cpu", placement.engine, None)
    sets = [f"framework.source.git=https://ci:{token}@git.example/o/demofw.git"]
    multibuild.run_one(placement, "demo-cpu", fleet({"unix:///b.sock": "unix:///b.sock"}, chosen, sets), outcome,
                       lambda: None)
    assert outcome.ok and outcome.artifact == "/a/demo-cpu/k", outcome
    [call] = _RecordedChild.calls
    assert not any(token in arg or "--set" in arg or "demo-cpu" in arg for arg in call["cmd"]), call["cmd"]
    assert call["env"] == before, {k: v for k, v in call["env"].items() if before.get(k) != v}
    job = child_build.Job.from_json(json.loads(call["stdin"]), environ=os.environ)
    assert (job.recipe, list(job.sets), job.engine_url) == ("demo-cpu", sets, "unix:///b.sock")
    child = job.settings  # the child reads no setting from its environment
    assert child.engines == ("unix:///b.sock",) and child.network == "host" and child.cache_url == chosen.cache_url


def test_the_child_builds_on_its_one_engine_whatever_its_environment_says(tmp_path):
    """The child process itself, with a lowercase buildctl_engines naming two engines in its environment:
    it builds its recipe on the engine of its job (here one that does not exist: one line naming it),
    never the multi-engine path ("no engine answered", or children of its own)."""
    import subprocess

    chosen = Settings.from_cli("build", environ=os.environ, engine=["unix:///nonexistent/c.sock"], no_verify=True)
    job = child_build.Job("build", "demo-cpu", chosen, no_preflight=True, verify=False).to_json()
    env = {**os.environ, "buildctl_engines": "unix:///nonexistent/a.sock unix:///nonexistent/b.sock",
           "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"), "BUILDCTL_DEBUG": ""}
    proc = subprocess.run([sys.executable, "-m", "buildctl.cli.child"], input=json.dumps(job), env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    *_, result = (child_build.from_json(json.loads(line)) for line in proc.stdout.splitlines())
    assert result.failure.step == "buildctl", result
    assert result.failure.error.startswith("the Docker engine is not running: /nonexistent/c.sock"), result
