"""The seam of a build run by another process (pipeline/child_build.py, cli/child.py): the typed job and
events, a real child process read to its result (tests/fake_child.py: the real entry point, the build
replaced by pure logic), a stream that does not read (an error naming the child and its last event, never
a hang), and a bisect step's spec and key computed once, in the child."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from buildctl import recipe
from buildctl.bisect import axes, log
from buildctl.bisect.bisector import Bisector, StepBuilds
from buildctl.bisect.child import Criterion
from buildctl.cli import child
from buildctl.cli.child_command import CHILD
from buildctl.errors import InputError
from buildctl.pipeline import child_build as cb
from buildctl.settings import Settings
from buildctl.ui import View

FAKE = cb.Child((sys.executable, str(Path(__file__).resolve().parents[1] / "fake_child.py")), "the fake child")


class Seen(View):
    """An ordinary view that keeps what it is shown."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


def job(recipe: str, **fields) -> cb.Job:
    return cb.Job("build", recipe, Settings.model_validate({"engines": ["unix:///nonexistent/x.sock"]}), **fields)


def test_a_job_and_every_event_read_back_as_written():
    written = job("demo-cpu", sets=("a=1",), until="compile", verify=False, key_first=True,
                  known_keys=frozenset({"k2", "k1"}))
    assert cb.Job.from_json(json.loads(json.dumps(written.to_json())), environ={}) == written
    events = [cb.StepStarted("fetch"), cb.StepFinished("fetch", 1.5, "cached"), cb.Line("x"), cb.Warned("w"),
              cb.KeyKnown("k", known=True),
              cb.Result(ok=False, key="k", failure=cb.Failure("compile", "failed", cb.Diagnosis("oom", "Out of memory"),
                                                              "/b", ("error: x",)))]
    assert [cb.from_json(json.loads(json.dumps(cb.to_json(e)))) for e in events] == events


@pytest.mark.parametrize("data", [{"v": 2, "event": "line", "text": "x"}, {"v": None, "task": "build"}])
def test_another_schema_version_is_refused_in_one_line(data):
    with pytest.raises(InputError) as info:
        cb.from_json(data) if "event" in data else cb.Job.from_json(data, environ={})
    assert "schema version" in str(info.value) and "fix: run the parent and the child from the same buildctl" \
        in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("data", [{"v": 1, "event": "nope"}, {"v": 1, "event": "line"}, {"v": 1, "event": "line", "text": 3},
                                  {"v": 1, "event": "result", "ok": "yes"}, [1, 2]])
def test_an_event_of_another_shape_is_refused(data):
    with pytest.raises(InputError):
        cb.from_json(data)


def test_a_real_child_sends_every_kind_of_event_and_its_result():
    seen: list[cb.Event] = []
    view = Seen()

    def on_event(event: cb.Event) -> None:
        seen.append(event)
        cb.replay(event, view)

    followed = cb.follow(cb.start(FAKE, job("every-event")), "the fake child", on_event)
    assert [type(e) for e in seen] == [cb.StepStarted, cb.Line, cb.Warned, cb.KeyKnown, cb.StepFinished, cb.Result]
    assert followed.returncode == 0 and followed.result == cb.Result(ok=True, key="k1", artifact="/a/demo/k1",
                                                                     compile_cache={"hits": 3, "misses": 1})
    assert view.durations == {"fetch": 1.5} and view.status == {"fetch": "ok"}
    assert view.lines == ["\x1b[31mcloning\x1b[0m demo", "warning: a warning"]  # the view strips what it shows
    assert "a stray print" in followed.stderr_tail  # printed by the build: stderr, never the stream


def test_a_stream_with_a_line_that_is_not_an_event_is_an_error_naming_the_child_and_its_last_event():
    t0 = time.monotonic()
    proc = cb.start(FAKE, job("garbage"))
    with pytest.raises(cb.ChildStreamError) as info:
        cb.follow(proc, "the fake child", lambda event: None)
    assert time.monotonic() - t0 < 60 and proc.returncode is not None  # stopped, not waited on
    message = str(info.value)
    assert message.startswith("the fake child: its event stream does not read: ") and "'[compile] ...'" in message
    assert message.endswith('after its last event {"event": "step_started", "step": "fetch"}'), message


def test_a_stream_that_ends_without_a_result_is_an_error_with_the_childs_last_words():
    with pytest.raises(cb.ChildStreamError) as info:
        cb.follow(cb.start(FAKE, job("truncated")), "the fake child", lambda event: None)
    assert str(info.value) == ('the fake child: its event stream ended without a result (exit 3: Segmentation '
                               'fault), after its last event {"event": "step_started", "step": "fetch"}')
    assert info.value.returncode == 3


def test_the_real_child_refuses_a_job_of_another_version_in_one_result():
    proc = subprocess.run(list(CHILD.command), input=json.dumps({**job("demo-cpu").to_json(), "v": 99}),
                          capture_output=True, text=True, timeout=120)
    [line] = proc.stdout.splitlines()
    result = cb.from_json(json.loads(line))
    assert proc.returncode == 2 and result.failure.step == "refused"
    assert result.failure.error.startswith("the child's job: schema version 99, this buildctl reads 1; fix:")


# --- a bisect step: the spec and the key once, in the child ------------------------------------------


