"""Which earlier build weights this compile's ETA: the `ninja_log.txt` of a published artifact.

Preferred, in order: a build whose compile cache mostly missed and that compiled here (its step times are
compile costs; a warm rebuild's are cache look-ups, ~1 s each, and a build cluster's ran elsewhere, which
say nothing of the work), of this recipe, else of a
close recipe (the same framework name and version, of the same build type first), the newest first.
None found: the ETA is the step rate. The pipeline records the choice (Prior) and hands it on; the
view never reads the disk.

The files are untrusted (a build container wrote them): read capped, never followed through a link,
and one that is not a ninja log is passed over with one line saying so.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from buildctl.errors import InputError
from buildctl.pipeline import eta
from buildctl.recipe.schema import Spec
from buildctl.store import artifacts
from buildctl.store.manifest import Manifest

LOG_NAME = "ninja_log.txt"
# PyTorch's CPU build logs 14k lines in 1.5 MB; a CUDA build a few times that.
MAX_LOG_BYTES = 32 << 20
MAX_LOG_LINES = 300_000  # the dict of a 32 MiB file of tiny lines would take GBs
MAX_MANIFESTS = 64  # artifacts looked at for a close recipe: a big store is not read whole
WARM_HIT_RATE = 0.5  # above it the compile cache answered most steps: their times are no compile costs
# A prior of the other side of -O0: ATen's vectorised CPU kernels (aten/src/ATen/native/cpu, compiled once per
# CPU capability) are where -O2 spends its time. Measured on PyTorch 2.6 CPU (the Debug build's resumed run
# against the Release build, docs/evidence/pytorch2.6-cpu-trixie-debug): those 128 units cost 0.73x their
# Release time at -O0, the 500 others 1.25x, so against the rest a kernel unit costs 0.6x in a Debug build.
# Taken from that one pair; a Release prior weighted so gave its replay within -7..+2 % (unweighted: +20 %).
UNOPTIMISED_KERNEL_FACTOR = 0.6
VECTORISED_KERNELS = "/native/cpu/"
UNOPTIMISED = ("Debug",)  # -O0; Release, RelWithDebInfo and MinSizeRel optimise


@dataclass(frozen=True)
class Prior:
    """The build whose step costs weight the ETA (recipe and key None: none, the step rate)."""

    recipe: str | None = None
    key: str | None = None
    costs: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    why: str = "no earlier build with a ninja_log.txt"

    @property
    def source(self) -> str:
        """What the ETA is computed from, for a person: 'cost-weighted from r/k' or 'step rate'."""
        return f"cost-weighted from {self.recipe}/{self.key[:12]}" if self.recipe and self.key else "step rate"

    def note(self) -> str:
        """The build-log line naming the choice."""
        if not self.recipe:
            return f"buildctl: ETA from the step rate ({self.why})"
        return f"buildctl: ETA weighted by the {len(self.costs)} steps of {self.recipe}/{self.key} ({self.why})"


def find(spec: Spec, root: Path | None = None, log: Callable[[str], None] = lambda line: None) -> Prior:
    """The prior for a compile of `spec` in the store `root`; refusals are logged, never raised."""
    base = artifacts.root_or_default(root)
    ranked = sorted(_candidates(spec, base), key=lambda c: c[0])
    for _, why, folder, prior_type in ranked:
        try:
            costs = read_costs(folder / LOG_NAME)
        except InputError as e:
            log(f"buildctl: ETA: {e}")
            continue
        costs, why = across_optimisation(costs, prior_type, spec.build.type, why)
        return Prior(folder.parent.name, folder.name, MappingProxyType(costs), why)
    close = f" or of {spec.framework.name} {spec.framework.version}" if spec.framework.version else ""
    return Prior(why=f"no earlier build of {spec.name}{close} left a usable {LOG_NAME}")


def across_optimisation(costs: dict[str, float], prior_type: str | None, build_type: str,
                        why: str) -> tuple[dict[str, float], str]:
    """A prior built on the other side of -O0 than this build, its vectorised kernel units reweighted
    (UNOPTIMISED_KERNEL_FACTOR), and the why saying so; else as it is."""
    if prior_type is None or (prior_type in UNOPTIMISED) == (build_type in UNOPTIMISED) \
            or not any(VECTORISED_KERNELS in out for out in costs):
        return costs, why
    factor = UNOPTIMISED_KERNEL_FACTOR if build_type in UNOPTIMISED else 1 / UNOPTIMISED_KERNEL_FACTOR
    scaled = {out: c * factor if VECTORISED_KERNELS in out else c for out, c in costs.items()}
    return scaled, f"{why}; its vectorised CPU kernels x{factor:.2g} for {build_type}"


def _candidates(spec: Spec, base: Path) -> Iterator[tuple[tuple, str, Path, str | None]]:
    """(rank, why, artifact folder, its build type) of every published artifact that may serve, lowest
    rank best."""
    version = spec.framework.version
    read = 0
    for recipe_dir in sorted(_dirs(base), key=lambda d: (d.name != spec.name, d.name)):  # this recipe's first
        same = recipe_dir.name == spec.name
        if not same and not version:
            continue  # no version to call a recipe close by
        for folder in _published(recipe_dir):
            if read >= MAX_MANIFESTS:
                return
            read += 1
            try:
                m = Manifest.read(folder)
            except InputError:
                continue  # not a build to learn from; invoke verify says what is wrong with it
            framework = m.resolved_recipe.get("framework") if isinstance(m.resolved_recipe, dict) else None
            close = isinstance(framework, dict) and m.framework == spec.framework.name \
                and framework.get("version") == version
            if not (same or close):
                continue
            hit_rate = m.compile_cache.get("hit_rate") if isinstance(m.compile_cache, dict) else None
            warm = isinstance(hit_rate, (int, float)) and hit_rate > WARM_HIT_RATE
            # compiled on a build cluster: its steps' times are not this machine's work either
            warm = warm or (isinstance(m.dist, dict) and m.dist.get("state") == "used")
            other_type = m.build_type != spec.build.type
            why = ("this recipe" if same else f"{spec.framework.name} {version}, {m.build_type}") \
                + (", a warm rebuild" if warm else "")
            yield (warm, not same, other_type, -_mtime(folder / LOG_NAME)), why, folder, m.build_type


def _dirs(base: Path) -> Iterator[Path]:
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for e in entries:
        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False):
            yield Path(e.path)


def _published(recipe_dir: Path) -> list[Path]:
    """A recipe's published artifacts with a ninja log, newest first (staging folders are dot-named)."""
    found = [d for d in _dirs(recipe_dir) if _is_file(artifacts.manifest_path(d)) and _mtime(d / LOG_NAME)]
    return sorted(found, key=lambda d: -_mtime(d / LOG_NAME))


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)  # a FIFO, a device: no (reading one would block or not end)
    except OSError:  # absent, or a folder this user may not read: not a candidate
        return False


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


