"""buildctl's settings: one object, built once per command from its flags and BUILDCTL_* variables
(a flag wins over its variable), then passed down.

A field is an option: its name is the task parameter (`--ca-cert` is `ca_cert`... see `flag`), its
variable is BUILDCTL_<NAME> unless `env` says otherwise, its description is the --help text, and its
group says which tasks take it (`settings_task` in tasks.py builds their signatures from here).
Fields of the SITE group also go into the recipe's `site:` section (spec.Site adds any it does not
declare itself), so adding a site option is adding a field here.

Nothing here reads the environment: the CLI hands it in as a mapping (`Settings.from_env(os.environ, ...)`),
and the Settings object keeps it, never as a field (an environment holds secrets; settings are serialized
into a child build's job), for what library code needs of it: `environ()` (what a child process starts
from), `docker_host`, `cache_dir`... There is no "current settings" a command sets for code below it to read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model, field_validator
from pydantic.fields import FieldInfo

from buildctl.errors import InputError

SITE, RECIPE, BUILD, CLEAN, ENV_ONLY = "site", "recipe", "build", "clean", "env-only"
REPO_ROOT = Path(__file__).resolve().parent.parent
PullPolicy = Literal["missing", "always", "never"]
DEFAULT_CACHE_DIR = Path(".cache/buildctl")  # the verification cache when BUILDCTL_CACHE is not set
CHECKOUT_FILES = ("templates", "recipes", "tasks.py")  # beside the package in a checkout, not in a wheel


def checkout() -> Path:
    """The checkout buildctl runs from (its templates, recipes and tasks.py). A regular install (`pip
    install .`, not -e) copies only the package: refused in one line rather than half working."""
    missing = [name for name in CHECKOUT_FILES if not (REPO_ROOT / name).exists()]
    if missing:
        raise InputError(f"buildctl is installed without its checkout: {', '.join(missing)} are not beside "
                         f"{REPO_ROOT / 'buildctl'}; fix: install it editable from a checkout "
                         "(pip install -e CHECKOUT) and run invoke there")
    return REPO_ROOT


def option(default: Any, help: str, *, group: str, env: str | None = None, flag: str | None = None,
           site_default: Any = None) -> Any:
    """A field of Settings. `flag`: the task parameter when it is not the field's name; `site_default`:
    the value spec.Site shows when neither a flag, a variable nor the recipe set it."""
    extra = {"group": group, "flag": flag, "site_default": site_default}
    return Field(default, description=help, validation_alias=env, json_schema_extra=extra)


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    # The environment the settings were read from (from_env): what child processes start from. A private
    # attribute, never a field: model_dump() and a child's job never carry it.
    _environ: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **values: Any) -> Settings:
        """The values given over the variables of `environ` (env_name; empty ones unset, names in any case),
        over the defaults; the settings keep `environ` (never as a field). A bad value is one InputError line
        naming its variable."""
        return _validated(cls, environ, values)

    def with_environ(self, environ: Mapping[str, str]) -> Settings:
        """These settings (their values as they are, none read from `environ`) with `environ` as theirs:
        a child build's job settings in the child's own environment."""
        copy = self.model_copy()
        copy._environ = dict(environ)
        return copy

    def __eq__(self, other: object) -> bool:
        """By their values: the environment they carry is what child processes start from, never compared (as
        BuildOptions.environ and VerifyOptions.environ)."""
        if not isinstance(other, Settings):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def environ(self) -> dict[str, str]:
        """A copy of the environment the settings were read from: what a child process (git, docker, pip) starts
        from, the engine's DOCKER_* variables, an index server's credentials. Empty for Settings(...)."""
        return dict(self._environ)

    @property
    def docker_host(self) -> str:
        """DOCKER_HOST as set ("" when unset): the engine a build, a connection or a message means by default."""
        return self._environ.get("DOCKER_HOST", "")

    @property
    def cache_dir(self) -> Path:
        """The verification cache (wheelhouses): BUILDCTL_CACHE, default .cache/buildctl."""
        return Path(self._environ.get("BUILDCTL_CACHE") or DEFAULT_CACHE_DIR)

    @property
    def step_summary(self) -> str | None:
        """$GITHUB_STEP_SUMMARY (GitHub Actions): where a verification appends its report."""
        return self._environ.get("GITHUB_STEP_SUMMARY") or None

    @property
    def user_cache_home(self) -> Path:
        """$XDG_CACHE_HOME, else ~/.cache."""
        return Path(self._environ.get("XDG_CACHE_HOME") or os.path.join(_home(self._environ), ".cache"))

    @property
    def template_cache(self) -> Path:
        """Where rendering keeps its compiled templates between runs: buildctl/templates of user_cache_home."""
        return self.user_cache_home / "buildctl" / "templates"

    @property
    def key_salt_file(self) -> Path:
        """This host's key salt file (key_salt_file_of) as the settings' environment places it."""
        return key_salt_file_of(self._environ)

    # --- site: host and network facts, never part of the artifact key (spec.Site) --------------
    ca_certs: tuple[str, ...] = option(
        (), "Extra CA certificate (PEM) trusted in the image and by pip; repeatable", group=SITE,
        env="BUILDCTL_CA_CERT", flag="ca_cert")
    pip_index_url: str | None = option(None, "pip index URL used in the image", group=SITE)
    apt_mirror: str | None = option(None, "Debian/Ubuntu mirror URL for apt in the image", group=SITE)
    http_proxy: str | None = option(None, "HTTP proxy for the build (never stored in the image)", group=SITE)
    https_proxy: str | None = option(None, "HTTPS proxy for the build (never stored in the image)", group=SITE)
    no_proxy: str | None = option(None, "Hosts that bypass the proxy, as NO_PROXY", group=SITE, flag="proxy_exclude")
    network: str | None = option(None, "Network mode for builds and containers: default|host|bridge|none",
                                 group=SITE)
    download_cache: str | None = option(
        None, "Folder of pre-staged downloads, used when their sha256 matches", group=SITE)
    cache_url: str | None = option(
        None, "Shared compile cache behind the local one: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]; "
              "an unreachable server only warns", group=SITE)
    dist_scheduler: str | None = option(
        None, "Spread the compile over an sccache-dist cluster: its scheduler, http[s]://[:TOKEN@]HOST[:PORT] "
              "(the token is a credential); a scheduler that does not answer only warns", group=SITE)
    git_mirrors: tuple[str, ...] = option(
        (), "Fetch git URLs under PREFIX from MIRROR instead: PREFIX=MIRROR (git's url.<MIRROR>.insteadOf "
            "PREFIX); repeatable; a login in MIRROR is a credential, never stored", group=SITE, flag="git_mirror",
        env="BUILDCTL_GIT_MIRROR")
    registry: str | None = option(
        None, "Registry the engines share builder and runtime images through: HOST[:PORT][/PATH]; "
              "credentials from `docker login`", group=SITE)
    pull: PullPolicy | None = option(
        None, "Base images: missing (pull when absent), always, or never (only local images)", group=SITE,
        site_default="missing")

    # --- the recipe and the build ---------------------------------------------------------------
    base_image: str | None = option(None, "Use this base image instead of the recipe's", group=RECIPE)
    jobs: str = option("auto", "Parallel compile jobs: a number, or auto (from the engine's cores and memory)",
                       group=BUILD)
    memory: str | None = option(None, "Memory limit of the build container, e.g. 8g", group=BUILD)
    cpuset: str | None = option(
        None, "CPUs the build container may use, as docker's --cpuset-cpus (e.g. 0 or 0-3; give --jobs to match)",
        group=BUILD)
    dist_local_jobs: str = option(
        "auto", "With --dist-scheduler: how many compiles run on this machine at once, the rest on the cluster: "
                "a number (0: all on the cluster), or auto (MAX_JOBS' local rule)", group=BUILD)
    engines: tuple[str, ...] = option(
        (), "Docker engine to build on (unix://, tcp://, ssh://); repeatable: the recipes are spread over the "
            "engines by their cores and memory (default: DOCKER_HOST)", group=BUILD, flag="engine")
    no_verify: bool = option(False, "Skip the post-build verification", group=BUILD)
    offline: bool = option(False, "Ask no git server which commit a ref names: build the commit it was resolved to "
                           "last time here (said in one line)", group=BUILD)
    keep_container: bool = option(False, "Keep the build container after the compile, for inspection", group=BUILD)
    namespace: str | None = option(
        None, "Only engine objects of this namespace (default: every buildctl object)", group=CLEAN)

    # --- where things are (variables only) ------------------------------------------------------
    artifacts: Path = option(Path("artifacts"), "The artifacts folder", group=ENV_ONLY)
    recipes_dir: Path = option(REPO_ROOT / "recipes", "Where recipe names are looked up", group=ENV_ONLY)

    @field_validator("engines", mode="before")
    @classmethod
    def _engine_list(cls, v: Any) -> Any:
        """BUILDCTL_ENGINES: several engine URLs separated by commas or spaces (URLs hold colons)."""
        if isinstance(v, str):
            return tuple(p for p in v.replace(",", " ").split() if p)
        return v

    @field_validator("git_mirrors", mode="before")
    @classmethod
    def _mirror_list(cls, v: Any) -> Any:
        """BUILDCTL_GIT_MIRROR: several PREFIX=MIRROR pairs separated by commas or spaces."""
        if isinstance(v, str):
            return tuple(p for p in v.replace(",", " ").split() if p)
        return v

    @field_validator("registry")
    @classmethod
    def _registry_address(cls, v: str | None) -> str | None:
        from buildctl.urls import check_registry_address

        return check_registry_address(v) if v else v

    @field_validator("ca_certs", mode="before")
    @classmethod
    def _path_list(cls, v: Any) -> Any:
        """BUILDCTL_CA_CERT: several files separated by os.pathsep or commas."""
        if isinstance(v, str):
            return tuple(p for p in v.replace(os.pathsep, ",").split(",") if p)
        return v

    def __repr_args__(self):
        from buildctl.secrets import mask

        # A proxy or an index URL may carry a password: settings are shown masked, like the spec.
        for name, value in super().__repr_args__():
            yield name, mask(value) if isinstance(value, str) else value

    def site(self) -> dict[str, Any]:
        """The site options that were set, as the recipe's `site:` section names them."""
        values = {name: getattr(self, name) for name in fields(SITE)}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items() if v not in (None, "", ())}

    @classmethod
    def from_cli(cls, task: str = "TASK", *, environ: Mapping[str, str], **given: Any) -> Settings:
        """Settings from the task's parameters (by flag name) over `environ` (the process's, which only the
        CLI reads). A parameter not given (None, "", [], False: tasks.py gives every option such a default)
        leaves the variable, then the default, in force; a value given wins, even one equal to the default
        (`--jobs auto`)."""
        by_flag = {flag_name(name): name for name in cls.model_fields}
        values = {}
        for key, value in given.items():
            if value in (None, "", [], (), False):
                continue
            values[by_flag.get(key, key)] = tuple(value) if isinstance(value, list) else value
        return _validated(cls, environ, values, task, flags=set(given))


