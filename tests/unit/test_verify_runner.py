"""The verify pieces that need no install: wheel names, platforms, the container script, arguments."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest
from rich.console import Console
from verify_fixtures import make_spec

from buildctl.errors import InputError
from buildctl.store import wheel_facts
from buildctl.verify import runner, targets, wheelhouse
from buildctl.verify.options import VerifyOptions

QUIET = Console(file=io.StringIO())  # what a verification prints is not what these tests look at


def test_wheel_tags():
    t = wheel_facts.wheel_tags(Path("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"))
    assert (t["name"], t["version"], t["python"], t["platform"]) == ("torch", "2.13.0+cpu", "3.11",
                                                                      "manylinux_2_28_x86_64")
    assert wheel_facts.wheel_tags(Path("demofw-0.4.0a0-1-cp312-cp312-linux_x86_64.whl"))["python"] == "3.12"
    with pytest.raises(InputError, match="not a wheel file name"):
        wheel_facts.wheel_tags(Path("torch.tar.gz"))


def test_manylinux_platforms_cover_the_target_glibc():
    plats = wheelhouse.manylinux_platforms((2, 36), "x86_64")
    assert plats[0] == "manylinux_2_36_x86_64" and "manylinux_2_17_x86_64" in plats
    assert {"manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64"} <= set(plats)
    assert "manylinux_2_37_x86_64" not in plats


def test_container_script_installs_offline_then_runs_the_probe():
    options = VerifyOptions(module="torch", sweep=True, sizes="8:1M", iters=5, warmup=2)
    argv = runner.probe_args(options, "/verify/out/probe.json")
    assert argv == ["--module", "torch", "--out", "/verify/out/probe.json", "--sweep", "--sizes", "8:1M",
                    "--iters", "5", "--warmup", "2"]
    script = targets.container_script("/opt/venv", "3.11", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                                      ["numpy", "nvidia-ml-py"], argv)
    lines = script.splitlines()
    assert lines[0] == "set -e"
    assert "if [ ! -x /opt/venv/bin/python ]; then python3.11 -m venv /opt/venv; fi" in lines
    install = next(ln for ln in lines if " -m pip install " in ln)
    assert "--no-index --find-links /verify/wheelhouse" in install and shlex.split(install)[-2:] == [
        "numpy", "nvidia-ml-py"]
    assert lines[-1].startswith("exec /opt/venv/bin/python /verify/in/probe.py --module torch")
    assert runner.probe_args(VerifyOptions(module="demofw", sweep=False), "x") == [
        "--module", "demofw", "--out", "x"]


def test_verify_image_dockerfile():
    text = targets.verify_image_dockerfile("buildctl/base:bookworm", "3.11")
    assert text.startswith("FROM buildctl/base:bookworm\n")
    assert "apt-get install -y --no-install-recommends python3.11 python3.11-venv ca-certificates" in text


def test_default_out_dir(tmp_path):
    wheel = tmp_path / "x-1.0-cp311-cp311-linux_x86_64.whl"
    assert runner.default_out_dir(wheel) == tmp_path


def test_bad_arguments_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such wheel"):
        runner.verify_wheel(tmp_path / "missing.whl", options=VerifyOptions(host=True), console=QUIET)
    wheel = tmp_path / "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    with pytest.raises(InputError, match="recipe's Python is 3.11"):
        runner.verify_wheel(wheel, spec=make_spec(), options=VerifyOptions(host=True), console=QUIET)
    with pytest.raises(InputError, match="default verification image"):
        runner.verify_wheel(wheel, options=VerifyOptions(host=False), console=QUIET)
    ok = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    ok.write_bytes(b"")
    with pytest.raises(InputError, match="--sizes"):
        runner.verify_wheel(ok, options=VerifyOptions(host=True, sizes="8:1"), console=QUIET)
    other = tmp_path / "other-1.0-cp311-cp311-linux_x86_64.whl"
    other.write_bytes(b"")
    with pytest.raises(InputError, match="cannot tell the module"):
        runner.verify_wheel(other, options=VerifyOptions(host=True), console=QUIET)


def test_wheel_requirements_are_judged_for_the_target_python():
    """torch 2.6's `setuptools; python_version >= "3.12"`: pip download on a 3.11 host skips it, and the
    install of a cp313 wheel then fails offline (seen on the real pytorch2.6-cpu-trixie wheel)."""
    from buildctl.store.wheel_facts import requires_for_python

    reqs = ["filelock", 'setuptools; python_version >= "3.12"', 'optree>=0.13.0; extra == "optree"',
            'sympy==1.13.1; python_version >= "3.9"']
    assert requires_for_python(reqs, "3.13") == ["filelock", "setuptools", "sympy==1.13.1"]
    assert requires_for_python(reqs, "3.11") == ["filelock", "sympy==1.13.1"]


def test_two_verifications_filling_one_wheelhouse_at_once(tmp_path):
    """Two verifications of one key at once (two builds, two `invoke verify`): the second starts while
    the first's pip is writing a wheel into the folder it fills (a truncated copy there). The second
    gets a complete wheelhouse of sound wheels, and so does the first (suspected in issue 20, proved:
    both filled one folder, so the second took the first's half-written wheel for a download of its
    own). Real pip, on local wheels: no index."""
    import zipfile

    from publish_helpers import make_wheel

    wheel = make_wheel(tmp_path / "build", "bctl-demo", "1.0")
    tool = make_wheel(tmp_path / "tools", "bctl-tool", "2.0")  # an optional requirement, as nvidia-ml-py
    plats = wheelhouse.manylinux_platforms((2, 36), "x86_64")
    cache = tmp_path / "cache"
    second: list = []

    def first_on_line(line: str) -> None:
        if line != f"pip download {tool}" or second:
            return
        [filling] = [d for d in cache.rglob("*") if d.is_dir() and not (d / ".complete.json").exists()
                     and d.name != "wheelhouse"]  # the folder the first fills, wherever that is
        (filling / tool.name).write_bytes(tool.read_bytes()[:200])  # pip half-way through writing it
        second.append(wheelhouse.prepare_wheelhouse(wheel, [], [str(tool)], "3.11", plats, cache, lambda _: None))

    first = wheelhouse.prepare_wheelhouse(wheel, [], [str(tool)], "3.11", plats, cache, first_on_line)
    for wh, have in (second[0], first):
        assert have == [str(tool)] and sorted(p.name for p in wh.iterdir()) == [".complete.json", tool.name]
        with zipfile.ZipFile(wh / tool.name) as z:
            assert z.testzip() is None
    assert [p.name for p in cache.joinpath("wheelhouse").iterdir()] == [first[0].name]  # no staging left


def test_verifying_a_wheel_opens_its_zip_once(tmp_path, monkeypatch):
    """Issue 37: a wheel's facts are read once into a record and passed (the runner read its METADATA, then
    the wheelhouse read it again). A real wheel and real pip (local files, no index); only the probe's run
    on the host is stood in for. Counted: the zips this process opens (pip's are its own)."""
    import zipfile

    from publish_helpers import make_wheel

    from buildctl.verify.report import VerificationFailed

    wheel = make_wheel(tmp_path / "build", "demofw", "0.1.0")
    opened: list[str] = []
    real_init = zipfile.ZipFile.__init__

    def counting_init(self, file, *args, **kwargs):
        opened.append(str(getattr(file, "name", file)))
        real_init(self, file, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", counting_init)
    monkeypatch.setattr(runner, "OPTIONAL_TOOLS", ())  # nvidia-ml-py would need an index
    monkeypatch.setattr(runner, "run_on_host", lambda *a, **k: ({"ok": False, "fatal": "stood in"}, {}))
    options = VerifyOptions(host=True, sweep=False, cache_dir=tmp_path / "cache")
    with pytest.raises(VerificationFailed):
        runner.verify_wheel(wheel, spec=make_spec(framework="demofw"), options=options, out_dir=tmp_path / "out",
                            console=QUIET)
    assert [name for name in opened if name.endswith(".whl")] == [str(wheel)]


@pytest.mark.parametrize("json_out, passed", [(True, True), (True, False), (False, True)])
def test_invoke_verify_prints_the_json_itself_and_gives_the_verification_its_console(json_out, passed, tmp_path,
                                                                                    monkeypatch, capsys):
    """Issue 42: the runner returns its report (or raises with it) on the console the command gives, and the
    command prints the JSON: with --json the report alone on stdout, passed or failed, the progress on stderr."""
    import json

    from invoke.exceptions import Exit
    from verify_fixtures import make_report

    from buildctl.cli.verify import VerifyRequest, verify
    from buildctl.settings import Settings
    from buildctl.verify.report import VerificationFailed

    report = make_report()

    def verify_wheel(wheel, *, console, **kwargs):
        console.print("verify: progress")
        if not passed:
            raise VerificationFailed("wheel: a check failed", report=report)
        return report

    monkeypatch.setattr(runner, "verify_wheel", verify_wheel)
    request = VerifyRequest(wheel=str(tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"))
    if passed:
        verify(request, options=VerifyOptions(json_out=json_out), settings=Settings.model_validate({}))
    else:
        with pytest.raises(Exit):
            verify(request, options=VerifyOptions(json_out=json_out), settings=Settings.model_validate({}))
    out, err = capsys.readouterr()
    if json_out:
        assert json.loads(out) == json.loads(json.dumps(report.to_dict(), default=str))
        assert err.startswith("verify: progress\n")
    else:
        assert out == "verify: progress\n" and err == ""
