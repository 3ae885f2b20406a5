"""How a command starts a child build (pipeline/child_build.py): the entry point's whole command line (the
job goes on its stdin). Here, not in cli/child.py, which imports the build command that starts children."""

from __future__ import annotations

import sys

from buildctl.pipeline.child_build import Child

CHILD = Child((sys.executable, "-m", "buildctl.cli.child"), "the build")
