"""URLs with credentials, read once the way the tools that use them read them.

pip, requests, curl, apt and git split a URL as `urllib.parse.urlsplit` does: the host part ends at
the first `/`, `?` or `#`. ccache's Redis storage agrees on that but takes the login up to the FIRST
`@` (Python's `.password` up to the last), and every one of them percent-decodes the login. So a
password that holds `/ ? # @` unencoded is read differently by different tools, or as a host name:
`https://ci:tok#en@pypi.corp/simple` is the host `ci` to pip. `problem` refuses such URLs (the fix is
percent-encoding); on every URL it accepts, all those readers agree with `split`.

That one parse feeds validation (`problem`), stripping (`stripped`), masking (`masked`) and the
secret values to mask (`secrets`). What fails it (text in a log, an environment variable) is masked
by shape instead (`mask_text`), generously: a secret shown is worse than a URL shown as `***@`.
No message here ever quotes the URL: it may hold a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

from buildctl.errors import InputError

MASK = "***"
# Shorter literals would mask common words and numbers everywhere; such "secrets" are not secret anyway.
MIN_SECRET_LEN = 4
# ssh-like schemes keep a bare user name (git@…): it names an account, not a token.
SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git", "sftp")
# RFC 3986 userinfo: unreserved, sub-delims, ":" and %XX escapes.
_USERINFO_CHARS = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:%]*")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODE = "percent-encode them in the login: / as %2F, ? as %3F, # as %23, @ as %40, % as %25"

# Query parameters whose values are credentials (case-insensitive).
TOKEN_PARAMS = (
    "token", "access_token", "id_token", "refresh_token", "private_token", "auth", "auth_token",
    "password", "passwd", "pwd", "secret", "client_secret", "api_key", "apikey", "key", "sig", "signature",
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential",
    "jwt", "session_token",
)
_TOKEN_QUERY = re.compile(
    r"(?P<lead>[?&;](?:" + "|".join(re.escape(p) for p in TOKEN_PARAMS) + r")=)(?P<value>[^&#\s'\"`<>]+)",
    re.IGNORECASE,
)

_SCHEME = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
_END = r"\s'\"`<>"
# Shapes of a login in free text, masked in this order:
_TEXT_LOGINS = (
    # as urlsplit reads it: everything before the last "@" of the host part (so `:pa@ss@host` whole)
    re.compile(_SCHEME + rf"(?P<userinfo>[^{_END}/?#]+)@"),
    # a login holding an unencoded "/", "?" or "#" after a colon that starts no port number
    re.compile(_SCHEME + rf"(?P<userinfo>[^{_END}/?#@:]*:(?![0-9]*(?:[/?#{_END}]|$))[^{_END}]*)@"),
    # a token holding an unencoded "?" or "#" (no "/" before it: a host has none)
    re.compile(_SCHEME + rf"(?P<userinfo>[^{_END}/?#@:]*[?#][^{_END}]*)@"),
)


class UrlError(ValueError):
    """Why a URL is not one the tools agree on; the message never quotes the URL."""


@dataclass(frozen=True)
class Url:
    """One URL as the tools read it (see the module docstring). `userinfo` is raw, as written."""

    scheme: str
    userinfo: str | None
    host: str  # host[:port] as written, without the login
    path: str
    query: str
    fragment: str

    @property
    def user(self) -> str:
        return unquote((self.userinfo or "").partition(":")[0])

    @property
    def password(self) -> str | None:
        user, colon, password = (self.userinfo or "").partition(":")
        return unquote(password) if colon else None

    @property
    def has_login(self) -> bool:
        """Whether the login is a credential (a bare user name on ssh names an account)."""
        if self.userinfo is None:
            return False
        return self.password is not None or self.scheme.lower() not in SSH_SCHEMES

    def _join(self, userinfo: str | None, query: str) -> str:
        login = f"{userinfo}@" if userinfo is not None else ""
        return (f"{self.scheme}://{login}{self.host}{self.path}" + (f"?{query}" if query else "")
                + (f"#{self.fragment}" if self.fragment else ""))

    def stripped(self) -> str:
        """Without the login and the credential query parameters (what apt, pip, git and rendered
        files get); everything else as written."""
        kept = [p for p in re.split(r"[&;]", self.query) if p and not _is_token_param(p)]
        return self._join(None if self.has_login else self.userinfo, "&".join(kept))

    def masked(self) -> str:
        """With `***` for the login and the credential parameters' values (to show it)."""
        query = _TOKEN_QUERY.sub(lambda m: m.group("lead") + MASK, "?" + self.query)[1:] if self.query else ""
        return self._join(MASK if self.has_login else self.userinfo, query)

    def secrets(self) -> set[str]:
        """The secret parts: password, user name (a bare one on http(s) is usually a token), the whole
        login, token parameter values; raw and percent-decoded."""
        out: set[str] = set()
        if self.has_login:
            raw_user, colon, raw_password = (self.userinfo or "").partition(":")
            if colon and raw_password:
                out.update({raw_password, self.password or "", self.userinfo or ""})
            else:
                out.update({raw_user, self.user})
        for m in _TOKEN_QUERY.finditer("?" + self.query if self.query else ""):
            out.update({m.group("value"), unquote(m.group("value"))})
        return {s for s in out if len(s) >= MIN_SECRET_LEN}


