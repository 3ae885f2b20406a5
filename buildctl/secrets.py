"""Secrets: credentials in recipe URLs kept out of everything buildctl writes, and masked in what it shows.

One path for every URL with credentials (docs/security.md, "Secrets"):

* `split_credentials(spec)` is where they leave the recipe: a spec whose URLs carry no credentials
  (what is rendered, keyed and handed to tools), and `Credentials`, what the build needs at run time
  (the real URLs, proxy passwords, an apt login);
* `Credentials.payload()` is the one form they travel in: shell assignments, sourced by
  templates/secrets.sh inside the build, from a `SecretServer` during an image build or from a file
  copied into a container before its start;
* masking (`Masker`, `mask`, `mask_url`, `mask_data`) covers what is shown or stored anyway: literal
  values known to be secret (raw and percent-decoded) and shapes that are secret whatever their value,
  the userinfo of a URL (`https://user:pass@host` → `https://***@host`) and credential query
  parameters (`?token=…`, `X-Amz-Signature=…`, `sig=…`).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import shlex
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from buildctl import urls
from buildctl.errors import BuildctlError, InputError
from buildctl.git_env import git_mirror_env

T = TypeVar("T")
MASK = urls.MASK
MIN_SECRET_LEN = urls.MIN_SECRET_LEN

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

# One parse of a URL for every use (buildctl/urls.py): shown, stripped, its secret values.
mask_url = urls.mask
strip_credentials = urls.strip
url_secrets = urls.secrets


def proxy_env(spec) -> dict[str, str]:
    """Proxy variables for build args and the container's config: without credentials (a proxy's
    password reaches the build with the other credentials, secrets.Credentials)."""
    site = spec.site
    env = {"HTTP_PROXY": site.http_proxy, "HTTPS_PROXY": site.https_proxy, "NO_PROXY": site.no_proxy}
    env = {k: strip_credentials(v) for k, v in env.items() if v}
    # Docker leaves its predefined proxy build args (upper and lower case) out of the image history.
    return {**env, **{k.lower(): v for k, v in env.items()}}


def mask_data(data: Any, masker: Masker | None = None) -> Any:
    """Plain data (dicts, lists, strings) with every string masked (to store or show it)."""
    masker = masker or Masker()
    if isinstance(data, str):
        return masker(data)
    if isinstance(data, dict):
        return {k: mask_data(v, masker) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [mask_data(v, masker) for v in data]
    return data


# The one rule: every file buildctl writes and every command line it starts goes through one of these two
# (tests/unit/test_secret_filter.py walks the code for writers and argv that do not).


def filtered(content: T, masker: Masker | None = None) -> T:
    """What a file is given to hold: text, or plain data about to be serialised, with every secret masked (the
    URL logins and credential parameters by shape, and `masker`'s known values)."""
    return mask_data(content, masker)


def checked_argv(args: Iterable[str], masker: Masker | None = None) -> list[str]:
    """A command line to start, refused (the argument not shown) when an argument carries a credential (a URL
    login, a credential parameter, a `masker` value): every user reads argv (/proc/PID/cmdline); credentials
    go in the environment, a 0600 file outside the artifacts root, or stdin."""
    argv = [str(a) for a in args]
    check = masker or Masker()
    for i, arg in enumerate(argv):
        if check(arg) != arg:
            raise BuildctlError(f"internal error: argument {i} of `{argv[0]}` would carry a credential on its command "
                                "line (not run); fix: report it: credentials go in the environment, a 0600 file or stdin")
    return argv


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
        return urls.mask_text(text)

    def extend(self, more: Iterable[str]) -> Masker:
        return Masker((*self.secrets, *more))


def mask(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret value, URL userinfo and credential query parameter replaced by `***`."""
    return Masker(secrets)(text)


def secret_values_from_env(environ: Mapping[str, str]) -> set[str]:
    """Secret values in an environment (settings.environ(), or a container's): variables named like secrets
    and credentials inside URLs."""
    env = environ
    out: set[str] = set()
    for name, value in env.items():
        if not value:
            continue
        if secret_name(name):
            out.add(value)
        if name.upper() in _URL_ENV_NAMES or "://" in value:
            for part in re.split(r"[\s,]+", value):
                out |= url_secrets(part)
    return {s for s in out if len(s) >= MIN_SECRET_LEN}


def secret_name(name: str) -> bool:
    """Whether a variable or field of this name holds a secret by its name (GH_TOKEN, DB_PASSWORD)."""
    return bool(_SECRET_ENV_NAME.search(name)) and not name.upper().endswith(("_FILE", "_PATH", "_DIR"))


def secret_values_from_sets(items: Iterable[str]) -> set[str]:
    """Secret values in `--set KEY=VALUE` items: a value under a key named like a secret
    (build.env.GH_TOKEN=...), and the credentials of every URL in them."""
    out: set[str] = set()
    for item in items:
        key, eq, value = item.partition("=")
        if eq and secret_name(key.rsplit(".", 1)[-1].strip()):
            out.add(value.strip())
        for url in _URL_IN_TEXT.findall(item):
            out |= url_secrets(url)
    return {s for s in out if len(s) >= MIN_SECRET_LEN}


def mask_set(item: str, masker: Masker | None = None) -> str:
    """A `--set KEY=VALUE` item to show or store: the whole value under a key named like a secret, else
    every secret in it, masked."""
    key, eq, _ = item.partition("=")
    if eq and secret_name(key.rsplit(".", 1)[-1].strip()):
        return f"{key}={MASK}"
    return (masker or Masker())(item)


def secret_values_from_site(site: object | None) -> set[str]:
    """Credentials inside the URLs of a recipe's `site:` section (proxies, package indexes, mirrors)."""
    out: set[str] = set()
    if site is None:
        return out
    for field in ("http_proxy", "https_proxy", "pip_index_url", "apt_mirror", "cache_url", "dist_scheduler"):
        value = getattr(site, field, None)
        if value:
            out |= url_secrets(str(value))
    for pair in getattr(site, "git_mirrors", ()) or ():
        out |= url_secrets(pair.partition("=")[2])
    for value in getattr(site, "pip_extra_index_urls", ()) or ():
        out |= url_secrets(str(value))
    return out


def secret_values_from_env_and_site(site: object | None, environ: Mapping[str, str]) -> set[str]:
    """Every secret value buildctl knows of for one run: from the environment (settings.environ()) and from
    `spec.site`."""
    return secret_values_from_env(environ) | secret_values_from_site(site)


# ---------------------------------------------------------------------------------------------- run time

_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"`<>]+")
# The host name that announces a SecretServer to a build's RUN steps (docker build --add-host).
SECRET_HOST_RE = re.compile(r"buildctl-secrets-(?P<port>\d{1,5})-(?P<token>[0-9a-f]{32})")
PROXY_ENV = {"http_proxy": ("HTTP_PROXY", "http_proxy"), "https_proxy": ("HTTPS_PROXY", "https_proxy")}


@dataclass(frozen=True)
class Credentials:
    """What a build needs at run time and must never write down.

    urls: (URL as rendered, real URL) for the download and git helpers; env: variables the build's
    tools read (proxies, pip's indexes, build.env values) with their real values; apt_auth: an
    apt_auth.conf(5) text for the apt mirror.
    """

    urls: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    apt_auth: str = ""

    def __bool__(self) -> bool:
        return bool(self.urls or self.env or self.apt_auth)

    def values(self) -> set[str]:
        """The secret values in them, for masking."""
        out: set[str] = set()
        for text in (*(real for _, real in self.urls), *(v for _, v in self.env)):
            for url in _URL_IN_TEXT.findall(text):
                out |= url_secrets(url)
        for line in self.apt_auth.splitlines():
            words = line.split()
            out.update(w for k, w in zip(words, words[1:], strict=False) if k in ("login", "password"))
        return {v for v in out if len(v) >= MIN_SECRET_LEN}

    def payload(self) -> str:
        """Shell assignments (inert whatever the values hold) that templates/secrets.sh sources."""
        lines = [f"export {name}={shlex.quote(value)}" for name, value in self.env]
        if self.urls:
            url_map = "\n".join(f"{clean} {real}" for clean, real in self.urls)
            lines.append(f"export BUILDCTL_URL_MAP={shlex.quote(url_map)}")
        if self.apt_auth:
            lines.append(f"buildctl_apt_auth={shlex.quote(self.apt_auth)}")
        return "\n".join(lines) + "\n"


S = TypeVar("S")


def mirror_for(url: str | None, site) -> str | None:
    """The mirror a git URL is fetched from (the longest matching prefix, as git picks), masked; None."""
    pairs = [m.partition("=") for m in (getattr(site, "git_mirrors", None) or ())]
    best = max((p for p in pairs if url and url.startswith(p[0])), key=lambda p: len(p[0]), default=None)
    return mask_url(best[2] + url[len(best[0]):]) if best else None


def split_credentials(spec: S) -> tuple[S, Credentials]:
    """The spec with no credentials in any URL, and the credentials it had (see `Credentials`).

    Every string of the spec is searched, so a new URL field needs nothing here. Site URLs reach
    their tools as environment (proxies, pip) or an apt login; other URLs through the URL map;
    build.env values as themselves.
    """
    real_by_path: dict[tuple[str, ...], str] = {}

    def clean(node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            return {k: clean(v, (*path, str(k))) for k, v in node.items()}
        if isinstance(node, list):
            return [clean(v, (*path, str(i))) for i, v in enumerate(node)]
        if isinstance(node, str) and "://" in node:
            stripped = _URL_IN_TEXT.sub(lambda m: strip_credentials(m.group(0)), node)
            if stripped != node:
                real_by_path[path] = node
                return stripped
        return node

    # Defaults left out: validated again below, a default need not pass its own field's check.
    data = spec.model_dump(mode="json", exclude_defaults=True)  # type: ignore[attr-defined]
    mirrors = data.get("site", {}).pop("git_mirrors", None)  # run time only: never rendered or shown
    cleaned = clean(data, ())
    if mirrors:
        cleaned.setdefault("site", {})["git_mirrors"] = []
    if not real_by_path and not mirrors:
        return spec, Credentials()
    site = data.get("site") or {}
    env: dict[str, str] = {}
    for field, names in PROXY_ENV.items():
        if ("site", field) in real_by_path:
            env.update(dict.fromkeys(names, site[field]))
    if any(p[:2] in (("site", "pip_index_url"), ("site", "pip_extra_index_urls")) for p in real_by_path):
        if site.get("pip_index_url"):
            env["PIP_INDEX_URL"] = site["pip_index_url"]
        if site.get("pip_extra_index_urls"):
            env["PIP_EXTRA_INDEX_URL"] = " ".join(site["pip_extra_index_urls"])
    urls: dict[str, str] = {}
    for path, real in real_by_path.items():
        if path[:2] == ("build", "env") and len(path) == 3:
            env[path[2]] = real
        elif path[0] != "site" and _URL_IN_TEXT.fullmatch(real):
            urls.setdefault(strip_credentials(real), real)
    env.update(git_mirror_env(getattr(spec, "site", None)))
    apt = site.get("apt_mirror")
    creds = Credentials(urls=tuple(sorted(urls.items())), env=tuple(env.items()),
                        apt_auth=_apt_auth(apt) if ("site", "apt_mirror") in real_by_path else "")
    return type(spec).model_validate(cleaned), creds  # type: ignore[attr-defined]


def _apt_auth(mirror: str) -> str:
    """apt_auth.conf(5) for a mirror URL with credentials: protocol given, so plain http matches too."""
    url = urls.split(mirror)
    user, password = url.user, url.password or ""
    if any(c.isspace() for c in user + password):
        raise InputError(f"apt mirror {mask_url(mirror)}: apt cannot take a login with white space; "
                         "fix: use a token without spaces")
    return f"machine {url.scheme}://{url.host}{url.path.rstrip('/')} login {user} password {password}\n"


class SecretServer:
    """Serves one payload, for the duration of a `with` block, to whoever sends its token first.

    Bound to one address (loopback for host networking, the bridge's gateway otherwise), on a
    random port, with a random token; the pair reaches the RUN steps as the host name `host_name`.
    Protocol: connect, send the token and a newline, read the payload until the server closes.
    """

    def __init__(self, payload: bytes, address: str):
        self.payload = payload
        self.token = os.urandom(16).hex()
        self._sock = socket.create_server((address, 0))
        self.address, self.port = address, self._sock.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="buildctl-secrets", daemon=True)

    @property
    def host_name(self) -> str:
        return f"buildctl-secrets-{self.port}-{self.token}"

    def __enter__(self) -> SecretServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(10)
            line = b""
            while b"\n" not in line and len(line) < 128:
                chunk = conn.recv(128)
                if not chunk:
                    return
                line += chunk
            if hmac.compare_digest(line.split(b"\n", 1)[0].strip(), self.token.encode()):
                conn.sendall(self.payload)
