"""A git source's history on this machine, for `invoke bisect --axis commits`: which commits lie between
the two ends, their subjects, and whether one end is an ancestor of the other.

The history is fetched into a bare repository of the bisect folder (`<artifacts>/.bisect/git/`), named by
a digest of the URL without its credentials (a rotated token reuses the copy), through the site's git mirrors
(`--git-mirror`: git's url.<MIRROR>.insteadOf from the environment, as the build's own fetch reads them).
Only commits are fetched where the server can filter (`--filter=tree:0`): a bisect needs their parents and
subjects, never their files; the build fetches the tree of each commit it builds. git is given the URL
without its login (the copy's remote, and every command line, hold only that); the login reaches git
through a credential helper of its environment, for that URL's host alone (git_env.git_login_env), and no
FETCH_HEAD is written. A subject is a commit's text: shown without terminal controls, cut at 100 characters.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from buildctl import urls
from buildctl.errors import InputError
from buildctl.git_env import git_login_env
from buildctl.store.git_refs import run_git
from buildctl.terminal_text import strip_controls
from buildctl.urls import mask

FETCH_TIMEOUT_S = 1800
SUBJECT_CHARS = 100
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]


class History:
    """A bare copy of one repository's branches and tags; git starts from `environ` (the command's
    environment: the site's git mirrors, a proxy, HOME's git config)."""

    def __init__(self, url: str, folder: Path, site=None, *, environ: Mapping[str, str]) -> None:
        self.url, self.site, self.environ = url, site, dict(environ)
        parsed = urls.split(url) if "://" in url else None
        self.clean_url = urls.strip(url) if parsed is not None and parsed.has_login else url
        self.path = folder / f"{hashlib.sha256(self.clean_url.encode()).hexdigest()[:16]}.git"

    def _git(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        env = {**self.environ, "GIT_TERMINAL_PROMPT": "0", **git_login_env(self.url, self.site)}
        done = run_git(["git", "-C", str(self.path), *args], env, timeout, what=f"git {args[0]} of {mask(self.url)}",
                       needed_for="a bisect over commits reads the history here",
                       slow_fix="check the network or give a --git-mirror near you")
        if check and done.returncode != 0:
            last = mask(strip_controls((done.stderr.strip().splitlines() or ["no message"])[-1]))[:300]
            raise InputError(f"git {args[0]} of {mask(self.url)} failed: {last}; fix: check the URL, the network, "
                             "or --git-mirror")
        return done

    def fetch(self, on_note=None) -> History:
        """The repository's branches and tags, fetched (again: a new commit may have come since). When the
        source does not answer and a copy was fetched before, the copy is used (a bisect replays offline)
        and `on_note` says so; without a copy, one line (InputError)."""
        had_copy = (self.path / "HEAD").is_file()
        if not had_copy:
            self.path.mkdir(parents=True, exist_ok=True)
            self._git("init", "--quiet", "--bare")
        # A named remote: a partial fetch records its promisor remote in the copy's config, by URL when it has no
        # name. Set each time: an older copy may have none.
        self._git("config", "remote.origin.url", self.clean_url)
        try:
            self._git("fetch", "--quiet", "--prune", "--no-write-fetch-head", "--filter=tree:0", "origin",
                      "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", timeout=FETCH_TIMEOUT_S)
        except InputError as e:
            if not had_copy or on_note is None:
                raise
            on_note(f"{str(e).split('; fix:')[0]}; using the copy fetched before ({self.path})")
        return self

    def resolve(self, ref: str) -> str | None:
        """The commit a branch, tag or (abbreviated) sha names; None when the repository has none."""
        if not ref or ref.startswith("-"):
            return None
        done = self._git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
        sha = done.stdout.strip()
        return sha if done.returncode == 0 and _SHA.fullmatch(sha) else None

    def is_ancestor(self, old: str, new: str) -> bool:
        return self._git("merge-base", "--is-ancestor", old, new, check=False).returncode == 0

    def between(self, old: str, new: str) -> list[Commit]:
        """The commits after `old` up to `new`, oldest first, along `new`'s first parents (a merged branch is
        one change: its merge commit)."""
        done = self._git("log", "--first-parent", "--format=%H%x00%s", f"{old}..{new}", timeout=600)
        return list(reversed(parse_log(done.stdout)))

    def commit(self, sha: str) -> Commit:
        done = self._git("log", "-1", "--format=%H%x00%s", sha)
        (found,) = parse_log(done.stdout)
        return found


def parse_log(text: str) -> list[Commit]:
    """`git log --format=%H%x00%s` output as commits (newest first, as git prints them); a subject is shown
    without terminal controls, cut at SUBJECT_CHARS."""
    commits = []
    for line in text.splitlines():
        sha, sep, subject = line.partition("\0")
        if not sep or not _SHA.fullmatch(sha):
            continue
        subject = strip_controls(subject).strip()
        commits.append(Commit(sha, subject if len(subject) <= SUBJECT_CHARS else subject[:SUBJECT_CHARS - 1] + "…"))
    return commits
