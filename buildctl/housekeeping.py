"""`invoke clean`: prune artifacts, failure bundles, buildctl images and cache volumes by age or size."""

from __future__ import annotations

import shutil
import time
from datetime import datetime
from pathlib import Path

from . import artifacts, engine
from .errors import InputError

DAY = 86400.0


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _artifact_items(root: Path) -> list[dict]:
    items = []
    if not root.is_dir():
        return items
    for recipe_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for d in sorted(p for p in recipe_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            kind = "bundle" if recipe_dir.name == "failures" else "artifact"
            items.append({"kind": kind, "name": f"{recipe_dir.name}/{d.name}", "path": d,
                          "bytes": _dir_size(d), "mtime": d.stat().st_mtime})
    return items


def _timestamp(created: str) -> float:
    """Docker's CreatedAt (RFC 3339) as a POSIX time; 0 (oldest) when unreadable."""
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _engine_items(client, images: bool, caches: bool) -> list[dict]:
    items = []
    df = client.df()
    if images:
        for img in df.get("Images") or []:
            labels = img.get("Labels") or {}
            if labels.get("buildctl") == "1" and not (img.get("RepoTags") or [""])[0].startswith("buildctl/base:"):
                items.append({"kind": "image", "name": (img.get("RepoTags") or [img["Id"][:19]])[0],
                              "id": img["Id"], "bytes": int(img.get("Size") or 0),
                              "mtime": float(img.get("Created") or 0)})
    if caches:
        for vol in df.get("Volumes") or []:
            if (vol.get("Labels") or {}).get("buildctl") == "1":
                items.append({"kind": "volume", "name": vol["Name"], "bytes": int((vol.get("UsageData") or {}).get("Size") or 0),
                              "mtime": _timestamp(vol.get("CreatedAt") or "")})
    return items


def clean(*, older_than_days: float | None, keep_bytes: int | None, images: bool = True, caches: bool = True,
          dry_run: bool = False, root: Path | None = None) -> dict:
    if older_than_days is None and keep_bytes is None:
        raise InputError("nothing to select; fix: give --older-than-days N and/or --keep-gb N "
                         "(--older-than-days 0 removes everything)")
    root = root or artifacts.ARTIFACTS_DIR
    items = _artifact_items(root)
    client = engine.connect() if (images or caches) else None
    if client is not None:
        items += _engine_items(client, images, caches)
    now = time.time()
    chosen: list[dict] = []
    if older_than_days is not None:
        chosen = [i for i in items if now - i["mtime"] >= older_than_days * DAY]
    if keep_bytes is not None:
        rest = sorted((i for i in items if i not in chosen), key=lambda i: i["mtime"])
        total = sum(i["bytes"] for i in rest)
        for i in rest:
            if total <= keep_bytes:
                break
            chosen.append(i)
            total -= i["bytes"]
    removed = []
    for item in chosen:
        if not dry_run:
            if item["kind"] in ("artifact", "bundle"):
                shutil.rmtree(item["path"], ignore_errors=True)
            elif item["kind"] == "image":
                try:
                    client.images.remove(item["id"], force=True)
                except Exception:
                    continue  # in use by a container: left alone
            elif item["kind"] == "volume":
                try:
                    engine.remove_volume(client, item["name"])
                except Exception:
                    continue
        removed.append({"kind": item["kind"], "name": item["name"], "bytes": item["bytes"]})
    return {"removed": removed, "freed_bytes": sum(i["bytes"] for i in removed), "dry_run": dry_run}
