"""`invoke verify --image`: what is checked before any engine call (--expect, --image, --python), the
report of an image (schema, round trip, wording), and `invoke diff` between an image and a wheel report.
The runs against the real engine are in test_verify_image_integration.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from docker import errors as derr
from invoke_here import invoke_here
from rich.console import Console
from verify_fixtures import cpu_probe, debian_probe, make_report, make_spec

from buildctl.errors import InputError
from buildctl.verify import compare, report_files
from buildctl.verify import image as image_verify
from buildctl.verify import report as rep
from buildctl.verify.expectations import ABSENT, Expectations, evaluate, merge, parse_expect, verdict
from buildctl.verify.options import VerifyOptions

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "buildctl-test/debian-torch:trixie"
IMAGE_ID = "sha256:290eb3e61ddcca5798478f92af320a1db3cfbeb953cc396fa1c96a5205e4e5db"


def image_report(probe: dict | None = None, exp: Expectations | None = None) -> rep.Report:
    probe = probe or debian_probe()
    exp = exp or parse_expect(["torch=2.6.0", "cuda=none"])
    return rep.Report(wheel=None, image={"reference": IMAGE, "id": IMAGE_ID, "python": "python3"}, mode="image",
                      module="torch", environment={"image": IMAGE, "image_id": IMAGE_ID, "python": "python3"},
                      expectations=exp.to_dict(), checks=evaluate(exp, probe, subject="image"), probe=probe,
                      verdict=verdict(probe))


# --------------------------------------------------------------------------- --expect key=value


def test_expect_values_are_read_as_a_recipe_reads_verify_expect():
    exp = parse_expect(["torch=2.6.0", "cuda=none", "nccl=2.21.5", "arch=8.0,9.0+PTX", "build_type=Release",
                        "USE_MPI=on", "USE_NCCL=OFF", "accelerator=cpu"])
    assert exp.version == "2.6.0" and exp.cuda == ABSENT and exp.nccl == "2.21.5"
    assert exp.arch == ("sm_80", "sm_90", "compute_90") and exp.build_type == "Release"
    assert exp.features == {"USE_MPI": True, "USE_NCCL": False} and exp.accelerator == "cpu"
    assert set(exp.sources.values()) == {"--expect says"}
    assert parse_expect(["arch=gfx90a,gfx942"]).arch == ("gfx90a", "gfx942")
    assert parse_expect(["version=2.6.0"]).version == "2.6.0"
    assert parse_expect(["demofw=0.3.0"], module="demofw").version == "0.3.0"


@pytest.mark.parametrize("item, words", [
    ("torch", "not key=value"),
    ("=2.6.0", "not key=value"),
    ("cuda=", "not key=value"),
    ("pytorch=2.6.0", "unknown key pytorch"),
    ("cuda=twelve", "should match pattern"),
    ("cuda=12.4.1.1.1", "should match pattern"),
    ("arch=sm_90", "should match pattern"),
    ("build_type=Fast", "Release"),
    ("USE_MPI=maybe", "on or off"),
    ("torch=two", "not a version"),
    ("accelerator=tpu", "cpu, cuda or rocm"),
    ("cuda=12.4\x1b[31m", "should match pattern"),
])
def test_bad_expect_is_one_line_naming_it_and_the_keys(item, words):
    with pytest.raises(InputError) as e:
        parse_expect([item])
    msg = str(e.value)
    assert msg.startswith("--expect ") and "\n" not in msg and "\x1b" not in msg, msg
    assert words in msg and "fix: --expect key=value, keys: version, accelerator, cuda" in msg, msg


def test_an_expectation_given_twice_is_refused():
    with pytest.raises(InputError, match="torch=2.5.1: version is expected twice"):
        parse_expect(["torch=2.6.0", "torch=2.5.1"])


def test_expect_goes_over_the_recipe():
    recipe = Expectations.from_spec(make_spec(expect={"cuda": "12.4"}))
    exp = merge(recipe, parse_expect(["torch=2.6.0", "USE_MPI=on"]))
    assert exp.cuda == "12.4" and exp.sources["cuda"] == "verify.expect says"  # the recipe's, kept
    assert exp.version == "2.6.0" and exp.sources["version"] == "--expect says"
    assert exp.build_type == "Release" and exp.features["USE_MPI"] is True
    assert merge(recipe, parse_expect(["cuda=none"])).cuda == ABSENT


# --------------------------------------------------------------------------- the report of an image


def test_checks_of_an_image_say_image_and_where_the_expectation_came_from():
    checks = {c.name: c for c in image_report(exp=parse_expect(["torch=2.5.1", "cuda=12.4", "USE_MPI=on"])).checks}
    assert checks["version"].ok is False
    assert checks["version"].detail == "version 2.6.0+debian in the image, --expect says 2.5.1"
    assert checks["CUDA"].detail == "CUDA absent in the image, --expect says 12.4"
    assert checks["USE_MPI"].ok is True
    ok = {c.name: c.ok for c in image_report().checks}
    assert ok["version"] and ok["CUDA"] and ok["all-reduce correctness"] and ok["DDP step (2 ranks, gloo)"]


def test_image_report_round_trips_and_says_what_was_verified(tmp_path):
    r = image_report()
    report_files.write_all(r, tmp_path)
    back = rep.load_report(tmp_path / "report.json")
    assert back.to_dict() == r.to_dict()
    assert back.image == {"reference": IMAGE, "id": IMAGE_ID, "python": "python3"} and back.wheel is None
    assert back.subject == f"{IMAGE} (python3)"
    md = (tmp_path / "report.md").read_text()
    assert md.startswith(f"## buildctl verify: {IMAGE} (python3) — passed")
    assert "CPU capability AVX512; BLAS generic (LAPACK generic); loaded: reference BLAS (netlib): libblas.so.3.12.1" in md
    console = Console(record=True, width=200)
    rep.render(back, console)
    out = console.export_text()
    for words in (f"image: {IMAGE_ID}", "CPU capability", "AVX512", "reference BLAS (netlib)",
                  "legacy backend, USE_LIBUV=0", "PyTorch built with:", "gloo on CPU, 2 processes"):
        assert words in out, words


def test_the_loaded_blas_is_named_by_its_real_path():
    """Debian's libblas.so.3 is whichever BLAS the alternatives system points at; the real path says which."""
    libs = ["/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
            "/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack.so.3",
            "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.12.1", "/opt/conda/lib/libmkl_rt.so.2",
            "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0"]
    assert rep.blas_kinds(libs) == ["OpenBLAS", "reference BLAS (netlib)", "MKL"]
    assert rep.blas_text({"blas": "mkl", "lapack": "mkl", "libraries": []}) == "mkl (LAPACK mkl); loaded: none seen"


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d.update(image=None), "neither"),
    (lambda d: d.update(wheel={"name": "x.whl"}), "both"),
    (lambda d: d["image"].pop("id"), "image.id"),
])
def test_a_report_names_exactly_one_thing_it_verified(tmp_path, mutate, words):
    d = image_report().to_dict()
    mutate(d)
    (tmp_path / "report.json").write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        rep.load_report(tmp_path / "report.json")
    msg = str(e.value)
    assert "\n" not in msg
    assert ("the wheel or the image" in msg) if words in ("neither", "both") else (words in msg), msg


