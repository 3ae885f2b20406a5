"""Render a Spec into the files of a self-contained build folder. Pure: no Docker, no network.

`render(spec)` returns {relative path: content}; `write(rendered, out_dir)` puts them on disk
atomically (a temporary sibling folder renamed into place), so a failed render leaves nothing.
Credentials in the spec's URLs are never rendered: the files carry the URLs without them
(secrets.split_credentials), and the build gets the real ones at run time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from buildctl import settings
from buildctl.errors import InputError
from buildctl.in_container import EXTENSION_BUILD_FILES, FRONTEND, PROBE_FILES, WHEELNORM, WHEELREPAIR
from buildctl.recipe import parallel_jobs, preflight
from buildctl.recipe.fields import DEFAULT_SOURCE_DATE_EPOCH
from buildctl.recipe.loader import resolved_yaml
from buildctl.recipe.schema import PrebuiltIndex, Spec
from buildctl.render import pip_lock, portable, providers
from buildctl.render.patches import patch_files, patch_lines, patch_lines_for
from buildctl.secrets import filtered, split_credentials
from buildctl.settings import REPO_ROOT

TEMPLATES = REPO_ROOT / "templates"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A Debug or RelWithDebInfo build is for chasing a crash: its runtime image can resolve symbols
# (binutils; verification checks a symbol resolves to a source line) and debug (gdb).
DEBUG_RUNTIME_PACKAGES = ("binutils", "gdb")
# The ABI check of an extension set reads its symbols (nm, readelf, c++filt) where it is installed.
EXTENSION_RUNTIME_PACKAGES = ("binutils",)
# The build script's path in the builder image: the Dockerfile installs it there, the compile runs it.
BUILD_COMMAND = ("/usr/local/bin/buildctl-build",)
# Python build requirements every framework build gets in its venv (PyTorch's minimal set).
BASE_BUILD_REQUIREMENTS = ("setuptools", "wheel")


class _CompiledTemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's compiled templates kept between runs in `folder` (the caller's: the CLI gives the user's cache
    folder): compiling them was most of a no-op `invoke build`'s own work. The folder is made on the first
    write, private; a cache that cannot be written is only slower, never an error."""

    def __init__(self, folder: Path) -> None:
        super().__init__(str(folder))

    def dump_bytecode(self, bucket) -> None:
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


@functools.lru_cache(maxsize=4)
def _templates(template_cache: Path | None) -> jinja2.Environment:
    """The templates, made once per cache folder (None: compiled in this process only)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        bytecode_cache=_CompiledTemplateCache(template_cache) if template_cache is not None else None,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=False,
    )
    env.filters["q"] = lambda v: shlex.quote(str(v))
    return env


@dataclass(frozen=True)
class Requested:
    """A variable the build script exports, and the recipe field that asks for it."""

    value: str
    by: str  # e.g. toolchain.cuda, build.features.USE_GLOO, build.env.BLAS, build.type


@dataclass(frozen=True)
class Rendered:
    spec: Spec  # the spec the files were rendered from: no credentials in its URLs
    files: dict[str, str]  # relative path -> text
    fragments: tuple[providers.Fragment, ...]
    # The files beside the recipe the render read (its patches): (path as opened, sha256 of what it held then)
    reads: tuple[tuple[str, str], ...] = ()
    # What the build script exports to the framework's build (build.env last: it wins), for the configure
    # gate to compare with what CMake decided
    build_env: dict[str, Requested] = field(default_factory=dict)

    @property
    def downloads(self):
        return [(f.stage_name or f.provider, d) for f in self.fragments for d in f.downloads]


def _stage_renderer(env: jinja2.Environment):
    """How a provider's stage template is rendered (providers.fragments), with `env`'s templates."""
    return lambda template, **ctx: env.get_template(f"providers/{template}").render(**ctx).rstrip() + "\n"


def _ca_files(spec: Spec) -> dict[str, str]:
    """The site's CA certificates (the recipe's `site.ca_certs`, then --ca-cert's: recipe.load merges them), each
    read once, as certs/ files: the Dockerfile adds them to the image's trust store. Not keyed (store/key.py)."""
    files = {}
    for i, p in enumerate(spec.site.ca_certs):
        path = Path(p).expanduser()
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            raise InputError(f"CA certificate {p} (--ca-cert or site.ca_certs): file not found or unreadable; "
                             "fix: give a PEM file (e.g. /etc/ssl/certs/ca-certificates.crt)") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise InputError(f"CA certificate {p} (--ca-cert or site.ca_certs): no PEM certificate in it; "
                             "fix: give a PEM file")
        files[f"certs/{i:02d}-{path.stem}.crt"] = text
    return files


