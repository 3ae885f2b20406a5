"""buildctl/settings.py: one Settings from the flags over the BUILDCTL_* variables; the tasks' options and
--help come from its fields, and a site option added there reaches `--help` and the spec's `site:`."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import recipe
from buildctl import settings as settings_mod
from buildctl.cli.common import load_spec
from buildctl.errors import InputError
from buildctl.settings import SITE, Settings, env_name, fields, flag_name
from buildctl.store import artifacts

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3t-proxy-pass"


@pytest.fixture
def clean_env(monkeypatch):
    for name in Settings.model_fields:
        monkeypatch.delenv(env_name(name), raising=False)
    return monkeypatch


def test_flag_wins_over_variable_which_wins_over_default(clean_env):
    clean_env.setenv("BUILDCTL_PIP_INDEX_URL", "https://env.example/simple")
    clean_env.setenv("BUILDCTL_JOBS", "4")
    clean_env.setenv("BUILDCTL_NO_PROXY", "env.example")
    assert Settings.from_cli(environ=os.environ, pip_index_url="https://flag.example/simple").pip_index_url == "https://flag.example/simple"
    chosen = Settings.from_cli(environ=os.environ, pip_index_url="", jobs="", proxy_exclude="", memory="")
    assert chosen.pip_index_url == "https://env.example/simple"  # a flag left empty leaves the variable
    assert chosen.jobs == "4"  # --jobs not given: the variable applies
    assert chosen.no_proxy == "env.example"  # --proxy-exclude's variable keeps its name, BUILDCTL_NO_PROXY
    assert chosen.memory is None and chosen.pull is None and chosen.artifacts == Path("artifacts")
    assert Settings.from_cli(environ=os.environ, jobs="8").jobs == "8"


def test_variables_keep_their_forms(clean_env, tmp_path):
    clean_env.setenv("BUILDCTL_CA_CERT", f"/a.pem{os.pathsep}/b.pem,/c.pem")
    clean_env.setenv("BUILDCTL_NO_VERIFY", "1")
    clean_env.setenv("BUILDCTL_ARTIFACTS", str(tmp_path / "store"))
    clean_env.setenv("BUILDCTL_RECIPES_DIR", str(tmp_path))
    chosen = Settings.from_cli(environ=os.environ)
    assert chosen.ca_certs == ("/a.pem", "/b.pem", "/c.pem")
    assert Settings.from_cli(environ=os.environ, ca_cert=["/flag.pem"]).ca_certs == ("/flag.pem",)
    assert chosen.no_verify is True and chosen.keep_container is False
    # Read when asked, not when buildctl was imported.
    assert chosen.artifacts == tmp_path / "store" and recipe.recipes_dir(chosen.recipes_dir) == tmp_path


def test_a_flag_is_passed_down_and_the_environment_is_the_default(clean_env, tmp_path):
    """No command sets settings for code below it to read (issue 21: a hidden global): a flag's value is
    an argument, the BUILDCTL_* variable its default in the settings the CLI builds; a library call given
    none takes its own default, never the variable (issue 42)."""
    clean_env.setenv("BUILDCTL_NAMESPACE", "from-env")
    chosen = Settings.from_cli(environ=os.environ, namespace="from-flag")
    assert artifacts.namespace(explicit=chosen.namespace) == "from-flag"
    assert artifacts.namespace(explicit=Settings.from_cli(environ=os.environ).namespace) == "from-env"
    assert artifacts.namespace() == artifacts.DEFAULT_NAMESPACE
    assert not hasattr(settings_mod, "current") and not hasattr(settings_mod, "using")


def test_bad_value_is_one_line_naming_flag_and_variable_without_the_value(clean_env):
    with pytest.raises(InputError) as info:
        Settings.from_cli(environ=os.environ, pull="sometimes")
    assert str(info.value).startswith("--pull [BUILDCTL_PULL]: ") and "'missing', 'always' or 'never'" in str(info.value)
    clean_env.setenv("BUILDCTL_NO_VERIFY", f"maybe-{PASSWORD}")
    with pytest.raises(InputError) as info:
        Settings.from_cli("build", environ=os.environ, no_verify=False)  # a task that takes --no-verify, not given
    message = str(info.value)
    assert message.startswith("--no-verify [BUILDCTL_NO_VERIFY]: ") and "\n" not in message
    assert PASSWORD not in message


def test_credentials_are_masked_when_settings_are_shown(clean_env):
    clean_env.setenv("BUILDCTL_HTTPS_PROXY", f"http://user:{PASSWORD}@proxy.corp:3128")
    chosen = Settings.from_cli(environ=os.environ, cache_url=f"redis://:{PASSWORD}@cache.corp:6379/0")
    for shown in (repr(chosen), str(chosen)):
        assert PASSWORD not in shown and "proxy.corp:3128" in shown and "cache.corp:6379" in shown
    # The real values reach the spec (the build needs them), which masks them wherever it is shown.
    spec, _ = load_spec("demo-cpu", site=chosen.site(), preflight=False)
    assert spec.site.https_proxy == f"http://user:{PASSWORD}@proxy.corp:3128"
    assert PASSWORD not in json.dumps(recipe.masked_dump(spec)) and PASSWORD not in recipe.resolved_yaml(spec)


def test_site_options_fill_the_spec_site_section(clean_env):
    clean_env.setenv("BUILDCTL_PULL", "never")
    chosen = Settings.from_cli(environ=os.environ, proxy_exclude="localhost", network="host")
    assert chosen.site() == {"no_proxy": "localhost", "network": "host", "pull": "never"}
    spec, _ = load_spec("demo-cpu", site=chosen.site(), preflight=False)
    assert (spec.site.no_proxy, spec.site.network, spec.site.pull) == ("localhost", "host", "never")
    assert load_spec("demo-cpu", preflight=False)[0].site.pull == "missing"  # the policy shown when unset


def invoke_help(task: str) -> str:
    proc = invoke_here(task, "--help", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("task", ["render", "build"])
def test_help_lists_every_site_option_from_settings(task):
    text = " ".join(invoke_help(task).split())  # unwrapped
    for name, field in fields(SITE).items():
        assert f" --{flag_name(name).replace('_', '-')}" in text
        assert f"{field.description} [{env_name(name)}]" in text


def test_a_site_option_added_to_settings_reaches_help_variable_and_spec(tmp_path):
    """The proof that adding a site option is one field in settings.py: a Settings with one more field
    (made before tasks.py and spec.py are imported, as the file would be) gives --help, the variable and
    the spec's site section without another change."""
    script = textwrap.dedent("""
        import json, os, sys
        from pydantic import create_model
        from buildctl import settings
        settings.Settings = create_model("Settings", __base__=settings.Settings, registry_mirror=(
            str | None, settings.option(None, "Registry mirror for base images", group=settings.SITE)))
        from invoke import Collection, Program
        import tasks
        from buildctl.cli.common import load_spec
        Program(namespace=Collection.from_module(tasks)).run(["invoke", "build", "--help"], exit=False)
        chosen = settings.Settings.from_cli(environ=os.environ)
        spec, _ = load_spec("demo-cpu", site=chosen.site(), preflight=False)
        print(json.dumps({"env": chosen.registry_mirror, "site": spec.site.registry_mirror,
                          "flag": settings.Settings.from_cli(environ=os.environ, registry_mirror="https://flag.example").registry_mirror}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO),
                               "BUILDCTL_REGISTRY_MIRROR": "https://mirror.example"})
    assert proc.returncode == 0, proc.stderr
    *help_lines, last = proc.stdout.strip().splitlines()
    help_text, result = " ".join(" ".join(help_lines).split()), json.loads(last)
    assert "--registry-mirror=STRING" in help_text
    assert "Registry mirror for base images [BUILDCTL_REGISTRY_MIRROR]" in help_text
    assert result == {"env": "https://mirror.example", "site": "https://mirror.example",
                      "flag": "https://flag.example"}


def test_a_bad_variable_ends_the_task_in_one_line_exit_2():
    proc = invoke_here("render", "--recipe", "demo-cpu", cwd=REPO,
                       env={"BUILDCTL_PULL": "sometimes", "BUILDCTL_DEBUG": "", "COLUMNS": "300"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["error: --pull [BUILDCTL_PULL]: Input should be 'missing', 'always' or "
                                        "'never'; fix: see `invoke render --help`"]


def test_jobs_auto_given_wins_over_the_variable(clean_env):
    """`--jobs auto` is a value given: it overrides BUILDCTL_JOBS even though it is also the default."""
    clean_env.setenv("BUILDCTL_JOBS", "4")
    assert Settings.from_cli("build", environ=os.environ, jobs="auto").jobs == "auto"
    assert Settings.from_cli("build", environ=os.environ, jobs="").jobs == "4"  # --jobs not given (tasks.py's default): the variable
    # tasks.py gives the option a "not given" default, so invoke hands "auto" only when the user typed it
    import tasks

    assert inspect.signature(tasks.build.body).parameters["jobs"].default == ""


@pytest.mark.parametrize("command", [["recipes"], ["matrix"], ["clean", "--dry-run"], ["build", "--recipe", "demo-cpu"]])
def test_a_bad_variable_is_one_line_exit_2_in_every_command(command, tmp_path):
    """Also in the commands that have no such flag (BUILDCTL_PULL in `invoke recipes`): one line, exit 2,
    naming the variable and the fix, never "internal error"."""
    proc = invoke_here("-r", str(REPO), *command, cwd=tmp_path,
                       env={"BUILDCTL_PULL": "sometimes", "BUILDCTL_DEBUG": "", "COLUMNS": "300"})
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    takes_flag = command[0] == "build"
    assert proc.stderr.splitlines() == [
        "error: " + ("--pull [BUILDCTL_PULL]" if takes_flag else "BUILDCTL_PULL")
        + ": Input should be 'missing', 'always' or 'never'; fix: "
        + ("see `invoke build --help`" if takes_flag else "correct or unset BUILDCTL_PULL")]


def test_registry_is_a_site_option_checked_where_it_is_given(clean_env):
    chosen = Settings.from_cli(environ=os.environ, registry="127.0.0.1:5000/ci/")
    assert chosen.site() == {"registry": "127.0.0.1:5000/ci"}
    assert load_spec("demo-cpu", site=chosen.site(), preflight=False)[0].site.registry == "127.0.0.1:5000/ci"
    clean_env.setenv("BUILDCTL_REGISTRY", "ci:hunter22@registry.example")
    with pytest.raises(InputError) as info:
        Settings.from_cli(environ=os.environ)
    assert "docker login registry.example" in str(info.value) and "hunter22" not in str(info.value)
    build_help = invoke_help("build")
    assert "--registry" in build_help and "[BUILDCTL_REGISTRY]" in build_help


SECRET_URL = "redis://:pw-in-the-environment@cache.corp:6379/0"


def test_settings_read_the_mapping_they_are_given_and_never_carry_it_as_a_value(clean_env):
    """Settings come from a mapping the CLI hands in (issue 42); they keep it for what child processes start
    from, never as a field: an environment holds secrets, and settings are serialized into a child's job."""
    given = {"BUILDCTL_CACHE_URL": SECRET_URL, "buildctl_jobs": "6", "BUILDCTL_MEMORY": "", "API_TOKEN": "tok-secret",
             "DOCKER_HOST": "tcp://engine:2375", "BUILDCTL_CACHE": "/var/cache/b", "XDG_CONFIG_HOME": "/cfg"}
    chosen = Settings.from_env(given, memory="8g")
    assert chosen.cache_url == SECRET_URL and chosen.jobs == "6"  # names in any case
    assert chosen.memory == "8g" and Settings.from_env(given).memory is None  # a value given wins; empty: unset
    assert Settings.from_env(given, jobs="2").jobs == "2"
    assert Settings.from_cli("build", environ=given, jobs="2").jobs == "2"  # a flag wins over its variable
    assert chosen.environ() == given and chosen.environ() is not chosen.environ()  # a copy each time
    assert (chosen.docker_host, chosen.cache_dir) == ("tcp://engine:2375", Path("/var/cache/b"))
    assert chosen.key_salt_file == Path("/cfg/buildctl/key-salt")
    dumped = chosen.model_dump_json()
    assert "tok-secret" not in dumped and "DOCKER_HOST" not in dumped and "environ" not in Settings.model_fields
    assert set(chosen.model_dump()) == set(Settings.model_fields) and "_environ" not in dumped
    # the process's environment is not read: only the mapping's
    clean_env.setenv("BUILDCTL_JOBS", "9")
    assert Settings.from_env({}).jobs == "auto" and Settings().jobs == "auto" and Settings().environ() == {}


def test_a_child_job_carries_the_values_never_the_environment(clean_env):
    from buildctl.pipeline import child_build as cb

    parent = Settings.from_env({"BUILDCTL_CACHE_URL": SECRET_URL, "API_TOKEN": "tok-secret"}, jobs="3")
    written = json.dumps(cb.Job("build", "demo-cpu", parent).to_json())
    assert "tok-secret" not in written and "API_TOKEN" not in written
    # the child's settings: the parent's values, in the child's own environment, whose variables are not read
    child = cb.Job.from_json(json.loads(written), environ={"BUILDCTL_JOBS": "7", "HOME": "/child"}).settings
    assert child.jobs == "3" and child.cache_url == SECRET_URL and child.environ() == {"BUILDCTL_JOBS": "7",
                                                                                        "HOME": "/child"}


def test_a_bad_variable_of_the_mapping_is_one_line_naming_it():
    with pytest.raises(InputError, match=r"^BUILDCTL_PULL: .*; fix: correct or unset BUILDCTL_PULL$"):
        Settings.from_env({"BUILDCTL_PULL": "sometimes"})


def test_the_options_that_carry_the_environment_never_show_it():
    from buildctl.pipeline.stages import BuildOptions
    from buildctl.verify import targets
    from buildctl.verify.options import VerifyOptions

    given = {"API_TOKEN": "tok-secret"}
    assert "tok-secret" not in repr(BuildOptions(environ=given)) + repr(VerifyOptions(environ=given))
    assert BuildOptions(environ=given) == BuildOptions(environ={})  # nor compared
    with pytest.raises(TypeError):
        BuildOptions()  # a build is always given the command's environment
    with pytest.raises(ValueError, match="VerifyOptions.environ"):
        targets._clean_env(None)  # a venv on this host starts from it (run_on_host)
    assert targets._clean_env({"PYTHONPATH": "/x", "PATH": "/bin"})["PATH"] == "/bin"


def test_the_step_summary_and_the_cache_come_from_the_environment_handed_in():
    from buildctl.settings import Settings

    chosen = Settings.from_env({"GITHUB_STEP_SUMMARY": "/runner/summary.md", "BUILDCTL_CACHE": "/c"})
    assert chosen.step_summary == "/runner/summary.md" and str(chosen.cache_dir) == "/c"
    assert Settings.from_env({"GITHUB_STEP_SUMMARY": ""}).step_summary is None


def test_settings_are_compared_by_their_values_never_by_the_environment_they_carry():
    """As BuildOptions and VerifyOptions (compare=False): the environment is what child processes start from,
    not a value; two commands with the same settings in two shells are the same settings."""
    one = Settings.from_env({"BUILDCTL_JOBS": "2", "HOME": "/home/a", "SECRET_TOKEN": "x"})
    other = Settings.from_env({"BUILDCTL_JOBS": "2", "HOME": "/home/b"})
    assert one == other and one.environ() != other.environ()
    assert one != Settings.from_env({"BUILDCTL_JOBS": "3"})
