"""The compile's time left, from what each step cost in a previous build of the same recipe (pure).

PyTorch's ninja steps vary 100x (codegen takes a second, RegisterCPU.cpp minutes), and the cheap ones
come first, so steps left over the step rate is a poor clock: replayed on the real Release build it
settled only within -28..+13 %. A build that has run before left its `.ninja_log` in its artifact
(ninja_log.txt): each output's duration there is its weight now. The time left is

    (prior cost of the steps not done yet) x (wall time so far / prior cost of the steps done)

so the machine's speed and the parallelism are measured on this build and the shape of the work
comes from the last one. Steps the prior does not know cost its mean; without a prior (or before
any prior-known step is done) the estimate is the step rate. A resumed build's ninja counts only
the steps left: the ones an earlier run built are taken to be those the prior finished first (ninja
walks the same graph in about the same order), and the prior's cost of the rest is scaled to the
number of steps ninja says remain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# ninja's status line: "[N/M] Building CXX object <output>", "[N/M] Linking CXX shared library <output>".
# The log is the container's (untrusted): ASCII digits only, and few of them (int() refuses over 4300).
STATUS = re.compile(r"^\[([0-9]{1,12})/([0-9]{1,12})\]\s+(?P<what>.*?)\s*$")
# A .ninja_log time in ms: ASCII digits (str.isdigit takes '²', which int() refuses), within a year of ms.
_MS = re.compile(r"[0-9]{1,12}")


def ninja_costs(text: str) -> dict[str, float]:
    """{output: seconds} from a .ninja_log (v5/v6: start, end, mtime, output, hash in ms), one entry per
    edge (an edge with several outputs, codegen, logs each with the same times and hash: it keeps the
    last-listed name), in the order the steps ended (`timeline`'s: what a resumed build's ninja finds
    done is what ran first). A step logged again (a later run rebuilt it) keeps its last duration."""
    costs: dict[str, float] = {}
    for _, out, cost in _ordered(text):
        costs.pop(out, None)
        costs[out] = cost
    return costs


def steps_of(text: str) -> Iterable[tuple[int, int, str, str]]:
    """(start ms, end ms, output, hash) of each line of a .ninja_log that is a step; any other line passed over. Lines end at '\n' only, as ninja writes them (a line
    cap counted in '\n' holds: splitlines would also split at '\r', '\x0b', '\x1c', ...)."""
    for line in text.split("\n"):
        parts = line.split("\t")
        if len(parts) == 5 and _MS.fullmatch(parts[0]) and _MS.fullmatch(parts[1]):
            yield int(parts[0]), int(parts[1]), parts[3], parts[4]


def output_of(description: str) -> str:
    """The output path a ninja status description names: its last word (CMake's descriptions end
    with the output: "Building CXX object a/b.o", "Linking CXX shared library lib/x.so")."""
    return description.rsplit(" ", 1)[-1] if description else ""


class Eta:
    """Feed it ninja's status lines as they come (`line`, with the time); ask `remaining(now)`."""

    # Before this share of the prior's cost is done, the rate is measured on too little: step rate.
    WARMUP_SHARE = 0.002

    def __init__(self, prior: dict[str, float] | None = None, start: float | None = None) -> None:
        """`start`: when ninja started, if known (else taken as the first step's end less its cost)."""
        self.prior = dict(prior or {})  # in the order the prior's steps ended
        self.mean = sum(self.prior.values()) / len(self.prior) if self.prior else 0.0
        self.start = start
        self.done: set[str] = set()
        self.built_before: set[str] = set()  # by an earlier run of a resumed build (guessed by order)
        self.done_cost = 0.0
        self.n = self.total = 0

    def line(self, text: str, now: float) -> None:
        m = STATUS.match(text)
        if not m:
            return
        n, total = int(m.group(1)), int(m.group(2))
        if self.start is None:  # ninja prints a step when it finishes: the first one ran since about now
            self.start = now - self.prior.get(output_of(m.group("what")), self.mean)
        if total != self.total:
            self.built_before = set(list(self.prior)[:max(len(self.prior) - total, 0)])
        self.n, self.total = n, total
        out = output_of(m.group("what"))
        if out and out not in self.done:
            self.done.add(out)
            self.done_cost += self.prior.get(out, self.mean)

    def remaining(self, now: float) -> float | None:
        """Seconds left, or None before the first step."""
        if self.start is None or self.n == 0:
            return None
        elapsed = max(now - self.start, 0.0)
        left_steps = max(self.total - self.n, 0)
        prior_total = sum(self.prior.values())
        if not self.prior or self.done_cost <= self.WARMUP_SHARE * prior_total:
            return elapsed / self.n * left_steps
        not_done = [c for out, c in self.prior.items() if out not in self.done and out not in self.built_before]
        left_cost = sum(not_done)
        if not_done and len(not_done) != left_steps:  # another graph, or a resumed build: scale by count
            left_cost *= left_steps / len(not_done)
        elif not not_done:
            left_cost = left_steps * self.mean
        return left_cost * elapsed / self.done_cost


