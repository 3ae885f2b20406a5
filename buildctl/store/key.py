"""The artifact key: what it is made of, and what a request changed since an earlier artifact.

The key is content-addressed over what reaches the builder image and the build container: every file the
render writes (but those declared in NOT_KEYED, each with why), the source's digest (file contents, or git
URL + ref, or tarball sha256) and the base image's id. It is the digest of exactly that record
(`KeyInputs`), which the manifest keeps as `key_inputs`; `changed` compares a request's record with an
earlier artifact's and names what differs, as `ninja -d explain` names what is out of date (invoke build
--dry-run, and the line a build prints when it rebuilds).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from buildctl.recipe.schema import Spec
    from buildctl.render import Rendered

# Every file the render writes is keyed but for those declared here, each with why. A file the render starts
# writing is keyed until it is declared (tests/unit/test_artifact_key.py renders
# every shipped recipe and checks that each keyed file moves the key and each declared one does not).
NOT_KEYED = {
    "pip.conf": "a site setting where the recipe has a pip lock (pip.lock: every package by name, version and "
                "sha256): where pip finds packages (--pip-index-url), never which; without a lock pip chooses "
                "from that index, and pip.conf is keyed (`not_keyed_because`)",
    "certs/": "a site setting: the CA certificates the site's TLS inspection needs (--ca-cert)",
    "apt/": "a site setting: the apt mirror (--apt-mirror), never which packages",
    "recipe.resolved.yaml": "a record for people and repro bundles: the build reads none of it, and what of it "
                            "reaches the build is in the keyed files",
}
# What the compile stage copies into the compile container at run time (never rendered, so in no key): each
# declared by its folder in the container, with why. tests/unit/test_artifact_key.py checks every file the
# build cluster and the memory launcher copy in, for every shipped recipe. (A local source's snapshot, also
# copied in, is keyed: source_digest.)
RUN_TIME_NOT_KEYED = {
    "/usr/local/lib/buildctl-dist/": "the build cluster's sccache client, launcher (dist_launcher.sh) and nvcc "
                                     "driver (nvcc_dist.py), copied in when a scheduler answers: they decide where "
                                     "a unit compiles, not what it compiles to, and a build on the cluster shares "
                                     "the key of a local one (demo-cuda13 with every unit on the cluster makes the "
                                     "local build's wheel byte for byte: tests/integration/test_build_integration.py)",
    "/usr/local/lib/buildctl-memory/": "the memory launcher (memory_launcher.py, memory_predict.py) and its table "
                                       "of predictions: they decide when a unit starts, never what it compiles to",
}
# The verification's own files: they decide how the wheel is checked, not the wheel; verification copies
# buildctl's current ones into its container, and the report records their digest (verification_files_sha256).
VERIFICATION_ONLY = "verification only: how the wheel is checked, never what is built (the report records them)"


def not_keyed_because(path: str, files: Mapping[str, str] | None = None) -> str | None:
    """Why a rendered file is not part of the artifact key, or None: it is keyed. `files`: all the rendered
    files (without a pip.lock among them, pip chooses from the index pip.conf names: it is keyed)."""
    from buildctl.in_container import PROBE_FILES

    if path == "pip.conf" and files is not None and "pip.lock" not in files:
        return None
    if path in {p.name for p in PROBE_FILES}:
        return VERIFICATION_ONLY
    for declared, why in NOT_KEYED.items():
        if path == declared or (declared.endswith("/") and path.startswith(declared)):
            return why
    return None


def run_time_not_keyed_because(container_path: str) -> str | None:
    """Why a file the compile stage copies into the compile container is not part of the artifact key, or
    None: nothing declares it."""
    return next((why for folder, why in RUN_TIME_NOT_KEYED.items() if container_path.startswith(folder)), None)


def source_digest(spec: Spec) -> str:
    src = spec.framework.source
    h = hashlib.sha256()
    if src.kind == "prebuilt":  # the base image's framework is keyed by the image; a wheel by its digest
        p = src.prebuilt  # an index's by its pin and index (what pip resolves lands in the images' layers)
        h.update(f"prebuilt {p if isinstance(p, str) else getattr(p, 'sha256', None) or f'{p.pypi} {p.index_url}'}"
                 .encode())
    elif src.kind == "git":
        # the commit the ref was resolved to before the key (store/git_refs.py), never the ref's name
        h.update(f"git {src.git} {src.commit or src.ref} {src.submodules}".encode())
    elif src.kind == "tarball":
        h.update(f"tarball {src.tarball.sha256}".encode())
    else:
        return tree_digest(Path(src.path))
    return h.hexdigest()


def tree_digest(root: Path) -> str:
    """A local source folder's digest over exactly what the build is sent: the members its declared rule
    keeps (store/source_tree.py), read as they are now (the build keys the snapshot it sends)."""
    from buildctl.store import source_tree

    return source_tree.digest(root)


@dataclass(frozen=True)
class KeyInputs:
    """What an artifact key is made of, as the manifest records it: each keyed rendered file's sha256,
    the source's digest and the base image's id. The key is a digest of exactly this record."""

    files: Mapping[str, str]
    source: str
    base_image: str
    # build.env's credential query values ({'build.env.NAME sig': salted digest}): they reach the build and
    # may name other content; recorded only when there are some, so other keys stay what they were
    credentials: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        out = {"files": dict(sorted(self.files.items())), "source": self.source, "base_image": self.base_image}
        if self.credentials:
            out["credentials"] = dict(sorted(self.credentials.items()))
        return out

    @classmethod
    def from_json(cls, data) -> KeyInputs | None:
        """The record a manifest holds, or None when it holds none (an older buildctl) or not this shape."""
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            return None
        files, source, base = data["files"], data.get("source"), data.get("base_image")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            return None
        if not isinstance(source, str) or not isinstance(base, str):
            return None
        creds = data.get("credentials") or {}
        if not isinstance(creds, dict) or not all(isinstance(v, str) for v in creds.values()):
            return None
        return cls(files, source, base, creds)


def key_inputs(files: Mapping[str, str], source: str, base_image_id: str,
               credentials: Mapping[str, str] | None = None) -> KeyInputs:
    keyed = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in files.items()
             if not_keyed_because(name, files) is None}
    return KeyInputs(keyed, source, base_image_id, dict(credentials or {}))


def request_inputs(rendered: Rendered, base_image_id: str, salt: bytes, env: Mapping[str, str],
                   source: str | None = None) -> KeyInputs:
    """The key's inputs of a rendered request: its keyed files, its source's digest, the base image's id and
    the salted digests of the credential query values in `env` (build.env as the recipe gives it, credentials
    in: the rendered files have them stripped)."""
    return key_inputs(rendered.files, source or source_digest(rendered.spec), base_image_id,
                      credential_digests(env, salt))


# --- credential query values: keyed salted -----------------------------------------------------------------

SALT_BYTES = 32
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"`<>]+")


def host_salt(path: Path) -> bytes:
    """This host's salt for credential digests (made once, mode 0600, kept outside the artifacts root, so a
    copied artifact's record cannot be tried against guesses elsewhere)."""
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(os.urandom(SALT_BYTES).hex() + "\n")
    return bytes.fromhex(path.read_text().strip())


