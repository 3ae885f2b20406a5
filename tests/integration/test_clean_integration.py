"""`invoke clean` against the real engine, on objects these tests make with their own unique labels.

The engine is shared: every clean() here is restricted to a label of its own test (`own`: the session's
`test_labels`, whose clean-up removes leftovers, plus one unique to the test), so nobody else's
container, image or volume is ever touched.
What the code before (b74e6d9) did, read from it (it was not run here: it had no way to keep to one's
own labels and would have pruned everyone's buildctl objects on the shared engine): it never listed
containers (a SIGKILLed build's container ran on), aged volumes by CreatedAt and images by Created (a
compile cache in daily use went), and removed images with force=True.
"""

from __future__ import annotations

import io
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker import errors as derr

from buildctl import engine
from buildctl.host import base_images, clean
from buildctl.store import artifacts

pytestmark = [pytest.mark.integration, pytest.mark.engines]
DAY = 86400


@pytest.fixture
def own(test_labels, docker_client) -> Iterator[dict]:
    """The session's labels plus one for this test alone; what a test leaves (a container clean had
    to spare) goes when the test ends, so later tests of the session that count containers with the
    session's labels (test_engine.py) do not see it."""
    labels = {**test_labels, "buildctl.cleantest": uuid.uuid4().hex[:12]}
    yield labels
    for c in engine.list_buildctl_containers(docker_client, labels):
        engine.remove_container(docker_client, c.id)


def _stamp(root: Path, kind: str, name: str, days_ago: float) -> None:
    artifacts.record_use({kind: [name]}, root)
    t = time.time() - days_ago * DAY
    os.utime(artifacts._stamp(root, kind, name), (t, t))


def _volume(client, labels: dict, name: str) -> str:
    client.api.create_volume(name, labels={engine.LABEL: engine.LABEL_VALUE, **labels})
    return name


def _exists_volume(client, name: str) -> bool:
    try:
        client.api.inspect_volume(name)
        return True
    except derr.NotFound:
        return False


def _exists_container(client, cid: str) -> bool:
    try:
        client.api.inspect_container(cid)
        return True
    except derr.NotFound:
        return False


def _dead_owner() -> str:
    p = subprocess.Popen(["true"])
    p.wait()
    return engine.process_owner().rsplit(":", 2)[0] + f":{p.pid}:1"


def _container(client, base_image: str, labels: dict, *, owner: str | None, start: bool, keep: bool = False) -> str:
    all_labels = {engine.LABEL: engine.LABEL_VALUE, **labels}
    if owner:
        all_labels[engine.OWNER_LABEL] = owner
    if keep:
        all_labels[engine.KEEP_LABEL] = "1"
    cid = client.api.create_container(base_image, command=["sleep", "600"], labels=all_labels,
                                      name=f"buildctl-cleantest-{uuid.uuid4().hex[:10]}")["Id"]
    if start:
        client.api.start(cid)
    return cid


def test_clean_volumes_by_last_use(docker_client, own, tmp_path):
    """A compile cache made 'long ago' but used yesterday stays; one unused for 10 days goes; one with no
    record is stamped (first seen) and stays. Before: volumes aged by CreatedAt, so a cache in daily use
    older than N days was removed."""
    root = tmp_path / "artifacts"
    tag = own["buildctl.cleantest"]
    daily = _volume(docker_client, own, f"buildctl-cleantest-daily-{tag}")
    stale = _volume(docker_client, own, f"buildctl-cleantest-stale-{tag}")
    fresh = _volume(docker_client, own, f"buildctl-cleantest-norecord-{tag}")
    _stamp(root, "volume", daily, 1)
    _stamp(root, "volume", stale, 10)
    report = clean.clean(
        older_than_days=7,
        root=root,
        labels=own,
        client=docker_client,
        objects=("caches",),
    )
    assert {r["name"] for r in report["removed"]} == {stale}
    assert report["freed"]["volume"]["count"] == 1
    assert not _exists_volume(docker_client, stale)
    assert _exists_volume(docker_client, daily) and _exists_volume(docker_client, fresh)
    assert artifacts.last_use("volume", fresh, root) is not None


def test_clean_touches_only_its_namespace_and_labels(docker_client, own, tmp_path):
    """namespace='mine' leaves another namespace's volume; extra labels leave an object without them
    (here one of a second unique label standing for someone else's), even at --older-than-days 0."""
    root = tmp_path / "artifacts"
    tag = own["buildctl.cleantest"]
    other_labels = {"buildctl.test": uuid.uuid4().hex[:12]}  # someone else's: not the session's label
    mine = _volume(docker_client, {**own, engine.NAMESPACE_LABEL: "mine"}, f"buildctl-ct-mine-{tag}")
    theirs_ns = _volume(docker_client, {**own, engine.NAMESPACE_LABEL: "theirs"},
                        f"buildctl-ct-theirs-{tag}")
    someone = _volume(docker_client, other_labels, f"buildctl-ct-someone-{tag}")
    try:
        for v in (mine, theirs_ns, someone):
            _stamp(root, "volume", v, 30)
        report = clean.clean(
            older_than_days=0,
            root=root,
            namespace="mine",
            labels=own,
            client=docker_client,
            objects=("caches",),
        )
        assert {r["name"] for r in report["removed"]} == {mine}
        assert _exists_volume(docker_client, theirs_ns) and _exists_volume(docker_client, someone)
        report = clean.clean(
            older_than_days=0,
            root=root,
            labels=own,
            client=docker_client,
            objects=("caches",),
        )
        assert {r["name"] for r in report["removed"]} == {theirs_ns}
        assert _exists_volume(docker_client, someone)
    finally:
        engine.remove_volume(docker_client, someone)


