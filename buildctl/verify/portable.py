"""The portability check: a repaired wheel installed where the team runs it, not where it was built.

A BARE image (the recipe's base image plus its Python and venv only: none of the recipe's runtime
packages; targets.ensure_verify_image, built once and cached under buildctl/verify-runtime) gets the wheel
and the pip packages the build recorded as its runtime requirements (the nvidia-* wheels the repair left
libraries to), and the probe imports it with the same smoke test as the main verification; a torch wheel
also runs the framework checks there (numerics against NumPy, the torch.compile matrix, the DDP step over
gloo), judged as the main verification judges them (inductor needs a C++ compiler at run time, which a
bare image has not: its cells are shown as skipped, not expected). A library the
loader cannot find there fails the check, by name (the import error, and ldd over the wheel's files), with
the Debian package that provides it when the build image's dpkg knew it (the manifest's portability
section). Only for wheels whose repair is not off: the manifest records the section then.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from buildctl.in_container import probe_inputs
from buildctl.recipe.schema import Spec
from buildctl.store.manifest import Manifest, Portability
from buildctl.store.wheel_facts import WheelFacts
from buildctl.verify.expectations import Check
from buildctl.verify.expectations.evaluation import framework_check_results
from buildctl.verify.expectations.expected import Expectations
from buildctl.verify.options import VerifyOptions
from buildctl.verify.report import VerificationFailed
from buildctl.verify.targets import ensure_verify_image, last_lines, probe_in_container
from buildctl.verify.wheelhouse import prepare_wheelhouse

NAME = "portable"
VENV = "/opt/portable-venv"
MISSING_FILE = "missing.txt"
_NOT_FOUND = re.compile(r"(lib[^\s:/]+\.so[^\s:]*): cannot open shared object file")


def container_script(python: str, wheel_name: str, reqs: Sequence[str], module: str) -> str:
    """Install into a fresh venv, probe (import + smoke, nothing GPU- or tool-bound), then list what the
    loader cannot find for the wheel's own files (its package folder and the *.libs auditwheel made)."""
    q = shlex.quote
    probe = ["--module", module, "--out", "/verify/out/probe.json", "--no-arch-coverage",
             *(() if module == "torch" else ("--no-checks",))]
    site = f"$({VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_paths()[\"platlib\"])')"
    return "\n".join([
        "set -e",
        "mkdir -p /verify/out",
        f"python{python} -m venv {VENV}",
        f"echo 'installing {wheel_name} into a bare image ({VENV}: the base image, its Python, nothing else)'",
        f"{VENV}/bin/python -m pip install -q --no-index --find-links /verify/wheelhouse --no-compile "
        + " ".join(q(x) for x in [f"/verify/in/{wheel_name}", *reqs]),
        f"{VENV}/bin/python /verify/in/probe.py {' '.join(q(a) for a in probe)} || true",
        f'site="{site}"',
        f'find "$site/{module}" "$site"/*.libs -name "*.so*" -type f 2>/dev/null | while read -r f; do ldd "$f" 2>/dev/null || true; done'
        rf" | sed -n 's/^[[:space:]]*\([^[:space:]]*\) => not found$/\1/p' | sort -u > /verify/out/{MISSING_FILE}",
    ])


def missing_libraries(import_error: str, ldd_listing: str) -> list[str]:
    """The sonames the loader could not find: the import error's first, then ldd's, each once."""
    found = _NOT_FOUND.findall(import_error or "")
    found += [ln.strip() for ln in ldd_listing.splitlines() if re.fullmatch(r"lib[\w.+-]+\.so[\w.+-]*", ln.strip())]
    return list(dict.fromkeys(found))


def framework_checks(probe: dict) -> list[Check]:
    """The bare image's numerics, torch.compile and DDP results, judged as the main verification's are."""
    release = Expectations(build_type="Release")
    # the debug-only assertion is the main verification's fact about the build, not about where it runs
    return [dataclasses.replace(c, name=f"{NAME}: {c.name}") for c in framework_check_results(release, probe)
            if not c.name.startswith("debug-only assertion")]


