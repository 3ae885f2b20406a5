"""The search of `invoke bisect`, pure: which change to build next, what a step's result means, and the
answer (no engine, no git, no files).

The changes are positions 0..n-1 in the order they happened: 0 the old end, n-1 the new one. A built
step is `old` (it behaves as the old end), `new` (as the new end) or `skip` (it cannot say: it failed for
another reason than the one the bisect is about). The answer is the first `new` position after the last
`old` one; when only skipped positions lie between them, the answer is that range, never a guess
(`git bisect skip`'s rule).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

OLD, NEW, SKIP = "old", "new", "skip"
PASS, FAIL = "pass", "fail"


@dataclass(frozen=True)
class Answer:
    """Where the change happened: after `last_old`, at or before `first_new`; `skipped` are the positions
    between them (all skipped: the answer is one of them or first_new)."""

    last_old: int
    first_new: int
    skipped: tuple[int, ...]

    @property
    def exact(self) -> bool:
        return not self.skipped

    @property
    def candidates(self) -> tuple[int, ...]:
        """The positions that may be the first new one."""
        return (*self.skipped, self.first_new)


def bounds(outcomes: Mapping[int, str]) -> tuple[int, int]:
    """(last old position before the first new one, first new position). Both ends must be known."""
    news = [i for i, o in outcomes.items() if o == NEW]
    if not news:
        raise ValueError("no new position known: the new end is built first")
    first_new = min(news)
    olds = [i for i, o in outcomes.items() if o == OLD and i < first_new]
    if not olds:
        raise ValueError("no old position before the first new one: the old end is built first")
    return max(olds), first_new


def candidates(outcomes: Mapping[int, str], pending: Collection[int] = ()) -> list[int]:
    """The positions still worth building: unknown, between the bounds, not being built."""
    lo, hi = bounds(outcomes)
    return [i for i in range(lo + 1, hi) if i not in outcomes and i not in pending]


def next_steps(outcomes: Mapping[int, str], pending: Collection[int] = (), slots: int = 1) -> list[int]:
    """Up to `slots` positions to build now, besides `pending` (being built): each the middle of the widest
    stretch of unknown positions that the bounds and the pending builds leave, so two engines build the
    quarter points and one the middle. Skipped positions are stepped around, never chosen again."""
    lo, hi = bounds(outcomes)
    chosen: list[int] = []
    busy = set(pending)
    for _ in range(slots):
        cuts = [lo, *sorted(p for p in busy if lo < p < hi), hi]
        best: list[int] = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            stretch = [i for i in range(a + 1, b) if i not in outcomes and i not in busy]
            if len(stretch) > len(best):
                best, mid = stretch, (a + b) / 2
        if not best:
            break
        pick = min(best, key=lambda i: (abs(i - mid), i))
        chosen.append(pick)
        busy.add(pick)
    return chosen


def answer(outcomes: Mapping[int, str]) -> Answer | None:
    """The answer once no position between the bounds is left unknown; None while one is."""
    lo, hi = bounds(outcomes)
    between = range(lo + 1, hi)
    if any(i not in outcomes for i in between):
        return None
    return Answer(lo, hi, tuple(between))  # every position between is skipped (or none is there)


def steps_left(outcomes: Mapping[int, str]) -> int:
    """About how many more builds the search needs (halving the unknown stretch, skips aside)."""
    n = len(candidates(outcomes))
    return n.bit_length()


# --- what a step's result means ---------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """Why a build failed, as the bisect compares failures: the step and the diagnosis' id (None: no
    known cause), or the verification checks that did not hold."""

    step: str
    diagnosis: str | None = None
    title: str | None = None

    @property
    def signature(self) -> str:
        return f"{self.step}:{self.diagnosis or 'unknown'}"

    def describe(self) -> str:
        """"fails in configure", "fails in fetch: Network failure during a download"."""
        what = f": {self.title}" if self.title else f" [{self.diagnosis}]" if self.diagnosis else ""
        return f"fails in {self.step}{what}"


def judge(failure: Failure | None, *, reference: str | None, test_exit: int | None = None,
          testing: bool = False) -> tuple[str, str]:
    """(pass | fail | skip, why) of one step.

    Without a test: a build that works passes; one that fails as the reference (the failing end's
    signature; None while that end itself is judged) fails; one that fails otherwise is skipped.
    With a test (`testing`): a build that fails is skipped, and the test's exit code decides as
    `git bisect run` reads it: 0 pass, 125 skip, 1-127 fail; beyond 127 (killed by a signal) skip."""
    if testing:
        if failure is not None:
            return SKIP, f"does not build: {failure.describe()}"
        if test_exit == 0:
            return PASS, ""
        if test_exit == 125:
            return SKIP, "the test said skip (exit 125)"
        if test_exit is not None and 1 <= test_exit <= 127:
            return FAIL, f"test exit {test_exit}"
        return SKIP, f"the test did not finish (exit {test_exit}: killed or crashed, not 0-127)"
    if failure is None:
        return PASS, ""
    if reference is None or failure.signature == reference:
        return FAIL, failure.describe()
    step, _, diagnosis = reference.partition(":")
    return SKIP, f"{failure.describe()}, not as the failing end ({step}{'' if diagnosis == 'unknown' else f' [{diagnosis}]'})"


def position_state(result: str, *, first_good: bool) -> str:
    """A step's pass/fail/skip as the search reads it: the old end passes (a regression) unless the
    search is for the first good change (`first_good`: the old end fails)."""
    if result == SKIP:
        return SKIP
    return (OLD if result == PASS else NEW) if not first_good else (OLD if result == FAIL else NEW)
