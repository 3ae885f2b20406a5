"""registry.py's pure parts: the address check, the image key and the registry's names (no engine)."""

import pytest

from buildctl import urls
from buildctl.engine import registry
from buildctl.errors import InputError


@pytest.mark.parametrize("value", ["127.0.0.1:5000", "registry.example:5000/ml-infra", "ghcr.io/org/team/",
                                   "localhost", "[::1]:5000"])
def test_registry_addresses_docker_takes(value):
    assert urls.check_registry_address(value) == value.rstrip("/")


@pytest.mark.parametrize("value, says", [
    ("https://registry.example", "without a scheme"),
    ("user:secret@registry.example:5000", "docker login registry.example:5000"),
    ("registry.example:99999", "not a registry address"),
    ("registry.example/Upper", "not a registry address"),
    ("reg istry", "not a registry address"),
])
def test_refused_addresses_say_the_fix_in_one_line(value, says):
    with pytest.raises(InputError) as e:
        urls.check_registry_address(value)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert "secret" not in str(e.value)


def test_image_key_follows_the_context_and_base_not_the_source():
    files = {"Dockerfile": "FROM x\n", "build.sh": "echo\n", "recipe.resolved.yaml": "source: a\n"}
    key = registry.image_key(files, "sha256:1")
    assert key == registry.image_key({**files, "recipe.resolved.yaml": "source: b\n"}, "sha256:1")
    assert key != registry.image_key({**files, "build.sh": "echo 2\n"}, "sha256:1")
    assert key != registry.image_key(files, "sha256:2")
    assert len(key) == 16


def test_remote_names_are_per_recipe_and_target():
    assert registry.remote_ref("127.0.0.1:5000/ci", "Demo-CPU", "0123abcd", "runtime") == (
        "127.0.0.1:5000/ci/buildctl-demo-cpu", "0123abcd-runtime")