def judge(probe: dict, missing: list[str], section: Portability, image: str) -> Check:
    """The check from the probe in the bare image and what the loader missed there."""
    expected = f"imports in {image}"
    imp = probe.get("import") or {}
    where = f"tag {section.tag}, glibc floor {section.glibc or 'unknown'}, GLIBCXX floor {section.glibcxx or 'none'}"
    if imp.get("ok") and imp.get("smoke") in (None, "ok") and not missing:
        return Check(NAME, expected, "ok", True, f"{where}; {len(section.vendored)} libraries vendored")
    if missing:
        named = "; ".join(f"{lib} missing ({_provider(lib, section)})" for lib in missing[:5])
        return Check(NAME, expected, f"missing {', '.join(missing[:5])}", False,
                     f"{named}; {where}" + (f"; it stayed {section.tag}: {section.reason}" if section.reason else ""))
    error = imp.get("error") or imp.get("smoke") or probe.get("fatal") or "the probe reported no import"
    return Check(NAME, expected, "fails", False, f"{str(error)[:300]}; {where}")


def _provider(soname: str, section: Portability) -> str:
    package = section.package_of(soname)
    left = next((lib for lib in section.excluded if lib.soname == soname), None)
    text = f"Debian package {package} provides it" if package else "no package known to provide it"
    return text + (f"; left out of the wheel: {left.reason}" if left is not None and left.reason else "")


def checks(manifest: Manifest | None, facts: WheelFacts, spec: Spec | None, *, client, plats: Sequence[str],
           on_line: Callable[[str], None], options: VerifyOptions) -> list[Check]:
    """[the portable check] for a wheel whose build recorded a repair; [] otherwise. `options` resolved
    (module, cache_dir): its network_mode (for the image) and timeout."""
    from buildctl import engine

    wheel = facts.path
    section = manifest.portability if manifest is not None else None
    if section is None or spec is None or section.wheel != wheel.name:
        return []
    module, cache_dir, network_mode, timeout = (
        options.module,
        options.cache_dir,
        options.network_mode,
        options.timeout,
    )
    runtime_requirements = (manifest.runtime.requirements if manifest.runtime is not None else None) or []
    python = spec.python.version
    try:
        image = ensure_verify_image(client, spec.base.image, python, network_mode=network_mode, on_line=on_line)
        # NumPy as the main verification installs it for torch: the numerics compare against it
        reqs = [*(["numpy"] if module == "torch" else []), *runtime_requirements]
        wheelhouse, _ = prepare_wheelhouse(facts, reqs, (), python, plats, cache_dir, on_line)
        listing: dict[str, str] = {}

        def read_out(out: Path) -> None:
            path = out / MISSING_FILE
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as fh:
                    listing["missing"] = fh.read(64 << 10).decode("utf-8", "replace")

        container = engine.ContainerSpec(
            image,
            ["/bin/sh", "-c", container_script(python, wheel.name, reqs, module)],
            inputs={
                f"/verify/in/{wheel.name}": wheel,
                **probe_inputs("/verify/in"),
                "/verify/wheelhouse": wheelhouse,
            },
            gpus=False,
            network_mode="none",
            timeout=timeout,
        )
        probe, _ = probe_in_container(
            client,
            container,
            shown=image,
            on_line=on_line,
            read_out=read_out,
            what=f"probe.json of {wheel.name} (written in the bare image {image})",
        )
    except VerificationFailed as e:
        return [
            Check(
                NAME,
                f"installs and imports in a bare {spec.base.distro} image",
                "fails",
                False,
                last_lines(str(e), 1),
            )
        ]
    missing = missing_libraries(str((probe.get("import") or {}).get("error") or ""), listing.get("missing", ""))
    return [judge(probe, missing, section, image), *framework_checks(probe)]
