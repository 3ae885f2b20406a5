"""Known-failure classifier over build logs (and verification reports).

`diagnose(log)` returns a `Diagnosis` (what went wrong, why, the concrete fix, the log lines that show
it) for the failures people hit building PyTorch in containers, or None for anything unknown; then
`first_error(log)` gives the first error block to show instead of the last screen of ninja noise.

The signatures, in priority order, live in one table: `diagnose_patterns.SIGNATURES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from buildctl.failure.patterns import SIGNATURES, Signature, explain_nccl_report
from buildctl.terminal_text import strip_controls

MAX_EVIDENCE = 5
_MAX_LINE = 300  # evidence and first_error lines are cut here: compile commands run to kilobytes


@dataclass
class Diagnosis:
    id: str
    title: str
    cause: str
    fix: str
    evidence: list[str] = field(default_factory=list)
    step: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# pip logs "WARNING: Retrying ... NewConnectionError/SSLError" and often succeeds on a later try:
# such lines count as evidence only when pip eventually gave up.
_RETRY = re.compile(r"WARNING: Retrying \(Retry\(")
_PIP_GAVE_UP = re.compile(
    r"ERROR: (?:Could not find a version that satisfies|No matching distribution found|"
    r"Could not install packages due to)|Could not fetch URL"
)
_MAX_JOBS_IN_LOG = re.compile(r"MAX_JOBS[=: ]+(\d+)")


def _line_at(log: str, pos: int) -> tuple[int, str]:
    start = log.rfind("\n", 0, pos) + 1
    end = log.find("\n", pos)
    if end < 0:
        end = len(log)
    return start, log[start:end]


def _clip(line: str) -> str:
    """A log line as a person will read it: no terminal control sequences, cut at _MAX_LINE."""
    line = strip_controls(line).strip()
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 1] + "…"


def _match(sig: Signature, log: str, pip_gave_up: bool) -> tuple[dict[str, str], list[str]] | None:
    hits: list[tuple[int, str, dict[str, str]]] = []
    for pat in sig.patterns:
        seen = 0
        for m in pat.finditer(log):
            start, line = _line_at(log, m.start())
            if not pip_gave_up and _RETRY.search(line):
                continue
            groups = {k: v for k, v in m.groupdict().items() if v}
            hits.append((start, line, groups))
            seen += 1
            if seen >= MAX_EVIDENCE:  # enough from this pattern; a log may repeat it thousands of times
                break
    if not hits:
        return None
    hits.sort(key=lambda h: h[0])
    fields: dict[str, str] = {}
    evidence: list[str] = []
    for _, line, groups in hits:
        for k, v in groups.items():
            fields.setdefault(k, v)
        clipped = _clip(line)
        if clipped not in evidence and len(evidence) < MAX_EVIDENCE:
            evidence.append(clipped)
    return fields, evidence


def _failed_checks(report: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    checks = report.get("checks") or report.get("expectations") or []
    if isinstance(checks, Mapping):
        checks = [{"name": k, **v} if isinstance(v, Mapping) else {"name": k, "ok": v}
                  for k, v in checks.items()]
    for c in checks:
        if not isinstance(c, Mapping):
            continue
        status = str(c.get("status", c.get("state", ""))).lower()
        if c.get("ok") is False or c.get("passed") is False or status in ("fail", "failed", "error"):
            yield dict(c)


def _from_report(report: Mapping[str, Any], ctx: Mapping[str, Any], step: str | None) -> Diagnosis | None:
    for check in _failed_checks(report):
        name = str(check.get("name", "")).lower()
        if not re.fullmatch(r"nccl(?:[._:/ -]\w+)*", name):
            continue
        fields = {}
        for key, aliases in (("expected", ("expected", "want", "pin")),
                             ("actual", ("actual", "got", "found", "value"))):
            for a in aliases:
                if check.get(a) not in (None, ""):
                    fields[key] = str(check[a])
                    break
        cause, fix = explain_nccl_report(fields, ctx)
        detail = check.get("detail") or check.get("message") or (
            f"{check.get('name')}: expected {fields.get('expected', '?')}, got {fields.get('actual', '?')}")
        return Diagnosis("nccl-version", "Wheel links a different NCCL than the recipe pins",
                         cause, fix, [_clip(str(detail))], step or "verify")
    return None


def diagnose(
    log: str,
    *,
    step: str | None = None,
    exit_code: int | None = None,
    oom_killed: bool = False,
    context: Mapping[str, Any] | None = None,
    report: Mapping[str, Any] | None = None,
) -> Diagnosis | None:
    """The known failure behind `log` (and a verification `report`), or None if none matches.

    context may hold max_jobs, cuda_version, cuda_arch, nccl_pin, python (and cuda_home): they make
    the fix concrete. oom_killed=True (the engine's OOMKilled) means an OOM kill even when the log
    shows none; exit code 137 alone does not (any SIGKILL gives it: `docker kill`, a timeout).
    """
    ctx: Mapping[str, Any] = context or {}
    if report:
        found = _from_report(report, ctx, step)
        if found:
            return found
    log = log or ""
    pip_gave_up = bool(_PIP_GAVE_UP.search(log))
    log_jobs = _MAX_JOBS_IN_LOG.findall(log)
    for sig in SIGNATURES:
        hit = _match(sig, log, pip_gave_up)
        if hit is None and sig.id == "oom" and oom_killed:
            hit = ({"exit": "oom-killed"}, ["the engine reports the container was OOM-killed (State.OOMKilled)"])
        if hit is None:
            continue
        fields, evidence = hit
        if log_jobs:
            fields.setdefault("log_jobs", log_jobs[-1])
        cause, fix = sig.explain(fields, ctx)
        return Diagnosis(sig.id, sig.title, cause, fix, evidence, step)
    return None


def killed_for_memory(log: str) -> bool:
    """The log says memory killed the compiler (what a compile retries for with fewer jobs)."""
    found = diagnose(log)
    return found is not None and found.id == "oom"


# ---------------------------------------------------------------------------------------------
# Unknown failures: the first error block, not the last screen of output.

# error:, FAILED:, CMake Error, fatal:, fatal error:, a traceback, apt's E:. Written with a leading
# character class: a plain alternation is several times slower on a 10 MB log.
_ERROR_START = re.compile(
    r"[EeFfTC](?:rror\s*:|RROR\s*:|AILED:|atal\s*(?:error\s*)?:|raceback \(most recent call last\)|"
    r"Make Error|(?<=^E): )",
    re.MULTILINE,
)
# Lines that look like errors but are not the failure: pip's resolver notice after a good install.
_BENIGN = re.compile(r"ERROR: pip's dependency resolver does not currently take into account")
_NOISE = re.compile(r"^\s*\[\d+/\d+\] ")  # ninja progress lines interleaved from other jobs


def first_error(log: str, *, before: int = 2, after: int = 12) -> list[str]:
    """The first error line of `log` with `before` lines of context and up to `after` lines of its block.

    The block is what follows the error up to a blank line (a traceback runs to its exception line, a
    CMake error to the end of its indented message);
    ninja progress lines from parallel jobs are skipped. Empty when no line looks like an error.
    """
    log = log or ""
    idx = None
    for m in _ERROR_START.finditer(log):
        _, line = _line_at(log, m.start())
        if not _BENIGN.search(line):
            idx = log.count("\n", 0, m.start())
            break
    if idx is None:
        return []
    lines = log.split("\n")
    out = [_clip(x) for x in lines[max(0, idx - before): idx] if x.strip() and not _NOISE.match(x)]
    out.append(_clip(lines[idx]))
    traceback = "Traceback" in lines[idx]
    # CMake indents its messages and puts blank lines between their paragraphs (a failed try-compile
    # quotes the compiler's error several paragraphs down): the block ends where the indentation does.
    cmake = "CMake Error" in lines[idx]
    taken = 0
    for line in lines[idx + 1:]:
        if taken >= (after * 2 if traceback or cmake else after):
            break
        if not line.strip():
            if traceback or cmake:
                continue
            break
        if _NOISE.match(line):
            continue
        if cmake and not line.startswith((" ", "\t")):
            break
        out.append(_clip(line))
        taken += 1
        if traceback and not line.startswith((" ", "\t")):
            break  # the exception line ends a traceback
    return out


def render_diagnosis(d: Diagnosis) -> str:
    """One short block for the terminal: what it is, the cause, the fix, the first evidence line."""
    head = f"diagnosis: {d.title} [{d.id}]" + (f" in step {d.step}" if d.step else "")
    lines = [head, f"  cause: {d.cause}", f"  fix:   {d.fix}"]
    if d.evidence:
        lines.append(f"  log:   {d.evidence[0]}")
    return "\n".join(lines)

