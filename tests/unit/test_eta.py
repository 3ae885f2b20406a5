"""The cost-weighted ETA (buildctl/pipeline/eta.py) on synthetic .ninja_logs: the shape of PyTorch's build (cheap
steps first, big kernels last) on two parallel jobs, the prior another machine's run of it."""

from __future__ import annotations

import random

import pytest

from buildctl.pipeline import eta


def ninja_log(costs: list[float], jobs: int = 2) -> str:
    """A .ninja_log of `costs` run on `jobs` slots in order, lines in the order the steps ended."""
    free = [0.0] * jobs
    steps = []
    for i, cost in enumerate(costs):
        slot = min(range(jobs), key=free.__getitem__)
        start, free[slot] = free[slot], free[slot] + cost
        steps.append((int(start * 1000), int(free[slot] * 1000), f"obj/{i}.o"))
    steps.sort(key=lambda s: s[1])
    return "# ninja log v5\n" + "".join(f"{s}\t{e}\t0\t{o}\th{o}\n" for s, e, o in steps)


def pytorch_like(seed: int, scale: float = 1.0, noise: float = 0.05) -> list[float]:
    rng = random.Random(seed)
    base = [random.Random(i).uniform(0.5, 2) for i in range(300)] + [random.Random(i).uniform(20, 90)
                                                                     for i in range(300, 500)]
    return [c * scale * rng.uniform(1 - noise, 1 + noise) for c in base]


def errors(rows, fractions=(0.1, 0.25, 0.5, 0.75)):
    finish = rows[-1][0] + rows[-1][2]
    out = []
    for f in fractions:
        t, left, really = min(rows, key=lambda r: abs(r[0] - f * finish))
        out.append((left - really) / really)
    return out


def test_a_prior_of_the_same_build_on_a_slower_machine_settles_within_ten_percent():
    actual = ninja_log(pytorch_like(1))
    prior = eta.ninja_costs(ninja_log(pytorch_like(2, scale=1.4)))
    assert all(abs(e) <= 0.10 for e in errors(eta.replay(actual, prior))), errors(eta.replay(actual, prior))


def test_the_step_rate_without_a_prior_is_far_off_on_such_a_build():
    """What the live view had before: cheap steps first make the step rate promise far too little."""
    actual = ninja_log(pytorch_like(1))
    assert errors(eta.replay(actual, None))[0] < -0.5


def test_an_edge_with_several_outputs_counts_once():
    log = "# ninja log v5\n0\t4000\t0\tgen/a.h\tabc\n0\t4000\t0\tgen/b.h\tabc\n4000\t5000\t0\tx.o\tdef\n"
    assert eta.ninja_costs(log) == {"gen/b.h": 4.0, "x.o": 1.0}


def test_live_lines_give_the_time_left():
    e = eta.Eta({"a.o": 10.0, "b.o": 10.0, "c.o": 20.0}, start=0.0)
    assert e.remaining(0.0) is None
    e.line("[1/3] Building CXX object a.o", 5.0)  # half the prior's time: a machine twice as fast
    e.line("[2/3] Building CXX object b.o", 10.0)
    assert e.remaining(10.0) == 10.0  # c.o: 20 prior-seconds at half speed
    e.line("[3/3] Linking CXX shared library c.o", 20.0)
    assert e.remaining(20.0) == 0.0


def test_a_resumed_build_scales_the_prior_to_the_steps_ninja_says_are_left():
    prior = {f"{i}.o": 1.0 for i in range(10)}
    e = eta.Eta(prior, start=0.0)
    e.line("[1/4] Building CXX object 6.o", 2.0)  # 6 steps were built by the run before
    assert e.remaining(2.0) == 6.0  # 3 left of 4 this run, at 2 s a step


def test_a_line_that_is_no_ninja_status_changes_nothing():
    e = eta.Eta({"a.o": 1.0})
    e.line("-- Configuring done", 1.0)
    assert e.remaining(1.0) is None


def test_a_resumed_build_is_left_the_steps_the_prior_finished_last():
    """The Debug build's third run: ninja said [1/395] of 1454, and the 395 left are the big kernels and the
    links, which PyTorch builds last. Scaling the average of all the prior's steps to 395 said 55 % too
    little here; the steps the prior finished last are what is left."""
    costs = pytorch_like(1)  # 300 cheap steps, then 200 heavy ones
    prior = eta.ninja_costs(ninja_log(costs))
    e = eta.Eta(prior, start=0.0)
    left = costs[350:]  # an earlier run built the first 350
    done_s = sum(left[:10]) / 2  # two jobs
    for i in range(350, 360):
        e.line(f"[{i - 349}/{len(left)}] Building CXX object obj/{i}.o", done_s)
    really = sum(left[10:]) / 2
    assert abs(e.remaining(done_s) - really) / really < 0.10, (e.remaining(done_s), really)


def test_a_resumed_log_is_replayed_as_one_build_and_its_last_run_as_its_ninja_saw_it():
    first = ninja_log(pytorch_like(1)[:350]).splitlines()[1:]  # stopped after 350 steps
    second = ninja_log(pytorch_like(1)[350:]).replace("obj/", "obj/r").splitlines()[1:]  # its clock restarts
    log = "# ninja log v5\n" + "\n".join(first + second) + "\n"
    assert len(eta.replay(log, None)) == 500
    runs = eta.replay_runs(log, eta.ninja_costs(log))
    assert [len(r) for r in runs] == [350, 150]
    assert runs[1][-1][2] == 0.0 and all(abs(e) <= 0.10 for e in errors(runs[1]))


@pytest.mark.parametrize("line", ["[" + "9" * 5000 + "/10] Building CXX object a.o", "[1/" + "9" * 5000 + "] Linking x",
                                  "[\u0661/\u0662] Building CXX object a.o", "[\u00b2/3] Building CXX object a.o"])
def test_a_status_line_no_ninja_writes_is_passed_over(line):
    """Issue 35: the compile's log lines come from the container; a [N/M] of 5000 digits ended the build
    with an internal error (int() past its 4300-digit limit). Only ninja's own status lines move the ETA."""
    e = eta.Eta({"a.o": 1.0})
    e.line(line, 10.0)
    e.line("[1/2] Building CXX object a.o", 11.0)
    assert (e.n, e.total) == (1, 2)


def test_a_log_with_a_few_bad_lines_keeps_its_good_ones():
    log = "# ninja log v6\n0\t1000\t0\ta.o\th1\n0\t\u00b2\t0\tb.o\th2\n0\t" + "9" * 5000 + "\t0\tc.o\th3\n1000\t3000\t0\td.o\th4\n"
    assert eta.ninja_costs(log) == {"a.o": 1.0, "d.o": 2.0}
