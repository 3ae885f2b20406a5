"""buildctl/engine/pull.py: Docker's --pull missing|always|never for the base image, decided without an engine
(a fake client stands in for the Docker client; tests/integration/test_pull_integration.py drives the real one)."""

from __future__ import annotations

import pytest
from docker import errors as derr

from buildctl.engine import pull
from buildctl.errors import EngineError

REGISTRY = "nvidia/cuda:12.8.1-devel-ubuntu22.04"
LOCAL = "buildctl/base:bookworm"
FIXES = ("`docker pull ", "`docker load -i FILE`", "`invoke base-image --distro jammy`")


@pytest.mark.parametrize(("ref", "policy", "present", "action"), [
    (REGISTRY, "missing", True, "use"),
    (REGISTRY, "missing", False, "pull"),
    (REGISTRY, "always", True, "pull"),
    (REGISTRY, "always", False, "pull"),
    (REGISTRY, "never", True, "use"),
    (REGISTRY, "never", False, "refuse"),
    # Made by `invoke base-image`, in no registry: never pulled, whatever the policy.
    (LOCAL, "missing", True, "use"),
    (LOCAL, "always", True, "use"),
    (LOCAL, "never", True, "use"),
    (LOCAL, "missing", False, "refuse"),
    (LOCAL, "always", False, "refuse"),
    (LOCAL, "never", False, "refuse"),
])
def test_decision(ref, policy, present, action):
    assert pull.decide(ref, policy, present) == action


class FakeClient:
    """What pull.py uses of docker.DockerClient: api.inspect_image and api.pull."""

    def __init__(self, present=(), pull_chunks=(), pull_raises=None):
        self.present, self.pulled = set(present), []
        self.api = self
        self._chunks, self._raises = list(pull_chunks), pull_raises

    def inspect_image(self, ref):
        if ref not in self.present:
            raise derr.ImageNotFound(f"No such image: {ref}")
        return {"Id": "sha256:" + "0" * 64}

    def pull(self, ref, stream, decode):
        self.pulled.append(ref)
        if self._raises is not None:
            raise self._raises
        yield from self._chunks


def test_missing_pulls_only_the_absent_image():
    client = FakeClient(present=["ubuntu:22.04"], pull_chunks=[{"status": "Pulling from nvidia/cuda", "id": "12.8"},
                                                               {"status": "Downloading", "progress": "[=> ]"}])
    lines = []
    assert pull.ensure_images(client, ["ubuntu:22.04", REGISTRY, REGISTRY], None, on_line=lines.append) == [REGISTRY]
    assert client.pulled == [REGISTRY]
    assert lines == [f"buildctl: pulling {REGISTRY} (--pull missing)", "Pulling from nvidia/cuda 12.8"]


def test_always_pulls_a_present_image_and_never_pulls_nothing():
    client = FakeClient(present=[REGISTRY, LOCAL])
    assert pull.ensure_images(client, [REGISTRY, LOCAL], "always") == [REGISTRY]
    assert pull.ensure_images(client, [REGISTRY, LOCAL], "never") == []
    assert client.pulled == [REGISTRY]


def one_line_error(client, refs, policy, distro="jammy") -> str:
    with pytest.raises(EngineError) as info:
        pull.ensure_images(client, refs, policy, distro=distro)
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 1
    return message


def test_never_refuses_an_absent_image_naming_it_and_the_fixes():
    client = FakeClient()
    message = one_line_error(client, [REGISTRY], "never")
    assert message.startswith(f"base image {REGISTRY} is not in the engine, and --pull never forbids pulling it; fix: ")
    assert all(fix in message for fix in FIXES) and client.pulled == []


def test_an_absent_local_base_image_says_to_make_it():
    message = one_line_error(FakeClient(), [LOCAL], "missing", distro="bookworm")
    assert message == (f"base image {LOCAL} is not in the engine, and it is made locally by `invoke base-image` (no "
                       "registry has it); fix: make it with `invoke base-image --distro bookworm`")
    assert one_line_error(FakeClient(), ["buildctl/base:mine"], "always", distro="trixie").endswith(
        "fix: make it with `invoke base-image --distro trixie --tag buildctl/base:mine`")


@pytest.mark.parametrize("client", [
    FakeClient(pull_raises=derr.APIError("500 Server Error", explanation="Get \"https://registry-1.docker.io/v2/\": "
                                         "dial tcp: lookup registry-1.docker.io: no such host")),
    FakeClient(pull_chunks=[{"status": "Pulling fs layer"},
                            {"error": "toomanyrequests:\nYou have reached your pull rate limit."}]),
], ids=["refused", "failed-midway"])
def test_a_failed_pull_is_one_line_with_the_image_and_three_fixes(client):
    message = one_line_error(client, [REGISTRY], "missing")
    assert message.startswith(f"the pull of base image {REGISTRY} failed (")
    assert ("no such host" in message) or ("pull rate limit" in message)
    assert all(fix in message for fix in FIXES)
