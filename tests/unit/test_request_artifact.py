"""Issue 41: `invoke verify --recipe R`, `invoke publish --recipe R` and `invoke debug` take the artifact of the
key the request names (the key a build of the request has now, or `--key K`), never the recipe's newest: a
Release no-op after a Debug build verified and published the Debug wheel. A fake store, an engine that
answers the base image's inspection only (the key needs its id): nothing built."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from publish_helpers import make_wheel, sha256

from buildctl import recipe
from buildctl.errors import InputError

BASE_ID = "sha256:" + "b" * 64


class OnlyTheBaseImage:
    def inspect_image(self, ref: str) -> dict:
        return {"Id": BASE_ID, "Config": {"Labels": {}}}

    def __getattr__(self, name: str):
        raise AssertionError(f"finding the request's artifact asked the engine for {name}")


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    """A store with demo-cpu's Release artifact, then (newer) its Debug one, each at its request's key."""
    from buildctl import engine
    from buildctl.pipeline.dry_run import dry_run
    from buildctl.pipeline.stages import BuildOptions

    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: OnlyTheBaseImage()))
    root = tmp_path / "artifacts"
    for n, (kind, sets) in enumerate((("release", []), ("debug", ["build.type=Debug"]))):
        key = dry_run(recipe.load("demo-cpu", sets), BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=root)).key
        folder = root / "demo-cpu" / key
        folder.mkdir(parents=True)
        wheel = make_wheel(folder, "bctl-demo", f"1.0+{kind}")
        (folder / "context").mkdir()
        (folder / "context" / "Dockerfile").write_text("FROM scratch AS runtime\n")
        manifest = folder / "manifest.json"
        manifest.write_text(json.dumps({"schema_version": 1, "recipe": "demo-cpu", "key": key,
                                        "runtime": {"context": "context", "target": "runtime", "requirements": []},
                                        "wheels": [{"file": wheel.name, "sha256": sha256(wheel),
                                                    "bytes": wheel.stat().st_size}]}))
        os.utime(manifest, (1_000_000 + n, 1_000_000 + n))  # the Debug one is the newest
        (root / kind).write_text(key)
    return root


def test_the_request_names_its_own_artifact_not_the_newest(store):
    from buildctl.pipeline.published import request_artifact
    from buildctl.store import artifacts

    assert artifacts.newest("demo-cpu", store).name == (store / "debug").read_text()
    release = request_artifact(recipe.load("demo-cpu"), root=store, environ=os.environ)
    assert release == store / "demo-cpu" / (store / "release").read_text()
    debug = request_artifact(recipe.load("demo-cpu", ["build.type=Debug"]), root=store, environ=os.environ)
    assert debug.name == (store / "debug").read_text()


def test_key_names_another_artifact_of_the_recipe(store):
    from buildctl.pipeline.published import request_artifact

    debug_key = (store / "debug").read_text()
    assert request_artifact(recipe.load("demo-cpu"), key=debug_key, root=store, environ=os.environ).name == debug_key
    with pytest.raises(InputError) as e:
        request_artifact(recipe.load("demo-cpu"), key="0123456789abcdef", root=store, environ=os.environ)
    assert str(e.value).startswith("--key 0123456789abcdef: no artifact of demo-cpu with that key in ")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="--key ../x: not an artifact key"):
        request_artifact(recipe.load("demo-cpu"), key="../x", root=store, environ=os.environ)


def test_a_request_without_its_artifact_is_refused_naming_the_newest(store):
    from buildctl.pipeline.published import request_artifact

    with pytest.raises(InputError) as e:
        request_artifact(recipe.load("demo-cpu", ["build.type=RelWithDebInfo"]), root=store, environ=os.environ)
    message = str(e.value)
    newest = (store / "debug").read_text()
    assert message.startswith("no artifact of demo-cpu for this request (key ")
    assert f"the newest, {newest}, differs: " in message
    assert "fix: invoke build --recipe demo-cpu (with the same --set), or --key " + newest in message
    assert "\n" not in message


def test_publish_of_a_release_request_after_a_debug_build_publishes_the_release_wheel(store, tmp_path, monkeypatch):
    from buildctl.cli import commands
    from buildctl.settings import Settings

    monkeypatch.setenv("BUILDCTL_ARTIFACTS", str(store))
    index = tmp_path / "index"
    commands.publish("demo-cpu", None, to=str(index), as_json=True, settings=Settings.from_env(os.environ))
    assert sorted(p.name for p in (index / "files" / "bctl-demo").glob("*.whl")) == ["bctl_demo-1.0+release-py3-none-any.whl"]
