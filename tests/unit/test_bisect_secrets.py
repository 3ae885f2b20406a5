"""Issue 43, items 1 and 2: `invoke bisect` writes and shows no credential, and its history fetch puts none
on git's command line or in the bare copy.

Before: the command's `--set` values stood in clear in the bisect log (`request.sets`, `request.changes`) and
the report's "build it again" line (plain, --json, --markdown); a token given only by `--values` was printed
at every step and in the final error; `git fetch <URL with its token>` put the token on git's command line
and (a partial clone remembers its promisor remote by URL) in the bare copy's config; the copy's folder was
named by a digest of the URL with its token, so a rotated token fetched the whole history again.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl.bisect import axes, report
from buildctl.bisect.bisector import Outcome
from buildctl.bisect.child import Criterion
from buildctl.bisect.gitrepo import History
from buildctl.bisect.record import BuildRecord, Entry, StepCriterion
from buildctl.bisect.search import Answer

REPO = Path(__file__).resolve().parents[2]
TOKENS = ("BaseTok3n4x", "ValTok3n1a", "ValTok3n2b", "ValTok3n3c", "EnvTok3n9z")


def leaked(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [t for t in TOKENS if t.encode() in data or base64.b64encode(t.encode()) in data]


def leaked_files(root: Path) -> list[str]:
    return [f"{p}: {leaked(p.read_bytes())}" for p in root.rglob("*") if p.is_file() and leaked(p.read_bytes())]


def test_a_bisect_over_token_urls_writes_and_prints_none_of_them(tmp_path):
    """The base --set's token and three given only by --values (a login, and ?token=): the run stops at its
    first step (no engine here), after the log was written and each step was named."""
    artifacts = tmp_path / "artifacts"
    values = (f"https://ci:{TOKENS[1]}@h.example/a,https://ci:{TOKENS[2]}@h.example/b,"
              f"https://h.example/c?token={TOKENS[3]}")
    proc = invoke_here("bisect", "--recipe", "demo-cpu", "--no-preflight",
                       "--set", f'framework.source={{git: "https://ci:{TOKENS[0]}@git.example/x.git", ref: main}}',
                       "--set", f"build.env.GH_TOKEN={TOKENS[4]}",
                       "--axis", "set:build.env.MIRROR", "--values", values, cwd=REPO,
                       env={"BUILDCTL_ARTIFACTS": str(artifacts)})
    assert proc.returncode == 1, proc.stderr
    assert leaked(proc.stdout + proc.stderr) == [], proc.stdout + proc.stderr
    logs = list((artifacts / ".bisect").glob("*.json"))
    assert logs and '"request"' in logs[0].read_text()
    assert leaked_files(artifacts) == []


def test_the_report_carries_no_token_in_any_form():
    """The "build it again" line in the table, --json and --markdown: the command's and the step's --set."""
    changes = tuple(axes.Change(label, (f"build.env.MIRROR=https://ci:{token}@h.example/{label}",))
                    for label, token in (("a", TOKENS[1]), ("b", TOKENS[2])))
    axis = axes.Axis("set", "build.env.MIRROR", changes)
    entries = {i: Entry(i, c.label, f"k{i}", StepCriterion(), BuildRecord(r == "pass", 1.0), result=r)
               for i, (c, r) in enumerate(zip(changes, ("pass", "fail"), strict=True))}
    outcome = Outcome(Answer(0, 1, ()), None, entries, {0: "old", 1: "new"}, 2.0)
    data = report.to_dict(outcome, recipe="demo-cpu", axis=axis, criterion=Criterion(), first_good=False,
                          log_path="l", sets=[f'framework.source={{git: "https://ci:{TOKENS[0]}@git.example/x.git"}}',
                                              f"build.env.GH_TOKEN={TOKENS[4]}"])
    from rich.console import Console

    console = Console(record=True, width=100)
    console.print(report.renderable(data))
    for shown in (repr(data), report.markdown(data), console.export_text()):
        assert leaked(shown) == [], shown
    assert "build.env.MIRROR=https://***@h.example/b" in data["failing_step"]["build"]


def test_labels_of_token_values_are_masked():
    axis = axes.field_values("build.env.MIRROR", [f"https://ci:{TOKENS[1]}@h.example/a", f"https://h/c?token={TOKENS[3]}"],
                             None, None, first_good=False)
    assert leaked(" ".join(c.label for c in axis.changes)) == []
    digest = "0" * 64
    axis = axes.versions(axes_spec_with_tarball(), [f"https://h.example/x-1.tar.gz?token={TOKENS[3]}#sha256={digest}",
                                                    f"https://ci:{TOKENS[2]}@h.example/x-2.tar.gz#sha256={digest}"],
                         None, None, first_good=False)
    assert leaked(" ".join(c.label for c in axis.changes)) == [], [c.label for c in axis.changes]


def axes_spec_with_tarball():
    from buildctl import recipe

    return recipe.load("demo-cpu", ["framework.source={tarball: {url: 'https://h.example/x-0.tar.gz', "
                                    f"sha256: '{'0' * 64}'}}}}"])


# ---------------------------------------------------------------------------------------- the history fetch


def _git_http():
    spec = importlib.util.spec_from_file_location("git_http", REPO / "tests" / "integration" / "git_http.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def private_server(tmp_path_factory):
    """A git smart-HTTP server on loopback that answers only `ci:<TOKENS[0]>` (401 otherwise, as GitHub)."""
    git_http = _git_http()
    root = tmp_path_factory.mktemp("served")
    subprocess.run(["git", "init", "-q", str(root / "src")], check=True)
    for subject in ("one", "two"):
        subprocess.run(["git", "-C", str(root / "src"), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", subject], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(root / "src"), str(root / "x.git")], check=True)
    expected = "Basic " + base64.b64encode(f"ci:{TOKENS[0]}".encode()).decode()

    class Private(git_http._Handler):
        def do_GET(self) -> None:  # noqa: N802
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            super().do_GET()

        do_POST = do_GET  # noqa: N815

    server = git_http.GitServer(root)
    server.server.RequestHandlerClass = type("Handler", (Private,), {"root": root})
    with server:
        yield server.url.replace("http://", f"http://ci:{TOKENS[0]}@") + "x.git"


def test_the_history_fetch_puts_no_token_on_a_command_line_or_in_a_file(private_server, tmp_path, monkeypatch):
    import buildctl.bisect.gitrepo as gitrepo

    argvs: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(args, *a, **kw):
        argvs.append(list(args))
        return real_run(args, *a, **kw)

    monkeypatch.setattr(gitrepo.subprocess, "run", recording_run)
    history = History(private_server, tmp_path / "git", environ=os.environ).fetch()
    assert history.resolve("HEAD") is not None and [c.subject for c in history.between(
        history.resolve("HEAD~1"), history.resolve("HEAD"))] == ["two"]
    assert any("fetch" in argv for argv in argvs)
    assert leaked(repr(argvs)) == [], argvs
    assert leaked_files(tmp_path) == []
    rotated = History(private_server.replace(TOKENS[0], "An0therTok3n"), tmp_path / "git", environ=os.environ)
    assert rotated.path == history.path  # a rotated token reuses the copy


def test_the_builds_git_fetch_puts_no_token_on_gits_command_line(private_server, tmp_path):
    """templates/git-fetch.sh (a build's source step, in the container) fetched `git fetch <URL with its token>`:
    the token stood in git's argv, readable in /proc on the host too. The login now goes through a credential
    helper of git's environment for that host; git is given the URL as rendered."""
    bindir, calls = tmp_path / "bin", tmp_path / "git-calls.txt"
    bindir.mkdir()
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    (bindir / "git").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {calls}\nexec {real_git} \"$@\"\n")
    (bindir / "git").chmod(0o755)
    clean = private_server.replace(f"ci:{TOKENS[0]}@", "")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), "BUILDCTL_SECRETS_TAKEN": "1",
           "BUILDCTL_URL_MAP": f"{clean} {private_server}", "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["bash", str(REPO / "templates" / "git-fetch.sh"), clean, "HEAD", str(tmp_path / "src"), "0"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert subprocess.run(["git", "-C", str(tmp_path / "src"), "log", "-1", "--format=%s"], capture_output=True,
                          text=True).stdout.strip() == "two"
    assert "fetch" in calls.read_text() and leaked(calls.read_text()) == [], calls.read_text()
    assert leaked_files(tmp_path / "src") == []