def test_diff_of_debian_torch_against_a_pypi_wheel_is_readable(tmp_path):
    rep.write_json(image_report(), tmp_path / "debian.json")
    rep.write_json(make_report(cpu_probe()), tmp_path / "pypi.json")
    result = compare.diff_paths(tmp_path / "debian.json", tmp_path / "pypi.json")
    json.dumps(result)
    rows = {s: {r["field"]: r for r in result[s]} for s in ("verified", "versions", "cpu", "build_settings")}
    assert (rows["verified"]["verified"]["a"], rows["verified"]["verified"]["b"]) == ("image", "wheel")
    assert rows["verified"]["id"]["a"] == IMAGE_ID
    assert (rows["versions"]["version"]["a"], rows["versions"]["version"]["b"]) == ("2.6.0+debian", "2.13.0+cpu")
    assert (rows["cpu"]["BLAS (build)"]["a"], rows["cpu"]["BLAS (build)"]["b"]) == ("generic", "mkl")
    assert rows["cpu"]["BLAS (loaded)"]["a"] == "reference BLAS (netlib)"
    assert rows["cpu"]["CPU capability"]["a"] == "AVX512"
    flags = rows["build_settings"]["CXX_FLAGS"]
    assert "-gsplit-dwarf" in flags["only_a"] and "-DNDEBUG" in flags["only_b"] and "-O2" not in flags["only_a"]
    assert (rows["build_settings"]["BUILD_TYPE"]["a"], rows["build_settings"]["BUILD_TYPE"]["b"]) == \
        ("RelWithDebInfo", "Release")
    console = Console(record=True, width=220)
    compare.print_diff(result, console)
    out = console.export_text()
    for words in ("verified (", "image", IMAGE, "2.6.0+debian", "2.13.0+cpu", "CPU and BLAS", "BLAS (build)",
                  "generic", "mkl", "reference BLAS (netlib)", "only here: ", "-gsplit-dwarf", "RelWithDebInfo",
                  "legacy backend (USE_LIBUV=0: built without libuv)"):
        assert words in out, words