def read_costs(path: Path) -> dict[str, float]:
    """{output: seconds} of the ninja log `path`, read within MAX_LOG_BYTES and MAX_LOG_LINES."""
    fix = "fix: delete it (only the ETA reads it)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"{path}: unreadable ({e.strerror}), not used; {fix}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file, not used; {fix}")
        if st.st_size > MAX_LOG_BYTES:
            raise InputError(f"{path}: {st.st_size} bytes, over the {MAX_LOG_BYTES >> 20} MiB cap, not used; {fix}")
        raw = fh.read(MAX_LOG_BYTES + 1)
    if len(raw) > MAX_LOG_BYTES:  # grew since fstat
        raise InputError(f"{path}: over the {MAX_LOG_BYTES >> 20} MiB cap, not used; {fix}")
    if not raw.startswith(b"# ninja log v"):
        raise InputError(f"{path}: not a .ninja_log (no '# ninja log' header), not used; {fix}")
    if raw.count(b"\n") > MAX_LOG_LINES:
        raise InputError(f"{path}: over {MAX_LOG_LINES} lines, not used; {fix}")
    try:
        costs = eta.ninja_costs(raw.decode("utf-8", errors="replace"))
    except (ValueError, ArithmeticError) as e:  # parsing is total; should a case slip through: one line
        raise InputError(f"{path}: not readable as a .ninja_log ({str(e)[:100]}), not used; {fix}") from None
    if not costs:
        raise InputError(f"{path}: no ninja steps in it, not used; {fix}")
    return costs
