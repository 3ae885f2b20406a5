"""`invoke clean` on real folders and symlinks (no engine: images, caches and containers are off here;
tests/integration/test_clean_integration.py drives the engine with objects of their own label).

Each hostile case says what the code before (b74e6d9) did.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import engine
from buildctl.host import clean
from buildctl.store import artifacts

ROOT = Path(__file__).resolve().parents[2]
DAY = 86400
FILES_ONLY = {"objects": ()}


def make_artifact(root: Path, recipe: str, key: str, size: int = 1000, age_days: float = 0) -> Path:
    d = root / recipe / key
    d.mkdir(parents=True)
    (d / "x.whl").write_bytes(b"w" * size)
    wheel = {"file": "x.whl", "sha256": hashlib.sha256(b"w" * size).hexdigest(), "bytes": size}
    (d / "manifest.json").write_text(json.dumps({"recipe": recipe, "key": key, "wheels": [wheel]}))
    _age(d, age_days)
    return d


def _age(path: Path, days: float) -> None:
    """Set the mtime (and atime) of path and everything under it `days` back."""
    t = time.time() - days * DAY
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            os.utime(os.path.join(dirpath, n), (t, t), follow_symlinks=False)
    os.utime(path, (t, t), follow_symlinks=False)


def used(root: Path, kind: str, name: str, days_ago: float) -> None:
    """A last-use stamp `days_ago`, as a build or lookup `days_ago` would have left it."""
    artifacts.record_use({kind: [name]}, root)
    stamp = artifacts._stamp(root, kind, name)
    t = time.time() - days_ago * DAY
    os.utime(stamp, (t, t))


def names(report: dict) -> set[str]:
    return {r["name"] for r in report["removed"]}


def test_symlink_in_the_root_is_never_followed(tmp_path):
    """artifacts/team -> ../shared. Before: `root.iterdir() if p.is_dir()` followed the link, took team
    for a recipe and shared/demo for one of its artifacts: --older-than-days 0 reported 'team/demo' and
    rmtree'd shared/demo (run on b74e6d9 with this layout). Now: shared/ untouched, the link kept."""
    root, shared = tmp_path / "artifacts", tmp_path / "shared"
    root.mkdir()
    precious = make_artifact(shared, "demo", "old", age_days=100)
    (root / "team").symlink_to("../shared")
    report = clean.clean(older_than_days=0, root=root, **FILES_ONLY)
    assert report["removed"] == [] and precious.is_dir() and (precious / "x.whl").read_bytes()
    assert report["symlinks_left_alone"] == ["team"] and (root / "team").is_symlink()


def test_symlinks_below_the_root_are_left_alone_and_links_inside_an_artifact_only_unlinked(tmp_path):
    """A linked artifact folder (demo/linked -> outside) is neither followed nor removed; an artifact
    holding a link to an outside folder is removed without touching the link's target."""
    root, outside = tmp_path / "artifacts", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    a = make_artifact(root, "demo", "k1")
    (a / "to-outside").symlink_to(outside)
    (root / "demo" / "linked").symlink_to(outside)
    used(root, "artifact", "demo/k1", 10)
    report = clean.clean(older_than_days=1, root=root, **FILES_ONLY)
    assert names(report) == {"demo/k1"} and not a.exists()
    assert (outside / "keep.txt").read_text() == "mine" and (root / "demo" / "linked").is_symlink()
    assert report["symlinks_left_alone"] == ["demo/linked"]


def test_age_is_last_use_not_creation(tmp_path):
    """An artifact published 100 days ago and found by a build yesterday. Before: aged by its folder's
    mtime, removed by --older-than-days 7 ('not used for N days' said the help). Now kept; the one last
    used 10 days ago goes."""
    root = tmp_path / "artifacts"
    daily = make_artifact(root, "demo", "daily", age_days=100)
    stale = make_artifact(root, "demo", "stale", age_days=100)
    assert artifacts.lookup("demo", "daily", root) == daily  # a build found it: a use, now
    used(root, "artifact", "demo/daily", 1)
    used(root, "artifact", "demo/stale", 10)
    report = clean.clean(older_than_days=7, root=root, **FILES_ONLY)
    assert names(report) == {"demo/stale"} and daily.is_dir() and not stale.exists()
    assert report["removed"][0]["reason"].startswith("not used for 10.0 days")
    assert report["freed"] == {"artifact": {"count": 1, "bytes": 1000 + len((stale.parent / "daily" / "manifest.json")
                                                                             .read_text().replace("daily", "stale"))}}