def replay(actual_log: str, prior: dict[str, float] | None) -> list[tuple[float, float, float]]:
    """(elapsed, estimated left, really left) after each step of a finished build's .ninja_log,
    replayed in the order its steps ended (timeline): as if its runs had been one."""
    events = timeline(actual_log)
    return _replay(events, len(events), prior)


def replay_runs(actual_log: str, prior: dict[str, float] | None) -> list[list[tuple[float, float, float]]]:
    """`replay` of each run of a finished, resumed build as its own ninja showed it: [N/M] counted
    from the run's start, M the steps left then, the clock the run's."""
    runs = _runs(actual_log)
    left = sum(len(r) for r in runs)
    out = []
    for run in runs:
        out.append(_replay([(t, o) for t, o, _ in run], left, prior))
        left -= len(run)
    return out


def _replay(events: list[tuple[float, str]], total: int, prior: dict[str, float] | None):
    eta = Eta(prior, start=0.0)
    finish = events[-1][0] if events else 0.0
    rows = []
    for i, (t, out) in enumerate(events, 1):
        eta.line(f"[{i}/{total}] Building CXX object {out}", t)
        left = eta.remaining(t)
        if left is not None:
            rows.append((t, left, finish - t))
    return rows


def timeline(log: str) -> list[tuple[float, str]]:
    """(seconds since the build started, output) of each step of a .ninja_log in the order the steps
    ended, a resumed build's runs (where the clock restarts) laid end to end."""
    return [(t, out) for t, out, _ in _ordered(log)]


def _ordered(log: str) -> list[tuple[float, str, float]]:
    """(end, output, seconds) of each edge, as `timeline` orders them."""
    events: list[tuple[float, str, float]] = []
    offset = 0.0
    for run in _runs(log):
        events += [(offset + t, out, cost) for t, out, cost in run]
        offset += run[-1][0]
    return events


def _runs(log: str) -> list[list[tuple[float, str, float]]]:
    """The log's ninja runs (where its clock restarts), each [(end, output, seconds)] in end order."""
    runs: list[list[tuple[float, str, float]]] = []
    last_end = None
    for start_ms, end_ms, out in _steps(log):
        if last_end is None or end_ms < last_end:  # the clock restarted: a new run, after the previous one
            runs.append([])
        last_end = end_ms
        runs[-1].append((end_ms / 1000, out, max(0, end_ms - start_ms) / 1000))
    return [sorted(run) for run in runs]


def _steps(text: str) -> Iterable[tuple[int, int, str]]:
    """One (start, end, output) per edge, in the log's order (an edge's last-listed output)."""
    edges: dict[tuple[int, int, str], str] = {}
    for start, end, out, edge_hash in steps_of(text):
        edges[(start, end, edge_hash)] = out
    for (start, end, _), out in edges.items():
        yield start, end, out
