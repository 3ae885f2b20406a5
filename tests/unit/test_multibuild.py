"""multibuild's pure parts: what a child build gets from this command's settings (no engine)."""

import os

from buildctl import multibuild
from buildctl.settings import Settings


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
        (folder / "manifest.json").write_text(f'{{"durations_s": {{"compile": {seconds}}}, "max_jobs": 2}}')
    os.utime(old / "manifest.json", (1, 1))
    assert multibuild.last_manifest(tmp_path, "demo-cpu")["durations_s"]["compile"] == 30.0
    assert multibuild.last_manifest(tmp_path, "never-built") is None
    (new / "manifest.json").write_text("{not json")
    assert multibuild.last_manifest(tmp_path, "demo-cpu") is None
