"""`invoke build` of a recipe whose artifact a no-op found before: the short path through the no-op memo
(store/noop_memo.py), without the recipe schema, the renderer or the manifest model.

`build` answers False, having printed nothing, whenever it cannot vouch for the answer: no entry for this
request, a recorded file changed, the engine is not on a local socket or has another base image, a
pull policy that pulls, the key's lock held by a build, pre-staged downloads (the full path says which it
used). The full path then runs as before and, when it finds the artifact, records the entry (`remember`),
so the memo only ever repeats what the full path printed, with this run's times."""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl import settings as settings_mod
from buildctl.store import noop_memo

if TYPE_CHECKING:
    from collections.abc import Sequence

    from buildctl.settings import Settings


def _request(recipe: str, sets, settings: Settings, no_preflight: bool) -> str:
    """The entry's name: everything the command was given that can reach the key, and buildctl's code. The
    values as given (a masked value would let two requests with two keys share an entry): only this digest of
    them is written, never the values."""
    from buildctl.cli.base import read_ca_certs

    ca = read_ca_certs(settings.ca_certs)  # their text is rendered; a missing file is the full path's error
    request = {"recipe": recipe, "set": list(sets or []), "no_preflight": bool(no_preflight),
               "settings": settings.model_dump(mode="json"),
               "ca": {name: hashlib.sha256(text.encode()).hexdigest() for name, text in ca.items()}}
    root = settings_mod.REPO_ROOT
    code = noop_memo.code_fingerprint([Path(__file__).resolve().parent.parent, root / "templates", root / "tasks.py"])
    return noop_memo.request_digest(request, code)


def build(recipe: str, sets, *, settings: Settings, no_preflight: bool, as_json: bool) -> bool:
    """Print the no-op's output from the memo and answer True; or answer False having printed nothing."""
    if not recipe or settings.download_cache:
        return False
    t0 = time.monotonic()
    try:
        digest = _request(recipe, sets, settings, no_preflight)
    except Exception:  # noqa: BLE001 - whatever it is, the full path meets it too and says it properly
        return False
    notes: list[str] = []
    entry = _still_valid(digest, settings, notes)
    if entry is None:
        return False
    for note in notes:  # what the resolve step asked: a moving git ref is never answered from the memo alone
        print(note, file=sys.stderr if as_json else sys.stdout)  # --json: stdout carries only the JSON
    _print(entry, as_json, t0)
    return True


def _git_refs_hold(entry: dict, settings: Settings, on_note) -> bool:
    """Whether each git ref the entry's key was taken over still names the commit it did (one git ls-remote
    each, or the last resolution with --offline); a full sha needs nothing."""
    from types import SimpleNamespace

    from buildctl.store import git_refs

    pinned = entry.get("git", [])
    if not isinstance(pinned, list) or not all(isinstance(p, list) and len(p) == 3 for p in pinned):
        return False
    if not pinned:
        return True
    resolver = git_refs.Resolver(settings.artifacts, SimpleNamespace(git_mirrors=settings.git_mirrors),
                                 offline=settings.offline, on_note=on_note, environ=settings.environ())
    return all(resolver.commit(url, ref) == commit for url, ref, commit in pinned)


def _still_valid(digest: str, settings: Settings, notes: list[str]) -> dict | None:
    from buildctl.engine.lazy import EngineConnection
    from buildctl.engine.pull import decide
    from buildctl.store import artifacts

    root = settings.artifacts
    entry = noop_memo.read(root, digest)
    if entry is None:
        return None
    try:
        engine = EngineConnection(settings.engines[0] if settings.engines else None, environ=settings.environ())
        answered, base = engine.local_inspection(entry["base_image"])
        if not answered or decide(entry["base_image"], entry["pull"], base is not None) != "use":
            return None
        if base.get("Id") != entry["base_image_id"]:
            return None
        if not _git_refs_hold(entry, settings, notes.append):
            return None
        # As the full path: held shared while the artifact is read; a build holding it is not waited for here
        with artifacts.key_lock(entry["recipe"], entry["key"], root, timeout=0, shared=True):
            # under the lock: `invoke clean` removes nothing meanwhile; the wheels are checked there too
            if not noop_memo.still_holds(entry):
                return None
            # the base image and the artifact are in use, as the full path stamps them
            artifacts.record_inspected([base], root)
            artifacts.record_use({"artifact": [f"{entry['recipe']}/{entry['key']}"]}, root)
            return entry
    except Exception:  # noqa: BLE001 - a lock held, an engine that errs: the full path waits or says why
        return None


