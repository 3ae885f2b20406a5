"""A local source's snapshot as the containers receive it: its own module, without docker-py, so that a
no-op build (which takes the snapshot's digest for its key) imports none of the engine's transfer code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Snapshot:
    """A tar made once of a local source at its key (store/source_tree.py): sent as it is, never the live
    folder, to every container that reads the source."""

    path: Path
