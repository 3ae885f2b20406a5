"""`invoke bisect`'s pure parts, no engine: the search with skips, what a step's result means, the axes
(a git history made here in a temporary folder), the log (resume, reuse, a log that does not read), what a
child build's JSON says, and the report at 80 columns. The builds themselves:
tests/integration/test_bisect_integration.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from buildctl import recipe, settings
from buildctl.bisect import axes, child, log, report, search
from buildctl.bisect.bisector import Outcome
from buildctl.bisect.gitrepo import History, parse_log
from buildctl.bisect.record import BuildRecord, CacheFigures, Entry, StepCriterion
from buildctl.cli.child_command import CHILD
from buildctl.errors import InputError
from buildctl.pipeline import child_build as cb

# --- the search ----------------------------------------------------------------------------------


def run_search(n: int, state, slots: int = 1) -> tuple[search.Answer, list[int]]:
    """The search over n positions where position i behaves as state(i); the positions built, in order."""
    outcomes = {0: state(0), n - 1: state(n - 1)}
    order: list[int] = []
    pending: list[int] = []
    while (found := search.answer(outcomes)) is None:
        pending += search.next_steps(outcomes, pending, slots - len(pending))
        position = pending.pop(0)
        order.append(position)
        outcomes[position] = state(position)
    return found, order


def regression(first_new: int, skips=()):
    return lambda i: search.SKIP if i in skips else (search.NEW if i >= first_new else search.OLD)


@pytest.mark.parametrize("first_new", range(1, 17))
def test_the_search_finds_every_first_new_position_in_log2_steps(first_new):
    found, order = run_search(17, regression(first_new))
    assert found.exact and found.first_new == first_new and found.last_old == first_new - 1
    assert len(order) <= 4  # 15 positions between the ends: 4 halvings


def test_a_skipped_position_is_stepped_around_never_built_again():
    found, order = run_search(17, regression(11, skips=(9, 12)))
    assert (found.first_new, found.exact) == (11, True)
    assert order == [8, 12, 11, 9, 10]  # the demo history of the integration test
    assert len(set(order)) == len(order)


def test_when_only_skipped_positions_separate_the_sides_the_answer_is_that_range():
    found, order = run_search(10, regression(6, skips=(4, 5)))
    assert not found.exact
    assert (found.last_old, found.first_new, found.skipped) == (3, 6, (4, 5))
    assert found.candidates == (4, 5, 6)
    everything_skipped, _ = run_search(5, regression(4, skips=(1, 2, 3)))
    assert everything_skipped.candidates == (1, 2, 3, 4) and everything_skipped.last_old == 0


def test_two_engines_build_the_quarter_points_and_never_the_same_position():
    outcomes = {0: search.OLD, 16: search.NEW}
    assert search.next_steps(outcomes, slots=2) == [8, 4]
    assert search.next_steps(outcomes, pending=[8], slots=1) == [4]
    found, order = run_search(17, regression(13), slots=2)
    assert found.first_new == 13 and len(order) == len(set(order))


def test_bounds_need_both_ends():
    with pytest.raises(ValueError):
        search.bounds({0: search.OLD})


def test_a_step_failing_as_the_failing_end_is_bad_otherwise_skipped():
    compile_error = search.Failure("compile")
    configure = search.Failure("configure")
    network = search.Failure("fetch", "network", "Network failure during a download")
    assert search.judge(None, reference="compile:unknown") == (search.PASS, "")
    assert search.judge(compile_error, reference=None)[0] == search.FAIL  # the failing end, judged on its own
    assert search.judge(compile_error, reference="compile:unknown")[0] == search.FAIL
    result, why = search.judge(configure, reference="compile:unknown")
    assert result == search.SKIP
    assert why == "fails in configure, not as the failing end (compile)"
    result, why = search.judge(network, reference="compile:unknown")
    assert result == search.SKIP and why == "fails in fetch: Network failure during a download, not as the failing end (compile)"
    assert search.judge(compile_error, reference="compile:oom")[1] == "fails in compile, not as the failing end (compile [oom])"


@pytest.mark.parametrize(("exit_code", "result"), [(0, "pass"), (1, "fail"), (2, "fail"), (127, "fail"),
                                                  (125, "skip"), (128, "skip"), (139, "skip"), (None, "skip")])
def test_a_test_reads_exit_codes_as_git_bisect_run(exit_code, result):
    assert search.judge(None, reference=None, test_exit=exit_code, testing=True)[0] == result


def test_with_a_test_a_build_that_fails_is_skipped():
    result, why = search.judge(search.Failure("compile"), reference=None, test_exit=None, testing=True)
    assert result == search.SKIP and why.startswith("does not build: fails in compile")


def test_first_good_turns_the_sides():
    assert search.position_state("pass", first_good=False) == search.OLD
    assert search.position_state("pass", first_good=True) == search.NEW
    assert search.position_state("fail", first_good=True) == search.OLD
    assert search.position_state("skip", first_good=True) == search.SKIP


# --- the axes ------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[History, list[str]]:
    """A repository of 6 commits (the 4th a merge of a side branch), fetched as a bisect fetches it."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    for n in range(1, 4):
        (repo / "f").write_text(str(n))
        git(repo, "commit", "-q", "-am" if n > 1 else "-m", f"c{n}", *(["--allow-empty"] if n == 1 else []))
        if n == 1:
            git(repo, "add", "f")
            git(repo, "commit", "-q", "--amend", "-m", "c1 \x1b[31mred\x1b[0m")
    git(repo, "tag", "v1", "HEAD~2")
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "g").write_text("side")
    git(repo, "add", "g")
    git(repo, "commit", "-q", "-m", "side work")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "side", "-m", "merge side")
    (repo / "f").write_text("5")
    git(repo, "commit", "-q", "-am", "c5")
    shas = git(repo, "rev-list", "--first-parent", "--reverse", "main").split()
    folder = tmp_path_factory.mktemp("bisect-git")
    return History(f"file://{repo}", folder, environ=os.environ).fetch(), shas