def _is_token_param(param: str) -> bool:
    return param.split("=", 1)[0].lower() in TOKEN_PARAMS


def split(text: str) -> Url:
    """`text` read as urlsplit reads it (UrlError where that fails: no scheme, a bad port or IPv6 host)."""
    if "://" not in text:
        raise UrlError("no scheme:// in front; fix: write it as scheme://HOST/...")
    try:
        parts: SplitResult = urlsplit(text)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as e:
        if "out of range" in str(e):
            raise UrlError("its port is not a number from 1 to 65535; fix: give a port from 1 to 65535") from None
        why = "its port is not a number" if "port" in str(e).lower() else "its host is not a valid IPv6 address"
        raise UrlError(f"{why}, or a '/', '?' or '#' in the login ends the host part early; fix: {_ENCODE}") from None
    userinfo, at, host = parts.netloc.rpartition("@")
    return Url(parts.scheme, userinfo if at else None, host, parts.path, parts.query, parts.fragment)


def problem(text: str) -> str | None:
    """Why `text` is not a URL every tool reads the same way, or None."""
    try:
        url = split(text)
    except UrlError as e:
        return str(e)
    if "@" in url.path + url.query + url.fragment:
        return (f"an '@' after the host part, or a '/', '?' or '#' in the login ends the host part early; fix: "
                f"{_ENCODE}; an '@' in a path as %40")
    userinfo = url.userinfo or ""
    if "@" in userinfo:
        return "two '@' before the host (tools disagree on which one ends the login); fix: write '@' as %40"
    if not _USERINFO_CHARS.fullmatch(userinfo):
        return f"the login holds characters a URL cannot carry unencoded; fix: {_ENCODE}"
    if _BAD_ESCAPE.search(userinfo):
        return "a '%' in the login is not followed by two hex digits; fix: write '%' as %25"
    if url.scheme.lower() in ("http", "https") and not urlsplit(text).hostname:
        return "no host name; fix: scheme://HOST/..."
    return None


def check(text: str, what: str) -> str:
    """`text` when `problem` finds nothing, else UrlError("<what>: <problem>") (the URL not quoted)."""
    why = problem(text)
    if why:
        raise UrlError(f"{what}: {why}")
    return text


def _read(text: str) -> tuple[Url | None, str | None]:
    """The one parse of `text`, and the login it hides from that parse (a misread URL), if any."""
    try:
        url = split(text)
    except UrlError:
        url = None
    if url is not None and url.userinfo is not None:
        return url, None
    for pattern in _TEXT_LOGINS[1:]:
        m = pattern.match(text)
        if m:
            return url, m.group("userinfo")
    return url, None


def login(text: str) -> str | None:
    """The login of one URL as a tool may read it (by the one parse, or by shape where the parse misreads
    it), raw; None without one. Never shown: it may be a password."""
    url, hidden = _read(text)
    return hidden if hidden is not None else (url.userinfo if url is not None else None)


def strip(text: str) -> str:
    """`text` without credentials: by the one parse, and by shape where the parse misreads it."""
    url, hidden = _read(text)
    if hidden is not None:  # drop the login the parse took for a host or a path
        scheme, _, rest = text.partition("://")
        return strip(f"{scheme}://{rest[len(hidden) + 1:]}")
    return url.stripped() if url else text


def secrets(text: str) -> set[str]:
    """The secret values of one URL (for masking): by the one parse, and by shape where it misreads."""
    url, hidden = _read(text.strip())
    out = url.secrets() if url else set()
    if hidden:
        user, colon, password = hidden.partition(":")
        out |= {hidden, password, unquote(password)} if colon else {user, unquote(user)}
    return {s for s in out if len(s) >= MIN_SECRET_LEN}


def mask(text: str) -> str:
    """One URL to show: its login and credential parameters as `***`."""
    url, hidden = _read(text)
    return url.masked() if url and hidden is None else mask_text(text)


def _login_repl(m: re.Match[str]) -> str:
    scheme, userinfo = m.group("scheme"), m.group("userinfo")
    if userinfo == MASK or (scheme[:-3].lower() in SSH_SCHEMES and ":" not in userinfo):
        return m.group(0)
    return f"{scheme}{MASK}@"


def mask_text(text: str) -> str:
    """Free text with every URL login and credential query parameter replaced by `***`."""
    if "://" in text:
        for pattern in _TEXT_LOGINS:
            text = pattern.sub(_login_repl, text)
    if "=" in text:
        text = _TOKEN_QUERY.sub(lambda m: m.group("lead") + MASK, text)
    return text


# ---------------------------------------------------------------------------------------------- Redis
# The shared compile cache's URL (site cache_url): a credential handed to ccache's Redis storage.

_FORM = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")
_IPV6 = re.compile(r"(?=.*:)[0-9a-f:.]+")