def _print(entry: dict, as_json: bool, t0: float) -> None:
    from buildctl import ui
    from buildctl.cli.base import console

    for warning in entry["warnings"]:  # as load_spec printed them
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)
    view = ui.make_view(as_json)
    view.step_started("fetch")
    fetch_s = round(time.monotonic() - t0, 2)
    view.step_finished("fetch", fetch_s, "ok")
    for name in entry["skipped"]:
        view.step_finished(name, None, "cached")
    total = round(time.monotonic() - t0, 2)
    view.finished(total)
    view.close()
    if as_json:
        from buildctl.cli.base import print_json

        print_json({"recipe": entry["recipe"], "ok": True, "warnings": entry["warnings"],
                    "durations_s": {"fetch": fetch_s, "total": total}, "key": entry["key"],
                    "artifact": entry["artifact"], "cached": True, "published": True, "manifest": entry["manifest"],
                    "verification": entry["verification"]})
    else:
        view.summary([tuple(row) for row in entry["rows"]])


@dataclass(frozen=True)
class Shown:
    """What the full path showed, which the no-op shows again: preflight's warnings, the summary's rows,
    the steps it skipped."""

    warnings: Sequence[str] = ()
    rows: Sequence[tuple[str, str]] = ()
    skipped: Sequence[str] = ()


def remember(recipe: str, sets, *, settings: Settings, no_preflight: bool, spec, reads: list[tuple[str, str]],
             result, shown: Shown) -> None:
    """After the full path found its artifact: the entry the next identical request is answered from. It
    records what the full path read when it read it (`reads`: the recipe's files as the loader opened them,
    with their digests then; the patches as the render read them; the source digest the key was computed
    from), never the files as they are now: a file edited since (while this build waited for the key's lock)
    is a miss next time. An entry that cannot record all of it is not written."""
    from buildctl.store import artifacts

    if settings.download_cache or result.inputs is None or result.verify_error is not None:
        return
    try:
        digest = _request(recipe, sets, settings, no_preflight)
    except Exception:  # noqa: BLE001 - then there is no memo, only the full path
        return
    src = spec.framework.source
    tree = [str(src.path), result.inputs.source] if src.kind == "path" else None
    artifact = Path(result.artifact)
    wheels = artifacts.recorded_wheels(artifact)
    if wheels is None or artifacts.unvouched(artifact) is not None:
        return
    report = artifact / "report.json"
    from buildctl.store import git_refs

    manifest = result.manifest.to_json()
    pinned = git_refs.pinned(manifest.get("resolved_recipe") or {})
    if pinned is None:  # a login in a git URL: the memo keeps none, and cannot ask without it
        return
    noop_memo.record(settings.artifacts, digest, {
        "recipe": spec.name, "key": result.key, "artifact_dir": str(artifact),
        "render_dir": str(Path("build") / spec.name / result.key),
        "base_image": spec.base.image, "base_image_id": result.base_image_id, "pull": spec.site.pull or "missing",
        "reads": dict([*reads, *result.reads]), "source_tree": tree,
        "wheels": wheels, "fingerprints": artifacts.wheel_fingerprints(artifact, wheels),
        "manifest_sha256": noop_memo.file_sha256(artifacts.manifest_path(artifact)),
        "report_sha256": noop_memo.file_sha256(report) if result.report is not None else None,
        "warnings": list(shown.warnings), "skipped": list(shown.skipped), "rows": [list(r) for r in shown.rows],
        "artifact": str(result.artifact), "manifest": manifest, "git": pinned,
        "verification": result.report.to_dict() if result.report is not None else None,
    })