def _site_files(spec: Spec) -> dict[str, str]:
    files = {"certs/.keep": "", "apt/.keep": "", **_ca_files(spec)}
    site = spec.site
    if site.apt_mirror:
        suite = spec.base.distro
        comps = "main contrib non-free non-free-firmware" if suite in ("bookworm", "trixie") else "main universe"
        files["apt/sources.list"] = f"deb {site.apt_mirror} {suite} {comps}\n"
    pip = ["[global]", "cert = /etc/ssl/certs/ca-certificates.crt"]
    if site.pip_index_url:
        pip.append(f"index-url = {site.pip_index_url}")
    if site.pip_extra_index_urls:
        pip.append("extra-index-url = " + " ".join(site.pip_extra_index_urls))
    files["pip.conf"] = "\n".join(pip) + "\n"
    return files


def builder_requirements(spec: Spec, frags=None) -> tuple[list[str], list[str]]:
    """What pip installs into the builder venv, as the Dockerfile names it: (requirements, constraints); what
    `invoke lock` resolves (pip_lock)."""
    if frags is None:
        frags = providers.fragments(split_credentials(spec)[0], _stage_renderer(_templates(None)))
    constraints = sorted({*spec.python.constraints, *(c for f in frags for c in f.pip_constraints)})
    requirements = [*BASE_BUILD_REQUIREMENTS, *spec.python.packages, *(p for f in frags for p in f.pip_build),
                    *(portable.REPAIR_REQUIREMENTS if portable.repairs(spec) else ())]
    # a prebuilt torch as the venv's pip line names it: from an index, in the lock with its dependencies; a
    # wheel's file, which no lock covers (pip resolves its dependencies)
    prebuilt = _framework_install(spec)
    requirements.extend(prebuilt["framework_install"][len(prebuilt["framework_index"]):])
    return requirements, constraints


def render(spec: Spec, *, template_cache: Path | None = None) -> Rendered:
    """Render the Dockerfile, the build script, the verify probe and the resolved recipe. `template_cache`: a
    folder the compiled templates are kept in between runs (the CLI gives the user's cache folder); None:
    none kept. The files are the same either way."""
    settings.checkout()  # the templates are the checkout's
    shown = resolved_yaml(spec)  # credentials masked as ***, so a reader sees where they were
    spec, _ = split_credentials(spec)
    env = _templates(template_cache)
    frags = providers.fragments(spec, _stage_renderer(env))
    build_env, requested = _build_env(spec, frags)
    build_requirements, constraints = builder_requirements(spec, frags)
    lock = pip_lock.read(spec, build_requirements, constraints)
    ctx = _template_context(spec, frags, build_env, build_requirements, constraints, lock)
    files = _folder_files(spec, env, ctx, shown, constraints)
    patches = patch_files(spec)
    files.update({name: text for name, (_, text) in patches.items()})
    for f in frags:
        if f.stage_name:
            files[f"downloads/{f.stage_name}/.keep"] = ""
    reads = tuple((source, hashlib.sha256(text.encode()).hexdigest()) for source, text in patches.values())
    if lock:
        files[pip_lock.FILE], reads = lock[0], (*reads, lock[1])
    return Rendered(spec, files, tuple(frags), reads, requested)


def _build_env(spec: Spec, frags) -> tuple[dict[str, str], dict[str, Requested]]:
    """What the build script exports to the framework's build: the toolchains', the build-env contract's,
    build.features' (1 or 0); and, with build.env over them, each value with the recipe field that asks it."""
    build_env: dict[str, str] = {}
    asked_by: dict[str, str] = {}
    for f in frags:
        build_env.update(f.build_env)
        asked_by.update(dict.fromkeys(f.build_env, f"toolchain.{f.provider.split('-')[0]}"))
    for key, (value, by) in _contract_env(spec).items():
        build_env[key], asked_by[key] = value, by
    for key, on in sorted(spec.build.features.items()):  # a canonical order: the order written cannot matter
        build_env[key], asked_by[key] = "1" if on else "0", f"build.features.{key}"
    requested = {key: Requested(value, asked_by[key]) for key, value in build_env.items()}
    requested.update({key: Requested(value, f"build.env.{key}") for key, value in spec.build.env.items()})
    return build_env, requested


