"""The base image is built FROM the id the key names, never the tag (issue 41): the rendered Dockerfile
takes the base as a build argument whose default is the recipe's tag (rendering stays pure: `docker build .`
alone builds as before), and buildctl's image build gives it the id the key was computed from, so a tag
moved mid-build cannot put another base under the old key. `--dry-run --pull always` says it would ask the
registry. No engine: the image build's request is read here."""

from __future__ import annotations

import os

from conftest import TEST_NAMESPACE

from buildctl import engine, recipe
from buildctl import render as render_mod
from buildctl.pipeline import stages
from buildctl.pipeline.stages import compile as compile_stage
from buildctl.store import key as key_mod

BASE_ID = "sha256:" + "b" * 64


def test_the_rendered_dockerfile_takes_the_base_as_an_argument_defaulting_to_the_tag():
    text = render_mod.render(recipe.load("demo-cpu")).files["Dockerfile"]
    assert "ARG BUILDCTL_BASE_IMAGE=buildctl/base:bookworm\nFROM ${BUILDCTL_BASE_IMAGE} AS base\n" in text
    assert engine.base_image_refs(text, {}) == ["buildctl/base:bookworm"]
    assert engine.base_image_refs(text, {"BUILDCTL_BASE_IMAGE": BASE_ID}) == [BASE_ID]


def test_the_builder_image_is_built_from_the_id_the_key_names(tmp_path, monkeypatch):
    spec = recipe.load("demo-cpu")
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    rendered = render_mod.render(run.spec)
    prepared = stages.Prepared(rendered, tmp_path, key_mod.key_inputs(rendered.files, "src", BASE_ID))
    planned = stages.Planned(prepared, 2, {}, {}, {})
    asked = []
    monkeypatch.setattr(engine, "build_image", lambda client, image, **kw: asked.append(image) or "sha256:built")
    compile_stage.build_image(run, planned)
    assert asked[0].buildargs["BUILDCTL_BASE_IMAGE"] == BASE_ID


def test_dry_run_with_pull_always_says_it_would_ask_the_registry(tmp_path, monkeypatch):
    from test_artifact_key import OnlyTheBaseImage

    from buildctl.pipeline.dry_run import dry_run

    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: OnlyTheBaseImage()))
    spec = recipe.load("demo-cpu", ["base.image=debian:bookworm-slim"], site={"pull": "always"})
    found = dry_run(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    assert "would ask the registry" in found.base_image and "pull always" in found.base_image
    assert not found.up_to_date


def test_the_runtime_image_is_built_from_the_base_id_the_artifact_recorded(tmp_path, monkeypatch):
    """Verification's runtime image shares the builder's `base` stage: built FROM the id the artifact's key
    names while the engine still has it, else from the tag (an old artifact whose base was removed)."""
    from buildctl.pipeline.stages import verify as verify_stage

    spec = recipe.load("demo-cpu")
    asked = []
    monkeypatch.setattr(engine, "build_image", lambda client, image, **kw: asked.append(image) or "sha256:built")
    monkeypatch.setattr(engine, "image_exists", lambda client, ref: ref == BASE_ID)
    verify_stage.runtime_image(spec, "k", client=None, context_dir=tmp_path, namespace="n", on_line=lambda line: None,
                               recorded=verify_stage.Recorded(base_image_id=BASE_ID))
    assert asked[-1].buildargs["BUILDCTL_BASE_IMAGE"] == BASE_ID
    verify_stage.runtime_image(spec, "k", client=None, context_dir=tmp_path, namespace="n", on_line=lambda line: None,
                               recorded=verify_stage.Recorded(base_image_id="sha256:" + "c" * 64))
    assert "BUILDCTL_BASE_IMAGE" not in asked[-1].buildargs


def test_a_repro_replay_builds_from_the_base_id_its_bundle_records(tmp_path, monkeypatch):
    """`invoke repro` rebuilds the failed build's image as the build did: FROM the base id the key named
    (bundle.json records it), while the engine has it; else from the tag (a bundle whose base was removed)."""
    from buildctl.errors import StepFailed
    from buildctl.failure import repro
    from buildctl.failure.repro import replayer
    from buildctl.pipeline.stages import failure

    run = stages.Run.of(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path / "artifacts"))
    rendered = render_mod.render(run.spec)
    failed = failure.build_failed(run, StepFailed("image", 1, "boom"), "image", stages.Prepared(
        rendered, tmp_path / "context", key_mod.key_inputs(rendered.files, "src", BASE_ID)), {})
    asked = []
    monkeypatch.setattr(engine, "build_image", lambda client, image, **kw: asked.append(image) or "sha256:built")
    with repro.open_bundle(failed.bundle) as b:
        assert b.data.base_image_id == BASE_ID and BASE_ID in "\n".join(repro.summary(b))
        monkeypatch.setattr(engine, "image_exists", lambda client, ref: ref == BASE_ID)
        replayer.replay(b, client=object())
        assert asked[-1].buildargs["BUILDCTL_BASE_IMAGE"] == BASE_ID
        monkeypatch.setattr(engine, "image_exists", lambda client, ref: False)
        replayer.replay(b, client=object())
        assert "BUILDCTL_BASE_IMAGE" not in (asked[-1].buildargs or {})


def test_invoke_debug_and_verify_take_the_runtime_image_built_from_the_base_id_the_manifest_records(tmp_path,
                                                                                                    monkeypatch):
    """`invoke debug` (published.debug_artifact) and `invoke verify` get their runtime image from
    artifact_runtime_image: the base id it builds from is the one the manifest's key_inputs name."""
    from types import SimpleNamespace

    from buildctl.pipeline.stages import verify as verify_stage

    spec = recipe.load("demo-cpu")
    artifact = tmp_path / "artifacts" / "demo-cpu" / "k"
    manifest = SimpleNamespace(runtime=None, namespace="n", key_inputs={"base_image": BASE_ID})
    asked = []
    monkeypatch.setattr(engine, "build_image", lambda client, image, **kw: asked.append(image) or "sha256:built")
    monkeypatch.setattr(engine, "image_exists", lambda client, ref: ref == BASE_ID)
    verify_stage.artifact_runtime_image(spec, SimpleNamespace(artifact=artifact, manifest=manifest, key="k"),
                                        client=None, context_dir=tmp_path, on_line=lambda line: None)
    assert asked[-1].buildargs["BUILDCTL_BASE_IMAGE"] == BASE_ID
