"""Which earlier build weights the compile's ETA (buildctl/pipeline/eta_prior.py), on a fake artifacts folder,
and what the pipeline and the live view make of it: the prior's name on the ETA line, the step rate
without one. The logs are untrusted: a bad one is passed over in one line, never a traceback."""

from __future__ import annotations

import io
import json
import os
import time

import pytest
from rich.console import Console

from buildctl import recipe, ui
from buildctl.pipeline import eta_prior, pipeline

RELEASE, DEBUG = "pytorch2.6-cpu-trixie", "pytorch2.6-cpu-trixie-debug"
LOG = "# ninja log v6\n0\t30000\t0\tx.o\tx1\n0\t90000\t0\ty.o\ty1\n"


def publish(root, recipe_name, key, *, age_s=0, hit_rate=0.0, version="2.6.0", build_type="Release",
            framework="pytorch", log=LOG):
    """An artifact folder as `invoke build` leaves it, with what the lookup reads: manifest and ninja log."""
    d = root / recipe_name / key
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({
        "recipe": recipe_name, "key": key, "wheels": [], "framework": framework, "build_type": build_type,
        "compile_cache": {"tool": "ccache", "hit_rate": hit_rate},
        "resolved_recipe": {"framework": {"name": framework, "version": version}}}))
    if log is not None:
        (d / "ninja_log.txt").write_text(log)
        then = time.time() - age_s
        os.utime(d / "ninja_log.txt", (then, then))
    return d


def find(name, root):
    said = []
    return eta_prior.find(recipe.load(name), root, log=said.append), said


def test_the_newest_build_of_the_same_recipe_is_the_prior(tmp_path):
    publish(tmp_path, RELEASE, "a" * 16, age_s=7200)
    publish(tmp_path, RELEASE, "b" * 16, age_s=3600)
    publish(tmp_path, DEBUG, "c" * 16, age_s=0, build_type="Debug")  # newer, but another recipe
    prior, said = find(RELEASE, tmp_path)
    assert (prior.recipe, prior.key, said) == (RELEASE, "b" * 16, [])
    assert prior.source == f"cost-weighted from {RELEASE}/bbbbbbbbbbbb"
    assert dict(prior.costs) == {"x.o": 30.0, "y.o": 90.0}
    assert prior.note() == f"buildctl: ETA weighted by the 2 steps of {RELEASE}/{'b' * 16} (this recipe)"


def test_a_warm_rebuild_is_passed_over_for_a_cold_build(tmp_path):
    """A rebuild the compile cache answered logs ~1 s a step: no measure of the work (the real Release
    artifacts had one: 1490 hits, 1 miss)."""
    publish(tmp_path, RELEASE, "a" * 16, age_s=7200, hit_rate=0.0)
    publish(tmp_path, RELEASE, "b" * 16, age_s=0, hit_rate=0.999)
    assert find(RELEASE, tmp_path)[0].key == "a" * 16


def test_a_build_on_a_cluster_is_passed_over_for_a_local_one(tmp_path):
    """Its steps ran on other machines, several at once beyond this one's MAX_JOBS: no measure of the
    work here (issue 32)."""
    publish(tmp_path, RELEASE, "a" * 16, age_s=7200)
    clustered = publish(tmp_path, RELEASE, "b" * 16, age_s=0)
    manifest = json.loads((clustered / "manifest.json").read_text())
    (clustered / "manifest.json").write_text(json.dumps({**manifest, "dist": {"state": "used", "remote": 900}}))
    assert find(RELEASE, tmp_path)[0].key == "a" * 16


def test_a_close_recipe_serves_when_the_recipe_has_none(tmp_path):
    """The Debug recipe, never built: the Release build of the same PyTorch 2.6.0 weights its steps; a
    newer build of another framework or version does not."""
    publish(tmp_path, RELEASE, "a" * 16, age_s=3600)
    publish(tmp_path, "pytorch2.15-cpu", "b" * 16, age_s=0, version="2.15.0+cpu")
    publish(tmp_path, "demo-cpu", "c" * 16, age_s=0, framework="demofw", version="2.6.0")
    prior, said = find(DEBUG, tmp_path)
    assert (prior.recipe, prior.key, said) == (RELEASE, "a" * 16, [])
    assert prior.note().endswith("(pytorch 2.6.0, Release)")


KERNELS_LOG = ("# ninja log v6\n0\t10000\t0\tcaffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/"
               "UnaryOpsKernel.cpp.DEFAULT.cpp.o\tk1\n0\t20000\t0\ty.o\ty1\n")
