"""A bisect step renders its files and computes its key once (issue 42): its child build (cli/child.py, a job
with key_first) takes the dry run's rendered files and key inputs into the build, which computes the key
again only when what it will build differs from what the dry run read: a base image the pull policy pulled
(a newer one, or the absent base), or a local source that changed since. The child runs here for real (the
dry run, the pipeline's fetch) on a fake engine that answers only the base image's inspection; the build
stops where it would ask the engine for more (the plan)."""

from __future__ import annotations

import io
import json
import os

import pytest
from conftest import TEST_NAMESPACE
from rich.console import Console

from buildctl import engine, recipe, render
from buildctl.bisect.child import Criterion, build_job
from buildctl.cli import child
from buildctl.engine import pull
from buildctl.errors import StepFailed
from buildctl.pipeline import child_build as cb
from buildctl.pipeline import stages
from buildctl.pipeline.stages import prepare
from buildctl.settings import Settings
from buildctl.store import key as key_mod

OLD_BASE = "sha256:" + "a" * 64
NEW_BASE = "sha256:" + "b" * 64


class BaseOnly(engine.EngineConnection):
    """An engine that answers the base image's inspection (its id, or absent) and nothing else."""

    def __init__(self, base_id: str | None) -> None:
        super().__init__(client="no engine here")
        self.base_id = base_id

    def inspect_image(self, ref: str) -> dict | None:
        return {"Id": self.base_id, "Config": {"Labels": {}}} if self.base_id else None


class ThePlan(Exception):
    """The build reached its plan: from there on it asks the engine (its facts, the image build)."""


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The renders and key computations of the step, counted where every one of them is made."""
    counts = {"render": 0, "key": 0}
    real_render, real_key = render.render, key_mod.key_inputs

    def counting_render(*args, **kwargs):
        counts["render"] += 1
        return real_render(*args, **kwargs)

    def counting_key(*args, **kwargs):
        counts["key"] += 1
        return real_key(*args, **kwargs)

    monkeypatch.setattr(render, "render", counting_render)
    monkeypatch.setattr(key_mod, "key_inputs", counting_key)
    monkeypatch.chdir(tmp_path)  # the build's render folder (build/) is the test's
    return counts


def step(tmp_path, fake: BaseOnly, monkeypatch) -> tuple[list[dict], cb.Result | None]:
    """One bisect step's child build of demo-cpu: its events, and its result (None: it reached the plan)."""
    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: fake))
    chosen = Settings.model_validate({"engines": ["unix:///nonexistent/x.sock"], "artifacts": str(tmp_path / "a")})
    job = build_job("demo-cpu", [], Criterion(), chosen, "unix:///nonexistent/x.sock", no_preflight=True)
    assert job.key_first
    events: list[dict] = []

    class Stream:
        def write(self, text: str) -> None:
            events.append(json.loads(text))

        def flush(self) -> None:
            pass

    try:
        return events, child.run_job(job, cb.EventView(Stream(), Console(file=io.StringIO())))
    except ThePlan:
        return events, None


def key_event(events: list[dict]) -> str:
    [key] = [e["key"] for e in events if e["event"] == "key"]
    return key


def test_a_bisect_step_renders_and_computes_its_key_once(counted, tmp_path, monkeypatch):
    seen: list[str] = []

    def plan(run, prepared):
        seen.append(prepared.key)
        raise ThePlan

    monkeypatch.setattr(prepare, "plan", plan)
    events, result = step(tmp_path, BaseOnly(OLD_BASE), monkeypatch)
    assert result is None and seen == [key_event(events)]
    assert counted == {"render": 1, "key": 1}


def test_a_base_the_build_pulls_is_keyed_again_and_the_result_says_the_builds_key(counted, tmp_path, monkeypatch):
    """The dry run keys the base the engine has now (never pulled there); the build's pull policy pulled
    another one (the absent base here; a newer one under `pull: always` alike): its key is computed again
    from the same rendered files, and the step's result names that key, not the dry run's."""
    fake = BaseOnly(None)
    monkeypatch.setattr(pull, "ensure_images", lambda client, refs, policy, **kw: setattr(fake, "base_id", NEW_BASE))
    built: list[stages.Prepared] = []

    def plan(run, prepared):
        built.append(prepared)
        raise StepFailed("image", 1, "the image build failed")

    monkeypatch.setattr(prepare, "plan", plan)
    events, result = step(tmp_path, fake, monkeypatch)
    [prepared] = built
    assert prepared.base_image_id == NEW_BASE and prepared.key != key_event(events)
    assert result is not None and not result.ok and result.failure.step == "image"
    assert result.key == prepared.key
    assert counted == {"render": 1, "key": 2}


def test_a_build_keys_what_it_builds_when_it_differs_from_what_the_dry_run_keyed(tmp_path):
    """The decision alone: the dry run's inputs when the base image and the source are those it keyed;
    else the key computed again from the build's own."""
    spec = recipe.load("demo-cpu")
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    rendered = render.render(run.spec)
    looked = prepare.request_inputs(run, rendered, OLD_BASE)
    assert prepare.build_inputs(run, rendered, OLD_BASE, None, looked) is looked
    assert prepare.build_inputs(run, rendered, OLD_BASE, looked.source, looked) is looked
    pulled = prepare.build_inputs(run, rendered, NEW_BASE, None, looked)
    assert pulled.base_image == NEW_BASE and pulled == prepare.request_inputs(run, rendered, NEW_BASE)
    assert run.log.lines[-1] == (f"buildctl: key {pulled.key}, not {looked.key}: the base image is not the one the "
                                 "key was first computed with")
    edited = prepare.build_inputs(run, rendered, OLD_BASE, "another tree", looked)
    assert edited.source == "another tree" and edited.key != looked.key
    assert prepare.build_inputs(run, rendered, OLD_BASE, None, None) == looked


def test_the_dry_run_hands_on_what_it_rendered_and_keyed_and_writes_nothing(tmp_path, monkeypatch):
    """`invoke build --dry-run` (and a step's key) stays a dry run: nothing written here or in the artifacts
    root; what it rendered and keyed travels in memory only."""
    from buildctl.pipeline.dry_run import dry_run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: BaseOnly(OLD_BASE)))
    looked = dry_run(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path / "a"))
    assert looked.keyed is not None and looked.keyed.spec is looked.spec
    assert looked.keyed.inputs.key == looked.key and looked.keyed.inputs.base_image == OLD_BASE
    assert looked.keyed.rendered == render.render(looked.spec)
    assert list(tmp_path.iterdir()) == []