def _validated(model: type[Settings], environ: Mapping[str, str], values: dict[str, Any], task: str | None = None,
               flags: set[str] = frozenset()) -> Settings:
    """`values` over the variables of `environ` over the defaults (a variable's value is its text: a list field
    splits it in its validator; read here, not through pydantic-settings: that import alone cost every
    command ~0.1 s, issue 23). A bad value is one InputError line, in every command: it names the flag and
    its variable when the task (`task`) takes that flag (`flags`), else the variable alone."""
    upper = {key.upper(): value for key, value in environ.items() if value}
    variables = {name: upper[env_name(name, model)] for name in model.model_fields if env_name(name, model) in upper}
    try:
        return model(**{**variables, **values}).with_environ(environ)
    except ValidationError as e:
        first = e.errors()[0]
        name = _field_of(str(first["loc"][0]) if first["loc"] else "")
        # The value is not quoted: it may hold a password.
        if task is None or flag_name(name) not in flags:
            raise InputError(f"{env_name(name)}: {first['msg']}; fix: correct or unset {env_name(name)}") from None
        raise InputError(f"--{flag_name(name).replace('_', '-')} [{env_name(name)}]: {first['msg']}; "
                         f"fix: see `invoke {task} --help`") from None


def key_salt_file_of(environ: Mapping[str, str]) -> Path:
    """This host's salt for the keyed digests of credential values (store.key.host_salt): $XDG_CONFIG_HOME
    (else ~/.config)/buildctl/key-salt of `environ`, outside any artifacts root."""
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(_home(environ), ".config")
    return Path(config) / "buildctl" / "key-salt"