def test_orphan_containers_go_and_live_ones_stay(docker_client, base_image, own, tmp_path):
    """A running container whose buildctl process is provably gone (SIGKILL: this host, this PID namespace)
    and a created one of such a process are orphans; a running one of a live process, one kept with
    --keep-container, and those whose owner cannot be told (another host: a live build there copies its
    inputs into a created container and its wheel out of an exited one; this host's name but another PID
    namespace) stay. Before: clean never looked at containers (b74e6d9); then (19b4e6a, issue 35 item 4)
    it force-removed the created/exited ones of other hosts and the running one of another namespace."""
    root = tmp_path / "artifacts"
    orphan_running = _container(docker_client, base_image, own, owner=_dead_owner(), start=True)
    orphan_created = _container(docker_client, base_image, own, owner=_dead_owner(), start=False)
    elsewhere = _container(docker_client, base_image, own, owner="elsewhere:4026531836:1:1", start=False)
    other_namespace = _container(docker_client, base_image, own, start=True,
                                 owner=f"{engine.process_owner().split(':')[0]}:4026599999:1:1")
    live = _container(docker_client, base_image, own, owner=engine.process_owner(), start=True)
    kept = _container(docker_client, base_image, own, owner=_dead_owner(), start=False, keep=True)
    report = clean.clean(
        root=root, labels=own, client=docker_client, objects=("containers",)
    )
    removed = {r["name"]: r["reason"] for r in report["removed"]}
    names = {cid: docker_client.api.inspect_container(cid)["Name"].lstrip("/") for cid in (live, kept)}
    assert len(removed) == 2 and all(r.startswith("orphan: ") for r in removed.values()), removed
    assert not _exists_container(docker_client, orphan_running)
    assert not _exists_container(docker_client, orphan_created)
    assert _exists_container(docker_client, elsewhere) and _exists_container(docker_client, other_namespace)
    assert _exists_container(docker_client, live) and _exists_container(docker_client, kept)
    assert names[live] not in removed and names[kept] not in removed
    # the kept one is aged like anything else: unused (first seen just now) is not old enough yet
    _stamp(root, "container", kept, 3)
    report = clean.clean(
        older_than_days=2,
        root=root,
        labels=own,
        client=docker_client,
        objects=("containers",),
    )
    assert [r["name"] for r in report["removed"]] == [names[kept]]
    assert _exists_container(docker_client, live)


def test_images_by_last_use_untagged_are_orphans_and_in_use_ones_stay(docker_client, base_image, own,
                                                                       tmp_path):
    """An image unused for 10 days goes; a rebuilt tag's old (untagged) image is an orphan; an image a
    container still uses is not removed (before: removed with force=True)."""
    root = tmp_path / "artifacts"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    tag = f"buildctl/cleantest-{own['buildctl.cleantest']}"  # buildctl's own names, as its builds give them

    def build(name: str, marker: str) -> str:
        (ctx / "Dockerfile").write_text(f"FROM {base_image}\nLABEL buildctl.cleantest.marker={marker}\n")
        return engine.build_image(docker_client, engine.ImageSpec(ctx, name, labels=own))

    old = build(f"{tag}:stale", "1")
    replaced = build(f"{tag}:rebuilt", "2")
    artifacts.record_images(docker_client, [f"{tag}:rebuilt"], root)  # a build used it under buildctl's name
    current = build(f"{tag}:rebuilt", "3")  # `replaced` is now untagged
    busy = build(f"{tag}:busy", "4")
    holder = _container(docker_client, busy, own, owner=engine.process_owner(), start=False)
    _stamp(root, "image", old, 10)
    _stamp(root, "image", f"{tag}:rebuilt", 1)
    _stamp(root, "image", f"{tag}:busy", 10)
    report = clean.clean(
        older_than_days=7,
        root=root,
        labels=own,
        client=docker_client,
        objects=("images",),
    )
    removed = {r["name"]: r["reason"] for r in report["removed"]}
    assert removed.keys() == {f"{tag}:stale", replaced[:19]}, removed
    assert removed[replaced[:19]].startswith("orphan: untagged")
    assert [f["name"] for f in report["failed"]] == [f"{tag}:busy"]
    assert engine.image_exists(docker_client, current) and engine.image_exists(docker_client, busy)
    assert not engine.image_exists(docker_client, old) and not engine.image_exists(docker_client, replaced)
    assert _exists_container(docker_client, holder)


