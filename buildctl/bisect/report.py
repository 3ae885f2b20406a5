"""What `invoke bisect` reports: the change found (or the range, when only skipped steps separate the two
sides), the failure's diagnosis and first error lines at the failing step next to it, the steps built
(what, result, why skipped, time, cache hits), and the commands that reproduce the failing step.

One dictionary (`to_dict`, the --json output) and two renderings of it: a rich table for people (fits
80 columns) and Markdown for a CI job summary (--markdown FILE, e.g. "$GITHUB_STEP_SUMMARY"). Every text
that came from a build (subjects, diagnoses, error lines, paths) is shown without terminal controls.
"""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from buildctl.bisect.axes import Axis
from buildctl.bisect.bisector import Outcome
from buildctl.bisect.child import Criterion
from buildctl.bisect.record import failure_json
from buildctl.secrets import mask_set
from buildctl.terminal_text import strip_controls

NOUN = {"commits": "commit", "versions": "version", "patches": "patch", "set": "value"}
RESULT = {"pass": "good", "fail": "bad", "skip": "skip"}


def _change(axis: Axis, position: int) -> dict:
    c = axis.changes[position]
    return {"position": position, "label": c.label, "subject": c.subject, "sets": [mask_set(s) for s in c.sets]}


def _build_command(recipe: str, sets: list[str], change_sets: list[str], criterion: Criterion) -> str:
    # Shown, printed to CI summaries: every --set masked (whoever runs it again gives the credentials again).
    args = ["invoke", "build", "--recipe", recipe,
            *(a for s in [*sets, *change_sets] for a in ("--set", mask_set(s)))]
    if criterion.until:
        args += ["--until", criterion.until]
    return " ".join(shlex.quote(a) for a in args)


def to_dict(outcome: Outcome, *, recipe: str, sets: list[str], axis: Axis, criterion: Criterion, first_good: bool,
            log_path: str) -> dict[str, Any]:
    found = outcome.answer
    failing = found.last_old if first_good else found.first_new  # the step that fails next to the change
    entry = outcome.entries.get(failing)
    build = entry.build if entry is not None else None
    test = entry.test if entry is not None else None
    ordered = sorted(outcome.entries.values(), key=lambda e: e.position)
    skipped = [e for e in ordered if e.result == "skip"]
    steps = []
    for e in ordered:
        seconds = (e.build.seconds or 0) + ((e.test.seconds or 0) if e.test else 0)
        steps.append({"position": e.position, "label": e.label, "subject": axis.changes[e.position].subject,
                      "result": RESULT[e.result], "why": strip_controls(e.why), "seconds": round(seconds, 1),
                      "source": e.source, "key": e.key, "cache": e.build.cache.to_json() if e.build.cache else None,
                      "test_exit": e.test.exit_code if e.test else None})
    lines = (test.tail if criterion.test and test else build.first_error if build else ()) or ()
    bundle = build.bundle if build else None
    return {
        "ok": True, "recipe": recipe, "axis": {"kind": axis.kind, "target": axis.target, "changes": len(axis.changes)},
        "criterion": {"until": criterion.until, "verify": criterion.as_dict()["verify"], "test": criterion.test},
        "searching": "first good" if first_good else "first bad",
        "exact": found.exact,
        "first": _change(axis, found.first_new) if found.exact else None,
        "candidates": [_change(axis, p) for p in found.candidates],
        "last_before": _change(axis, found.last_old),
        "failing_step": {
            **_change(axis, failing),
            "failure": failure_json(build.failure) if build and not build.ok and build.failure else None,
            "diagnosis": build.diagnosis.to_json() if build and build.diagnosis else None,
            "first_error": [strip_controls(x) for x in lines],
            "test_exit": test.exit_code if test else None,
            "bundle": bundle,
            "repro": f"invoke repro {shlex.quote(bundle)}" if bundle else None,
            "build": _build_command(recipe, sets, list(axis.changes[failing].sets), criterion),
        },
        "skipped": {"count": len(skipped), "why": dict(Counter(strip_controls(e.why) for e in skipped)),
                    "steps": [{"label": e.label, "why": strip_controls(e.why)} for e in skipped]},
        "built": sum(1 for s in steps if s["source"] == "built"),
        "steps": steps,
        "reference": outcome.reference,
        "seconds": outcome.seconds,
        "log": log_path,
    }


def headline(data: dict) -> str:
    noun = NOUN.get(data["axis"]["kind"], "change")
    what = f"{data['searching']} {noun}"
    if data["exact"]:
        first = data["first"]
        return f"{what}: {first['label']}" + (f" {first['subject']}" if first["subject"] else "")
    labels = ", ".join(c["label"] for c in data["candidates"])
    return (f"{what}: one of {len(data['candidates'])} ({labels}): the steps between "
            f"{data['last_before']['label']} and {data['candidates'][-1]['label']} were skipped")