def _home(environ: Mapping[str, str]) -> str:
    """$HOME of `environ`, else the user's home as the system has it (os.path.expanduser's fallback)."""
    return environ.get("HOME") or os.path.expanduser("~")


def _field_of(key: str) -> str:
    """The field a validation error names, by field name, flag or variable."""
    for name in Settings.model_fields:
        if key.lower() in (name, flag_name(name), env_name(name).lower()):
            return name
    return key


def flag_name(name: str) -> str:
    extra = Settings.model_fields[name].json_schema_extra or {}
    return extra.get("flag") or name


def env_name(name: str, model: type[BaseModel] | None = None) -> str:
    alias = (model or Settings).model_fields[name].validation_alias
    return alias if isinstance(alias, str) else f"BUILDCTL_{name.upper()}"


def fields(*groups_or_names: str) -> dict[str, FieldInfo]:
    """The fields of these groups (SITE, BUILD, ...) or with these names, in declaration order."""
    return {name: f for name, f in Settings.model_fields.items()
            if name in groups_or_names or (f.json_schema_extra or {}).get("group") in groups_or_names}


def help_text(name: str) -> str:
    return f"{Settings.model_fields[name].description} [{env_name(name)}]"


def extend_site(declared: type[BaseModel]) -> type[BaseModel]:
    """spec.Site plus the site options it does not declare (with its own stricter types), as typed here."""
    more = {name: (f.annotation, (f.json_schema_extra or {}).get("site_default") or f.default)
            for name, f in fields(SITE).items() if name not in declared.model_fields}
    return create_model(declared.__name__, __base__=declared, __module__=declared.__module__,
                        __doc__=declared.__doc__, **more)

