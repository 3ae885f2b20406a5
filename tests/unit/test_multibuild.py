"""multibuild's pure parts: what a child build gets from this command's settings (no engine)."""

import os
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import recipe
from buildctl.errors import InputError
from buildctl.scaleout import multibuild, plan
from buildctl.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def test_child_builds_get_the_settings_as_variables_and_their_own_engine(monkeypatch):
    monkeypatch.setenv("BUILDCTL_CACHE_URL", "redis://:pw-from-env@cache:6379/0")  # taken into the settings
    chosen = Settings.from_cli(ca_cert=["/etc/ca.pem", "/etc/ca2.pem"], network="host", no_verify=True,
                               engine=["unix:///a.sock", "ssh://builder"], jobs="4")
    env = multibuild.child_env(chosen, "ssh://builder")
    assert env["DOCKER_HOST"] == "ssh://builder"
    assert env["BUILDCTL_CA_CERT"] == "/etc/ca.pem,/etc/ca2.pem" and env["BUILDCTL_NETWORK"] == "host"
    assert env["BUILDCTL_NO_VERIFY"] == "1" and env["BUILDCTL_JOBS"] == "4"
    assert env["BUILDCTL_CACHE_URL"] == "redis://:pw-from-env@cache:6379/0"  # in the environment, never argv
    assert "BUILDCTL_ENGINES" not in env  # a child builds on its one engine


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


def test_child_builds_keep_the_variables_that_are_not_settings(monkeypatch):
    """BUILDCTL_CACHE (the verification wheelhouse) and BUILDCTL_DEBUG reach each child build as they are;
    a settings variable is replaced by this command's choice (its flag wins)."""
    monkeypatch.setenv("BUILDCTL_CACHE", "/var/cache/team-wheelhouse")
    monkeypatch.setenv("BUILDCTL_DEBUG", "1")
    monkeypatch.setenv("BUILDCTL_NETWORK", "bridge")
    monkeypatch.setenv("BUILDCTL_ENGINES", "unix:///a.sock ssh://builder")
    env = multibuild.child_env(Settings.from_cli("build", network="host"), "ssh://builder")
    assert env["BUILDCTL_CACHE"] == "/var/cache/team-wheelhouse" and env["BUILDCTL_DEBUG"] == "1"
    assert env["BUILDCTL_NETWORK"] == "host" and "BUILDCTL_ENGINES" not in env


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
    build, verify = multibuild.child_commands(placement, "demo-cuda13", [], Settings.from_cli("build"))
    assert "--no-verify" in build and verify[-4:] == ["verify", "--recipe", "demo-cuda13", "--json"]
    chosen = Settings.from_cli("build", no_verify=True)
    build, verify = multibuild.child_commands(placement, "demo-cuda13", [], chosen)
    assert verify is None  # no `invoke verify` on the GPU engine
    assert multibuild.child_env(chosen, placement.engine)["BUILDCTL_NO_VERIFY"] == "1"  # nor in the build
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