def test_lookup_latest_and_publish_record_use(tmp_path):
    root = tmp_path / "artifacts"
    make_artifact(root, "demo", "k")
    assert artifacts.last_use("artifact", "demo/k", root) is None
    before = time.time() - 1
    artifacts.lookup("demo", "k", root)
    assert artifacts.last_use("artifact", "demo/k", root) >= before
    used(root, "artifact", "demo/k", 5)
    artifacts.latest("demo", root)
    assert artifacts.last_use("artifact", "demo/k", root) >= before
    with artifacts.staging("demo", "k2", root) as tmp:
        (tmp / "manifest.json").write_text("{}")
        artifacts.publish(tmp, "demo", "k2", root)
    assert artifacts.last_use("artifact", "demo/k2", root) >= before


def test_without_a_record_an_object_counts_as_used_when_first_seen(tmp_path):
    """No stamp (made before stamps existed): never removed on the strength of a missing record.
    A dry run writes no stamp either."""
    root = tmp_path / "artifacts"
    make_artifact(root, "demo", "k", age_days=100)
    assert clean.clean(older_than_days=7, root=root, dry_run=True, **FILES_ONLY)["removed"] == []
    assert artifacts.last_use("artifact", "demo/k", root) is None
    assert clean.clean(older_than_days=7, root=root, **FILES_ONLY)["removed"] == []
    assert artifacts.last_use("artifact", "demo/k", root) is not None
    assert names(clean.clean(older_than_days=0, root=root, **FILES_ONLY)) == {"demo/k"}


def test_stale_staging_folders_go_unless_their_build_runs(tmp_path):
    """`.tmp-*` left by a SIGKILL. Before: skipped (every name starting with '.' was), forever. Now: gone
    once quiet for an hour with its key lock free; a running build's (lock held) and fresh ones stay."""
    root = tmp_path / "artifacts"
    (root / "demo").mkdir(parents=True)
    killed = root / "demo" / ".tmp-aaaa-x1y2z3"
    running = root / "demo" / ".tmp-bbbb-q9w8e7"
    fresh = root / "demo" / ".tmp-cccc-r5t6y7"
    bundle = root / "failures" / ".tmp-bundle-abc"
    for d in (killed, running, fresh, bundle):
        d.mkdir(parents=True)
        (d / "partial.whl").write_bytes(b"p" * 10)
    for d in (killed, running, bundle):
        _age(d, 1)
    with artifacts.key_lock("demo", "bbbb", root):
        report = clean.clean(root=root, **FILES_ONLY)  # no age given: orphans only
    assert names(report) == {"demo/.tmp-aaaa-x1y2z3", "failures/.tmp-bundle-abc"}
    assert not killed.exists() and not bundle.exists() and running.is_dir() and fresh.is_dir()
    assert all(r["reason"].startswith("orphan: staging folder untouched for 24.0 h") for r in report["removed"])
    assert report["freed"] == {"staging": {"count": 2, "bytes": 20}}


def test_an_artifact_whose_build_holds_the_lock_is_not_removed(tmp_path):
    root = tmp_path / "artifacts"
    a = make_artifact(root, "demo", "busy")
    used(root, "artifact", "demo/busy", 30)
    with artifacts.key_lock("demo", "busy", root):
        report = clean.clean(older_than_days=7, root=root, **FILES_ONLY)
    assert report["removed"] == [] and a.is_dir()
    assert report["failed"] == [{"kind": "artifact", "name": "demo/busy",
                                 "error": "a build of this key is running (its lock is held)"}]


