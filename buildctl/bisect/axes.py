"""What changes from one step of `invoke bisect` to the next (`--axis`), as the `--set` overrides of an
ordinary build:

| axis | a change is | the step's build gets |
|---|---|---|
| commits | a commit of a git source, between the ends (first parents) | `<source>.ref=<sha>` |
| versions | a ref of a git source, a release of an sdist, a tarball URL | `<source>.ref=V`, `.pypi=N==V` + `.sha256`, `.tarball.url` + `.sha256` |
| patches | the recipe's `framework.patches` up to one of them (0: none) | `framework.patches=[...the first k...]` |
| set:FIELD | a value of that field | `FIELD=VALUE` |

`<source>` is `framework.source`, or with `--extension NAME` that extension's (`extensions.<i>.source`).
The changes run from the old end to the new end: --good to --bad, or, searching for the first good
change (`--first-good`), --bad to --good. Every refusal is one line (InputError), before any build.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from buildctl.errors import InputError
from buildctl.recipe.schema import Spec
from buildctl.secrets import mask_set
from buildctl.terminal_text import strip_controls
from buildctl.urls import mask

if TYPE_CHECKING:
    from buildctl.bisect.gitrepo import History

KINDS = ("commits", "versions", "patches")
FIELD = re.compile(r"[a-z_][a-z0-9_]*(?:\.(?:[A-Za-z0-9_]+))*")
DEFAULT_INDEX = "https://pypi.org/simple"
INDEX_PAGE_BYTES = 32 << 20


@dataclass(frozen=True)
class Change:
    """One position of the axis: how the table names it, and the build's --set overrides for it."""

    label: str
    sets: tuple[str, ...]
    subject: str = ""  # a commit's subject, a patch's file


@dataclass(frozen=True)
class Axis:
    kind: str  # commits | versions | patches | set
    target: str  # what changes: framework.source, extensions.0.source (torch-scatter), a field
    changes: tuple[Change, ...]  # oldest first: changes[0] is the old end, changes[-1] the new end

    def describe(self) -> str:
        return f"{len(self.changes)} {self.kind if self.kind != 'set' else 'values'} of {self.target}"


def parse_axis(text: str) -> tuple[str, str | None]:
    """`commits`, `versions`, `patches` or `set:FIELD` as (kind, field)."""
    if text in KINDS:
        return text, None
    kind, sep, field = (text or "").partition(":")
    if kind == "set" and sep and FIELD.fullmatch(field):
        return "set", field
    raise InputError(f"--axis {ascii(text)[1:-1][:80]}: not an axis; fix: --axis commits, versions, patches or "
                     "set:FIELD (e.g. set:toolchain.nccl.version)")


def split_values(items: Sequence[str] | None) -> list[str]:
    """--values a,b,c (repeatable): each value once, in the order given."""
    out: list[str] = []
    for item in items or ():
        for value in item.split(","):
            value = value.strip()
            if value and value not in out:
                out.append(value)
    return out


def source_target(spec: Spec, extension: str | None) -> tuple[str, object]:
    """(the --set path of the source that changes, that source): the framework's, or an extension's."""
    if extension is None:
        return "framework.source", spec.framework.source
    for i, ext in enumerate(spec.extensions):
        if ext.name == extension:
            return f"extensions.{i}.source", ext.source
    names = ", ".join(e.name for e in spec.extensions) or "none"
    raise InputError(f"--extension {ascii(extension)[1:-1][:60]}: {spec.name} builds no such extension (it builds: "
                     f"{names}); fix: name one of them")


def _kind_of(source) -> str:
    for kind in ("git", "pypi", "tarball", "path", "prebuilt"):
        if getattr(source, kind, None) is not None:
            return kind
    return "unknown"


