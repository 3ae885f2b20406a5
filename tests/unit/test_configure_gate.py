"""The configure gate (issue 34): what CMake decided, against what the recipe asks, before the compile.

The PyTorch fixtures are the real configure outputs of pytorch2.6-cpu-trixie and pytorch2.6-cuda12.4-trixie
(tests/fixtures/cmake/, docs/evidence/); the demofw one is demo-cuda13's real configure with an nvcc that
is not there (examples/demofw/CMakeLists.txt prints PyTorch's warning and turns USE_CUDA off)."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildctl import recipe, render
from buildctl.pipeline import cmake_record
from buildctl.pipeline import configure_gate as gate
from buildctl.pipeline.cmake_record import Recorded, arch_set, cmake_messages

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cmake"


def fixture(name: str) -> str:
    path = FIXTURES / name
    return path.read_text() if path.is_file() else ""


def request(name: str, *sets: str) -> gate.Request:
    spec = recipe.load(name, list(sets))
    rendered = render.render(spec)
    return gate.Request(rendered.build_env, rendered.spec)


def recorded(prefix: str, *, summary: str | None = None, cache: str | None = None, log: str = "") -> Recorded:
    return Recorded.of(fixture(f"{prefix}-summary.txt") if summary is None else summary,
                       fixture(f"{prefix}-cache.txt") if cache is None else cache, fixture(f"{prefix}-found.txt"), log)


def rows(checked: gate.Gate) -> dict[str, gate.Row]:
    return {r.fact: r for r in checked.rows}


@pytest.mark.parametrize("name, prefix", [("pytorch2.6-cpu-trixie", "pytorch-2.6-cpu"),
                                          ("pytorch2.6-cuda12.4-trixie", "pytorch-2.6-cuda12.4")])
def test_the_shipped_pytorch_recipes_configure_as_they_ask(name, prefix):
    """Every fact these recipes pin is what their real configure decided; the rest is shown."""
    checked = gate.check(request(name), recorded(prefix))
    assert checked.ok, [r.line() for r in checked.mismatches]
    by_fact = rows(checked)
    assert by_fact["Python"].status == "ok" and by_fact["Python"].decided == "/opt/venv/bin/python"
    assert by_fact["NumPy"].status == "ok" and by_fact["NumPy"].decided.startswith("/opt/venv/lib/python3.13/")
    assert (by_fact["BLAS"].asked, by_fact["BLAS"].decided, by_fact["BLAS"].status) == ("OpenBLAS", "open", "ok")
    assert by_fact["build type"].status == by_fact["compiler launcher"].status == "ok"
    assert by_fact["USE_GLOO"].where == "CMake summary USE_GLOO" and by_fact["USE_GLOO"].status == "ok"
    assert by_fact["USE_NCCL"].status == ("ok" if "cuda" in name else "shown")  # the CPU recipe does not pin it
    if "cuda" in name:
        for fact, decided in (("CUDA version", "12.4"), ("CUDA archs", "9.0"), ("cuDNN version", "9.1.0"),
                              ("NCCL version", "2.22.3"), ("NCCL library", "/usr/lib/x86_64-linux-gnu/libnccl.so")):
            assert (by_fact[fact].status, by_fact[fact].decided) == ("ok", decided), by_fact[fact]
        assert by_fact["CUDA archs"].where == "CMake summary CUDA flags"  # -gencode arch=compute_90,code=sm_90
    assert "facts as asked" in checked.summary() and checked.to_dict()["mismatches"] == 0


CUDNN_WARNING = """-- Could NOT find CUDNN (missing: CUDNN_LIBRARY_PATH CUDNN_INCLUDE_PATH)
CMake Warning at cmake/public/cuda.cmake:255 (message):
  Cannot find cuDNN library.  Turning the option off
Call Stack (most recent call first):
  cmake/Dependencies.cmake:44 (include)
  CMakeLists.txt:865 (include)

