"""An extension set verified where it is installed: in the container that verifies the framework (the
runtime image), the artifact's extension wheels go in beside it, and in_container/ext_set.py checks each
one: it imports, its smoke check passes against plain torch, its Requires-Dist and the torch it was built
against are the one installed, and its compiled ops fit that torch (undefined c10/at/torch symbols,
C++11 ABI, CUDA/HIP libraries). Packages asked for with `--beside` (e.g. PyPI's torchvision) are checked
the same way: the set a user would install them into. Each is one Check with a one-line reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from buildctl.errors import InputError
from buildctl.secrets import checked_argv, filtered
from buildctl.store.manifest import Manifest
from buildctl.store.wheel_facts import requires_for_python, wheel_requires, wheel_tags
from buildctl.verify.expectations import Check
from buildctl.verify.report import VerificationFailed
from buildctl.verify.schema.fields import MAX_ITEMS

SET_FILE, RESULT_FILE = "extension-set.json", "extensions.json"
# A --beside requirement: one distribution by name and an exact version, as pip takes it from an index.
BESIDE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!-]+")


@dataclass(frozen=True)
class ExtensionSet:
    """What the verification container installs beside the framework, and what ext_set.py checks."""

    wheels: tuple[Path, ...]  # the artifact's extension wheels, installed --no-deps
    beside: tuple[Path, ...]  # --beside wheels, installed --no-deps
    requirements: tuple[str, ...]  # what the set needs from the wheelhouse (not the framework, not itself)
    description: dict  # SET_FILE's content

    def write(self, folder: Path) -> Path:
        path = folder / SET_FILE
        path.write_text(json.dumps(filtered(self.description), indent=1))
        return path


def from_artifact(artifact: Path | None, manifest: Manifest | None, dist: str, smoke: dict[str, str | None],
                  python: str, beside: Sequence[Path] = ()) -> ExtensionSet | None:
    """The artifact's extension set with the recipe's smoke checks by name, and the `beside` wheels;
    None when there is neither."""
    recorded = manifest.extensions if manifest is not None else None
    if recorded is None and not beside:
        return None
    rows = recorded.extensions if recorded else []
    against = recorded.built_against if recorded else {}
    wheels = []
    for row in rows:
        name = str(row.get("file") or "")
        if artifact is None or not name or "/" in name or name in (".", "..") or not (artifact / name).is_file():
            raise InputError(f"{artifact}/manifest.json: extension {ascii(str(row.get('name'))[:60])} names no wheel "
                             "file in the artifact; fix: rebuild it (invoke build)")
        wheels.append(artifact / name)
    own = {_canonical(dist), *(_canonical(wheel_tags(w)["name"]) for w in [*wheels, *beside])}
    requirements = sorted({r for w in [*wheels, *beside] for r in requires_for_python(wheel_requires(w), python)
                           if _canonical(_requirement_name(r)) not in own})
    description = {
        "framework": {"dist": dist, "module": dist},
        "extensions": [{"name": row.get("name"), "module": row.get("module"), "smoke": smoke.get(str(row.get("name"))),
                        "built_against": against} for row in rows],
        "beside": [wheel_tags(w)["name"] for w in beside],
    }
    return ExtensionSet(tuple(wheels), tuple(beside), tuple(requirements), description)


def check_beside(req: str) -> str:
    """`--beside` as given, or one line refusing it (it also names a folder of the artifact)."""
    if not BESIDE.fullmatch(req or ""):
        raise InputError(f"--beside {ascii(str(req)[:80])[1:-1]}: not NAME==VERSION; fix: e.g. --beside "
                         "torchvision==0.21.0")
    return req


def beside_folder(beside: Sequence[str]) -> str:
    """torchvision-0.21.0+pillow-11.0: the packages tried beside a set, as one folder name (never a path)."""
    return "+".join(sorted(check_beside(req) for req in beside)).replace("==", "-")[:200]


def fetch_beside(requirements: Sequence[str], python: str, platforms: Sequence[str], cache_dir: Path,
                 on_line) -> list[Path]:
    """The wheels of `--beside NAME==VERSION` for the target (the host's pip, no dependencies): PyPI's
    torchvision beside this torch is the mismatch users meet."""
    out = []
    for req in requirements:
        check_beside(req)
        folder = cache_dir / "beside" / hashlib.sha256(json.dumps([req, python, list(platforms)]).encode()).hexdigest()[:16]
        found = sorted(folder.glob("*.whl"))
        if not found:
            folder.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--no-deps",
                   "--only-binary=:all:", "--python-version", python, "--implementation", "cp", "--dest", str(folder)]
            for p in platforms:
                cmd += ["--platform", p]
            on_line(f"pip download --no-deps {req}")
            done = subprocess.run(checked_argv([*cmd, req]), capture_output=True, text=True)
            found = sorted(folder.glob("*.whl"))
            if done.returncode != 0 or not found:
                tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])[-300:]
                raise InputError(f"--beside {req}: no wheel for Python {python} on this platform ({tail}); fix: "
                                 "name a version the index has a wheel of")
        out.append(found[0])
    return out


def container_lines(python: str, ext_set: ExtensionSet, folder: str = "/verify/ext") -> list[str]:
    """Shell lines for the verification container, after the framework is installed and probed."""
    import shlex

    q = shlex.quote
    wheels = [f"{folder}/{w.name}" for w in ext_set.wheels] + [f"{folder}/beside/{w.name}" for w in ext_set.beside]
    lines = []
    if wheels:
        lines.append(f"{q(python)} -m pip install -q --no-index --no-deps --no-compile {' '.join(map(q, wheels))}")
    lines.append(f"{q(python)} /verify/in/ext_set.py --set {folder}/{SET_FILE} --out /verify/out/{RESULT_FILE}")
    return lines


def container_inputs(ext_set: ExtensionSet, folder: Path, at: str = "/verify/ext") -> dict[str, Path]:
    from buildctl.in_container import EXTENSION_CHECK_FILES

    inputs = {f"/verify/in/{p.name}": p for p in EXTENSION_CHECK_FILES}
    inputs[f"{at}/{SET_FILE}"] = ext_set.write(folder)
    inputs.update({f"{at}/{w.name}": w for w in ext_set.wheels})
    inputs.update({f"{at}/beside/{w.name}": w for w in ext_set.beside})
    return inputs


def load_result(path: Path, what: str) -> dict:
    """ext_set.py's output, bounded and shaped before anything reads it (it ran beside untrusted code)."""
    if not path.is_file():
        raise VerificationFailed(f"the extension check wrote no {RESULT_FILE} ({what}); see the log above")
    with path.open("rb") as fh:
        raw = fh.read(8 << 20)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        raise VerificationFailed(f"{RESULT_FILE} of {what} is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
        raise VerificationFailed(f"{RESULT_FILE} of {what} is not an extension check's output")
    results = []
    for r in data.get("results", [])[:MAX_ITEMS]:
        if not isinstance(r, dict):
            continue
        results.append({"name": _text(r.get("name"), 100), "role": _text(r.get("role"), 20),
                        "version": _text(r.get("version"), 100), "ok": r.get("ok") is True,
                        "reason": _text(r.get("reason"), 1500),
                        "requires": [_text(x, 200) for x in _list(r.get("requires"))[:20] if isinstance(x, str)],
                        "smoke": _small(r.get("smoke")), "import": _small(r.get("import")),
                        "abi": [_small(a) for a in _list(r.get("abi"))[:200] if isinstance(a, dict)]})
    torch = data.get("torch") if isinstance(data.get("torch"), dict) else None
    return {"torch": _small(torch) if torch else None, "error": _text(data.get("error"), 500) or None,
            "results": results}


def checks(result: dict) -> list[Check]:
    """One check per extension (and per package beside the set), in the set's order."""
    if result.get("error"):
        return [Check("extension set", "the installed torch reads", "unreadable", False, result["error"])]
    out = []
    for r in result["results"]:
        label = f"{'extension' if r['role'] == 'extension' else 'beside'} {r['name']}"
        out.append(Check(label, "imports, smoke passes, fits the torch", "ok" if r["ok"] else "mismatch", r["ok"],
                         "" if r["ok"] else r["reason"]))
    return out


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]


def _text(value, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _small(value) -> dict | None:
    """A small mapping of scalars and short lists, as JSON keeps it (for the report)."""
    if not isinstance(value, dict):
        return None
    out = {}
    for k, v in list(value.items())[:40]:
        if isinstance(v, (bool, int, float)) or v is None:
            out[str(k)[:60]] = v
        elif isinstance(v, str):
            out[str(k)[:60]] = v[:600]
        elif isinstance(v, list):
            out[str(k)[:60]] = [x[:300] if isinstance(x, str) else x for x in v[:40]
                                if isinstance(x, (str, int, float, bool))]
    return out