def test_keep_bytes_removes_the_least_recently_used_first(tmp_path):
    root = tmp_path / "artifacts"
    for key, days in (("a", 3), ("b", 2), ("c", 1)):
        make_artifact(root, "demo", key, size=10_000)
        used(root, "artifact", f"demo/{key}", days)
    report = clean.clean(keep_bytes=25_000, root=root, **FILES_ONLY)
    assert [r["name"] for r in report["removed"]] == ["demo/a"]
    report = clean.clean(keep_bytes=0, root=root, dry_run=True, **FILES_ONLY)
    assert [r["name"] for r in report["removed"]] == ["demo/b", "demo/c"] and (root / "demo" / "b").is_dir()


def test_bundles_are_aged_too(tmp_path):
    root = tmp_path / "artifacts"
    b = root / "failures" / "demo-20250101-000000"
    b.mkdir(parents=True)
    (b / "bundle.json").write_text("{}")
    used(root, "bundle", "failures/demo-20250101-000000", 40)
    assert names(clean.clean(older_than_days=30, root=root, **FILES_ONLY)) == {"failures/demo-20250101-000000"}


def test_the_last_use_store_stays_in_the_root(tmp_path):
    """A stamp directory that is a symlink is not written through; odd names stay one file each."""
    root, outside = tmp_path / "artifacts", tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / artifacts.LAST_USE_DIR).symlink_to(outside)
    artifacts.record_use({"artifact": ["demo/k"]}, root)
    assert list(outside.iterdir()) == []
    (root / artifacts.LAST_USE_DIR).unlink()
    artifacts.record_use({"volume": ["../../../etc/x", ".."]}, root)
    assert sorted(p.name for p in (root / artifacts.LAST_USE_DIR / "volume").iterdir()) == [
        "%2E%2E", "%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fx"]


def test_owner_labels_tell_a_gone_process():
    """host:pid-namespace:pid:start: gone when no such pid runs here, or the pid runs but started at another
    time (reuse); another host, another PID namespace or a label of the old host:pid:start form: untold."""
    me = engine.process_owner()
    host, pid, start = me.rsplit(":", 2)  # host: the host name and this PID namespace
    assert clean._owner_gone(me) is False
    assert clean._owner_gone(f"{host}:{pid}:{int(start) + 1}") is True
    p = subprocess.Popen(["true"])
    p.wait()
    assert clean._owner_gone(f"{host}:{p.pid}:1") is True
    assert clean._owner_gone(f"another-host:{engine.pid_namespace()}:{p.pid}:1") is None
    assert clean._owner_gone(f"{host.split(':')[0]}:4026599999:{p.pid}:1") is None  # another PID namespace
    assert clean._owner_gone(f"{host.split(':')[0]}:{p.pid}:1") is None  # which namespace? cannot be told
    assert clean._owner_gone(None) is None and clean._owner_gone("junk") is None