"""


def test_cudnn_dropped_by_cmake_is_one_mismatch_with_the_log_line_and_the_fix():
    """The CUDA recipe with cuDNN hidden: CMake turns USE_CUDNN off (PyTorch's cmake/public/cuda.cmake);
    the gate names it once, and cuDNN's version and library count with the switch."""
    summary = fixture("pytorch-2.6-cuda12.4-summary.txt").replace("USE_CUDNN           : 1", "USE_CUDNN           : OFF")
    summary = "\n".join(ln for ln in summary.splitlines() if "cuDNN" not in ln)
    cache = fixture("pytorch-2.6-cuda12.4-cache.txt").replace("USE_CUDNN:BOOL=1", "USE_CUDNN:BOOL=OFF")
    req = request("pytorch2.6-cuda12.4-trixie", "build.env.CUDNN_ROOT=/nowhere", "build.env.CUDNN_LIB_DIR=/nowhere")
    checked = gate.check(req, recorded("pytorch-2.6-cuda12.4", summary=summary, cache=cache, log=CUDNN_WARNING))
    assert [r.fact for r in checked.mismatches] == ["USE_CUDNN"]
    by_fact = rows(checked)
    assert by_fact["cuDNN version"].status == by_fact["cuDNN library"].status == "off with USE_CUDNN"
    line = checked.mismatches[0].line()
    assert line.startswith("USE_CUDNN: asked ON (build.features.USE_CUDNN), CMake decided OFF (CMake summary USE_CUDNN)")
    assert ("why: CMake Warning at cmake/public/cuda.cmake:255 (message): Cannot find cuDNN library. Turning the "
            "option off") in line
    assert "fix: CMake found no cuDNN (CUDNN_ROOT=/nowhere" in line and "build.features.USE_CUDNN: false" in line
    assert checked.message().splitlines()[0] == ("configure gate: CMake decided otherwise than the recipe asks "
                                                 "(1 of 33 facts); nothing was compiled")


def test_a_feature_the_image_lacks_is_named_with_cmakes_reason():
    """The CPU recipe asking for MPI without an MPI in the image: PyTorch warns and builds without it."""
    summary = fixture("pytorch-2.6-cpu-summary.txt").replace("USE_MPI               : 0", "USE_MPI               : OFF")
    log = ("-- Could NOT find MPI_C (missing: MPI_C_LIB_NAMES MPI_C_HEADER_DIR MPI_C_WORKS)\n"
           "CMake Warning at cmake/Dependencies.cmake:1036 (message):\n  Not compiling with MPI.  Suppress this "
           "warning with -DUSE_MPI=OFF\nCall Stack (most recent call first):\n  CMakeLists.txt:865 (include)\n")
    checked = gate.check(request("pytorch2.6-cpu-trixie", "build.features.USE_MPI=true"),
                         recorded("pytorch-2.6-cpu", summary=summary, log=log))
    assert [r.fact for r in checked.mismatches] == ["USE_MPI"]
    row = checked.mismatches[0]
    assert (row.asked, row.decided) == ("ON", "OFF")
    assert row.why == ("CMake Warning at cmake/Dependencies.cmake:1036 (message): Not compiling with MPI. Suppress "
                       "this warning with -DUSE_MPI=OFF")
    assert "libopenmpi-dev" in row.fix


def test_demo_without_nvcc_is_refused_naming_use_cuda_and_the_override():
    """demo-cuda13 with CMAKE_CUDA_COMPILER pointing nowhere: demofw's CMake warns as PyTorch does and
    turns USE_CUDA off (and USE_NCCL with it); the one mismatch names the override in its fix."""
    req = request("demo-cuda13", "build.env.CMAKE_CUDA_COMPILER=/nonexistent/nvcc")
    checked = gate.check(req, Recorded.of(fixture("demofw-cuda13-no-nvcc-summary.txt"),
                                          fixture("demofw-cuda13-no-nvcc-cache.txt"),
                                          fixture("demofw-cuda13-no-nvcc-found.txt"),
                                          fixture("demofw-cuda13-no-nvcc-configure.log")))
    assert [r.fact for r in checked.mismatches] == ["USE_CUDA"], [r.line() for r in checked.mismatches]
    row = checked.mismatches[0]
    assert (row.asked, row.asked_by, row.decided) == ("ON", "toolchain.cuda", "OFF")
    assert "nvcc not found. Not compiling with CUDA." in row.why
    assert "CMAKE_CUDA_COMPILER=/nonexistent/nvcc" in row.fix
    by_fact = rows(checked)
    for fact in ("CUDA version", "CUDA archs", "USE_NCCL"):
        assert by_fact[fact].status == "off with USE_CUDA", by_fact[fact]
    assert by_fact["NCCL version"].status == "off with USE_NCCL"


def test_facts_the_recipe_does_not_pin_are_shown_and_what_cmake_never_recorded_is_not_judged():
    req = request("demo-cpu")
    checked = gate.check(req, Recorded.of("-- ******** Summary ********\n--   USE_MKLDNN : ON\n",
                                          "CMAKE_BUILD_TYPE:STRING=Release\nBLAS:UNINITIALIZED=OpenBLAS\n"))
    by_fact = rows(checked)
    assert by_fact["USE_MKLDNN"].status == "shown" and by_fact["USE_MKLDNN"].asked is None
    assert by_fact["Python"].status == "not recorded" and by_fact["Python"].decided is None
    assert "BLAS" not in by_fact  # asked by nobody, and a -D the project never declared is not a decision
    assert checked.ok


@pytest.mark.parametrize("kind, asked, decided, same", [
    ("version", "12.4", "12.4.131", True), ("version", "9.1.0.70", "9.1.0", True), ("version", "12.4", "12.8", False),
    ("version", "5.7", "5.7.31921", True), ("archs", "8.0;9.0", "8.0;9.0 (environment: '8.0;9.0')", True),
    ("archs", "9.0", "-gencode arch=compute_90,code=sm_90", True), ("archs", "8.0;9.0", "-gencode arch=compute_90,code=sm_90", False),
    ("archs", "9.0+PTX", "-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90", True),
    ("archs", "gfx90a;gfx942", "gfx90a;gfx942 (environment: 'gfx90a')", True),
    ("switch", "ON", "1", True), ("switch", "OFF", "False", True), ("switch", "ON", "OFF", False),
    ("switch", "OFF", "CUDNN-NOTFOUND", True), ("blas", "OpenBLAS", "open", True), ("blas", "MKL", "eigen", False),
    ("blas", "FlexiBLAS", "flexi", True), ("tool", "ccache", "/usr/bin/ccache", True),
    ("under", "/usr/lib/x86_64-linux-gnu/", "/usr/lib/x86_64-linux-gnu/libnccl.so", True),
    ("under", "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/", "/usr/lib/x86_64-linux-gnu/libnccl.so", False),
])
def test_comparisons(kind, asked, decided, same):
    assert cmake_record.same(kind, asked, decided) is same


def test_arch_lists_read_as_sets():
    assert arch_set("8.0;9.0+PTX") == {"8.0", "9.0", "9.0+PTX"}
    assert arch_set("-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_90a,code=sm_90a") == {"8.0", "9.0a"}


def test_cmake_messages_join_wrapped_warnings_and_keep_status_lines():
    log = ("-- Found CUDA: /usr (found version \"12.4\")\nCMake Warning at CMakeLists.txt:96 (message):\n"
           "  CUDA_HOME='/usr/local/cuda': nvcc not\n  found.  Not compiling with CUDA.\n\n-- Configuring done\n")
    assert cmake_messages(log) == ('-- Found CUDA: /usr (found version "12.4")',
                                   "CMake Warning at CMakeLists.txt:96 (message): CUDA_HOME='/usr/local/cuda': nvcc "
                                   "not found.  Not compiling with CUDA.", "-- Configuring done")


def test_the_cache_leaves_out_what_the_project_never_declared(tmp_path):
    (tmp_path / "cmake-cache.txt").write_text("USE_FOO:UNINITIALIZED=1\nUSE_CUDA:BOOL=OFF\nNCCL_VERSION:STRING=\n")
    got = Recorded.read(tmp_path)
    assert got.value("cache:USE_FOO") is None and got.value("cache:USE_CUDA") == "OFF"
    assert got.value("cache:NCCL_VERSION") is None  # empty: nothing decided


def test_a_symlinked_or_huge_file_is_not_followed_or_read_whole(tmp_path):
    (tmp_path / "elsewhere.txt").write_text("USE_CUDA:BOOL=ON\n")
    (tmp_path / "cmake-cache.txt").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "cmake-summary.txt").write_text("-- USE_CUDA : OFF\n" + "x" * (cmake_record.MAX_READ + 10))
    got = Recorded.read(tmp_path)
    assert got.value("cache:USE_CUDA") is None and got.value("summary:USE_CUDA") == "OFF"