@pytest.fixture(scope="module")
def git_spec():
    spec, = [recipe.load("demo-cpu", ["framework.source={git: 'https://example.invalid/demofw.git', ref: main}"])]
    return spec


def test_commits_between_the_ends_along_first_parents(history, git_spec):
    hist, shas = history
    axis = axes.commits(git_spec, hist, "v1", "main", first_good=False)
    assert [c.label for c in axis.changes] == [s[:12] for s in shas]  # c1, c2, c3, merge, c5: the side commit not
    assert axis.changes[0].subject == "c1 red"  # terminal controls gone
    assert axis.changes[3].subject == "merge side"
    assert axis.changes[-1].sets == (f"framework.source.ref={shas[-1]}",)
    assert axis.target == "framework.source"


def test_commits_refuse_bad_ends_in_one_line(history, git_spec):
    hist, shas = history
    with pytest.raises(InputError, match=r"--good nope: no such commit, branch or tag in file://"):
        axes.commits(git_spec, hist, "nope", "main", first_good=False)
    with pytest.raises(InputError, match=r"is not an ancestor of --bad v1 .*fix: add --first-good"):
        axes.commits(git_spec, hist, "main", "v1", first_good=False)
    with pytest.raises(InputError, match="the same commit"):
        axes.commits(git_spec, hist, "v1", shas[0], first_good=False)
    reverse = axes.commits(git_spec, hist, "main", "v1", first_good=True)  # --bad is the older end
    assert reverse.changes[0].label == shas[0][:12] and reverse.changes[-1].label == shas[-1][:12]
    with pytest.raises(InputError, match="needs a git source"):
        axes.commits(recipe.load("demo-cpu"), hist, "v1", "main", first_good=False)


