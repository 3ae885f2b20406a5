"""The resolve step of git sources: every git ref a recipe names (the framework's, an extension's, NCCL's,
torch_npu's) is resolved to the commit it names before the key is taken, and the key and the build take that
commit (the build script checks out exactly it). A full 40-hex sha is its own commit: no network.

A ref is asked of its server with one `git ls-remote` each, through the site's git mirrors (git's
url.<MIRROR>.insteadOf from the environment, as the build's own fetch reads them). A login in the URL
never reaches a command line: git is given the URL without it, and the login through a credential
helper that reads it from the environment, for the URL's host only (git_env.git_login_env). Asking writes
nothing (a key is computed with no side effects: --dry-run, a bisect step's key); a build records the
commits it builds from (`record`, into `<artifacts root>/.resolved/git.json`: the URL without its login, the
ref, the commit, when), and `--offline` builds from that record instead of asking, and says so in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from buildctl import urls
from buildctl.errors import InputError
from buildctl.git_env import git_login_env
from buildctl.secrets import checked_argv
from buildctl.terminal_text import strip_controls

SHA = re.compile(r"[0-9a-f]{40}")
LS_REMOTE_TIMEOUT_S = 120
RECORD = Path(".resolved") / "git.json"


def git_sources(data: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str, str]]:
    """[(path of the source in the recipe's data, URL, ref)] of every git source a recipe (as JSON data) has."""
    found: list[tuple[tuple[str | int, ...], str, str]] = []
    src = (data.get("framework") or {}).get("source") or {}
    if src.get("git"):
        found.append((("framework", "source"), src["git"], src["ref"]))
    for i, ext in enumerate(data.get("extensions") or []):
        s = ext.get("source") or {}
        if s.get("git"):
            found.append((("extensions", i, "source"), s["git"], s["ref"]))
    toolchain = data.get("toolchain") or {}
    nccl = toolchain.get("nccl") or {}
    if nccl.get("install") == "source":
        found.append((("toolchain", "nccl"), nccl["git"], nccl.get("ref") or f"v{nccl['version']}-1"))
    npu = (toolchain.get("ascend") or {}).get("torch_npu") or {}
    if npu.get("git"):
        found.append((("toolchain", "ascend", "torch_npu"), npu["git"], npu["ref"]))
    return found


def _source_nodes(data: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """[(the source's own mapping inside `data`, URL, ref)] of every git source: its `commit` read or set there."""
    found = []
    for path, url, ref in git_sources(data):
        node: Any = data
        for part in path:
            node = node[part]
        found.append((node, url, ref))
    return found


def pinned(data: dict[str, Any]) -> list[list[str]] | None:
    """[[URL, ref, commit]] of a resolved recipe's git sources (as JSON data, e.g. a manifest's resolved_recipe),
    for the no-op memo to ask again; None when one has a login in its URL or no commit (nothing to compare)."""
    out = []
    for node, url, ref in _source_nodes(data):
        commit = node.get("commit")
        if not isinstance(commit, str) or not SHA.fullmatch(commit) or urls.MASK in url or urls.login(url):
            return None
        out.append([url, ref, commit])
    return out


def pin(spec, artifacts_root: Path | None, *, offline: bool = False, on_note: Callable[[str], None],
        environ: Mapping[str, str]):
    """`spec` with each git source's `commit` set to the commit its ref names now (or, offline, did when last
    asked); `spec` itself when it has no git source left to resolve. A source that has its commit already (a
    spec this step resolved, a bundle's or a manifest's resolved recipe) is resolved: kept, never asked again.
    One line each through `on_note` for what was asked; `environ`: the command's, what git starts from."""
    data = spec.model_dump(mode="json")
    unresolved = [(node, url, ref) for node, url, ref in _source_nodes(data) if not node.get("commit")]
    if not unresolved:
        return spec
    resolver = Resolver(artifacts_root, getattr(spec, "site", None), offline=offline, on_note=on_note, environ=environ)
    for node, url, ref in unresolved:
        node["commit"] = resolver.commit(url, ref)
    return type(spec).model_validate(data)


class Resolver:
    """Answers which commit a git URL's ref names: asked of the server, or read from the record (offline)."""

    def __init__(self, artifacts_root: Path | None, site=None, *, offline: bool = False,
                 on_note: Callable[[str], None], environ: Mapping[str, str]) -> None:
        from buildctl.store.artifacts import root_or_default

        self.record = root_or_default(artifacts_root) / RECORD
        self.site, self.offline, self.on_note, self.environ = site, offline, on_note, environ

    def commit(self, url: str, ref: str) -> str:
        if SHA.fullmatch(ref):
            return ref
        shown = urls.mask(url)
        if self.offline:
            entry = _read(self.record).get(_entry_name(url, ref))
            if not isinstance(entry, dict) or not SHA.fullmatch(str(entry.get("commit", ""))):
                raise InputError(f"--offline: {ref} of {shown} was never resolved here; fix: build once without "
                                 "--offline (it asks the server which commit the ref names)")
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(entry.get("at", 0)))
            self.on_note(f"buildctl: --offline: {ref} of {shown} taken as {entry['commit'][:12]}, as resolved "
                         f"{when} (not asked again)")
            return entry["commit"]
        sha = ls_remote(url, ref, self.site, environ=self.environ)
        self.on_note(f"buildctl: {ref} of {shown} is {sha[:12]} (git ls-remote)")
        return sha


def _entry_name(url: str, ref: str) -> str:
    return hashlib.sha256(f"{urls.strip(url)}\0{ref}".encode()).hexdigest()[:24]


def record(spec, artifacts_root: Path | None) -> None:
    """Record the commit each git ref of the resolved `spec` names, for `--offline`: called by a build, never by
    the resolve step (computing a key writes nothing). A full sha is its own commit: nothing to record."""
    from buildctl.store.artifacts import root_or_default

    data = spec.model_dump(mode="json")
    entries = {}
    for node, url, ref in _source_nodes(data):
        commit = node.get("commit")
        if not SHA.fullmatch(ref) and isinstance(commit, str) and SHA.fullmatch(commit):
            entries[_entry_name(url, ref)] = {"url": urls.mask(urls.strip(url)), "ref": ref, "commit": commit,
                                              "at": int(time.time())}
    if entries:
        _write(root_or_default(artifacts_root) / RECORD, entries)


def ls_remote(url: str, ref: str, site=None, *, environ: Mapping[str, str]) -> str:
    """The commit `ref` (a tag, peeled; a branch; a full ref name) names on the server; one line when none.
    `environ`: the command's, what git starts from."""
    shown = urls.mask(url)
    if ref.startswith("-"):
        raise InputError(f"git ref {ref} of {shown}: not a ref; fix: a tag, branch or full commit sha")
    env = {**environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", **git_login_env(url, site)}
    done = run_git(["git", "ls-remote", "--", urls.strip(url), ref, f"{ref}^{{}}"], env, LS_REMOTE_TIMEOUT_S,
                   what=f"git ls-remote of {shown}", needed_for="a git source's ref is resolved to its commit here, "
                   "before the key", slow_fix="check the network, give a --git-mirror near you, or --offline to build "
                   "the commit resolved last time")
    if done.returncode != 0:
        last = urls.mask_text(strip_controls((done.stderr.strip().splitlines() or ["no message"])[-1]))[:300]
        raise InputError(f"git ls-remote of {shown} failed: {last}; fix: check the URL, the network or "
                         "--git-mirror, or --offline to build the commit resolved last time")
    refs = {}
    for line in done.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if SHA.fullmatch(sha):
            refs[name] = sha
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", f"{ref}^{{}}", ref):
        if name in refs:
            return refs[name]
    hint = " (an abbreviated sha: give all 40 hex digits)" if re.fullmatch(r"[0-9a-f]{4,39}", ref) else ""
    raise InputError(f"git ref {ref} not found in {shown}{hint}; fix: a tag or branch it has (git ls-remote URL), "
                     "or a full commit sha")


def run_git(argv: list[str], env: dict[str, str], timeout: float, *, what: str, needed_for: str,
            slow_fix: str) -> subprocess.CompletedProcess:
    """git run without a terminal, its output captured; one line (InputError) when git is missing (`needed_for`:
    why it is needed here) or `what` takes over `timeout` seconds."""
    try:
        return subprocess.run(checked_argv(argv), env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise InputError(f"git is not installed on this machine; fix: install git ({needed_for})") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{what} took over {timeout:.0f} s; fix: {slow_fix}") from None


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Record answers (atomically; a store this process cannot write keeps no record: --offline says so)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {**_read(path), **entries}
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return