def test_the_refusal_is_a_failed_configure_step_with_one_line_per_mismatch():
    req = request("demo-cuda13", "build.env.CMAKE_CUDA_COMPILER=/nonexistent/nvcc")
    checked = gate.check(req, Recorded.of("-- USE_CUDA : OFF\n", "USE_CUDA:BOOL=OFF\n"))
    exc = gate.ConfigureRefused(checked, "the log")
    assert exc.step == "configure" and exc.returncode == 1 and exc.exit_code == 1
    assert checked.message().count("\n") == len(checked.mismatches) == 1
    assert "the configure log names no reason" in checked.mismatches[0].line()


def test_found_lines_give_the_version_cmake_found():
    found = Recorded.of("", "", '-- Found CUDAToolkit: /usr/include (found version "12.4.131")\n'
                        '-- Found HIP: /opt/rocm (found suitable version "6.2.41133-dd7f95766", minimum required is "1.0")\n'
                        "-- Found HIP 5.7.31921: /usr/bin/clang++-17\n-- NCCL version: 2.22.3\n"
                        "-- Found NCCL (include: /usr/include, library: /usr/lib/x86_64-linux-gnu/libnccl.so)\n")
    assert found.value("found:CUDAToolkit version") == "12.4.131"
    assert found.value("found:HIP version") == "6.2.41133-dd7f95766"  # the first HIP line wins
    assert found.value("found:NCCL version") == "2.22.3"
    assert found.value("found:NCCL library") == "/usr/lib/x86_64-linux-gnu/libnccl.so"


