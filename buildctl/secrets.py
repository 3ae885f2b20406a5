"""Masking of secrets in everything buildctl writes or shows: log lines, manifests, repro bundles.

Two kinds of protection, applied together by `mask`:

* literal values known to be secret (passwords from proxy/index URLs, tokens from the environment),
  replaced wherever they occur, raw and percent-decoded;
* shapes that are secret whatever their value: the userinfo of a URL (`https://user:pass@host` →
  `https://***@host`) and credential query parameters (`?token=…`, `X-Amz-Signature=…`, `sig=…`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from urllib.parse import unquote, urlsplit

MASK = "***"

# Shorter literals would mask common words and numbers everywhere; such "secrets" are not secret anyway.
MIN_SECRET_LEN = 4

# URL userinfo in free text: scheme://USERINFO@host. ssh-like schemes keep a bare user name (git@…),
# every other scheme loses the whole userinfo, since tokens are often passed as the user name.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#@'\"`<>]+)@")
_SSH_SCHEMES = ("ssh://", "git+ssh://", "ssh+git://", "sftp://")

# Query parameters whose values are credentials (case-insensitive).
_TOKEN_PARAMS = (
    "token",
    "access_token",
    "id_token",
    "refresh_token",
    "private_token",
    "auth",
    "auth_token",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "api_key",
    "apikey",
    "key",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "x-goog-signature",
    "x-goog-credential",
    "jwt",
    "session_token",
)
_TOKEN_QUERY = re.compile(
    r"(?P<lead>[?&;](?:" + "|".join(re.escape(p) for p in _TOKEN_PARAMS) + r")=)(?P<value>[^&#\s'\"`<>]+)",
    re.IGNORECASE,
)

# Environment variables whose value is a secret by name.
_SECRET_ENV_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|CREDENTIAL|PRIVATE_KEY|AUTH)", re.IGNORECASE
)
# Environment variables that often carry URLs with credentials in them (any URL value is checked, too).
_URL_ENV_NAMES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "FTP_PROXY",
    "ALL_PROXY",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "CONDA_CHANNEL",
)


def _userinfo_repl(m: re.Match[str]) -> str:
    scheme, userinfo = m.group("scheme"), m.group("userinfo")
    if userinfo == MASK:
        return m.group(0)
    if scheme.lower() in _SSH_SCHEMES and ":" not in userinfo:
        return m.group(0)
    return f"{scheme}{MASK}@"


def _mask_shapes(text: str) -> str:
    if "://" in text:
        text = _USERINFO.sub(_userinfo_repl, text)
    if "=" in text:
        text = _TOKEN_QUERY.sub(lambda m: m.group("lead") + MASK, text)
    return text


def mask_url(url: str) -> str:
    """The URL with its userinfo and credential query parameters replaced by `***`."""
    return _mask_shapes(url)


def url_secrets(url: str) -> set[str]:
    """The secret parts of one URL: password, user name (when it may be a token), token parameters."""
    out: set[str] = set()
    if not url or "://" not in url:
        return out
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return out
    netloc = parts.netloc
    if "@" in netloc:
        userinfo = netloc.rsplit("@", 1)[0]
        user, _, password = userinfo.partition(":")
        if password:
            out.update({password, unquote(password), userinfo})
        elif user and parts.scheme.lower() + "://" not in _SSH_SCHEMES:
            # A bare user name on http(s) is usually a token (https://<token>@github.com/…).
            out.update({user, unquote(user)})
    for m in _TOKEN_QUERY.finditer("?" + parts.query if parts.query else ""):
        value = m.group("value")
        out.update({value, unquote(value)})
    return {s for s in out if len(s) >= MIN_SECRET_LEN}


def _secret_values(values: Iterable[str]) -> tuple[str, ...]:
    uniq = {v for v in values if v and len(v) >= MIN_SECRET_LEN}
    # Longest first, so that a secret containing another is replaced whole.
    return tuple(sorted(uniq, key=lambda s: (-len(s), s)))


@lru_cache(maxsize=64)
def _literal_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    if not values:
        return None
    return re.compile("|".join(re.escape(v) for v in values))


class Masker:
    """A reusable masker for one set of secrets: `Masker(secrets)(text)`. Cheap per line."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = _secret_values(secrets)
        self._pattern = _literal_pattern(self.secrets)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return _mask_shapes(text)

    def extend(self, more: Iterable[str]) -> Masker:
        return Masker((*self.secrets, *more))


def mask(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret value, URL userinfo and credential query parameter replaced by `***`."""
    return Masker(secrets)(text)


def secret_values_from_env(environ: Mapping[str, str] | None = None) -> set[str]:
    """Secret values in an environment: variables named like secrets and credentials inside URLs."""
    env = os.environ if environ is None else environ
    out: set[str] = set()
    for name, value in env.items():
        if not value:
            continue
        if _SECRET_ENV_NAME.search(name) and not name.upper().endswith(("_FILE", "_PATH", "_DIR")):
            out.add(value)
        if name.upper() in _URL_ENV_NAMES or "://" in value:
            for part in re.split(r"[\s,]+", value):
                out |= url_secrets(part)
    return {s for s in out if len(s) >= MIN_SECRET_LEN}


def secret_values_from_site(site: object | None) -> set[str]:
    """Credentials inside the URLs of a recipe's `site:` section (proxies, package indexes, mirrors)."""
    out: set[str] = set()
    if site is None:
        return out
    for field in ("http_proxy", "https_proxy", "pip_index_url", "apt_mirror"):
        value = getattr(site, field, None)
        if value:
            out |= url_secrets(str(value))
    for value in getattr(site, "pip_extra_index_urls", ()) or ():
        out |= url_secrets(str(value))
    return out


def secret_values_from_env_and_site(
    site: object | None = None, environ: Mapping[str, str] | None = None
) -> set[str]:
    """Every secret value buildctl knows of for one run: from the environment and from `spec.site`."""
    return secret_values_from_env(environ) | secret_values_from_site(site)
