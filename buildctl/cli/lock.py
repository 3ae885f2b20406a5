"""`invoke lock --recipe R`: the builder venv's lock (render/pip_lock.py), made against the site's index.

The resolution is uv's (`uv pip compile --generate-hashes`, for the recipe's CPython version on
manylinux x86_64: what the builder image runs, not this host), with every configuration of this host left out
(`--no-config`, PIP_CONFIG_FILE=/dev/null, no UV_* variables): a host's pip.conf may add local indexes that
the containers never see. The index goes to uv through its environment, never its command line (it may
hold a login)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from buildctl.cli.common import command, load_spec, out, print_json, recipes_dir, site_options
from buildctl.errors import BuildctlError, InputError
from buildctl.settings import REPO_ROOT, Settings

DEFAULT_INDEX = "https://pypi.org/simple"
UV_TIMEOUT_S = 600


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).is_file():
        raise InputError("invoke lock resolves with uv, which is not installed; fix: pip install uv (buildctl's "
                         "test extras have it: pip install -e '.[test]')")
    return found


def _uv_env(environ: dict[str, str], index: str, extra: list[str]) -> dict[str, str]:
    """`environ` (the command's) without pip's and uv's own settings, the indexes given as uv reads them."""
    env = {k: v for k, v in environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1", UV_DEFAULT_INDEX=index)
    if extra:
        env["UV_INDEX"] = " ".join(extra)
    return env


def _extra_indexes(spec) -> list[str]:
    """The site's extra indexes, and a prebuilt torch's own index (the builder's pip line names it too)."""
    from buildctl.recipe.schema import PrebuiltIndex

    prebuilt = spec.framework.source.prebuilt
    own = [prebuilt.index_url] if isinstance(prebuilt, PrebuiltIndex) and prebuilt.index_url else []
    return [*(spec.site.pip_extra_index_urls or ()), *own]


@command
def lock(recipe: str, sets, *, settings: Settings, index_url: str | None = None, as_json: bool = False) -> None:
    from buildctl import urls
    from buildctl.recipe import loader
    from buildctl.recipe.locks import lock_path
    from buildctl.recipe.schema import PrebuiltIndex
    from buildctl.render import pip_lock, rendering
    from buildctl.secrets import checked_argv, filtered, mask_url

    if index_url and urls.problem(index_url):
        raise InputError(f"--index-url (value not shown): {urls.problem(index_url)}")
    spec, _ = load_spec(recipe, sets, base_image=settings.base_image, site=site_options(settings), preflight=False)
    if spec.framework.source.prebuilt is not None and not isinstance(spec.framework.source.prebuilt, (str, PrebuiltIndex)):
        raise InputError(f"{spec.name}: a prebuilt wheel by URL is installed with the dependencies pip chooses, which a "
                         "lock does not cover; fix: name the torch by its index (framework.source.prebuilt.pypi, "
                         "index_url), or build it unlocked")
    requirements, constraints = rendering.builder_requirements(spec)
    index = index_url or spec.site.pip_index_url or DEFAULT_INDEX
    path = (REPO_ROOT / spec.python.lock if spec.python.lock
            else lock_path(loader.recipe_path(recipe, recipes_dir())))
    facts = pip_lock.made_for(spec.python.version, requirements, constraints)
    with tempfile.TemporaryDirectory(prefix="buildctl-lock-") as tmp:
        # pip itself too: an unlocked build upgrades it (the venv stage), a locked one installs the lock's
        (Path(tmp) / "requirements.in").write_text(filtered("".join(f"{r}\n" for r in ["pip", *requirements])))
        (Path(tmp) / "constraints.txt").write_text(filtered("".join(f"{c}\n" for c in constraints)))
        argv = [_uv(), "pip", "compile", "--quiet", "--no-config", "--no-header", "--generate-hashes",
                "--python-version", spec.python.version, "--python-platform", pip_lock.PLATFORM,
                "-c", "constraints.txt", "-o", "lock.txt", "requirements.in"]
        try:
            done = subprocess.run(checked_argv(argv), cwd=tmp, env=_uv_env(settings.environ(), index, _extra_indexes(spec)),
                                  capture_output=True, text=True, timeout=UV_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise BuildctlError(f"uv pip compile did not finish in {UV_TIMEOUT_S} s against {mask_url(index)}") from None
        if done.returncode != 0:
            why = next((ln.strip() for ln in done.stderr.splitlines() if ln.strip()), f"exit {done.returncode}")
            raise BuildctlError(f"uv pip compile against {mask_url(index)} failed: {mask_url(why)[:300]}")
        body = (Path(tmp) / "lock.txt").read_text()
    text = pip_lock.header(facts, mask_url(index)) + body
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(filtered(text))
    partial.replace(path)
    pins = [line.split(" ", 1)[0] for line in body.splitlines() if line and not line.startswith((" ", "#"))]
    if as_json:
        print_json({"recipe": spec.name, "lock": str(path), "index": mask_url(index), "packages": pins})
        return
    out.print(f"wrote {path}: {len(pins)} packages ({', '.join(pins)}) from {mask_url(index)}", markup=False,
              highlight=False)