def _template_context(spec: Spec, frags, build_env: dict[str, str], build_requirements: list[str],
                      constraints: list[str], lock) -> dict:
    """What the Dockerfile and build script templates are rendered with."""
    python = f"python{spec.python.version}"
    per_job, reserve = _jobs_rule(spec.accelerator, spec.build.type)
    return dict(
        build_command=BUILD_COMMAND[0],
        frontend=spec.framework.frontend,
        probe_files=[p.name for p in PROBE_FILES],
        spec=spec,
        python=python,
        python_pkgs=[python, f"{python}-venv", f"{python}-dev"],
        stages=[f for f in frags if f.stage],
        build_requirements=build_requirements,
        pip_lock=pip_lock.FILE if lock else None,
        repair_args=portable.repair_args(spec) if portable.repairs(spec) else None,
        runtime_requirements=[p for f in frags for p in f.pip_runtime],
        apt_packages=sorted({p for f in frags for p in f.apt_packages}),
        cache_pkg={"ccache": "ccache", "sccache": "sccache", "none": ""}[spec.build.cache],
        links_run=_join_run(
            f"mkdir -p {shlex.quote(str(Path(link).parent))} && ln -sfn {shlex.quote(target)} {shlex.quote(link)}"
            for f in frags for link, target in f.links),
        path=":".join([f"{spec.python.venv}/bin", *(p for f in frags for p in f.path), DEFAULT_PATH]),
        ld_library_path=":".join(p for f in frags for p in f.ld_library_path),
        image_env={key: value for f in frags for key, value in f.image_env.items()},  # a later one wins
        checks_run=_join_run(c for f in frags for c in f.image_checks),
        build_env=build_env,
        user_env=dict(sorted(spec.build.env.items())),  # values quoted: the order written cannot matter
        version_probes={name: probe for f in frags for name, probe in f.version_probes.items()},
        patch_lines=patch_lines(spec),
        build_packages=sorted({*spec.packages.build, *spec.packages.runtime}),
        runtime_packages=sorted({*spec.packages.runtime, *(p for f in frags for p in f.apt_runtime),
                                 *(DEBUG_RUNTIME_PACKAGES if spec.build.type != "Release" else ()),
                                 *(EXTENSION_RUNTIME_PACKAGES if spec.extensions else ())}),
        apt_components=sorted({*spec.packages.components, *(c for f in frags for c in f.apt_components)}),
        constraints=bool(constraints),
        pre_build=[line for f in frags for line in f.pre_build],
        post_build=[line for f in frags for line in f.post_build],
        cache=spec.build.cache,
        placeholders=preflight.placeholders(spec),
        per_job_mib=per_job,
        reserve_mib=reserve,
        default_source_date_epoch=DEFAULT_SOURCE_DATE_EPOCH,
        # nvcc's --objdir-as-tempdir, documented from the CUDA 12.4 manual on (docs/reproducible.md)
        nvcc_objtemp=bool(spec.toolchain.cuda) and _version(spec.toolchain.cuda.version) >= (12, 4),
        dist=spec.framework.dist,
        prebuilt=_prebuilt(spec),
        **_framework_install(spec),
        extensions=[_extension(e, spec) for e in spec.extensions],
        extension_files=[p.name for p in EXTENSION_BUILD_FILES] if spec.extensions else [],
        # a framework the base image has installed: the venvs see the system site-packages
        system_site_packages=spec.framework.source.prebuilt == "base-image",
    )


def _folder_files(spec: Spec, env: jinja2.Environment, ctx: dict, shown: str, constraints: list[str]) -> dict[str, str]:
    """The build folder's files, less the recipe's patches and pip lock: the templates rendered, the scripts
    and helpers the build runs, the resolved recipe as shown, the site's files."""
    files = {
        "Dockerfile": env.get_template("Dockerfile.j2").render(**ctx),
        "build.sh": env.get_template("build.sh.j2").render(**ctx),
        "fetch.sh": (TEMPLATES / "fetch.sh").read_text(),
        "git-fetch.sh": (TEMPLATES / "git-fetch.sh").read_text(),
        "patch.sh": (TEMPLATES / "patch.sh").read_text(),
        "secrets.sh": (TEMPLATES / "secrets.sh").read_text(),
        "patches/.keep": "",
        "constraints.txt": "".join(f"{c}\n" for c in constraints),
        **{p.name: p.read_text() for p in PROBE_FILES},
        "wheelnorm.py": WHEELNORM.read_text(),
        "frontend.py": FRONTEND.read_text(),
        **({"wheelrepair.py": WHEELREPAIR.read_text()} if portable.repairs(spec) else {}),
        **({p.name: p.read_text() for p in EXTENSION_BUILD_FILES} if spec.extensions else {}),
        "recipe.resolved.yaml": shown,
        ".dockerignore": "downloads/**/.keep\n",
    }
    files.update(_site_files(spec))
    return files


