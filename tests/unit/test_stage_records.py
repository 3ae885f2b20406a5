"""What later stages read is what earlier ones recorded: a fetch replay checks the bundle's own
download list, verification takes the artifact's runtime context and requirements, and an older
artifact or bundle that lacks them is refused with the fix (rebuild), never rendered again."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from publish_helpers import assembled_artifact

from buildctl import recipe, render
from buildctl.errors import InputError
from buildctl.failure import repro
from buildctl.pipeline import pipeline, stages
from buildctl.pipeline.stages import artifact
from buildctl.store.key import KeyInputs
from buildctl.store.manifest import Manifest

FAILURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"


def fetch_bundle(tmp_path: Path) -> Path:
    spec = recipe.load(str(FAILURES / "checksum-runfile.yaml"))
    rendered = render.render(spec)
    assert rendered.downloads, "the fixture recipe downloads a runfile"
    return repro.write_bundle(
        spec=spec,
        rendered=rendered,
        context_dir=None,
        secrets=(),
        root=tmp_path / "artifacts",
        failure=repro.FailedStep(step="fetch", exit_code=1, log="x", diagnosis=None),
        replay=repro.ReplayFacts(image_id=None, command=None, env={}, volumes={}, network=None, memory=None),
    )


def test_a_fetch_replay_checks_the_bundles_download_list_not_the_recipe(tmp_path):
    bundle = fetch_bundle(tmp_path)
    (bundle / "recipe.resolved.yaml").write_text("not: [a recipe")  # never read again
    name = json.loads((bundle / "bundle.json").read_text())["downloads"][0]["name"]
    (bundle / "downloads").mkdir(exist_ok=True)
    (bundle / "downloads" / name).write_bytes(b"<html>403 Forbidden</html>\n")
    with repro.open_bundle(bundle) as b:
        out = repro.replay(b)
    assert out["exit_code"] == 1 and out["diagnosis"]["id"] == "checksum-mismatch"
    assert name in out["diagnosis"]["evidence"][0]


def test_an_older_fetch_bundle_is_refused_with_the_fix(tmp_path):
    bundle = fetch_bundle(tmp_path)
    data = json.loads((bundle / "bundle.json").read_text())
    del data["downloads"]
    (bundle / "bundle.json").write_text(json.dumps(data))
    with repro.open_bundle(bundle) as b, pytest.raises(InputError) as e:
        repro.replay(b)
    assert "records no download list" in str(e.value) and "fix: rebuild" in str(e.value)
    assert "\n" not in str(e.value)


def published_artifact(tmp_path: Path) -> tuple[Path, dict]:
    return assembled_artifact(recipe.load("demo-cpu"), tmp_path, "demofw-0.1-cp311-cp311-linux_x86_64.whl")


def test_the_manifest_records_the_runtime_context_and_requirements(tmp_path):
    folder, manifest = published_artifact(tmp_path)
    context, section = artifact.recorded_runtime(folder, Manifest.read(folder))
    assert context == folder / "context" and section.target == "runtime"
    assert "AS runtime" in (context / "Dockerfile").read_text()
    assert not list((context / "downloads").rglob("*.run"))  # the rendered files only
    assert artifact.recorded_requirements(folder, folder / manifest["wheels"][0]["file"]) == section.requirements
    assert isinstance(manifest["downloads"], list)


def test_an_older_artifact_is_refused_with_the_fix(tmp_path):
    folder, manifest = published_artifact(tmp_path)
    old = {k: v for k, v in manifest.items() if k not in ("runtime", "downloads")}
    (folder / "manifest.json").write_text(json.dumps(old))
    with pytest.raises(InputError) as e:
        artifact.recorded_runtime(folder, Manifest.model_validate(old))
    assert "fix: rebuild it: invoke build --recipe demo-cpu" in str(e.value)
    with pytest.raises(InputError) as e:
        artifact.recorded_requirements(folder, folder / manifest["wheels"][0]["file"])
    assert "records no runtime requirements" in str(e.value) and "fix: rebuild" in str(e.value)


def test_a_context_outside_the_artifact_is_refused(tmp_path):
    folder, manifest = published_artifact(tmp_path)
    hostile = {**manifest, "runtime": {**manifest["runtime"], "context": "../../etc"}}
    with pytest.raises(InputError):
        artifact.recorded_runtime(folder, Manifest.model_validate(hostile))


def test_records_are_frozen(tmp_path):
    prepared = stages.Prepared(render.render(recipe.load("demo-cpu")), tmp_path, KeyInputs({}, "source", "sha256:base"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.key = "other"  # type: ignore[misc]


def test_a_build_finds_an_older_artifact_of_its_key_outdated_and_builds_it_again(tmp_path):
    """`fix: rebuild it` works: an artifact without the runtime context is not taken as up to date."""
    folder, manifest = published_artifact(tmp_path)
    root = tmp_path / "artifacts"
    (root / "demo-cpu").mkdir(parents=True)
    folder = folder.rename(root / "demo-cpu" / manifest["key"])
    lines: list[str] = []
    run = stages.Run.of(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=root), stages.BuildLog(lines.append))
    assert pipeline._found(run, manifest["key"]).artifact == folder
    old = {k: v for k, v in manifest.items() if k not in ("runtime", "downloads")}
    (folder / "manifest.json").write_text(json.dumps(old))
    assert pipeline._found(run, manifest["key"]) is None and lines == []
    assert pipeline._found(run, manifest["key"], say_why=True) is None
    assert lines == [f"buildctl: {folder} records no runtime image context (an older buildctl built it); building it again"]


HOSTILE_NUMBERS = [b"\xc2\xb2", b"9" * 5000, b"\xff\xfe not utf-8"]


@pytest.mark.parametrize("number", HOSTILE_NUMBERS, ids=["superscript", "5000-digits", "not-utf-8"])
def test_the_publish_reads_the_compiles_outputs_as_untrusted(tmp_path, number):
    """Issue 35: what the build container wrote (versions.txt, resumed.txt, peak-memory.txt, ccache's and
    sccache's stats) is read by the publish: a '2' that str.isdigit takes and int() refuses, a 5000-digit
    number (past int()'s limit), bytes that are no UTF-8 or JSON nested 100,000 deep ended the build with
    an internal error. Now a value that does not read is no value: the wheel is published all the same."""
    outputs = {"resumed.txt": b"built=" + number + b"\ntotal=" + number + b"\n", "peak-memory.txt": number,
               "cache-stats.txt": b"direct_cache_hit\t" + number + b"\ncache_miss\t3\n"}
    versions = "source_date_epoch=" + number.decode(errors="replace") + "\ngcc=12.2.0\n"
    spec = recipe.load("demo-cpu")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, manifest = assembled_artifact(spec, tmp_path / "a", "demofw-0.1-cp311-cp311-linux_x86_64.whl", versions,
                                     outputs=outputs)
    assert manifest["peak_memory_bytes"] is None and manifest["source_date_epoch"] is None
    assert manifest["resumed"] is None and manifest["compile_cache"]["misses"] == 3
    nested = {"cache-stats.json": b'{"stats": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"}
    _, manifest = assembled_artifact(spec, tmp_path / "b", "demofw-0.1-cp311-cp311-linux_x86_64.whl",
                                     outputs={**outputs, **nested})
    assert manifest["compile_cache"] == {"tool": "ccache"}


def test_a_no_op_applies_the_size_guard_a_fresh_build_applies(tmp_path):
    """Issue 41: `build.wheel.max_vendored` added to a recipe leaves its key as it was (the guard is the
    publish's, on the host), so the fat wheel published before was "up to date" and went on to publish. A
    found artifact now meets the same checks as a fresh one: it is refused at the wheel step, in the words a
    fresh build uses."""
    from buildctl.errors import StepFailed

    wheel = "demofw-0.1-cp311-cp311-linux_x86_64.whl"
    fat = {"repaired": True, "wheel": wheel, "original": wheel, "vendored": [
        {"soname": "libcuda.so.1", "file": "demofw.libs/libcuda.so.1", "bytes": 71_000_000, "package": "libcuda1"}]}
    folder, manifest = assembled_artifact(recipe.load("demo-cpu"), tmp_path, wheel,
                                          outputs={"portability.json": json.dumps(fat).encode()})
    root = tmp_path / "artifacts"
    (root / "demo-cpu").mkdir(parents=True)
    folder = folder.rename(root / "demo-cpu" / manifest["key"])
    plain = stages.Run.of(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=root), stages.BuildLog())
    assert pipeline._found(plain, manifest["key"]).artifact == folder
    guarded = stages.Run.of(recipe.load("demo-cpu", overrides=["build.wheel.max_vendored=10MB"]),
                            stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=root), stages.BuildLog())
    with pytest.raises(StepFailed) as e:
        pipeline._found(guarded, manifest["key"])
    assert e.value.step == "wheel"
    assert "the repair vendored 1 libraries, 71.0 MB unpacked, past build.wheel.max_vendored 10MB" in str(e.value)
    assert str(folder) in str(e.value) and "\n" not in str(e.value)
    from buildctl.pipeline.stages import failure

    message = str(failure.build_failed(guarded, e.value, "wheel", stages.Prepared(
        render.render(guarded.spec), tmp_path / "context", KeyInputs({}, "source", "sha256:base")), {}))
    assert message.splitlines()[0] == "build of demo-cpu failed in step wheel (exit 1)"
    assert "past build.wheel.max_vendored 10MB" in message.splitlines()[1]  # the why, as a fresh build's
    from buildctl.pipeline import dry_run

    assert dry_run._why_not_served(folder, plain.spec) is None
    assert "past build.wheel.max_vendored 10MB" in dry_run._why_not_served(folder, guarded.spec)


@pytest.mark.parametrize("detail", [
    "the repair vendored 4 libraries, 110.4 MB unpacked, past build.wheel.max_vendored 100MB; largest: libcublasLt.so.12 "
    "60.0 MB (from nvidia-cublas-cu12), libcudnn.so.9 30.0 MB, libnccl.so.2 20.0 MB; fix: leave what a dependency or the "
    "target provides to it (build.wheel.exclude), or raise build.wheel.max_vendored",
    "the build produced no wheel",
    "extension torch_scatter built no wheel of that name (torch_scatter-*.whl)",
])
def test_a_build_refused_on_the_host_says_why_in_the_message_the_bundle_its_readme_and_build_log(tmp_path, detail):
    """Issue 43, item 9: a refusal on the host after the container ran (the size guard, no wheel, an
    extension wheel refused) printed only `build of R failed in step wheel (exit 1)`: bundle.json, README.md
    and build.log (which ends where the container did) held no reason."""
    from buildctl.errors import StepFailed
    from buildctl.pipeline.stages import failure

    root = tmp_path / "artifacts"
    log = stages.BuildLog()
    log("[100/100] Linking CXX shared library lib/libdemofw.so")
    run = stages.Run.of(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=root), log)
    step = "extensions" if detail.startswith("extension") else "wheel"
    exc = StepFailed(step, 1, log.text(), detail=detail)
    failed = failure.build_failed(run, exc, step, stages.Prepared(
        render.render(run.spec), tmp_path / "context", KeyInputs({}, "source", "sha256:base")), {})
    message = str(failed)
    assert message.splitlines()[0] == f"build of demo-cpu failed in step {step} (exit 1)"
    assert detail in message
    bundle = json.loads((failed.bundle / "bundle.json").read_text())
    assert any(detail.split(";")[0] in line for line in bundle["first_error"]), bundle["first_error"]
    assert detail.split(";")[0] in bundle["diagnosis"]["cause"]
    assert detail.split(";")[0] in (failed.bundle / "README.md").read_text()
    assert detail.split(";")[0] in (failed.bundle / "build.log").read_text()
    if "fix: " in detail:
        assert bundle["diagnosis"]["fix"] == detail.split("; fix: ", 1)[1]


def test_the_manifest_records_what_apt_installed_and_diff_compares_it(tmp_path):
    """Issue 41: apt is never pinned (Debian's mirrors keep only current versions), so what it installed is
    recorded (dpkg-query in the build: untrusted lines skipped) and `invoke diff` names a package that moved."""
    from buildctl.verify import compare

    spec = recipe.load("demo-cpu")
    listed = {"apt-packages.txt": b"libc6 2.36-9+deb12u4\ncmake 3.25.1-1\n$(rm -rf /) x\nlibgomp1:amd64 12.2.0-14\n"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    folder, manifest = assembled_artifact(spec, tmp_path / "a", "demofw-0.1-cp311-cp311-linux_x86_64.whl",
                                          outputs=listed)
    assert manifest["apt"] == {"cmake": "3.25.1-1", "libc6": "2.36-9+deb12u4", "libgomp1:amd64": "12.2.0-14"}
    moved = {"apt-packages.txt": listed["apt-packages.txt"].replace(b"deb12u4", b"deb12u9")}
    other, _ = assembled_artifact(spec, tmp_path / "b", "demofw-0.1-cp311-cp311-linux_x86_64.whl", outputs=moved)
    rows = {r["field"]: r for r in compare.diff_paths(folder / "manifest.json", other / "manifest.json")["manifest"]}
    assert rows["apt.libc6"]["same"] is False and rows["apt.libc6"]["b"] == "2.36-9+deb12u9"
    assert rows["apt.cmake"]["same"] is True


def test_a_bundles_context_carries_every_rendered_file_the_pip_lock_too(tmp_path):
    # The bundle's context is what `invoke repro` builds the image from again: a rendered file missing there
    # (pip.lock, which the Dockerfile installs from) fails the replay at the image step, not the build's step.
    spec = recipe.load("demo-cpu")
    rendered = render.render(spec)
    assert "pip.lock" in rendered.files, "demo-cpu builds from its lock"
    context = render.write(rendered, tmp_path / "build" / spec.name)
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    bundle = repro.write_bundle(
        spec=spec, rendered=rendered, context_dir=context, secrets=run.secrets, root=tmp_path / "artifacts",
        failure=repro.FailedStep(step="compile", exit_code=1, log="error: x", diagnosis=None),
        replay=repro.ReplayFacts(image_id="sha256:img", command=list(render.BUILD_COMMAND), env={},
                                 volumes={"w": "/work"}, network="host", memory=None),
    )
    carried = {str(p.relative_to(bundle / "context")) for p in (bundle / "context").rglob("*") if p.is_file()}
    assert set(rendered.files) <= carried, sorted(set(rendered.files) - carried)