# --- issue 43, items 11 and 12: an empty value is a decision; the recipe's fields are what is asked ---------


@pytest.mark.parametrize("switch", ["USE_MKL", "USE_EIGEN_FOR_BLAS"])
def test_an_empty_summary_value_is_cmakes_off_and_a_recipe_asking_on_is_refused(switch):
    """PyTorch 2.6's summary prints `USE_MKL :` (an unset CMake variable: off); it was counted "not
    recorded", so a recipe asking USE_MKL: true compiled for hours without MKL."""
    assert f"--   {switch}" in fixture("pytorch-2.6-cpu-summary.txt")
    checked = gate.check(request("pytorch2.6-cpu-trixie", f"build.features.{switch}=true"), recorded("pytorch-2.6-cpu"))
    assert [r.fact for r in checked.mismatches] == [switch], [r.line() for r in checked.rows]
    row = checked.mismatches[0]
    assert (row.asked, row.decided, row.where) == ("ON", "OFF", f"CMake summary {switch}")
    asked_off = gate.check(request("pytorch2.6-cpu-trixie", f"build.features.{switch}=false"), recorded("pytorch-2.6-cpu"))
    assert asked_off.ok and rows(asked_off)[switch].status == "ok"


@pytest.mark.parametrize("name, prefix", [("pytorch2.6-cpu-trixie", "pytorch-2.6-cpu"),
                                          ("pytorch2.6-cuda12.4-trixie", "pytorch-2.6-cuda12.4")])
def test_every_feature_of_the_shipped_recipes_is_judged_on_their_real_configure(name, prefix):
    """Each build.features switch has its row, and the real configure recorded a decision for it."""
    req = request(name)
    by_fact = rows(gate.check(req, recorded(prefix)))
    for switch in req.spec.build.features:
        assert by_fact[switch].status == "ok", by_fact[switch]


ARCHS_NARROWED = ('build.cuda_arch=["8.0", "9.0"]', "build.env.TORCH_CUDA_ARCH_LIST=9.0")