def _prebuilt(spec: Spec) -> str | None:
    """None (the framework is built), 'base-image', 'wheel' or 'index'."""
    prebuilt = spec.framework.source.prebuilt
    if prebuilt is None or isinstance(prebuilt, str):
        return prebuilt
    return "index" if isinstance(prebuilt, PrebuiltIndex) else "wheel"


def _framework_install(spec: Spec) -> dict:
    """A prebuilt framework that is a download, for both venv stages: the shell line fetching a wheel
    (sha256 checked), and the pip arguments installing it with its dependencies, in the same resolve as the
    build's requirements (a CUDA torch needs its nvidia-* wheels: --no-deps left it unimportable)."""
    prebuilt = spec.framework.source.prebuilt
    if isinstance(prebuilt, PrebuiltIndex):
        index = ["--extra-index-url", prebuilt.index_url] if prebuilt.index_url else []
        # the locked install looks there too: the lock names torch's files, that index serves them
        return {"framework_fetch": "", "framework_install": [*index, prebuilt.pypi], "framework_index": index}
    if prebuilt is None or isinstance(prebuilt, str):
        return {"framework_fetch": "", "framework_install": [], "framework_index": []}
    tmp = f"/tmp/{prebuilt.name}"
    return {"framework_fetch": f"buildctl-fetch {shlex.quote(prebuilt.url)} {prebuilt.sha256} {shlex.quote(tmp)}",
            "framework_install": [tmp], "framework_index": []}


@dataclass(frozen=True)
class _RenderedExtension:
    name: str
    label: str
    source: object
    env: dict[str, str]
    requires: tuple[str, ...]  # the names of the extensions above it it imports, as the recipe lists them
    patch_lines: tuple[str, ...] = ()  # its recipe patches, applied to "$dir" after unpacking


def _extension(ext, spec: Spec) -> _RenderedExtension:
    """One extension as the build script builds it: its env over the defaults a GPU-less builder needs
    (PyG and most setup.py files build CUDA ops only when torch sees a GPU, unless FORCE_CUDA=1)."""
    env = {"FORCE_CUDA": "1"} if spec.toolchain.cuda else {}

    def listed(name: str) -> str:
        return next(e.name for e in spec.extensions if _same(e.name, name))

    return _RenderedExtension(ext.name, ext.source_label, ext.source, {**env, **ext.env},
                              tuple(listed(n) for n in ext.requires),
                              tuple(patch_lines_for(ext.patches, '"$dir"', f"ext-{ext.name}-")))


def _same(a: str, b: str) -> bool:
    return a.lower().replace("_", "-") == b.lower().replace("_", "-")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def _join_run(commands) -> str:
    """Shell commands as the body of one RUN instruction, one per line."""
    return " \\\n && ".join(commands)


def _jobs_rule(accelerator: str, build_type: str) -> tuple[int, int]:
    """(MiB per compile job, MiB reserved) from parallel_jobs.py, for the script's stand-alone fallback."""
    return parallel_jobs.per_job_bytes(accelerator, build_type) >> 20, parallel_jobs.RESERVE_BYTES >> 20


def _contract_env(spec: Spec) -> dict[str, tuple[str, str]]:
    """PyTorch's build-env contract beyond what the toolchain providers declare: {name: (value, the
    recipe field that asks it)}."""
    env: dict[str, tuple[str, str]] = {}
    if spec.accelerator == "cpu" or spec.accelerator == "ascend":
        by = f"a {spec.accelerator} recipe (no toolchain.cuda or rocm)"
        env["USE_CUDA"] = ("0", by)
        env["USE_ROCM"] = ("0", by)
    if spec.build.type == "Debug":
        env["DEBUG"] = ("1", "build.type")
    elif spec.build.type == "RelWithDebInfo":
        env["REL_WITH_DEB_INFO"] = ("1", "build.type")
    fw = spec.framework
    if fw.version:
        env["PYTORCH_BUILD_VERSION"] = (fw.version, "framework.version")
        env["PYTORCH_BUILD_NUMBER"] = (str(fw.build_number), "framework.build_number")
    env.setdefault("BUILD_TEST", ("0", "buildctl's default (no tests in a wheel)"))
    return env


def write(rendered: Rendered, out_dir: Path, *, staged: dict[str, Path] | None = None) -> Path:
    """Write the folder atomically; `staged` maps downloads/<stage>/<sha256> to pre-staged files."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for rel, text in rendered.files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(filtered(text))
            if rel.endswith(".sh"):
                p.chmod(0o755)
        for rel, src in (staged or {}).items():
            dst = tmp / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                dst.hardlink_to(src)
            except OSError:
                shutil.copy2(src, dst)
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out_dir.rename(old)
            tmp.rename(out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
