"""The shared compile cache: a Redis server behind each build's local ccache volume (site `cache_url`).

ccache's remote storage does the caching (docs/scale-out.md, "Shared compile cache"); buildctl only
checks the URL, hands it to the compile container at run time with the other credentials (it is never
rendered, keyed or written), and reads the local and remote hit counts back for the manifest.
"""

from __future__ import annotations

from buildctl import urls
from buildctl.secrets import mask_url

# The container's environment variable the build script reads the server from (secrets.sh sets it).
ENV_NAME = "BUILDCTL_CACHE_URL"
# What the build script leaves in $OUT: "used" or "unreachable <why>" (nothing without a server).
STATE_FILE = "cache-remote.txt"
# The compile container's config with a server set: a warm local volume fills an empty (or evicted) server
# too, since ccache writes to its remote storage on a local miss only unless `reshare` is on. Inert when the
# build script's probe leaves the server out (no CCACHE_REMOTE_STORAGE).
CONTAINER_ENV = {"CCACHE_RESHARE": "1"}

def runtime_env(url: str | None) -> tuple[tuple[str, str], ...]:
    """The compile container's variables for a cache server (secrets.Credentials.env form)."""
    return ((ENV_NAME, urls.ccache_form(url)),) if url else ()


def stats(ccache_stats: dict[str, int], state: str, url: str | None) -> dict:
    """The manifest's local and remote figures from ccache's counters and the build script's state line.

    ccache counts each result lookup once per storage: a local miss that the server answers is
    local_storage_miss + remote_storage_hit (and an overall hit)."""
    out: dict = {}
    local_hits, local_misses = ccache_stats.get("local_storage_hit", 0), ccache_stats.get("local_storage_miss", 0)
    out.update(local_hits=local_hits, local_misses=local_misses, local_hit_rate=_rate(local_hits, local_misses))
    if not url:
        return out
    # written by the build container (untrusted): one line, bounded
    state_word, _, reason = (state.strip().splitlines() or [""])[0][:200].partition(" ")
    out["remote"] = {"url": mask_url(url), "state": state_word or "unknown"}
    if reason:
        out["remote"]["reason"] = reason
    if state_word == "used":
        hits, misses = ccache_stats.get("remote_storage_hit", 0), ccache_stats.get("remote_storage_miss", 0)
        out["remote"].update(hits=hits, misses=misses, hit_rate=_rate(hits, misses),
                             errors=ccache_stats.get("remote_storage_error", 0),
                             timeouts=ccache_stats.get("remote_storage_timeout", 0))
    return out


def _rate(hits: int, misses: int) -> float | None:
    return round(hits / (hits + misses), 3) if hits + misses else None