def _ends(labels: Sequence[str], good: str | None, bad: str | None, *, first_good: bool,
          find: Callable[[str], int | None], what: str) -> tuple[int, int]:
    """The positions of the old and the new end among `labels` (good/bad default to the first and last)."""
    if len(labels) < 2:
        raise InputError(f"{what} has {len(labels)} value: nothing to bisect; fix: give two values at least")
    default_old, default_new = 0, len(labels) - 1
    positions = {}
    for flag, given, default in (("--good", good, default_new if first_good else default_old),
                                 ("--bad", bad, default_old if first_good else default_new)):
        if given is None:
            positions[flag] = default
            continue
        found = find(given)
        if found is None:
            raise InputError(f"{flag} {ascii(mask(given))[1:-1][:80]}: not one of {what} "
                             f"({', '.join(mask(label) for label in labels[:6])}"
                             f"{', …' if len(labels) > 6 else ''}); fix: name one of them")
        positions[flag] = found
    old, new = (positions["--bad"], positions["--good"]) if first_good else (positions["--good"], positions["--bad"])
    if old == new:
        raise InputError(f"--good and --bad are the same value ({mask(labels[old])}): nothing to bisect; fix: give two "
                         "different ends")
    if old > new:
        raise InputError(f"{'--bad' if first_good else '--good'} {mask(labels[old])} comes after "
                         f"{'--good' if first_good else '--bad'} {mask(labels[new])} in {what}; fix: swap them, or "
                         f"{'drop --first-good' if first_good else 'add --first-good to find the first change that fixes it'}")
    return old, new


# --- the axes ------------------------------------------------------------------------------------


def commits(spec: Spec, history: History, good: str | None, bad: str | None, *, first_good: bool,
            extension: str | None = None) -> Axis:
    """The commits of the git source from the old end to the new one (first parents)."""
    prefix, source = source_target(spec, extension)
    if _kind_of(source) != "git":
        raise InputError(f"{prefix} of {spec.name} is {_kind_of(source)}, not git: --axis commits needs a git source; "
                         f"fix: --set '{prefix}={{git: URL, ref: REF}}', or --axis versions")
    if not good or not bad:
        raise InputError("--axis commits needs both ends; fix: --good REF --bad REF (tags, branches or commits)")
    shas = {}
    for flag, ref in (("--good", good), ("--bad", bad)):
        shas[flag] = history.resolve(ref)
        if shas[flag] is None:
            raise InputError(f"{flag} {ascii(ref)[1:-1][:80]}: no such commit, branch or tag in {mask(history.url)}; "
                             "fix: name one it has (git ls-remote URL)")
    old_flag, new_flag = ("--bad", "--good") if first_good else ("--good", "--bad")
    old, new = shas[old_flag], shas[new_flag]
    if old == new:
        raise InputError(f"--good {good} and --bad {bad} are the same commit ({old[:12]}): nothing to bisect; fix: "
                         "give two different commits")
    if not history.is_ancestor(old, new):
        hint = ("add --first-good to find the commit that fixed it" if history.is_ancestor(new, old) and not first_good
                else "drop --first-good" if history.is_ancestor(new, old) else
                "give two commits of one line of history")
        raise InputError(f"{old_flag} {good if old_flag == '--good' else bad} ({old[:12]}) is not an ancestor of "
                         f"{new_flag} {bad if new_flag == '--bad' else good} ({new[:12]}); fix: {hint}")
    chain = [history.commit(old), *history.between(old, new)]
    return Axis("commits", prefix, tuple(Change(c.short, (f"{prefix}.ref={c.sha}",), c.subject) for c in chain))


def versions(spec: Spec, values: Sequence[str], good: str | None, bad: str | None, *, first_good: bool,
             extension: str | None = None, history: History | None = None,
             sdist_sha256: Callable[[str, str], str] | None = None) -> Axis:
    """Refs of a git source (tags, in the order given), releases of a PyPI sdist (the index's sha256 of
    each), or tarballs given as URL#sha256=HEX."""
    prefix, source = source_target(spec, extension)
    kind = _kind_of(source)
    if not values:
        raise InputError("--axis versions needs the versions in order; fix: --values 2.0.9,2.1.0,2.1.2")
    old, new = _ends(values, good, bad, first_good=first_good, find=lambda v: values.index(v) if v in values else None,
                     what="--values")
    chosen = values[old:new + 1]
    if kind == "git":
        for ref in chosen:
            if history is not None and history.resolve(ref) is None:
                raise InputError(f"--values {ascii(ref)[1:-1][:80]}: no such ref in {mask(history.url)}; fix: name "
                                 "tags or branches it has")
        changes = [Change(ref, (f"{prefix}.ref={ref}",)) for ref in chosen]
    elif kind == "pypi":
        name = source.pypi.split("==", 1)[0]
        changes = []
        for value in chosen:
            version = value.split("==", 1)[1] if "==" in value else value
            digest = sdist_sha256(name, version) if sdist_sha256 else ""
            changes.append(Change(version, (f"{prefix}.pypi={name}=={version}", f"{prefix}.sha256={digest}")))
    elif kind == "tarball":
        changes = []
        for value in chosen:
            url, sep, digest = value.partition("#sha256=")
            if not sep or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise InputError(f"--values {mask(value)[:100]}: a tarball is URL#sha256=HEX; fix: e.g. "
                                 "https://host/x-1.0.tar.gz#sha256=$(sha256sum x-1.0.tar.gz | cut -c1-64)")
            changes.append(Change(mask(url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]),
                                  (f"{prefix}.tarball.url={url}", f"{prefix}.tarball.sha256={digest}",
                                   f"{prefix}.tarball.filename=null")))
    else:
        raise InputError(f"{prefix} of {spec.name} is {kind}: it has no versions to choose from; fix: --axis versions "
                         "takes a git, pypi or tarball source")
    return Axis("versions", prefix, tuple(changes))


