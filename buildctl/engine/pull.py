"""Base images before the image build, by Docker's and Podman's `--pull missing|always|never`.

`missing` pulls an image only when the engine lacks it, `always` pulls it every time (a moved tag is
picked up, and the artifact key follows the image id), `never` uses local images only. Images made
by `invoke base-image` (buildctl/base:*) are in no registry: they are never pulled, and an absent one
is refused with the command that makes it. Every refusal and failed pull is one line naming the
image and the fixes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from buildctl.errors import EngineError, one_line

LOCAL_ONLY_REPOSITORY = "buildctl/base"  # `invoke base-image` tags buildctl/base:<distro>
Action = Literal["use", "pull", "refuse"]
# `invoke doctor` asks a registry whether it has a base image (the manifest only, nothing pulled); an
# air-gapped host's engine answers at once (no route, no name), a slow registry is given this long.
REGISTRY_PROBE_TIMEOUT = 10


def is_local_only(ref: str) -> bool:
    return ref.split("@", 1)[0].rsplit(":", 1)[0] == LOCAL_ONLY_REPOSITORY


def decide(ref: str, policy: str, present: bool) -> Action:
    """What to do with one base image: use the local one, pull it, or refuse the build."""
    if is_local_only(ref):
        return "use" if present else "refuse"
    if policy == "always":
        return "pull"
    if present:
        return "use"
    return "pull" if policy == "missing" else "refuse"


def fix_for(ref: str, distro: str | None = None) -> str:
    """How to get base image `ref` into the engine ("fix: ...")."""
    if is_local_only(ref):
        distro = distro or ref.rsplit(":", 1)[-1]
        tag = "" if ref == f"{LOCAL_ONLY_REPOSITORY}:{distro}" else f" --tag {ref}"
        return f"fix: make it with `invoke base-image --distro {distro}{tag}`"
    return (f"fix: `docker pull {ref}` where a registry is reachable, `docker load -i FILE` of a saved copy, or "
            f"`invoke base-image --distro {distro or 'DISTRO'}` and --base-image buildctl/base:{distro or 'DISTRO'}")


def base_image_states(client, refs: Mapping[str, str | None]) -> dict[str, dict[str, str | None]]:
    """{ref: {"state": present | pullable | missing, "detail", "fix"}} for each base image ({ref: its
    distro}): in the engine, or not but its registry answered for it (the engine asked for its manifest;
    nothing is pulled), or neither. An image of `invoke base-image` is in no registry and never asked for."""
    from concurrent.futures import ThreadPoolExecutor

    from buildctl.engine.objects import image_exists

    def state(ref: str) -> dict[str, str | None]:
        distro = refs[ref]
        if image_exists(client, ref):
            return {"state": "present", "detail": "in the engine", "fix": None}
        if is_local_only(ref):
            return {"state": "missing", "detail": "not in the engine; `invoke base-image` makes it (no registry has "
                    "it)", "fix": fix_for(ref, distro)}
        answer = _registry_answer(client, ref)
        if answer is None:
            return {"state": "pullable", "detail": "not in the engine; its registry has it (a build pulls it)",
                    "fix": None}
        return {"state": "missing", "detail": f"not in the engine, and its registry did not answer ({answer})",
                "fix": fix_for(ref, distro)}

    timeout = client.api.timeout
    client.api.timeout = REGISTRY_PROBE_TIMEOUT  # this client is doctor's own: one probe each, side by side
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            return dict(zip(refs, pool.map(state, refs), strict=True))
    finally:
        client.api.timeout = timeout


def _registry_answer(client, ref: str) -> str | None:
    """None when the registry of `ref` answers that it has it; else why not, in one short line."""
    import requests
    from docker import errors as derr

    try:
        client.api.inspect_distribution(ref)
    except derr.APIError as e:
        return one_line(str(getattr(e, "explanation", None) or e), 160)
    except (requests.exceptions.RequestException, derr.DockerException) as e:
        return one_line(f"no answer in {REGISTRY_PROBE_TIMEOUT} s: {e.__class__.__name__}", 160)
    return None


def refusal(ref: str, policy: str, distro: str | None = None) -> str:
    why = ("it is made locally by `invoke base-image` (no registry has it)" if is_local_only(ref)
           else f"--pull {policy} forbids pulling it")
    return f"base image {ref} is not in the engine, and {why}; {fix_for(ref, distro)}"


def pull(client, ref: str, distro: str | None = None, on_line: Callable[[str], None] | None = None) -> None:
    """Pull `ref`, its progress to `on_line`; a failure (no registry reachable, no such image) is one line."""
    from docker import (
        errors as derr,  # here: a build whose base image is there (`decide`) never loads docker-py
    )

    error = None
    try:
        for chunk in client.api.pull(ref, stream=True, decode=True):
            if "error" in chunk:
                error = str(chunk.get("error") or "")
            elif on_line is not None and chunk.get("status") and "progress" not in chunk:
                on_line(" ".join(str(chunk[k]) for k in ("status", "id") if chunk.get(k)))
    except (derr.APIError, derr.DockerException) as e:
        error = getattr(e, "explanation", None) or str(e)
    if error is not None:
        raise EngineError(f"the pull of base image {ref} failed ({one_line(error, 200)}); {fix_for(ref, distro)}")


def ensure_images(client, refs: Iterable[str], policy: str | None, *, distro: str | None = None,
                  on_line: Callable[[str], None] | None = None) -> list[str]:
    """Apply the pull policy (None: `missing`) to each image before the build; the images pulled."""
    from buildctl.engine.objects import image_exists

    policy = policy or "missing"
    pulled = []
    for ref in dict.fromkeys(refs):
        action = decide(ref, policy, image_exists(client, ref))
        if action == "refuse":
            raise EngineError(refusal(ref, policy, distro))
        if action == "pull":
            if on_line is not None:
                on_line(f"buildctl: pulling {ref} (--pull {policy})")
            pull(client, ref, distro, on_line)
            pulled.append(ref)
    return pulled