KERNEL = "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/UnaryOpsKernel.cpp.DEFAULT.cpp.o"


def test_a_release_prior_of_a_debug_build_weighs_its_vectorised_kernels_less_and_says_so(tmp_path):
    """-O0 skips what -O2 spends on ATen's vectorised kernels: measured 0.6x against the other units."""
    publish(tmp_path, RELEASE, "a" * 16, log=KERNELS_LOG)
    prior, _ = find(DEBUG, tmp_path)
    assert dict(prior.costs) == {KERNEL: pytest.approx(6.0), "y.o": 20.0}
    assert prior.note().endswith("(pytorch 2.6.0, Release; its vectorised CPU kernels x0.6 for Debug)")


def test_a_debug_prior_of_a_release_build_weighs_them_more_and_a_prior_of_the_same_side_is_kept(tmp_path):
    publish(tmp_path, DEBUG, "b" * 16, build_type="Debug", log=KERNELS_LOG)
    prior, _ = find(RELEASE, tmp_path)
    assert dict(prior.costs) == {KERNEL: pytest.approx(10 / 0.6), "y.o": 20.0}
    costs = {KERNEL: 10.0, "y.o": 20.0}
    assert eta_prior.across_optimisation(costs, "RelWithDebInfo", "Release", "w") == (costs, "w")  # both -O2
    assert eta_prior.across_optimisation({"y.o": 1.0}, "Release", "Debug", "w") == ({"y.o": 1.0}, "w")  # no kernels


def test_a_close_build_of_the_same_build_type_comes_first(tmp_path):
    publish(tmp_path, RELEASE, "a" * 16, age_s=0)
    publish(tmp_path, "pytorch2.6-cpu-bookworm-debug", "b" * 16, age_s=3600, build_type="Debug")
    assert find(DEBUG, tmp_path)[0].key == "b" * 16


def test_without_an_earlier_build_the_eta_is_the_step_rate(tmp_path):
    publish(tmp_path, "demo-cpu", "c" * 16, framework="demofw", version="0.1.0+cpu")
    publish(tmp_path, RELEASE, "d" * 16, log=None)  # built before ninja logs were kept
    prior, said = find(RELEASE, tmp_path)
    assert (prior.source, dict(prior.costs), said) == ("step rate", {}, [])
    assert prior.note() == ("buildctl: ETA from the step rate (no earlier build of pytorch2.6-cpu-trixie or of "
                            "pytorch 2.6.0 left a usable ninja_log.txt)")
    assert find(RELEASE, tmp_path / "no-such-store")[0].source == "step rate"


def _oversized(path):
    with open(path, "wb") as f:  # sparse: no disk used
        f.write(b"# ninja log v6\n")
        f.truncate(eta_prior.MAX_LOG_BYTES + 1)


def _fifo(path):
    os.mkfifo(path)  # opened blocking, it would hang the build


def _link(path):
    path.symlink_to("/etc/passwd")


def _many_lines(path):
    path.write_text("# ninja log v6\n" + "0\t1\t0\tx.o\th\n" * (eta_prior.MAX_LOG_LINES + 1))


def _carriage_returns(path):
    """Issue 35: lines ended by '\r' were counted as one (the cap counts '\n') and read as many (splitlines):
    a 20 MB log read 1,000,000 steps."""
    path.write_bytes(b"# ninja log v6\n" + b"".join(b"0\t1\t0\tx%d.o\th\r" % i for i in range(eta_prior.MAX_LOG_LINES + 1)))


@pytest.mark.parametrize("make, why", [
    (lambda p: p.write_bytes(b"\x00\xff garbage \x1b]0;t\x07\n" * 100), "no '# ninja log' header"),
    (lambda p: p.write_text("# ninja log v6\nnot\ta\tstep\n"), "no ninja steps in it"),
    (_oversized, "over the 32 MiB cap"),
    (_many_lines, "over 300000 lines"),
    (_fifo, "not a regular file"),
    (_link, "unreadable"),
    # issue 35: '²' is a digit to str.isdigit and not to int() (ValueError: every later cold build of the
    # recipe stopped at its compile's start); a run of 5000 digits is past int()'s 4300-digit limit
    (lambda p: p.write_text("# ninja log v6\n0\t\u00b2\t0\tx.o\th\n"), "no ninja steps in it"),
    (lambda p: p.write_text("# ninja log v6\n0\t" + "9" * 5000 + "\t0\tx.o\th\n"), "no ninja steps in it"),
    (_carriage_returns, "no ninja steps in it"),
], ids=["binary", "no-steps", "oversized", "many-lines", "fifo", "symlink", "superscript", "long-number", "cr"])
def test_an_untrusted_log_is_passed_over_in_one_line(tmp_path, make, why):
    """The newest build's log is bad: one line names it and the fix, the older good one serves."""
    publish(tmp_path, RELEASE, "a" * 16, age_s=7200)
    bad = publish(tmp_path, RELEASE, "b" * 16, log=None)
    make(bad / "ninja_log.txt")
    os.utime(bad / "ninja_log.txt", follow_symlinks=False)
    prior, said = find(RELEASE, tmp_path)
    assert prior.key == "a" * 16
    assert len(said) == 1 and "\n" not in said[0] and "\x1b" not in said[0], said
    assert said[0].startswith(f"buildctl: ETA: {bad / 'ninja_log.txt'}: ") and why in said[0]
    assert said[0].endswith("not used; fix: delete it (only the ETA reads it)")