def test_an_arch_list_narrowed_in_build_env_is_a_mismatch_with_the_recipes_field():
    """CMake compiled 9.0 only (the real configure), the gate compared with the exported 9.0 and said ok
    while the recipe (and the manifest) said [8.0, 9.0]: it compares with build.cuda_arch, and reports
    the override itself as a conflict."""
    checked = gate.check(request("pytorch2.6-cuda12.4-trixie", *ARCHS_NARROWED), recorded("pytorch-2.6-cuda12.4"))
    assert not checked.ok
    by_fact = rows(checked)
    archs = by_fact["CUDA archs"]
    assert (archs.status, archs.asked, archs.asked_by, archs.decided) == ("mismatch", "8.0;9.0", "build.cuda_arch", "9.0")
    assert "TORCH_CUDA_ARCH_LIST in build.env overrides build.cuda_arch" in archs.fix
    override = by_fact["build.env.TORCH_CUDA_ARCH_LIST"]
    assert (override.status, override.asked, override.asked_by, override.decided) == (
        "mismatch", "8.0;9.0", "build.cuda_arch", "9.0")
    assert override.fix == "remove build.env.TORCH_CUDA_ARCH_LIST and ask for it in build.cuda_arch"


@pytest.mark.parametrize("sets, fact", [
    (("build.env.CMAKE_BUILD_TYPE=Debug",), "build type"),
    (("build.env.USE_MKLDNN=1",), "USE_MKLDNN"),
    (("build.env.USE_CUDNN=0",), "USE_CUDNN"),
])
def test_any_override_of_a_field_is_judged_against_the_field_and_reported(sets, fact):
    summary = fixture("pytorch-2.6-cuda12.4-summary.txt")
    cache = fixture("pytorch-2.6-cuda12.4-cache.txt")
    if fact == "build type":  # CMake did what build.env said
        cache = cache.replace("CMAKE_BUILD_TYPE:STRING=Release", "CMAKE_BUILD_TYPE:STRING=Debug")
    checked = gate.check(request("pytorch2.6-cuda12.4-trixie", *sets), recorded("pytorch-2.6-cuda12.4", summary=summary,
                                                                                   cache=cache))
    name = sets[0].split("=")[0].removeprefix("build.env.")
    by_fact = rows(checked)
    assert by_fact[f"build.env.{name}"].status == "mismatch"
    assert by_fact[fact].asked_by in ("build.type", f"build.features.{fact}"), by_fact[fact]


def test_an_override_that_means_what_the_field_says_is_no_conflict():
    checked = gate.check(request("pytorch2.6-cuda12.4-trixie", "build.env.TORCH_CUDA_ARCH_LIST=9.0",
                                 'build.env.USE_GLOO="ON"', "build.env.CMAKE_BUILD_TYPE=release"),
                         recorded("pytorch-2.6-cuda12.4"))
    assert checked.ok, [r.line() for r in checked.mismatches]


def test_preflight_refuses_an_override_of_a_field_in_one_line_with_the_fix():
    from buildctl.errors import RecipeError
    from buildctl.recipe import preflight

    spec = recipe.load("pytorch2.6-cuda12.4-trixie", list(ARCHS_NARROWED))
    with pytest.raises(RecipeError) as err:
        preflight.preflight(spec, source="recipes/pytorch2.6-cuda12.4-trixie.yaml")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("recipes/pytorch2.6-cuda12.4-trixie.yaml: build.env.TORCH_CUDA_ARCH_LIST: "
                              "build.env.TORCH_CUDA_ARCH_LIST=9.0 overrides build.cuda_arch")
    assert message.endswith("fix: remove build.env.TORCH_CUDA_ARCH_LIST and ask for it in build.cuda_arch")
    preflight.preflight(recipe.load("pytorch2.6-cuda12.4-trixie", ["build.env.TORCH_CUDA_ARCH_LIST=9.0"]),
                        source="r.yaml")  # the same archs: no conflict


def test_every_feature_switch_of_every_shipped_recipe_has_a_row_of_the_gate():
    """Each build.features switch is judged (a row of the table or the generic switch row), whatever recipe
    ships it: none is left out of the comparison."""
    names = sorted(p.stem for p in (Path(__file__).parents[2] / "recipes").glob("*.yaml"))
    for name in names:
        req = request(name)
        facts = {f.name: f for f in gate.facts_for(req)}
        for switch in req.spec.build.features:
            assert switch in facts and facts[switch].compare == "switch", (name, switch)
            assert facts[switch].asked(req).by == f"build.features.{switch}", (name, switch)