def test_an_extension_source_is_named_by_its_position(history):
    hist, shas = history
    spec = recipe.load("ext-torch2.6-debian", ["extensions.0.source={git: 'https://example.invalid/x.git', ref: v1}"])
    axis = axes.commits(spec, hist, "v1", "main", first_good=False, extension="torch-scatter")
    assert axis.target == "extensions.0.source" and axis.changes[1].sets == (f"extensions.0.source.ref={shas[1]}",)
    with pytest.raises(InputError, match="builds no such extension"):
        axes.source_target(spec, "torch-cluster")


def test_a_history_fetched_before_is_used_when_the_source_does_not_answer(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    hist = History(f"file://{repo}", tmp_path / "copies", environ=os.environ).fetch()
    sha = hist.resolve("main")
    (repo / ".git").rename(tmp_path / "gone")
    notes: list[str] = []
    assert hist.fetch(on_note=notes.append).resolve("main") == sha
    assert "using the copy fetched before" in notes[0]
    with pytest.raises(InputError, match=r"git fetch of file://.* failed: .*; fix: check the URL"):
        History(f"file://{repo}", tmp_path / "other", environ=os.environ).fetch(on_note=notes.append)


def test_parse_log_keeps_only_well_formed_lines():
    sha = "a" * 40
    text = f"{sha}\x00subject\nnot a line\n{'b' * 39}\x00short sha\n{sha}\x00" + "x" * 300
    commits = parse_log(text)
    assert [c.subject for c in commits] == ["subject", "x" * 99 + "…"]


def test_patches_one_more_each_step():
    spec = recipe.load("pytorch2.6-cpu-trixie")
    axis = axes.patches(spec, None, None, first_good=False)
    assert [c.label for c in axis.changes][:2] == ["none", "pytorch_2.6.0+dfsg-7.debian.tar.xz:debian/patches/series"]
    assert len(axis.changes) == len(spec.framework.patches) + 1
    assert axis.changes[0].sets == ("framework.patches=[]",)
    last = recipe.load("pytorch2.6-cpu-trixie", list(axis.changes[-1].sets))
    assert last.framework.patches == spec.framework.patches  # all of them: the recipe as it is
    two = axes.patches(spec, "1", "pytorch-2.6-rpc-without-tensorpipe.patch", first_good=False)
    assert [c.label for c in two.changes] == [axis.changes[1].label, axis.changes[2].label, axis.changes[3].label]
    with pytest.raises(InputError, match="has no framework.patches"):
        axes.patches(recipe.load("demo-cpu"), None, None, first_good=False)


def test_list_axes_take_their_ends_from_the_list():
    axis = axes.field_values("toolchain.nccl.version", ["2.18.1", "2.19.3", "2.20.5"], None, None, first_good=False)
    assert [c.sets for c in axis.changes] == [("toolchain.nccl.version=2.18.1",), ("toolchain.nccl.version=2.19.3",),
                                              ("toolchain.nccl.version=2.20.5",)]
    assert [c.label for c in axes.field_values("f", ["a", "b", "c", "d"], "b", "c", first_good=False).changes] == ["b", "c"]
    assert [c.label for c in axes.field_values("f", ["a", "b", "c"], None, None, first_good=True).changes] == \
        ["a", "b", "c"]
    with pytest.raises(InputError, match="--good z: not one of --values"):
        axes.field_values("f", ["a", "b"], "z", None, first_good=False)
    with pytest.raises(InputError, match="--good c comes after --bad a in --values; fix: swap them, or add --first-good"):
        axes.field_values("f", ["a", "b", "c"], "c", "a", first_good=False)
    with pytest.raises(InputError, match="1 value: nothing to bisect"):
        axes.field_values("f", ["a"], None, None, first_good=False)


def test_versions_of_an_sdist_and_of_tarballs():
    spec = recipe.load("ext-torch2.6-debian")
    digests = {"2.0.9": "1" * 64, "2.1.2": "2" * 64}
    axis = axes.versions(spec, ["2.0.9", "torch-scatter==2.1.2"], None, None, first_good=False,
                         extension="torch-scatter", sdist_sha256=lambda name, v: digests[v.split("==")[-1]])
    assert axis.changes[1].label == "2.1.2"
    assert axis.changes[1].sets == ("extensions.0.source.pypi=torch-scatter==2.1.2",
                                    f"extensions.0.source.sha256={'2' * 64}")
    loaded = recipe.load("ext-torch2.6-debian", list(axis.changes[0].sets))
    assert loaded.extensions[0].source.pypi == "torch-scatter==2.0.9"
    tarballs = axes.versions(recipe.load("pytorch2.6-cpu-trixie"), [f"https://h/x-1.tar.gz#sha256={'3' * 64}",
                                                                     f"https://h/x-2.tar.gz#sha256={'4' * 64}"],
                             None, None, first_good=False)
    assert tarballs.changes[0].label == "x-1.tar.gz"
    assert recipe.load("pytorch2.6-cpu-trixie", list(tarballs.changes[1].sets)).framework.source.tarball.sha256 == "4" * 64
    with pytest.raises(InputError, match="a tarball is URL#sha256=HEX"):
        axes.versions(recipe.load("pytorch2.6-cpu-trixie"), ["https://h/a.tgz", "https://h/b.tgz"], None, None,
                      first_good=False)
    with pytest.raises(InputError, match="is path: it has no versions"):
        axes.versions(recipe.load("demo-cpu"), ["1", "2"], None, None, first_good=False)


def test_an_sdist_digest_is_read_from_the_index_simple_page(tmp_path):
    """A PEP 503 page on loopback (no engine): the sha256 fragment of the release's sdist, names normalised."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    page = tmp_path / "simple" / "torch-scatter"
    page.mkdir(parents=True)
    page.joinpath("index.html").write_text(
        f'<a href="../../files/torch_scatter-2.1.1.tar.gz#sha256={"1" * 64}">torch_scatter-2.1.1.tar.gz</a>\n'
        f'<a href="../../files/torch_scatter-2.1.2-cp313-cp313-linux_x86_64.whl#sha256={"9" * 64}">wheel</a>\n'
        f'<a href="../../files/torch_scatter-2.1.2.tar.gz#sha256={"2" * 64}">torch_scatter-2.1.2.tar.gz</a>\n')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://user:pw@127.0.0.1:{server.server_address[1]}/simple"
        assert axes.sdist_sha256_from_index(index, "torch_scatter", "2.1.2") == "2" * 64
        with pytest.raises(InputError, match=r"the index http://\*\*\*@127.0.0.1:\d+/simple has no sdist of "
                                             r"torch-scatter 2.0.9"):
            axes.sdist_sha256_from_index(index, "torch-scatter", "2.0.9")
    finally:
        server.shutdown()
        server.server_close()


def test_parse_axis_and_values():
    assert axes.parse_axis("set:toolchain.nccl.version") == ("set", "toolchain.nccl.version")
    assert axes.parse_axis("set:extensions.0.source.ref") == ("set", "extensions.0.source.ref")
    with pytest.raises(InputError, match="not an axis"):
        axes.parse_axis("set:")
    assert axes.split_values(["a,b", " c ,a", ""]) == ["a", "b", "c"]


def test_a_bisect_stops_after_any_step_of_the_build_but_the_image():
    from buildctl.cli.bisect import BisectRequest, _checked_axis

    assert _checked_axis(BisectRequest("demo-cpu", until="configure")) == ("commits", None)
    with pytest.raises(InputError, match=r"^--until image: not a step a bisect stops after; fix: --until "
                                         r"configure\|compile\|wheel\|extensions$"):
        _checked_axis(BisectRequest("demo-cpu", until="image"))


# --- the log -------------------------------------------------------------------------------------


def entry(position: int, key: str, *, ok: bool = True, step: str = "compile", diagnosis=None, until="compile") -> Entry:
    failure = None if ok else search.Failure(step, diagnosis)
    return Entry(position, f"p{position}", key, StepCriterion(until, False), BuildRecord(ok, 1.0, failure=failure),
                 result="pass" if ok else "fail")


def test_the_log_is_written_whole_and_read_back_on_resume(tmp_path):
    request = {"recipe": "r", "axis": "commits"}
    with log.BisectLog(tmp_path, request).held() as first:
        first.record(entry(0, "k0"))
        first.record(entry(16, "k16", ok=False))
        first.record(entry(0, "k0b"))  # a position recorded again replaces its entry
    assert not list(log.folder(tmp_path).glob(".*.json.*"))  # no temporary file left
    with log.BisectLog(tmp_path, request).held() as again:
        assert again.recorded(0).key == "k0b" and again.recorded(16).build.ok is False
        assert again.recorded(16) == entry(16, "k16", ok=False)  # read back as written
        assert again.recorded(5) is None
    assert log.BisectLog(tmp_path, {"recipe": "other"}).digest != again.digest


def test_an_entry_as_logs_before_the_records_wrote_it_reads_and_writes_back_the_same():
    """The JSON of a log entry is the shape version 1 always had: a log of an earlier bisect reads as it is."""
    written = {"position": 3, "label": "0003-sub.patch", "key": "4f2a", "engine": "local",
               "criterion": {"until": "compile", "verify": False}, "sets": ["framework.patches=..."],
               "build": {"ok": False, "seconds": 61.5, "cached": False, "artifact": None, "out_dir": None, "cache": None,
                         "failure": {"step": "compile", "diagnosis": "oom", "title": "Out of memory"},
                         "error": "build failed in step compile", "bundle": "/f/b", "first_error": ["killed"],
                         "diagnosis": {"id": "oom", "title": "Out of memory", "cause": "c", "fix": "f"}},
               "test": {"digest": "d1", "exit_code": 1, "tail": ["x"], "seconds": 2.0}, "result": "fail", "why": "w"}
    entry = Entry.from_json(written)
    assert entry.build.failure == search.Failure("compile", "oom", "Out of memory") and entry.test.exit_code == 1
    assert entry.to_json() == written


@pytest.mark.parametrize("change", [{"result": "maybe"}, {"position": True}, {"build": {"ok": "yes"}},
                                    {"test": {"digest": "d", "exit_code": "1"}}, {"key": None}])
def test_an_entry_of_another_shape_is_refused_in_one_line(change):
    with pytest.raises(InputError, match="^a bisect log entry") as info:
        Entry.from_json({**entry(0, "k").to_json(), **change})
    assert "\n" not in str(info.value)


def test_a_bisect_running_holds_its_log(tmp_path):
    request = {"recipe": "r"}
    with log.BisectLog(tmp_path, request).held():
        with pytest.raises(InputError, match="this bisect is running already"):
            with log.BisectLog(tmp_path, request).held():
                pass


def test_a_log_that_does_not_read_is_passed_over_in_one_note(tmp_path):
    request = {"recipe": "r"}
    bad = log.BisectLog(tmp_path, request)
    bad.path.parent.mkdir(parents=True)
    bad.path.write_text("{not json")
    with log.BisectLog(tmp_path, request).held() as fresh:
        assert fresh.steps == [] and "does not read; starting over" in fresh.notes[0]
    data = {"version": 1, "digest": bad.digest, "steps": [entry(0, "k").to_json(), {"position": "x"}, 7]}
    bad.path.write_text(json.dumps(data))
    with log.BisectLog(tmp_path, request).held() as partly:
        assert [e.key for e in partly.steps] == ["k"] and "2 entries" in partly.notes[0]


def test_another_bisects_step_is_reused_for_the_same_key_and_criterion_but_not_a_network_failure(tmp_path):
    with log.BisectLog(tmp_path, {"recipe": "a"}).held() as a:
        a.record(entry(3, "same"))
        a.record(entry(4, "net", ok=False, step="fetch", diagnosis="network"))
        a.record(entry(5, "lost", ok=False, step="buildctl"))
    with log.BisectLog(tmp_path, {"recipe": "b"}).held() as b:
        criterion = StepCriterion("compile", False)
        assert b.from_other_logs("same", criterion, None).label == "p3"
        assert b.from_other_logs("same", StepCriterion(None, True), None) is None  # another criterion
        assert b.reusable_keys(3, criterion, None) == {"same"}  # a child given them builds none of them
        assert b.from_other_logs("net", criterion, None) is None  # the machine's failure: built again
        assert b.from_other_logs("lost", criterion, None) is None  # no result at all (the engine went away)
        assert b.from_other_logs("other", criterion, None) is None


# --- a child build's result ------------------------------------------------------------------------


def test_a_failed_child_build_is_recorded_with_its_step_and_first_error_lines():
    failure = cb.Failure("compile", "build of demo-cpu failed in step compile (exit 1)", None,
                         "/art/failures/demo-cpu-1", ("\x1b[31merror: x\x1b[0m",))
    record = child.build_record(cb.Result(ok=False, key="k", failure=failure), 12.5)
    assert record.failure == search.Failure("compile") and record.bundle == "/art/failures/demo-cpu-1"
    assert record.first_error == ("error: x",) and record.seconds == 12.5
    logged = Entry(0, "a", "k", StepCriterion(), record)
    assert child.failure_of(logged).signature == "compile:unknown"


def test_a_verification_that_fails_is_a_failure_of_its_checks():
    failure = cb.Failure("verify", "verification failed", cb.Diagnosis("checks:arch", "verification: arch"),
                         first_error=("sm_90 missing",))
    record = child.build_record(cb.Result(ok=False, failure=failure), 3.0)
    assert record.failure == search.Failure("verify", "checks:arch", "verification: arch")
    assert record.first_error == ("sm_90 missing",)


def test_a_child_without_a_build_is_a_failure_named_by_its_error():
    record = child.build_record(cb.Result(ok=False, failure=cb.Failure("refused", "error: --set build.type: nope")), 1.0)
    assert record.failure == search.Failure("refused", None, "--set build.type: nope")


def test_a_published_or_partial_build_brings_its_cache_figures():
    published = cb.Result(ok=True, artifact="/a", compile_cache={"hits": 30, "misses": 2})
    assert child.build_record(published, 1.0).cache == CacheFigures(30, 2)


def test_a_step_build_is_a_child_whose_job_comes_on_stdin():
    """A step's build: the same child process a multi-recipe build starts, its --set values and settings (a
    cache URL's password among them) in the job on its stdin, never on its command line (readable in /proc)
    nor in its environment."""
    secret = "redis://:s3cret-pw@cache.example:6379/0"
    chosen = settings.Settings(cache_url=secret, engines=("unix:///a.sock", "unix:///b.sock"))
    job = child.build_job("demo-cpu", ["a=1", "framework.source.ref=abc"], child.Criterion(until="compile"),
                          chosen, "unix:///b.sock", no_preflight=True, known_keys=frozenset({"k1"}))
    assert CHILD.command == (sys.executable, "-m", "buildctl.cli.child")
    assert job.task == "build" and job.recipe == "demo-cpu" and job.until == "compile"
    assert job.sets == ("a=1", "framework.source.ref=abc") and job.no_preflight is True
    assert job.known_keys == {"k1"} and job.to_json()["known_keys"] == ["k1"]
    assert job.settings.engines == ("unix:///b.sock",)  # its one engine: never the several-engines path
    assert job.settings.cache_url == secret and job.verify
    assert child.build_job("r", [], child.Criterion(test="true"), chosen, "").verify is False
    assert child.build_job("r", [], child.Criterion(), chosen, "").verify is True
    assert child.build_job("r", [], child.Criterion(), chosen, "").settings.engines == ()


# --- the report ----------------------------------------------------------------------------------


def outcome_for(axis: axes.Axis, states: dict[int, str], first_new: int, skipped=()) -> Outcome:
    entries = {}
    for position, result in states.items():
        failure = search.Failure("configure" if result == "skip" else "compile")
        build = BuildRecord(result == "pass", 61.0, failure=None if result == "pass" else failure,
                            first_error=("csrc/ops/sub.cpp:20: error: 'x' was not declared in this scope",),
                            bundle="/tmp/artifacts/failures/demo-cpu-20260101" if result == "fail" else None,
                            cache=CacheFigures(31, 1))
        entries[position] = Entry(position, axis.changes[position].label, f"k{position}", StepCriterion(), build,
                                  result=result, why="fails in configure, not as the failing end (compile)"
                                  if result == "skip" else "", source="built" if position != 0 else "logged")
    found = search.Answer(first_new - 1 - len(skipped), first_new, tuple(skipped))
    return Outcome(found, "compile:unknown", entries, {}, 300.0)


def test_the_report_names_the_commit_its_error_and_the_repro_and_fits_80_columns():
    changes = tuple(axes.Change(f"{i:012x}", (f"framework.source.ref={i:040x}",), f"subject of commit number {i}")
                    for i in range(17))
    axis = axes.Axis("commits", "framework.source", changes)
    states = {0: "pass", 16: "fail", 8: "pass", 12: "skip", 11: "fail", 9: "skip", 10: "pass"}
    data = report.to_dict(outcome_for(axis, states, 11), recipe="demo-cpu", sets=["a=1"], axis=axis,
                          criterion=child.Criterion(until="compile"), first_good=False, log_path="/x/.bisect/l.json")
    assert report.headline(data) == "first bad commit: 00000000000b subject of commit number 11"
    assert data["skipped"]["count"] == 2 and data["failing_step"]["repro"].startswith("invoke repro /tmp/artifacts")
    assert data["failing_step"]["build"] == (f"invoke build --recipe demo-cpu --set a=1 --set framework.source.ref={11:040x} "
                                             "--until compile")
    console = Console(width=80, record=True, color_system=None)
    console.print(report.renderable(data))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "first bad commit: 00000000000b" in text and "2 skipped" in text and "invoke repro" in text
    md = report.markdown(data)
    assert md.startswith("### invoke bisect: first bad commit: 00000000000b") and "| 12 |" in md
    assert json.loads(json.dumps(data)) == data


def test_the_report_of_a_range_says_which_steps_were_skipped():
    changes = tuple(axes.Change(v, (f"f={v}",)) for v in "abcdefg")
    axis = axes.Axis("set", "f", changes)
    data = report.to_dict(outcome_for(axis, {0: "pass", 6: "fail", 3: "skip", 4: "skip", 2: "pass", 5: "fail"}, 5,
                                      skipped=(3, 4)),
                          recipe="r", sets=[], axis=axis, criterion=child.Criterion(), first_good=False, log_path="l")
    assert not data["exact"] and [c["label"] for c in data["candidates"]] == ["d", "e", "f"]
    assert report.headline(data) == "first bad value: one of 3 (d, e, f): the steps between c and f were skipped"


def test_a_step_that_ends_without_a_result_stops_the_bisect_instead_of_being_skipped(tmp_path):
    """An engine lost mid-step says nothing of the change: the bisect stops (exit 1), the log kept."""
    from buildctl.bisect.bisector import Bisector, StepBuilds
    from buildctl.errors import BuildctlError
    from buildctl.settings import Settings

    axis = axes.Axis("set", "f", tuple(axes.Change(v, (f"f={v}",)) for v in "abc"))
    with log.BisectLog(tmp_path, {"r": 1}).held() as held:
        bisector = Bisector(builds=StepBuilds("r", [], lambda i: None, CHILD), axis=axis,
                            criterion=child.Criterion(), first_good=False, chosen=Settings(), log=held,
                            say=lambda line: None)
        failure = cb.Failure("buildctl", "error: the Docker engine is not running")
        record = child.build_record(cb.Result(ok=False, failure=failure), 3.0)
        bisector.done.put((1, replace(entry(1, "k"), build=record)))
        with pytest.raises(BuildctlError, match=r"\[1/2\] b: its build ended without a result \(the Docker engine is "
                                                r"not running\); the log keeps 0 steps"):
            bisector._wait()
