"""The shared compile cache: a Redis server behind each build's local ccache volume (site `cache_url`).

ccache's remote storage does the caching (docs/scale-out.md, "Shared compile cache"); buildctl only
checks the URL, hands it to the compile container at run time with the other credentials (it is never
rendered, keyed or written), and reads the local and remote hit counts back for the manifest.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from buildctl import urls
from buildctl.errors import InputError
from buildctl.secrets import mask_url

# The container's environment variable the build script reads the server from (secrets.sh sets it).
ENV_NAME = "BUILDCTL_CACHE_URL"
# What the build script leaves in $OUT: "used" or "unreachable <why>" (nothing without a server).
STATE_FILE = "cache-remote.txt"

_FORM = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")
_IPV6 = re.compile(r"(?=.*:)[0-9a-f:.]+")


def problem(url: str) -> str | None:
    """Why `url` is not a Redis URL ccache can use, or None. Never quotes the URL (it holds a password)."""
    if "://" not in url:
        return "no redis:// in front"
    if any(c.isspace() or c in "'\"`$;|&<>\\" for c in url):
        return "white space or shell characters in it"
    why = urls.problem(url)
    if why:  # "<problem>; fix: <fix>": a fix of its own
        return why
    user, colon, _ = (urls.split(url).userinfo or "").partition(":")
    if colon and ":" in unquote(user):
        return "a user name holding ':' (ccache splits the login at its first ':', even a %3A)"
    parts = urlsplit(url)
    if parts.scheme != "redis":
        return f"scheme {parts.scheme or '(none)'}: ccache's remote storage speaks redis:// only"
    host = parts.hostname or ""
    if not _HOST.fullmatch(host) and not _IPV6.fullmatch(host):
        return "no host name"
    if parts.port == 0:
        return "its port is not a number from 1 to 65535"
    if parts.path not in ("", "/") and not re.fullmatch(r"/\d{1,5}", parts.path):
        return "the path is not a database number (/0)"
    if parts.query or parts.fragment:
        return "a query or fragment (ccache takes none)"
    return None


def check_url(url: str, option: str = "--cache-url") -> str:
    """`url` when it is a usable Redis URL; else a one-line InputError, with the password masked."""
    why = problem(url)
    if why:  # the URL is never shown: a misread one masks badly, and it holds a password
        raise InputError(f"{option} (value not shown): {refusal(why)}")
    return url


def refusal(why: str) -> str:
    """`problem`'s answer as "<problem>; fix: <fix>"."""
    if "; fix: " in why:
        return why
    return f"not a Redis URL ({why}); fix: {_FORM}, e.g. redis://:PASSWORD@cache.example:6379/0"


def ccache_url(url: str) -> str:
    """`url` in ccache's form. ccache percent-decodes the login, then splits it at its first ':'
    (USER:PASSWORD, else PASSWORD alone; an empty USER sends no AUTH at all). So a password without a
    user is `redis://PASSWORD@host` there, and one holding ':' (raw or %3A) needs a user: Redis 6's
    `default` user is what a bare password authenticates as (`AUTH default PASSWORD`)."""
    login = urls.split(url).userinfo
    if login is None:
        return url
    user, colon, password = login.partition(":")
    if colon and user:  # USER:PASSWORD, as ccache reads it
        return url
    password = password if colon else user  # :PASSWORD, or a bare PASSWORD (ccache's own form)
    rest = url.partition("@")[2]
    if ":" in unquote(password):
        return f"redis://default:{password}@{rest}"
    return f"redis://{password}@{rest}"


def runtime_env(url: str | None) -> tuple[tuple[str, str], ...]:
    """The compile container's variables for a cache server (secrets.Credentials.env form)."""
    return ((ENV_NAME, ccache_url(url)),) if url else ()


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