def patches(spec: Spec, good: str | None, bad: str | None, *, first_good: bool) -> Axis:
    """The recipe's patch series applied up to each patch in turn: position k applies the first k
    (0: none), so the first new position names the patch that changed the build."""
    series = spec.framework.patches
    if not series:
        raise InputError(f"{spec.name} has no framework.patches: --axis patches has nothing to bisect; fix: another "
                         "--axis")
    labels = ["none", *(p.label for p in series)]

    def find(given: str) -> int | None:
        if given.isdigit() and int(given) < len(labels):
            return int(given)
        return labels.index(given) if given in labels else None

    old, new = _ends(labels, good, bad, first_good=first_good, find=find, what="the patches (none, then each)")
    dumped = [p.model_dump(mode="json", exclude_defaults=True) for p in series]
    return Axis("patches", "framework.patches", tuple(
        Change(labels[k], (f"framework.patches={json.dumps(dumped[:k])}",), series[k - 1].file or "" if k else "")
        for k in range(old, new + 1)))


def field_values(field: str, values: Sequence[str], good: str | None, bad: str | None, *, first_good: bool) -> Axis:
    """The values of one recipe field, in the order given."""
    if not values:
        raise InputError(f"--axis set:{field} needs the values in order; fix: --values A,B,C")
    old, new = _ends(values, good, bad, first_good=first_good, find=lambda v: values.index(v) if v in values else None,
                     what="--values")
    # A label is shown and logged: a value holding a credential is shown masked (the step gets it whole).
    return Axis("set", field, tuple(Change(_shown(field, v), (f"{field}={v}",)) for v in values[old:new + 1]))


def _shown(field: str, value: str) -> str:
    return mask_set(f"{field}={value}").split("=", 1)[1]


# --- a release's sdist digest, from the index (PEP 503) -------------------------------------------


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sdist_sha256_from_index(index_url: str | None, name: str, version: str, *, timeout: float = 60) -> str:
    """The sha256 the index's simple page gives for `name`'s sdist of `version` (the `#sha256=` of its link,
    which pip checks against): what the build then pins, as a recipe's pypi source does."""
    index = (index_url or DEFAULT_INDEX).rstrip("/")
    parts = urlsplit(index)
    headers = {"Accept": "text/html"}
    if parts.username or parts.password:  # a login in the index URL: sent as pip sends it, shown nowhere
        login = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
        parts = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
    page = urlunsplit(parts) + f"/{_normalized(name)}/"
    try:
        with urllib.request.urlopen(urllib.request.Request(page, headers=headers), timeout=timeout) as reply:
            text = reply.read(INDEX_PAGE_BYTES).decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise InputError(f"the index {mask(index)} did not answer for {name} ({strip_controls(str(e))[:120]}); fix: "
                         "check --pip-index-url and the network") from None
    for href in re.findall(r'href="([^"]+)"', text):
        path, _, fragment = href.partition("#")
        filename = unquote(path.rsplit("/", 1)[-1])
        for suffix in (".tar.gz", ".zip"):
            stem = filename[: -len(suffix)] if filename.endswith(suffix) else None
            if stem and stem.endswith(f"-{version}") and _normalized(stem[: -len(version) - 1]) == _normalized(name):
                digest = re.fullmatch(r"sha256=([0-9a-f]{64})", fragment)
                if digest:
                    return digest.group(1)
    raise InputError(f"--values {version}: the index {mask(index)} has no sdist of {name} {version} with a sha256; "
                     "fix: name a release it has")
