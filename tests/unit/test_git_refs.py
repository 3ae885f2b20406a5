"""The resolve step of git sources (issue 41): a ref is keyed by the commit it names, asked of the server
before the key (one git ls-remote), never by its name; the build checks out exactly that commit; --offline
takes the last resolution and says so; a login never reaches a command line. A local bare repository
(file://) stands for the server: no engine, no network."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.errors import InputError
from buildctl.store import git_refs
from buildctl.store import key as key_mod

ASK_THE_SERVER = git_refs.ls_remote  # as imported: tests/unit/conftest.py answers for servers that are not file://


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def server(tmp_path) -> tuple[Path, str]:
    """A repository with one commit on main; its file:// URL."""
    repo = tmp_path / "fw"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    return repo, f"file://{repo}"


def spec_for(url: str, ref: str = "main"):
    return recipe.load("demo-cpu", [f"framework.source={{git: '{url}', ref: {ref}}}"])


def key_over(spec) -> tuple[key_mod.KeyInputs, render_mod.Rendered]:
    rendered = render_mod.render(spec)
    return key_mod.request_inputs(rendered, "sha256:b", b"", spec.build.env), rendered


def test_a_moved_branch_gives_a_new_key_and_changed_names_the_commit(server, tmp_path):
    repo, url = server
    notes: list[str] = []
    first = git_refs.pin(spec_for(url), tmp_path / "artifacts", on_note=notes.append, environ=os.environ)
    old = _git(repo, "rev-parse", "HEAD")
    assert first.framework.source.commit == old
    assert notes == [f"buildctl: main of {url} is {old[:12]} (git ls-remote)"]
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    new = _git(repo, "rev-parse", "HEAD")
    second = git_refs.pin(spec_for(url), tmp_path / "artifacts", on_note=notes.append, environ=os.environ)
    (was, _), (now, rendered) = key_over(first), key_over(second)
    assert was.key != now.key
    assert f"\"$SRC\" 1 {new}" in rendered.files["build.sh"]  # the build checks out exactly the commit keyed
    changes = key_mod.changed(now, was, recipe.masked_dump(second), recipe.masked_dump(first))
    assert {"kind": "source", "name": "framework.source.commit", "change": f"{old[:12]} -> {new[:12]}"} in changes
    assert f"framework.source.commit {old[:12]} -> {new[:12]}" in key_mod.describe(changes)


def test_a_full_sha_needs_no_network(monkeypatch, tmp_path):
    def no_git(*args, **kwargs):
        raise AssertionError("git was run")

    monkeypatch.setattr(subprocess, "run", no_git)
    sha = "0123456789abcdef" * 2 + "01234567"
    spec = git_refs.pin(spec_for("https://git.invalid/fw.git", sha), tmp_path, on_note=lambda line: None, environ=os.environ)
    assert spec.framework.source.commit == sha


def test_an_annotated_tag_is_its_commit(server, tmp_path):
    repo, url = server
    _git(repo, "tag", "-a", "v1.0", "-m", "release")
    spec = git_refs.pin(spec_for(url, "v1.0"), tmp_path, on_note=lambda line: None, environ=os.environ)
    assert spec.framework.source.commit == _git(repo, "rev-parse", "HEAD")


def test_offline_takes_the_last_resolution_and_says_so(server, tmp_path):
    repo, url = server
    built = git_refs.pin(spec_for(url), tmp_path, on_note=lambda line: None, environ=os.environ)
    assert not (tmp_path / git_refs.RECORD).exists()  # asking writes nothing: a key has no side effects
    git_refs.record(built, tmp_path)  # the build records what it builds from
    old = built.framework.source.commit
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    notes: list[str] = []
    spec = git_refs.pin(spec_for(url), tmp_path, offline=True, on_note=notes.append, environ=os.environ)
    assert spec.framework.source.commit == old
    assert len(notes) == 1 and notes[0].startswith(f"buildctl: --offline: main of {url} taken as {old[:12]}")
    with pytest.raises(InputError, match="never resolved here; fix: build once without --offline"):
        git_refs.pin(spec_for(url), tmp_path / "elsewhere", offline=True, on_note=lambda line: None, environ=os.environ)


def test_an_unknown_ref_is_one_line(server, tmp_path):
    _, url = server
    with pytest.raises(InputError, match="git ref nope not found in"):
        git_refs.pin(spec_for(url, "nope"), tmp_path, on_note=lambda line: None, environ=os.environ)


