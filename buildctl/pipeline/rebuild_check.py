"""`invoke build --check-reproducible`: build the recipe (or find its artifact), build it again from
scratch elsewhere, and compare the two wheels byte for byte (docs/reproducible.md).

The second build is the same key (the same rendered files, image and source) with three things
changed, each a way real rebuilds differ: the build directory is a fresh volume (no objects of an
earlier build), mounted at another path of another length (REBUILD_DIR: build paths that leak into
the wheel show), and no compile cache, local or shared (every object compiled by this build). It
publishes nothing; its wheel stays in build/.until/<recipe>/<key>/wheel/ to look at (e.g. with
diffoscope). The result is recorded in the published artifact's manifest.json under "reproducible".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from buildctl import engine
from buildctl.errors import BuildctlError
from buildctl.pipeline import engine_names, pipeline, stages
from buildctl.pipeline.stages import compile as compile_stage
from buildctl.pipeline.stages.failure import BuildFailed
from buildctl.recipe.schema import Spec
from buildctl.store import artifacts, wheel_diff
from buildctl.terminal_text import strip_controls
from buildctl.ui import View

REBUILD_DIR = "/rebuild/work"  # not /work: another path, and of another length


@dataclass(frozen=True)
class Check:
    recipe: str
    key: str
    source_date_epoch: int | None
    first_build: dict  # {"seconds", "cached", "wheel"}: the published wheel
    second_build: dict  # {"seconds", "wheel"}: the rebuild's wheel (kept, not published)
    comparison: wheel_diff.WheelComparison
    checked: str  # when the comparison was made (UTC)

    @property
    def ok(self) -> bool:
        return self.comparison.identical

    def to_dict(self) -> dict:
        return {"identical": self.ok, "checked": self.checked,
                "source_date_epoch": self.source_date_epoch, "first_build": self.first_build,
                "second_build": {**self.second_build, "build_dir": f"{REBUILD_DIR}/src", "compile_cache": "off"},
                "comparison": self.comparison.to_dict(), "reason": self.comparison.reason()}


def check(spec: Spec, opts: stages.BuildOptions, view: View,
          second_view: Callable[[], View]) -> tuple[pipeline.BuildResult, Check]:
    """Build (or find) the artifact as `invoke build` does, then the check; the result is recorded in
    the artifact's manifest. `second_view` makes the view of the second build (after `view` closes)."""
    t0 = time.monotonic()
    result = pipeline.run(spec, opts, view)
    first_s = round(time.monotonic() - t0, 1)
    view.close()
    client = engine.connect(opts.engine_url, environ=opts.environ)
    namespace = artifacts.namespace(opts.artifacts_root, explicit=opts.namespace)
    volume = engine_names.rebuild_volume_name(spec.name, result.key, namespace)
    engine.remove_volume(client, volume)  # a check killed earlier may have left one: the rebuild starts clean
    rebuild_opts = dataclasses.replace(opts, until="wheel", targets=(), verify=False, keep_container=False,
                                       rebuild_dir=REBUILD_DIR)
    rebuild_view = second_view()
    t1 = time.monotonic()
    try:
        partial = pipeline.run(spec, rebuild_opts, rebuild_view)
    finally:
        rebuild_view.close()
        engine.remove_volume(client, volume)
    second_s = round(time.monotonic() - t1, 1)
    if partial.key != result.key:  # the same recipe renders the same files: never, unless the tree changed meanwhile
        raise BuildFailed(f"the second build of {spec.name} has key {partial.key}, the first {result.key}: the recipe "
                          "or its source changed during the check; fix: run it again on an unchanged tree")
    first_wheel = result.artifact / result.manifest.wheel.file
    second_wheels = sorted(partial.out_dir.glob("*.whl"))
    if not second_wheels:
        raise BuildFailed(f"the second build of {spec.name} made no wheel (its log: {partial.out_dir / 'build.log'})")
    comparison = wheel_diff.compare(first_wheel, second_wheels[0],
                                   build_paths=(f"{compile_stage.WORK_DIR}/src", f"{REBUILD_DIR}/src"))
    outcome = Check(spec.name, result.key, result.manifest.source_date_epoch,
                    {"seconds": first_s, "cached": result.cached, "wheel": str(first_wheel)},
                    {"seconds": second_s, "wheel": str(second_wheels[0])}, comparison,
                    datetime.now(timezone.utc).isoformat(timespec="seconds"))
    manifest = result.manifest.model_copy(update={"reproducible": outcome.to_dict()})
    manifest.write(artifacts.manifest_path(result.artifact))
    return dataclasses.replace(result, manifest=manifest), outcome


def table(outcome: Check):
    """For people: one line when the wheels are the same, else the differing members, one line each."""
    from rich.table import Table
    from rich.text import Text

    c = outcome.comparison
    builds = (f"first build {outcome.first_build['seconds']}s{' (cached)' if outcome.first_build['cached'] else ''}, "
              f"second build {outcome.second_build['seconds']}s at {REBUILD_DIR}/src without compile cache; "
              f"SOURCE_DATE_EPOCH={outcome.source_date_epoch}")
    if outcome.ok:
        return Text(f"Reproducible: both builds made the same wheel, sha256 {c.first_sha256} ({builds})")
    t = Table(title=f"Not reproducible: the wheels differ ({c.first_sha256[:12]} vs {c.second_sha256[:12]})",
              title_justify="left")
    t.add_column("member")
    t.add_column("kind")
    t.add_column("how")
    for d in c.differences:
        t.add_row(Text(strip_controls(d.member)), ", ".join(d.kinds), Text(strip_controls(d.detail)))
    t.caption = f"{builds}; the second wheel: {outcome.second_build['wheel']}"
    return t


class NotReproducible(BuildctlError):
    """--check-reproducible: the second build's wheel differs from the first (the message names how)."""

    diagnosis = None  # the comparison is the diagnosis: it names the members and the kind of difference