def _user_image(client, dockerfile: str, tag: str, labels: dict) -> str:
    """An image built the way a user builds one (`docker build`), not through buildctl: the test's labels
    only (to keep to its own objects), everything else inherited from what it is FROM."""
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, labels=labels, rm=True)
    return image.id


def _remove_images(client, refs: list[str]) -> None:
    for ref in refs:
        try:
            client.api.remove_image(ref, noprune=False)
        except derr.NotFound:
            pass


def test_images_and_containers_made_from_buildctls_are_the_users_own(docker_client, base_image, own, tmp_path):
    """The user's two-line image FROM buildctl/base:bookworm inherits buildctl=1 (and a base image's labels);
    so do images FROM a base image made under another name, a rebuilt one's old untagged image, and a
    container of any of them. Before: `invoke clean --older-than-days 0 --dry-run` listed every one of
    them (the images as unused, the untagged one and the container as orphans) and clean removed them.
    Now only what buildctl made goes: here the base image `invoke base-image --tag` makes."""
    root = tmp_path / "artifacts"
    uid = own["buildctl.cleantest"]
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "os-release").write_text("ID=cleantest\n")
    base = f"cleantest-{uid}/base:bookworm"  # as `invoke base-image --tag corp/base:bookworm` names one
    images = [base]
    try:
        base_images.import_rootfs(docker_client, rootfs, base, labels=own)  # what invoke base-image imports
        first = _user_image(docker_client, f"FROM {base_image}\nRUN echo mine > /mine\n", f"user-{uid}/mine:1", own)
        images[:0] = [first]
        mine = _user_image(docker_client, f"FROM {base_image}\nRUN echo mine, again > /mine\n", f"user-{uid}/mine:1",
                           own)  # `first` is untagged now
        on_base = _user_image(docker_client, f"FROM {base}\nLABEL user.note=mine\n", f"user-{uid}/on-base:1", own)
        images[:0] = [mine, on_base]
        container = docker_client.api.create_container(mine, command=["true"], name=f"user-{uid}")["Id"]
        assert docker_client.api.inspect_container(container)["Config"]["Labels"][engine.LABEL] == "1"  # inherited

        report = clean.clean(
            older_than_days=0,
            dry_run=True,
            root=root,
            labels=own,
            client=docker_client,
            objects=("images", "containers"),
        )
        assert [(r["kind"], r["name"]) for r in report["removed"]] == [("image", base)], report["removed"]
        report = clean.clean(
            older_than_days=0,
            root=root,
            labels=own,
            client=docker_client,
            objects=("images", "containers"),
        )
        # Docker refuses to remove an image another is FROM; Podman removes the name, the layers stay
        # the child's: either way only the base image was touched, and every image of the user's stays
        outcome = [r["name"] for r in report["removed"]] + [f["name"] for f in report["failed"]]
        assert outcome == [base], report
        assert all(engine.image_exists(docker_client, i) for i in (first, mine, on_base))
        assert _exists_container(docker_client, container)
    finally:
        for c in engine.list_buildctl_containers(docker_client, own):
            engine.remove_container(docker_client, c.id)
        _remove_images(docker_client, images)


def test_the_volumes_and_images_of_a_running_build_stay_between_its_containers(docker_client, base_image, own,
                                                                               tmp_path):
    """Issue 35, suspicion (proved): `invoke clean --keep-gb 0` removed a build's work volume between its
    compile container and the next (the extensions' step, an OOM retry, a resumed --until): no container
    held it, and --keep-gb ages nothing, so the next container found an empty build directory. Its builder
    image likewise between the image build and the compile. A build holds its key's lock from the
    moment it knows the key until it has verified: clean now leaves every object named for a key whose
    lock is held, as it leaves that key's artifact, and removes them once it is free. About 2 s."""
    root = tmp_path / "artifacts"
    key = uuid.uuid4().hex[:16]
    recipe = f"cleantest-{own['buildctl.cleantest']}"
    work = _volume(docker_client, own, f"buildctl-work-ns1-{recipe}-{key}")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nLABEL buildctl.cleantest.marker={key}\n")
    tag = f"buildctl/{recipe}:ns1-{key}"
    image = engine.build_image(docker_client, engine.ImageSpec(ctx, tag, labels=own))
    for kind, name in (("volume", work), ("image", image)):
        _stamp(root, kind, name, 1)
    try:
        with artifacts.key_lock(recipe, key, root):  # the build, between its containers
            report = clean.clean(
                keep_bytes=0,
                root=root,
                labels=own,
                client=docker_client,
                objects=("images", "caches"),
            )
        assert report["removed"] == [], report["removed"]
        assert {f["name"]: f["error"] for f in report["failed"]} == {
            work: "a build of this key is running (its lock is held)",
            tag: "a build of this key is running (its lock is held)"}
        assert _exists_volume(docker_client, work) and engine.image_exists(docker_client, image)
        report = clean.clean(
            keep_bytes=0,
            root=root,
            labels=own,
            client=docker_client,
            objects=("images", "caches"),
        )
        assert {r["name"] for r in report["removed"]} == {work, tag}  # the build is done: they go
    finally:
        engine.remove_volume(docker_client, work)
        _remove_images(docker_client, [image])