def test_diff_of_the_same_image_twice_counts_no_difference(tmp_path):
    rep.write_json(image_report(), tmp_path / "one.json")
    rep.write_json(image_report(), tmp_path / "two.json")
    result = compare.diff_paths(tmp_path / "one.json", tmp_path / "two.json")
    assert result["differences"] == 0 and all(r["same"] for r in result["cpu"])


# --------------------------------------------------------------------------- refused before the engine


class NoSuchImage:
    """An engine client whose inspect_image answers 404, as docker-py raises it (nothing else is called)."""

    class api:  # noqa: N801 - docker-py's attribute name
        @staticmethod
        def inspect_image(ref):
            raise derr.ImageNotFound(f"No such image: {ref}")


def test_missing_image_is_one_line_with_the_fix(tmp_path):
    with pytest.raises(InputError) as e:
        image_verify.verify_image("registry.example/team/torch:old", client=NoSuchImage(), out_dir=tmp_path,
                                  console=Console(file=io.StringIO()))
    msg = str(e.value)
    assert msg == ("image registry.example/team/torch:old is not in the Docker engine, and buildctl never pulls; "
                   "fix: `docker pull registry.example/team/torch:old` (or docker load / docker build it) first")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kwargs, words", [
    ({"image": "-rm"}, "--image -rm: not an image reference"),
    ({"image": "a b"}, "--image a b: not an image reference"),
    ({"image": ""}, "not an image reference"),
    ({"python": "python3 -c 'import os'"}, "--python"),
    ({"python": "../bin/python"}, "not a command name or an absolute path"),
    ({"python": "/opt/venv/bin/"}, "not a command name or an absolute path"),
    ({"module": "os"}, "--module os"),
    ({"sizes": "64:8"}, "--sizes"),
])
def test_bad_arguments_are_refused_before_the_engine(kwargs, words):
    args = {"image": IMAGE, **kwargs}
    with pytest.raises(InputError) as e:
        image = args.pop("image")
        options = VerifyOptions(**{k: args.pop(k) for k in ("module", "sizes") if k in args})
        image_verify.verify_image(image, client=object(), options=options, console=Console(file=io.StringIO()),
                                  **args)  # object(): any engine call would fail
    assert words in str(e.value) and "\n" not in str(e.value)


def test_image_out_dir_is_under_artifacts_and_names_the_image():
    d = image_verify.default_image_out_dir("nvcr.io/nvidia/pytorch:25.01-py3", IMAGE_ID)
    assert d.parts[-3:] == ("verify", "images", "nvcr.io_nvidia_pytorch_25.01-py3-290eb3e61ddc")


def invoke(*args: str):
    # No engine here: a command that reached Docker would fail with an engine error, not the one asserted.
    env = {"BUILDCTL_DEBUG": "", "COLUMNS": "200", "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    return invoke_here(*args, cwd=ROOT, env=env)


@pytest.mark.parametrize("args, words", [
    (("--image", IMAGE, "--expect", "cuda=twelve"), "--expect cuda=twelve"),
    (("--image", IMAGE, "--wheel", "x.whl"), "--image verifies what the image holds"),
    (("--image", IMAGE, "--set", "build.type=Debug"), "--set changes a recipe"),
    (("--python", "/opt/venv/bin/python", "--wheel", "x.whl"), "--python is for --image"),
    (("--expect", "torch=2.6.0", "--wheel", "x.whl"), "--expect is for --image"),
])
def test_cli_refuses_bad_image_arguments_in_one_line_exit_2(args, words):
    proc = invoke("verify", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and words in proc.stderr, proc.stderr