def _cache(cache: Any) -> str:
    if not isinstance(cache, dict) or not isinstance(cache.get("hits"), int):
        return "-"
    total = cache["hits"] + (cache.get("misses") or 0)
    return f"{cache['hits']}/{total}" if total else "-"


def _time(step: dict) -> str:
    return f"{step['seconds']:.0f}s" + ("*" if step["source"] != "built" else "")


def renderable(data: dict) -> Group:
    """The report for a terminal or a log: the headline, the failure, the steps table, the commands."""
    parts: list[Any] = [Text(headline(data), style="bold")]
    fs = data["failing_step"]
    diag = fs.get("diagnosis") or {}
    failure = fs.get("failure") or {}
    where = f"{fs['label']} {fs['subject']}".strip()
    if data["criterion"]["test"] and fs.get("test_exit") is not None:
        parts.append(Text(f"at {where}: the test exits {fs['test_exit']}"))
    elif failure:
        parts.append(Text(f"at {where}: fails in step {failure.get('step')}"
                          + (f": {diag.get('title')} [{diag.get('id')}]" if diag.get("title") else ", no known cause")))
        if diag.get("cause"):
            parts.append(Text(f"  cause: {diag['cause']}"))
        if diag.get("fix"):
            parts.append(Text(f"  fix:   {diag['fix']}"))
    if fs["first_error"]:
        parts.append(Text("first error lines:\n" + "\n".join(f"  {x}" for x in fs["first_error"][:8])))
    table = Table(title=f"{len(data['steps'])} steps ({data['built']} built, {data['skipped']['count']} skipped)",
                  title_justify="left", expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column(NOUN.get(data["axis"]["kind"], "change"), overflow="fold", max_width=34)
    table.add_column("result", no_wrap=True)
    table.add_column("why skipped", overflow="fold", max_width=24)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("cache", justify="right", no_wrap=True)
    for s in data["steps"]:
        style = {"good": "green", "bad": "red", "skip": "yellow"}[s["result"]]
        table.add_row(str(s["position"]), Text(f"{s['label']} {s['subject']}".strip()), Text(s["result"], style=style),
                      Text(s["why"] if s["result"] == "skip" else ""), _time(s), _cache(s["cache"]))
    parts.append(table)
    if any(s["source"] != "built" for s in data["steps"]):
        parts.append(Text("* from the bisect log: not built again (same artifact key)", style="dim"))
    if fs.get("repro"):
        parts.append(Text(f"reproduce the failing step: {fs['repro']}"))
    parts.append(Text(f"build it again: {fs['build']}"))
    parts.append(Text(f"log: {data['log']}", style="dim"))
    return Group(*parts)


def markdown(data: dict) -> str:
    """The same report for a CI job summary."""
    def cell(text: str) -> str:
        return strip_controls(str(text)).replace("|", "\\|").replace("\n", " ")

    fs = data["failing_step"]
    diag = fs.get("diagnosis") or {}
    failure = fs.get("failure") or {}
    out = [f"### invoke bisect: {cell(headline(data))}", ""]
    crit = data["criterion"]
    out.append(f"{data['axis']['changes']} {NOUN.get(data['axis']['kind'], 'change')}s of `{data['axis']['target']}` in "
               f"recipe `{data['recipe']}`; bad means " + (f"`{cell(crit['test'])}` exits 1-127" if crit["test"] else
                                                            f"the build fails up to `{crit['until']}`" if crit["until"] else
                                                            "the build or its verification fails") + ".")
    out.append("")
    if failure:
        out.append(f"**Failing step** {cell(fs['label'])}: step `{failure.get('step')}`"
                   + (f", {cell(diag.get('title'))} `{diag.get('id')}`" if diag.get("title") else ", no known cause"))
        if diag.get("fix"):
            out.append(f"- fix: {cell(diag['fix'])}")
    elif fs.get("test_exit") is not None:
        out.append(f"**Failing step** {cell(fs['label'])}: the test exits {fs['test_exit']}")
    if fs["first_error"]:
        out += ["", "```", *(strip_controls(x).replace("```", "'''") for x in fs["first_error"][:12]), "```"]
    out += ["", f"Skipped: {data['skipped']['count']}" + "".join(f"; {cell(w)} ({n})" for w, n in data["skipped"]["why"].items()),
            "", "| # | change | result | why skipped | time | cache |", "|---:|---|---|---|---:|---:|"]
    for s in data["steps"]:
        out.append(f"| {s['position']} | {cell((s['label'] + ' ' + s['subject']).strip())} | {s['result']} | "
                   f"{cell(s['why']) if s['result'] == 'skip' else ''} | {_time(s)} | {_cache(s['cache'])} |")
    out.append("")
    if fs.get("repro"):
        out.append(f"Reproduce the failing step: `{fs['repro']}`  ")
    out.append(f"Build it again: `{fs['build']}`")
    return "\n".join(out) + "\n"
