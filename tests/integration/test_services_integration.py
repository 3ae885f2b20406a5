"""Each scale-out service really answers, through the client buildctl uses (or will use) for it.

* engine B: a second dockerd with its own data root and identity, reached with docker-py through
  `buildctl.engine.connect`, directly (unix://) and over ssh:// (a local sshd, buildctl's ssh transport);
* the registry: a tiny image made on engine A from buildctl/base:bookworm is pushed with a real
  `docker push` (Engine API) and pulled by engine B over ssh, which runs it;
* redis: redis-cli (the Debian client) with the password, and refused without it;
* the index: `invoke publish` uploads to pypiserver (credentials from the environment, masked), a
  second publish is a no-op, a different file of the same name is refused, pip installs from it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from docker import errors as derr
from publish_helpers import make_artifact, make_wheel, sha256
from registry_helpers import delete_from_registry

from buildctl import engine

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]  # the session fixtures of the servers

ROOT = Path(__file__).resolve().parents[2]
RUN = uuid.uuid4().hex[:10]


def test_engine_b_is_a_second_engine_reached_directly_and_over_ssh(docker_client, engine_b, engine_b_ssh):
    a, b, b_ssh = docker_client.info(), engine_b.info(), engine_b_ssh.info()
    assert b["DockerRootDir"] != a["DockerRootDir"]
    assert b["ID"] != a["ID"], "engine B shares engine A's identity key"
    assert b_ssh["ID"] == b["ID"] and b_ssh["DockerRootDir"] == b["DockerRootDir"]
    assert getattr(engine_b_ssh, "_buildctl_ssh_bridge", None) is not None  # buildctl's ssh transport
    assert engine.engine_facts(engine_b_ssh)["server_version"] == b["ServerVersion"]


def test_redis_answers_with_its_password_only(services):
    url = urlsplit(services.redis_url)
    base = ["redis-cli", "-h", url.hostname, "-p", str(url.port), "--no-raw"]
    key, value = f"buildctl-test:{RUN}", f"value-{RUN}"
    env = {**os.environ, "REDISCLI_AUTH": url.password}

    def cli(*args: str, auth: bool = True) -> str:
        proc = subprocess.run([*base, *args], capture_output=True, text=True, timeout=30,
                              env=env if auth else {k: v for k, v in env.items() if k != "REDISCLI_AUTH"})
        return (proc.stdout + proc.stderr).strip()

    assert cli("SET", key, value, "EX", "60") == "OK"
    assert cli("GET", key) == f'"{value}"'
    assert "NOAUTH" in cli("GET", key, auth=False)
    assert cli("DEL", key) == "(integer) 1"


def test_registry_carries_an_image_from_engine_a_to_engine_b(services, docker_client, base_image, engine_b,
                                                             engine_b_ssh, test_labels, tmp_path):
    marker = f"pushed-by-engine-a-{RUN}"
    (tmp_path / "marker").write_text(marker + "\n")
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nCOPY marker /marker\n")
    repo, tag = f"{services.registry}/buildctl-test/smoke", RUN
    ref = f"{repo}:{tag}"
    docker_client.images.build(path=str(tmp_path), tag=ref, labels=test_labels, rm=True, network_mode="none")
    try:
        pushed = list(docker_client.images.push(repo, tag=tag, stream=True, decode=True))
        assert not [p for p in pushed if "error" in p], pushed[-3:]
        with pytest.raises(derr.ImageNotFound):
            engine_b.images.get(ref)
        engine_b_ssh.images.pull(repo, tag=tag)
        assert engine_b.images.get(ref).id == engine_b_ssh.images.get(ref).id
        res = engine.run_container(
            engine_b_ssh,
            engine.ContainerSpec(ref, ["cat", "/marker"], network_mode="none", labels=test_labels),
        )
        assert res.exit_code == 0 and res.log.strip() == marker, res.log
    finally:
        for client in (docker_client, engine_b):
            try:
                client.images.remove(ref, force=True)
            except derr.NotFound:
                pass
        delete_from_registry(services.registry, "buildctl-test/smoke", tag)


# ---------------------------------------------------------------------------------------------- index


def publish_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("invoke")
    return subprocess.run([str(exe), "-r", str(ROOT), "publish", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_index_server_takes_uploads_from_invoke_publish(services, tmp_path):
    project = f"bctl-smoke-{RUN}"
    store = tmp_path / "artifacts"
    art = make_artifact(store, "smoke", "k1", make_wheel(tmp_path / "w1", project, "1.0", body="VALUE = 1\n"))
    creds = {"BUILDCTL_PUBLISH_USERNAME": services.index_username,
             "BUILDCTL_PUBLISH_PASSWORD": services.index_password}

    wrong = f"wrong-{RUN}"
    refused = publish_cli("--artifact", str(art), "--to", services.index_url,
                          env={"BUILDCTL_PUBLISH_USERNAME": "ci", "BUILDCTL_PUBLISH_PASSWORD": wrong})
    assert refused.returncode == 1, refused.stderr
    assert "refused the upload (403" in refused.stderr or "refused the upload (401" in refused.stderr
    assert refused.stderr.count("\n") == 1 and wrong not in refused.stdout + refused.stderr

    first = publish_cli("--artifact", str(art), "--to", services.index_url, "--json", env=creds)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["index_url"] == services.index_simple_url
    assert [(w["file"], w["status"]) for w in result["wheels"]] == [(f"bctl_smoke_{RUN}-1.0-py3-none-any.whl", "added")]

    # credentials in the URL work too, and never show
    url = services.index_url.replace("://", f"://ci:{services.index_password}@")
    again = publish_cli("--artifact", str(art), "--to", url, "--json", env={})
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["wheels"][0]["status"] == "unchanged"
    assert services.index_password not in again.stdout + again.stderr
    assert json.loads(again.stdout)["to"] == services.index_url.replace("://", "://***@")

    other = make_artifact(store, "smoke", "k2", make_wheel(tmp_path / "w2", project, "1.0", body="VALUE = 2\n"))
    clash = publish_cli("--artifact", str(other), "--to", services.index_url, env=creds)
    assert clash.returncode == 1 and "already holds" in clash.stderr, clash.stderr

    target = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--index-url",
                           services.index_simple_url, "--target", str(target), f"{project}==1.0"],
                          capture_output=True, text=True, timeout=300,
                          env={**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / f"bctl_smoke_{RUN}" / "__init__.py").read_text() == "VALUE = 1\n"
    listed = requests.get(f"{services.index_simple_url}{project}/", timeout=30).text
    assert f"#sha256={sha256(art / f'bctl_smoke_{RUN}-1.0-py3-none-any.whl')}" in listed