def test_a_login_never_reaches_the_command_line(monkeypatch, tmp_path):
    seen = {}

    def fake(args, **kwargs):
        seen.update(args=args, env=kwargs["env"])
        return subprocess.CompletedProcess(args, 0, "ab" * 20 + "\trefs/heads/main\n", "")

    monkeypatch.setattr(subprocess, "run", fake)
    monkeypatch.setattr(git_refs, "ls_remote", ASK_THE_SERVER)
    spec = git_refs.pin(spec_for("https://ci:s3cr3t-t0k3n@git.example/fw.git"), tmp_path, on_note=lambda line: None, environ=os.environ)
    assert spec.framework.source.commit == "ab" * 20
    assert "s3cr3t-t0k3n" not in " ".join(seen["args"])
    assert seen["env"]["BUILDCTL_GIT_PASSWORD"] == "s3cr3t-t0k3n"
    git_refs.record(spec, tmp_path)
    assert "s3cr3t-t0k3n" not in (tmp_path / git_refs.RECORD).read_text()
    assert "git.example/fw.git" in (tmp_path / git_refs.RECORD).read_text()


def test_a_mirror_on_another_host_is_not_given_the_login(monkeypatch, tmp_path):
    """git is asked, with the environment ls_remote gives it, for the login of each host: the URL's host gets
    it, a --git-mirror's host (where git goes through url.<MIRROR>.insteadOf) does not."""
    seen = {}

    def fake(args, **kwargs):
        seen.update(env=kwargs["env"])
        return subprocess.CompletedProcess(args, 0, "ab" * 20 + "\trefs/heads/main\n", "")

    monkeypatch.setattr(subprocess, "run", fake)
    site = SimpleNamespace(git_mirrors=("https://git.example/=https://mirror.elsewhere/",))
    ASK_THE_SERVER("https://ci:s3cr3t-t0k3n@git.example/fw.git", "main", site, environ=os.environ)
    monkeypatch.undo()
    env = {**seen["env"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}

    def login_for(host: str) -> str:
        return subprocess.run(["git", "credential", "fill"], input=f"protocol=https\nhost={host}\n\n", env=env,
                              capture_output=True, text=True).stdout

    assert "password=s3cr3t-t0k3n" in login_for("git.example")
    assert "s3cr3t-t0k3n" not in login_for("mirror.elsewhere")


def test_every_git_source_is_resolved():
    data = recipe.load("cuda12.1-nccl2.18").model_dump(mode="json")
    data["toolchain"]["nccl"]["install"] = "source"
    names = [path for path, _, _ in git_refs.git_sources(data)]
    assert ("toolchain", "nccl") in names


def test_the_no_op_memo_asks_a_moving_ref_once_and_misses_when_it_moved(server, tmp_path, monkeypatch):
    from buildctl.cli import noop
    from buildctl.settings import Settings

    repo, url = server
    old = _git(repo, "rev-parse", "HEAD")
    settings = Settings(artifacts=tmp_path)
    notes: list[str] = []
    assert noop._git_refs_hold({"git": [[url, "main", old]]}, settings, notes.append)
    assert notes == [f"buildctl: main of {url} is {old[:12]} (git ls-remote)"]
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    assert not noop._git_refs_hold({"git": [[url, "main", old]]}, settings, notes.append)

    def no_git(*args, **kwargs):
        raise AssertionError("git was run")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert noop._git_refs_hold({"git": [["https://git.invalid/x.git", old, old]]}, settings, notes.append)


def test_the_memo_says_what_it_asked_on_stderr_under_json(monkeypatch, capsys):
    """--json: stdout carries only the JSON; the ls-remote line goes to stderr."""
    from buildctl.cli import noop
    from buildctl.settings import Settings

    def valid(digest, settings, notes):
        notes.append("buildctl: main of https://git.example/fw.git is 0123456789ab (git ls-remote)")
        return {}

    monkeypatch.setattr(noop, "_request", lambda *a: "digest")
    monkeypatch.setattr(noop, "_still_valid", valid)
    monkeypatch.setattr(noop, "_print", lambda entry, as_json, t0: None)
    assert noop.build("demo-cpu", [], settings=Settings(), no_preflight=False, as_json=True)
    out, err = capsys.readouterr()
    assert out == "" and "(git ls-remote)" in err


def test_a_resolved_spec_is_never_asked_again(server, tmp_path):
    """A bisect step's child resolves once: its dry run's resolved spec is what it builds (cli/child.py), and a
    bundle's or manifest's resolved recipe keeps the commit it recorded, though the branch moved since."""
    repo, url = server
    asked: list[str] = []
    first = git_refs.pin(spec_for(url), tmp_path, on_note=asked.append, environ=os.environ)
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    again = git_refs.pin(first, tmp_path, on_note=asked.append, environ=os.environ)
    assert again is first and len(asked) == 1