def test_cli_clean_files_only_says_what_it_freed(tmp_path):
    """Through `invoke clean --json` (files only: never against the shared engine)."""
    root, shared = tmp_path / "artifacts", tmp_path / "shared"
    make_artifact(shared, "demo", "old", age_days=100)
    root.mkdir()
    (root / "team").symlink_to("../shared")
    make_artifact(root, "demo", "gone")
    used(root, "artifact", "demo/gone", 3)
    env = {"BUILDCTL_ARTIFACTS": str(root), "BUILDCTL_DEBUG": "", "COLUMNS": "200"}
    cmd = ["clean", "--older-than-days", "2", "--no-images", "--no-caches", "--no-containers"]
    proc = invoke_here(*cmd, "--json", cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["freed"]["artifact"]["count"] == 1 and report["symlinks_left_alone"] == ["team"]
    assert (shared / "demo" / "old" / "x.whl").is_file()
    make_artifact(root, "demo", "gone2")
    used(root, "artifact", "demo/gone2", 3)
    proc = invoke_here(*cmd, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "demo/gone2" in proc.stdout and "artifact: 1 removed" in proc.stdout and "total:" in proc.stdout
    assert "left alone: team is a symlink" in proc.stderr
    proc = invoke_here(cmd[0], "--older-than-days=-3", *cmd[3:], cwd=ROOT, env=env)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --older-than-days")


@pytest.mark.parametrize("layout", ["root-is-link-target"])
def test_a_root_that_is_itself_a_symlink_is_used_as_the_root(tmp_path, layout):
    """artifacts -> /big/disk/artifacts is a normal setup: the link is the root, not something inside it."""
    real = tmp_path / "disk" / "artifacts"
    make_artifact(real, "demo", "k")
    used(real, "artifact", "demo/k", 10)
    (tmp_path / "artifacts").symlink_to(real)
    report = clean.clean(older_than_days=1, root=tmp_path / "artifacts", **FILES_ONLY)
    assert names(report) == {"demo/k"}


def test_buildctls_images_are_told_by_their_names_never_by_inherited_labels():
    """An image built FROM buildctl/base:bookworm has every label of it (buildctl=1 included). Before: clean
    took any image labelled buildctl=1 for its own, so `invoke clean --older-than-days 0` listed user/mine:1.
    Now an image is buildctl's by one of its own names, or as a base image under the name it was made under."""
    base_labels = {engine.LABEL: "1", "buildctl.distro": "bookworm", engine.BASE_IMAGE_LABEL: "corp/base:bookworm"}
    assert engine.is_buildctl_image(["buildctl/demo-cpu:0123456789abcdef"], {engine.LABEL: "1"})
    assert engine.is_buildctl_image(["buildctl-repro/demo-cpu:1a2b3c4d"], {})
    assert engine.is_buildctl_image(["buildctl/base:bookworm"], {engine.LABEL: "1"})  # made before the label
    assert engine.is_buildctl_image(["corp/base:bookworm"], base_labels)  # invoke base-image --tag corp/base:bookworm
    assert not engine.is_buildctl_image(["user/mine:1"], base_labels)  # FROM corp/base:bookworm: inherited
    assert not engine.is_buildctl_image(["user/mine:1"], {engine.LABEL: "1", engine.RECIPE_LABEL: "demo-cpu"})
    assert not engine.is_buildctl_image(["corp/base:bookworm"], {engine.LABEL: "1"})  # no record of the name
    assert not engine.is_buildctl_image([], base_labels)  # untagged: only the root's records can say


def test_a_build_reading_the_artifact_keeps_clean_out(tmp_path):
    """A build that finds its artifact holds the key lock shared while it reads and verifies it: builds
    that find it read it together, and clean (exclusive) removes nothing of the key meanwhile. Before:
    the read took no lock, so a clean at that moment removed the artifact under the build."""
    root = tmp_path / "artifacts"
    a = make_artifact(root, "demo", "k")
    used(root, "artifact", "demo/k", 30)
    with artifacts.key_lock("demo", "k", root, shared=True), artifacts.key_lock("demo", "k", root, shared=True):
        report = clean.clean(older_than_days=7, root=root, **FILES_ONLY)
        with pytest.raises(artifacts.LockTimeout, match="builds reading its artifact, or invoke clean"):
            with artifacts.key_lock("demo", "k", root, timeout=0):  # a build of the key waits for the readers
                pass
    assert report["removed"] == [] and a.is_dir()
    assert report["failed"] == [{"kind": "artifact", "name": "demo/k",
                                 "error": "a build of this key is running (its lock is held)"}]
    assert names(clean.clean(older_than_days=7, root=root, **FILES_ONLY)) == {"demo/k"}


def test_clean_holds_the_key_lock_while_it_removes_even_without_a_lock_file(tmp_path, monkeypatch):
    """An artifact copied in by hand has no lock file. Before: clean took that for 'no build holds it' and
    held nothing, so a build making the lock file meanwhile read the artifact as it went. Now clean makes
    the lock file and holds it: a build that comes to read waits."""
    root = tmp_path / "artifacts"
    make_artifact(root, "demo", "k")
    used(root, "artifact", "demo/k", 30)
    assert not (root / "demo" / ".k.lock").exists()
    reader = []
    real_rmtree = clean.shutil.rmtree

    def rmtree_as_a_build_comes(path, **kw):  # the moment a build finds the artifact
        try:
            with artifacts.key_lock("demo", "k", root, shared=True, timeout=0):
                reader.append("read it")
        except artifacts.LockTimeout:
            reader.append("waited")
        real_rmtree(path, **kw)

    monkeypatch.setattr(clean.shutil, "rmtree", rmtree_as_a_build_comes)
    assert names(clean.clean(older_than_days=7, root=root, **FILES_ONLY)) == {"demo/k"}
    assert reader == ["waited"]


def test_what_a_build_uses_while_clean_runs_is_kept(tmp_path, monkeypatch):
    """Clean decides, then removes; a build that finds the artifact in between (and lets go of it again)
    has used it just now. Before: removed all the same. Now kept: its stamp moved since clean looked."""
    root = tmp_path / "artifacts"
    a = make_artifact(root, "demo", "k")
    used(root, "artifact", "demo/k", 30)
    real_lock = clean._key_lock_free

    def lock_after_a_build_found_it(recipe_dir, key):
        assert artifacts.lookup("demo", "k", root) == a
        return real_lock(recipe_dir, key)

    monkeypatch.setattr(clean, "_key_lock_free", lock_after_a_build_found_it)
    report = clean.clean(older_than_days=7, root=root, **FILES_ONLY)
    assert report["removed"] == [] and a.is_dir()
    assert report["failed"] == [{"kind": "artifact", "name": "demo/k", "error": "used again while clean ran"}]


def test_a_replayed_bundle_is_in_use(tmp_path):
    """`invoke repro` of a bundle folder under <root>/failures stamps it (a fetch step's: no engine needed).
    Before: bundles were stamped by nothing, so one replayed every day went once clean had first seen it
    N days before."""
    from buildctl.cli.common import load_spec
    from buildctl.failure import repro
    from buildctl.render import render

    root = tmp_path / "artifacts"
    spec, _ = load_spec("demo-cpu", [], preflight=False)
    bundle = repro.write_bundle(
        spec=spec,
        rendered=render(spec),
        context_dir=None,
        secrets=[],
        root=root,
        failure=repro.FailedStep(step="fetch", exit_code=1, log="sha256 mismatch", diagnosis=None),
        replay=repro.ReplayFacts(image_id=None, command=None, env={}, volumes={}, network=None, memory=None),
    )
    name = f"failures/{bundle.name}"
    used(root, "bundle", name, 40)
    proc = invoke_here("repro", str(bundle), "--json", cwd=ROOT,
                       env={"BUILDCTL_ARTIFACTS": str(tmp_path / "elsewhere"), "BUILDCTL_DEBUG": ""})
    assert proc.returncode == 0 and json.loads(proc.stdout)["step"] == "fetch", proc.stderr
    assert clean.clean(older_than_days=30, root=root, **FILES_ONLY)["removed"] == []
    assert time.time() - artifacts.last_use("bundle", name, root) < 60


def test_only_folders_that_prove_they_are_artifacts_are_removed(tmp_path):
    """Issue 35, item 3: clean took every second-level folder of the root for an artifact. buildctl's own
    verify/images/* reports and a user's team-notes/2026-q4 went as "least recently used" with --keep-gb 0;
    so did a folder of a recipe with no manifest.json (a copy in progress, someone's notes). An artifact
    has its manifest.json (a plain file); a bundle its bundle.json; anything else is left alone."""
    root = tmp_path / "artifacts"
    artifact = make_artifact(root, "demo", "k1")
    report_dir = root / "verify" / "images" / "buildctl-demo-cpu-0123456789ab"
    notes = root / "team-notes" / "2026-q4"
    half = root / "demo" / "k2"  # no manifest.json
    linked = root / "demo" / "k3"  # manifest.json a symlink to a file elsewhere: not a plain file
    bundle = root / "failures" / "demo-20260101-000000"
    stray = root / "failures" / "notes"  # no bundle.json
    for folder in (report_dir, notes, half, linked, bundle, stray):
        folder.mkdir(parents=True)
    (report_dir / "report.json").write_text("{}")
    (notes / "plan.txt").write_text("mine")
    (half / "x.whl").write_bytes(b"w" * 100)
    (tmp_path / "manifest.json").write_text("{}")
    (linked / "manifest.json").symlink_to(tmp_path / "manifest.json")
    (bundle / "bundle.json").write_text("{}")
    (stray / "todo.txt").write_text("mine")
    report = clean.clean(keep_bytes=0, root=root, **FILES_ONLY)
    assert names(report) == {"demo/k1", "failures/demo-20260101-000000"}
    assert not artifact.exists() and not bundle.exists()
    for folder in (report_dir, notes, half, linked, stray):
        assert folder.is_dir() and any(folder.iterdir()), folder


class _FakeEngine:
    """The engine's answers clean reads, listed as the Docker API lists them: containers only."""

    def __init__(self, containers: list[dict]):
        from types import SimpleNamespace

        self.removed: list[str] = []
        self.api = SimpleNamespace(
            containers=lambda **kw: containers, inspect_image=lambda image_id: {"Config": {"Labels": {}}},
            remove_container=lambda cid, **kw: self.removed.append(cid))


def _listed(cid: str, state: str, owner: str, **labels: str) -> dict:
    return {"Id": cid * 8, "Names": [f"/buildctl-{cid}"], "State": state, "ImageID": "sha256:i",
            "Labels": {engine.LABEL: engine.LABEL_VALUE, engine.OWNER_LABEL: owner, **labels}, "SizeRw": 0}


def test_a_container_whose_owner_cannot_be_told_is_left_alone_whatever_its_state(tmp_path):
    """Issue 35, item 4: a container of a build on another host was "cannot be told", yet one in state
    created or exited (the moments a live build copies its inputs in and its wheel out) was force-removed
    as an orphan; and a running one whose owner names this host but whose pid is not visible here (another
    PID namespace: CI jobs in containers sharing one socket) was force-removed because `gone` came first.
    Now only a container whose owner is provably gone (this host, this PID namespace, no such process)
    is an orphan."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = engine.process_owner().split(":", 1)[0]
    old_format_here = f"{host}:{dead.pid}:1"  # host:pid:start, as buildctl wrote it before: which namespace?
    other_namespace = f"{host}:4026599999:{dead.pid}:1"  # host:pid-namespace:pid:start, another namespace
    gone_here = engine.process_owner().rsplit(":", 2)[0] + f":{dead.pid}:1"  # this host and namespace
    fake = _FakeEngine([
        _listed("a", "created", "build-box:4026531836:4242:77"),  # another host
        _listed("b", "exited", "build-box:4242:77"),
        _listed("c", "running", old_format_here),
        _listed("d", "exited", old_format_here),
        _listed("e", "running", other_namespace),
        _listed("f", "created", engine.process_owner()),  # this very process: a live build
        _listed("g", "exited", gone_here),  # provably gone: an orphan
        _listed("h", "running", gone_here),  # a SIGKILLed build's container, still compiling: an orphan
    ])
    report = clean.clean(root=tmp_path / "artifacts", client=fake, objects=("containers",))
    assert fake.removed == ["g" * 8, "h" * 8], report
    assert all(r["reason"] == "orphan: the buildctl process that started it is gone" for r in report["removed"])


def test_a_container_of_another_host_with_the_same_name_and_pid_namespace_id_is_left_alone(tmp_path, monkeypatch):
    """Issue 43, item 6: two hosts sharing an engine under one host name (CI runners from one image) have the
    same PID-namespace id (the initial namespace's inode is the same number on every Linux host): a live
    build of the other host, whose pid does not run here, was force-removed as an orphan. The owner label
    carries this boot's id (/proc/sys/kernel/random/boot_id, different per host and per boot)."""
    from buildctl.engine import labels

    dead = subprocess.Popen(["true"])
    dead.wait()
    monkeypatch.setattr(labels, "boot_id", lambda: "0d3c8a5e-another-host", raising=False)
    there = engine.process_owner()  # what host B writes: the same host name and PID-namespace id
    monkeypatch.undo()
    assert there.split(":", 1)[0] == engine.process_owner().split(":", 1)[0]
    there_dead_here = there.rsplit(":", 2)[0] + f":{dead.pid}:1"  # a pid that runs on B, not here
    assert clean._owner_gone(there_dead_here) is None
    fake = _FakeEngine([_listed("a", "running", there_dead_here), _listed("b", "exited", there_dead_here)])
    report = clean.clean(root=tmp_path / "artifacts", client=fake, objects=("containers",))
    assert fake.removed == [] and report["removed"] == []
    gone_here = engine.process_owner().rsplit(":", 2)[0] + f":{dead.pid}:1"  # this boot: provably gone
    assert clean._owner_gone(gone_here) is True