def credential_digests(env: Mapping[str, str], salt: bytes) -> dict[str, str]:
    """{'build.env.NAME PARAM': HMAC-SHA256(salt, value)} for each credential-named query parameter
    (urls.TOKEN_PARAMS) of each URL in a build.env value: never the value, never an unsalted digest."""
    from urllib.parse import parse_qsl

    from buildctl.urls import TOKEN_PARAMS

    out: dict[str, str] = {}
    for name, value in sorted(env.items()):
        for i, url in enumerate(_URL.findall(value)):
            query = url.partition("?")[2].partition("#")[0]
            for param, secret in parse_qsl(query, keep_blank_values=True, separator="&"):
                if param.lower() in TOKEN_PARAMS:
                    label = f"build.env.{name} {param}" + (f" #{i}" if i else "")
                    out[label] = hmac.new(salt, secret.encode(), hashlib.sha256).hexdigest()
    return out


def artifact_key(files: Mapping[str, str], source: str, base_image_id: str) -> str:
    return key_inputs(files, source, base_image_id).key


# --- what changed ---------------------------------------------------------------------------------------

MAX_FIELDS = 20  # a recipe rewritten whole names its first fields, not hundreds


def changed(now: KeyInputs, was: KeyInputs | None, recipe_now: dict, recipe_was: dict) -> list[dict[str, str]]:
    """[{kind, name, change}] where kind is file, field, source or base_image (record: an artifact too old
    to say); fields are the resolved recipe's (site settings aside: they never change a key)."""
    if was is None:
        return [{"kind": "record", "name": "key inputs",
                 "change": "the earlier artifact records none (an older buildctl built it)"}]
    out = []
    for name in sorted(set(now.files) | set(was.files)):
        before, after = was.files.get(name), now.files.get(name)
        if before != after:
            out.append({"kind": "file", "name": name,
                        "change": "added" if before is None else "removed" if after is None else "edited"})
    flat_was, flat_now = _flat(recipe_was), _flat(recipe_now)
    fields = [path for path in _differing(flat_was, flat_now) if path.split(".")[0] != "site"]
    commits = [path for path in fields if path.endswith(".commit")]  # a git ref resolved to another commit
    out += [{"kind": "source", "name": path, "change": f"{_short(str(flat_was.get(path)))} -> "
             f"{_short(str(flat_now.get(path)))}"} for path in commits]
    out += [{"kind": "field", "name": path, "change": "edited"} for path in fields[:MAX_FIELDS] if path not in commits]
    if now.source != was.source and not any(p.startswith("framework.source.") for p in commits):
        out.append({"kind": "source", "name": "source", "change": f"{was.source[:12]} -> {now.source[:12]}"})
    for name in sorted(set(now.credentials) | set(was.credentials)):
        if now.credentials.get(name) != was.credentials.get(name):
            out.append({"kind": "credential", "name": name, "change": "another value (keyed salted)"})
    if now.base_image != was.base_image:
        out.append({"kind": "base_image", "name": "base image",
                    "change": f"{_short(was.base_image)} -> {_short(now.base_image)}"})
    return out


def describe(changes: list[dict[str, str]]) -> str:
    """The changes as one line: 'build.sh, patches/00-fix.patch edited; field build.type; the source ...'."""
    parts = []
    files = [c for c in changes if c["kind"] == "file"]
    if files:
        parts.append(", ".join(f"{c['name']} {c['change']}" for c in files))
    fields = [c["name"] for c in changes if c["kind"] == "field"]
    if fields:
        parts.append(("fields " if len(fields) > 1 else "field ") + ", ".join(fields))
    for c in changes:
        if c["kind"] == "source":
            parts.append(f"the source ({c['change']})" if c["name"] == "source" else f"{c['name']} {c['change']}")
        elif c["kind"] == "base_image":
            parts.append(f"the base image ({c['change']})")
        elif c["kind"] == "credential":
            parts.append(f"{c['name']}: {c['change']}")
        elif c["kind"] in ("record", "artifact"):
            parts.append(f"{c['name']}: {c['change']}")
    return "; ".join(parts) or "nothing it records (another buildctl's key)"


def _short(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or ({prefix: {}} if prefix else {})
    return {prefix: data}


def _differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return sorted(path for path in set(a) | set(b) if a.get(path, _MISSING) != b.get(path, _MISSING))


_MISSING = object()