def test_a_child_step_loads_its_spec_and_computes_its_key_once_and_builds_only_an_unknown_key(monkeypatch, tmp_path):
    from buildctl.cli import common
    from buildctl.pipeline import dry_run, pipeline

    counts = {"spec": 0, "key": 0, "build": 0}
    real_load = common.load_spec

    def load_spec(*args, **kwargs):
        counts["spec"] += 1
        return real_load(*args, **kwargs)

    resolved = recipe.load("demo-cpu", ["build.type=Debug"])  # stands for the dry run's resolved spec

    class DryRun:
        key = "k-demo"
        spec = resolved
        keyed = None  # what it rendered and keyed (tests/unit/test_bisect_step_once.py)

    def look(spec, opts):
        counts["key"] += 1
        return DryRun()

    def run(spec, opts, view, keyed=None):
        assert spec is resolved, "the build starts from the spec the dry run resolved"
        counts["build"] += 1
        view.step_started("configure")
        return pipeline.PartialResult(spec.name, "k-demo", "configure", tmp_path, "vol")

    monkeypatch.setattr(common, "load_spec", load_spec)
    monkeypatch.setattr(dry_run, "dry_run", look)
    monkeypatch.setattr(pipeline, "run", run)
    (tmp_path / "cache-stats.txt").write_text("direct_cache_hit\t20\npreprocessed_cache_hit\t1\ncache_miss\t3\n")
    events: list[str] = []

    class Stream:
        def write(self, text: str) -> None:
            events.append(json.loads(text)["event"])

        def flush(self) -> None:
            pass

    view = cb.EventView(Stream(), Console(file=io.StringIO()))
    known = child.run_job(job("demo-cpu", until="configure", no_preflight=True, key_first=True,
                              known_keys=frozenset({"k-demo"})), view)
    assert known == cb.Result(ok=True, key="k-demo", known=True)
    assert counts == {"spec": 1, "key": 1, "build": 0} and events == ["key"]
    built = child.run_job(job("demo-cpu", until="configure", no_preflight=True, key_first=True), view)
    assert built.ok and not built.known and built.compile_cache == {"hits": 21, "misses": 3}
    assert counts == {"spec": 2, "key": 2, "build": 1} and events == ["key", "key", "step_started"]


def test_a_bisect_over_children_loads_no_spec_and_computes_no_key_itself_and_reuses_its_log(tmp_path):
    """The whole search over real child processes (the fake build): the parent never loads a position's spec
    nor computes a key (no --test); run again, every step is taken from the log by the key its child says."""
    axis = axes.Axis("set", "f", tuple(axes.Change(v, (f"f={v}",)) for v in "abcd"))
    loaded: list[int] = []

    def spec_for(position: int):
        loaded.append(position)
        raise AssertionError("the parent loads no spec without --test")

    said: list[str] = []

    def bisect():
        with log.BisectLog(tmp_path, {"r": 1}).held() as held:
            bisector = Bisector(builds=StepBuilds("fake", [], spec_for, FAKE), axis=axis, criterion=Criterion(),
                                first_good=False, chosen=Settings.model_validate({}), log=held, say=said.append)
            return bisector.run()

    outcome = bisect()  # a passes, d fails in compile; b fails in configure (skipped), c passes
    assert (outcome.answer.last_old, outcome.answer.first_new, outcome.answer.exact) == (2, 3, True) and loaded == []
    assert {p: e.key for p, e in outcome.entries.items()} == {p: f"key-{v}" for p, v in enumerate("abcd")}
    assert outcome.entries[1].result == "skip" and outcome.entries[3].build.failure.step == "compile"
    assert outcome.entries[3].build.first_error == ("error in d",)
    assert sum(": building (key" in line for line in said) == 4 and "[3/3] d: compile" in said
    said.clear()
    again = bisect()
    assert again.answer == outcome.answer and not any(": building (key" in line for line in said)
    assert sum(": logged (key" in line for line in said) == 4


def test_a_child_build_that_finds_its_artifact_records_the_no_op_as_invoke_build_does(monkeypatch, tmp_path):
    """The child of a multi-build is `invoke build` in its own process: its no-op is remembered with the same
    call (cli/build.py's), so the parent's later `invoke build` of the recipe is answered from the memo."""
    from types import SimpleNamespace

    from buildctl.cli import noop
    from buildctl.pipeline import pipeline

    manifest = SimpleNamespace(wheels=[], toolchain={}, compile_cache={}, dist=None, memory=None, resumed=None,
                               configure=None)
    found = pipeline.BuildResult("demo-cpu", "k-demo", tmp_path, manifest, cached=True, durations={"total": 1.0})
    monkeypatch.setattr(pipeline, "run", lambda spec, opts, view, keyed=None: found)
    remembered: list[dict] = []
    monkeypatch.setattr(noop, "remember", lambda recipe, sets, **kw: remembered.append({"recipe": recipe,
                                                                                        "sets": sets, **kw}))
    given = job("demo-cpu", sets=("build.max_jobs=2",), no_preflight=True)
    result = child.run_job(given, cb.EventView(io.StringIO(), Console(file=io.StringIO())))
    assert result.ok and result.cached
    [entry] = remembered
    assert (entry["recipe"], list(entry["sets"]), entry["no_preflight"]) == ("demo-cpu", ["build.max_jobs=2"], True)
    assert entry["settings"] == given.settings.model_copy(update={"no_verify": False}) and entry["reads"]
    assert entry["result"] is found and entry["shown"].skipped == ["image", "compile", "wheel"]
