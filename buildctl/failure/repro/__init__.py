"""Repro bundles: everything needed to replay a failed build step anywhere, with or without buildctl.

A bundle is one folder, artifacts/failures/<recipe>-<time>/ (or the same packed as .tar.gz):
  context/               the rendered build folder (`docker build --target builder context/`)
  source.tar.gz          a local-path source, when the recipe builds one
  downloads/             pre-staged files that failed their check (when small enough to carry)
  bundle.json            step, exit code, image id, command, environment (secrets masked), volumes,
                         network, memory limit, diagnosis, the downloads the build checks
                         (a replay reads these, never the recipe)
  build.log              the log up to the failure (secrets masked)
  recipe.resolved.yaml   the resolved recipe
  README.md              the plain docker commands that replay it
`invoke repro BUNDLE [--shell]` rebuilds the image and reruns the failing step (or opens a shell there).
"""

from buildctl.failure.repro.reader import BUNDLE_CAPS, SOURCE_CAPS, STEPS, Bundle, BundleData, open_bundle
from buildctl.failure.repro.replayer import preflight, replay, shell, summary
from buildctl.failure.repro.writer import (
    CARRY_LIMIT,
    FailedStep,
    ReplayFacts,
    failures_dir,
    pack,
    write_bundle,
)

__all__ = [
    "BUNDLE_CAPS",
    "CARRY_LIMIT",
    "SOURCE_CAPS",
    "STEPS",
    "Bundle",
    "BundleData",
    "FailedStep",
    "ReplayFacts",
    "failures_dir",
    "open_bundle",
    "pack",
    "preflight",
    "replay",
    "shell",
    "summary",
    "write_bundle",
]
