"""What a Dockerfile would take from the engine: the images its FROM lines and COPY --from words name,
after ARG defaults and build args are substituted as Docker does (buildctl never pulls)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from buildctl.engine.failures import one_line
from buildctl.errors import EngineError

BASE_IMAGE_ARG = "BUILDCTL_BASE_IMAGE"  # the rendered Dockerfiles' `ARG` for their base (default: the recipe's tag)


def base_image_arg(base_image_id: str) -> dict[str, str]:
    """The Dockerfile's base as the key names it: the image id (FROM a tag would take whatever the tag names
    when the build reaches that step); none when the key could name no id (the build says what is missing)."""
    return {BASE_IMAGE_ARG: base_image_id} if base_image_id.startswith("sha256:") else {}


def recorded_base_image_arg(client, base_image_id: str) -> dict[str, str]:
    """An image built again later (verification's runtime image, a repro's replay) FROM the base id its
    build's key named, while the engine still has it; else {}: the Dockerfile's default, the tag."""
    from buildctl import engine  # the package's name, as callers and tests reach the engine

    return base_image_arg(base_image_id) if base_image_id and engine.image_exists(client, base_image_id) else {}


_VAR = re.compile(r"\$\{(\w+)(?:(:?[-+?])([^}]*))?\}|\$(\w+)")


def _substitute(word: str, args: Mapping[str, str]) -> str:
    """Docker's variable substitution in a FROM or --from word: $V, ${V}, ${V:-x}, ${V-x}, ${V:+x}, ${V+x};
    an unset variable is the empty string (so `${UNSET}alpine` is `alpine`)."""

    def one(m: re.Match[str]) -> str:
        value = args.get(m.group(1) or m.group(4))
        op, alt = m.group(2), m.group(3) or ""
        is_set = value is not None and (value != "" or not (op or "").startswith(":"))
        if op and op.endswith("-"):
            return value if is_set and value is not None else alt
        if op and op.endswith("+"):
            return alt if is_set else ""
        return value or ""

    return _VAR.sub(one, word)


def base_image_refs(dockerfile_text: str, buildargs: Mapping[str, str]) -> list[str]:
    """Images a build would take from the engine (and pull when missing): FROM lines and COPY --from
    words that are not stages, after ARG defaults and build args are substituted as Docker does.
    A word that cannot be resolved here is refused rather than let through unchecked."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    refs: list[str] = []
    seen_from = False
    text = re.sub(r"\\\r?\n", " ", dockerfile_text)

    def resolve(word: str, line: str) -> str:
        ref = _substitute(word, args)
        if any(c in ref for c in "${}\\"):
            shown = "".join(c if c.isprintable() else "?" for c in one_line(line, 120))
            raise EngineError(
                f"cannot tell which image `{shown}` names (it would be pulled if missing); "
                "fix: name the image literally or with a plain ${ARG} that has a default"
            )
        return ref

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "ARG" and not seen_from:
            for decl in rest.split():
                name, eq, default = decl.partition("=")
                value = buildargs.get(name, _substitute(default.strip("\"'"), args) if eq else None)
                if value is not None:
                    args[name] = value
        elif word == "FROM":
            seen_from = True
            parts = [p for p in rest.split() if not p.startswith("--")]
            if not parts:
                continue
            ref = resolve(parts[0], line)
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2].lower())
            if ref and ref.lower() != "scratch" and ref.lower() not in stages:
                refs.append(ref)
        elif word == "COPY":
            for flag in rest.split():
                if flag.lower().startswith("--from="):
                    ref = resolve(flag.split("=", 1)[1], line)
                    if ref and not ref.isdigit() and ref.lower() not in stages:
                        refs.append(ref)
    return refs
