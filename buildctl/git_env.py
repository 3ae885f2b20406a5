"""git's configuration for one fetch, as the environment git reads it from: the site's git mirrors
(url.<MIRROR>.insteadOf) and a URL's login through a credential helper for that URL's host only. Nothing in
a config file, a layer or a command line; the login in two variables of git's environment."""

from __future__ import annotations

from collections.abc import Iterable

from buildctl import urls


def git_config_env(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """git configuration as the environment git reads it from (GIT_CONFIG_COUNT/KEY_n/VALUE_n, git >= 2.31):
    nothing in a config file, a layer or a command line."""
    pairs = list(pairs)
    if not pairs:
        return {}
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def git_mirror_config(site) -> list[tuple[str, str]]:
    """git's url.<MIRROR>.insteadOf PREFIX for each site git mirror: every git of the build, its submodules'
    too, fetches from the mirror."""
    pairs = [m.partition("=") for m in (getattr(site, "git_mirrors", None) or ())]
    return [(f"url.{mirror}.insteadOf", prefix) for prefix, _, mirror in pairs]


def git_mirror_env(site) -> dict[str, str]:
    """The site's git mirrors as git's environment (git_config_env)."""
    return git_config_env(git_mirror_config(site))


# A credential helper of git's configuration: it answers with two variables of its environment, so the login
# stands in no file and no command line (the helper's text names the variables, never their values).
_GIT_HELPER = ("!f() { test \"$1\" = get && printf 'username=%s\\npassword=%s\\n' \"$BUILDCTL_GIT_USERNAME\" "
               "\"$BUILDCTL_GIT_PASSWORD\"; }; f")


def git_login_env(url: str, site) -> dict[str, str]:
    """git's environment for fetching `url` (beside settings.environ()): the site's git mirrors and, when the
    URL has a login, a credential helper for that URL's scheme and host only (a --git-mirror on another host
    is never given the login) with the two variables it answers from. git is given the URL without its login."""
    parsed = urls.split(url) if "://" in url else None
    if parsed is None or not parsed.has_login:
        return git_mirror_env(site)
    helper = (f"credential.{parsed.scheme}://{parsed.host}.helper", _GIT_HELPER)
    return {**git_config_env([*git_mirror_config(site), helper]),
            "BUILDCTL_GIT_USERNAME": parsed.user, "BUILDCTL_GIT_PASSWORD": parsed.password or ""}