def redis_problem(url: str) -> str | None:
    """Why `url` is not a Redis URL ccache can use, or None. Never quotes the URL (it holds a password)."""
    if "://" not in url:
        return "no redis:// in front"
    if any(c.isspace() or c in "'\"`$;|&<>\\" for c in url):
        return "white space or shell characters in it"
    why = problem(url)
    if why:  # "<problem>; fix: <fix>": a fix of its own
        return why
    user, colon, _ = (split(url).userinfo or "").partition(":")
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


def check_redis_url(url: str, option: str = "--cache-url") -> str:
    """`url` when it is a usable Redis URL; else a one-line InputError, with the password masked."""
    why = redis_problem(url)
    if why:  # the URL is never shown: a misread one masks badly, and it holds a password
        raise InputError(f"{option} (value not shown): {redis_refusal(why)}")
    return url


def redis_refusal(why: str) -> str:
    """`redis_problem`'s answer as "<problem>; fix: <fix>"."""
    if "; fix: " in why:
        return why
    return f"not a Redis URL ({why}); fix: {_FORM}, e.g. redis://:PASSWORD@cache.example:6379/0"


def ccache_form(url: str) -> str:
    """`url` in ccache's form. ccache percent-decodes the login, then splits it at its first ':'
    (USER:PASSWORD, else PASSWORD alone; an empty USER sends no AUTH at all). So a password without a
    user is `redis://PASSWORD@host` there, and one holding ':' (raw or %3A) needs a user: Redis 6's
    `default` user is what a bare password authenticates as (`AUTH default PASSWORD`)."""
    login = split(url).userinfo
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


# ---------------------------------------------------------------------------------------------- registries
# The registry engines share images through (site registry): Docker's HOST[:PORT][/PATH], no scheme and no
# login (those belong to `docker login`).

_REGISTRY = re.compile(r"(?P<host>[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\])(:(?P<port>\d{1,5}))?"
                       r"(?P<path>(/[a-z0-9]+([._-][a-z0-9]+)*)*)")
_REGISTRY_FORM = "HOST[:PORT][/PATH], e.g. registry.example:5000/ml-infra"


def check_registry_address(registry: str, option: str = "--registry") -> str:
    """`registry` without a trailing slash when it is a registry address Docker can push to; else a
    one-line InputError. Credentials in it are refused: they belong to `docker login`."""
    value = registry.strip().rstrip("/")
    if "://" in value:
        raise InputError(f"{option}: give the registry as Docker names it, without a scheme; fix: {_REGISTRY_FORM}")
    if "@" in value:
        raise InputError(f"{option}: credentials do not go in the address (it is printed and recorded); "
                         f"fix: `docker login {value.rpartition('@')[2].split('/')[0]}`, then {option} "
                         f"{value.rpartition('@')[2]}")
    m = _REGISTRY.fullmatch(value)
    if not m or (m.group("port") and not 0 < int(m.group("port")) < 65536):
        raise InputError(f"{option} {value!r}: not a registry address; fix: {_REGISTRY_FORM}")
    return value


# ---------------------------------------------------------------------------------------------- sccache-dist
# The build cluster's scheduler (site dist_scheduler): http(s)://[:TOKEN@]HOST[:PORT], the client token a
# credential like the Redis password (sccache's `[dist.auth] type = "token"`).

_DIST_FORM = "http[s]://[:TOKEN@]HOST[:PORT], e.g. http://:TOKEN@scheduler.example:10600"


def dist_problem(url: str) -> str | None:
    """Why `url` is not a scheduler URL sccache's client can use, or None. Never quotes the URL."""
    why = problem(url)
    if why:
        return why
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"scheme {parts.scheme or '(none)'}: sccache's scheduler speaks http:// or https://"
    host = parts.hostname or ""
    if not _HOST.fullmatch(host) and not _IPV6.fullmatch(host):
        return "no host name"
    if parts.port == 0:
        return "its port is not a number from 1 to 65535"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "a path, query or fragment (the scheduler's API lives at the root)"
    token = dist_token(url)
    if token is not None and (not token or any(not " " <= c <= "~" for c in token)):
        return "a token that is empty or not printable ASCII (it travels as an HTTP header)"
    return None


def check_dist_url(url: str, option: str = "--dist-scheduler") -> str:
    """`url` when it is a usable scheduler URL; else a one-line InputError (the URL not shown)."""
    why = dist_problem(url)
    if why:
        raise InputError(f"{option} (value not shown): {dist_refusal(why)}")
    return url


def dist_refusal(why: str) -> str:
    if "; fix: " in why:
        return why
    return f"not a scheduler URL ({why}); fix: {_DIST_FORM}"


def dist_token(url: str) -> str | None:
    """The client token: the login's password (`:TOKEN@`), or a bare login (`TOKEN@`); None without one."""
    parsed = split(url)
    if parsed.userinfo is None:
        return None
    return parsed.password if parsed.password is not None else parsed.user


def dist_address(url: str) -> tuple[str, int, str]:
    """(host, port, URL without the token) of a checked scheduler URL; the port defaults as sccache's does
    (the scheme's)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    shown = f"[{host}]" if ":" in host else host
    return host, port, f"{parts.scheme}://{shown}:{port}"