def test_a_corrupt_manifest_is_no_candidate(tmp_path):
    publish(tmp_path, RELEASE, "a" * 16, age_s=7200)
    bad = publish(tmp_path, RELEASE, "b" * 16)
    (bad / "manifest.json").write_text("{not json")
    assert find(RELEASE, tmp_path)[0].key == "a" * 16


class Recorded(ui.View):
    def __init__(self):
        super().__init__()
        self.left: list[ui.TimeLeft] = []

    def time_left(self, left):
        self.left.append(left)


def test_the_pipeline_moves_the_eta_with_ninjas_lines_during_the_compile_only():
    view = Recorded()
    steps = pipeline.Steps(view)
    steps.prior = eta_prior.Prior(RELEASE, "a" * 16, {"x.o": 30.0, "y.o": 90.0}, "this recipe")
    steps.start("source")
    steps.line("[1/2] Building CXX object x.o")  # not the compile: a codegen's ninja, say
    steps.line("buildctl: step compile")
    compile_started = steps._since
    steps.line("[1/2] Building CXX object x.o")
    steps.line("buildctl: step wheel")
    steps.line("[1/1] Install the project...")
    assert len(view.left) == 1
    left = view.left[0]
    assert left.source == f"cost-weighted from {RELEASE}/aaaaaaaaaaaa"
    assert left.seconds == pytest.approx(3 * (left.at - compile_started))  # y.o costs 3x what x.o took


def live_text(view: ui.LiveView) -> list[str]:
    out = Console(file=io.StringIO(), record=True, width=80, color_system=None)
    out.print(view._render())
    return out.export_text().splitlines()


@pytest.fixture
def live():
    view = ui.LiveView(console=Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None))
    yield view
    view.close()


def test_the_live_view_names_the_prior_beside_the_eta_at_80_columns(live):
    live.step_started("compile")
    live.line("[500/1454] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/Context.cpp.o")
    live.time_left(ui.TimeLeft(3910.0, time.monotonic(), f"cost-weighted from {RELEASE}/0e79293fdce9"))
    lines = live_text(live)
    assert f"ETA ~1h05m (cost-weighted from {RELEASE}/0e79293fdce9)" in lines, lines
    bar = next(ln for ln in lines if ln.startswith("compile "))
    assert "500/1454" in bar
    assert all(len(ln) <= 80 for ln in lines)


def test_the_live_view_says_step_rate_without_a_prior_and_cuts_a_long_name(live):
    live.step_started("compile")
    live.time_left(ui.TimeLeft(700.0, time.monotonic(), "step rate"))
    assert "ETA ~12m (step rate)" in live_text(live)
    live.time_left(ui.TimeLeft(None, time.monotonic(), f"cost-weighted from {'r' * 90}/0e79293fdce9"))
    eta_line = next(ln for ln in live_text(live) if ln.startswith("ETA"))
    assert eta_line.startswith("ETA after the first step (cost-weighted from rrr") and len(eta_line) == 80
    live.step_finished("compile", 10.0)
    assert not any(ln.startswith("ETA") for ln in live_text(live))  # the compile is over: no ETA left


@pytest.mark.parametrize("seconds, shown", [(30, "<1m"), (89, "~1m"), (3569, "~59m"), (3571, "~1h00m"),
                                            (36000 * 11, ">99h")])
def test_the_eta_is_shown_in_minutes(seconds, shown):
    assert ui.TimeLeft(seconds, 100.0, "step rate").text(100.0) == f"ETA {shown} (step rate)"
    assert ui.TimeLeft(seconds, 100.0, "step rate").text(100.0 + seconds + 5) == "ETA <1m (step rate)"

