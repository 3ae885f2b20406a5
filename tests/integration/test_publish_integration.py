"""A real build, published to both kinds of index, installed by pip in a fresh container.

demo-cpu is built once for this module through the real CLI (a snapshot of examples/demofw, a temporary
artifacts root; the images are those every demo-cpu build makes and reuses). `invoke publish` then puts
its artifact
  (a) into a static folder served by `python -m http.server`, and
  (b) onto the real pypiserver of .ci/services.sh (tests/integration/services.py),
and for each, a FRESH container of the recipe's runtime image runs `pip install --index-url … demofw==<our
version>` and imports the package. pip's installation report shows it downloaded our file (its sha256)
from that index. And on the host: pip installs from the served folder (the engine-free publishing is in
tests/unit/test_publish.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import TEST_NAMESPACE
from docker import errors as derr
from packaging.utils import parse_wheel_filename
from publish_helpers import make_artifact, make_wheel, serve_folder

from buildctl import engine
from buildctl.pipeline import engine_names
from buildctl.store import publish

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]  # the session fixtures of the servers

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"
BUILD_TIMEOUT = 45 * 60


# Settings of the caller's shell that would change the build
UNSET = ("BUILDCTL_NO_VERIFY", "BUILDCTL_JOBS", "BUILDCTL_MEMORY", "BUILDCTL_KEEP_CONTAINER", "BUILDCTL_PUBLISH_TO",
         "BUILDCTL_PUBLISH_USERNAME", "BUILDCTL_PUBLISH_PASSWORD")


def invoke(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("invoke")
    full = {k: v for k, v in os.environ.items() if k not in UNSET}
    return subprocess.run([str(exe), "-r", str(ROOT), *args], capture_output=True, text=True, cwd=cwd,
                          env={**full, **env}, timeout=timeout)


@pytest.fixture(scope="module")
def demo_cpu(tmp_path_factory, docker_client, base_image) -> dict:
    """`invoke build --recipe demo-cpu --json` of a source snapshot; its JSON payload. Removes the
    build-dir volume it made (the images stay: they are every demo-cpu build's layer cache)."""
    work = tmp_path_factory.mktemp("publish-integration")
    src = work / "demofw"
    shutil.copytree(ROOT / "examples" / "demofw", src,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    volumes_before = {v.name for v in docker_client.volumes.list()}
    env = {"BUILDCTL_ARTIFACTS": str(work / "artifacts"), "BUILDCTL_CACHE": str(VERIFY_CACHE), "PYTHONUNBUFFERED": "1"}
    proc = invoke("build", "--recipe", "demo-cpu", "--network", NETWORK, "--ca-cert", CA_BUNDLE,
                  "--set", f"framework.source.path={src}", "--json", env=env, cwd=work, timeout=BUILD_TIMEOUT)
    payload = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    assert proc.returncode == 0 and payload.get("ok"), f"build failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}"
    payload["env"], payload["work"] = env, work
    yield payload
    volume = engine_names.work_volume_name("demo-cpu", payload["key"], TEST_NAMESPACE)  # the session's
    if volume not in volumes_before:
        with contextlib.suppress(derr.NotFound, derr.APIError):
            docker_client.api.remove_volume(volume)


def pip_install_in_fresh_container(client, image: str, index_url: str, requirement: str, labels: dict) -> dict:
    """pip install from `index_url` in a new container of `image` (host network: the index is on this
    machine's loopback), then import demofw; pip's --report and the probe's answers."""
    probe = ("import json, demofw\n"
             "report = json.load(open('/tmp/report.json'))\n"
             "got = [{'url': i['download_info']['url'], 'archive': i['download_info'].get('archive_info', {})}\n"
             "       for i in report['install']]\n"
             "print('RESULT ' + json.dumps({'version': demofw.__version__, 'add': demofw.add(2, 3),\n"
             "                              'file': demofw.__file__, 'installed': got}))\n")
    script = ('set -e; python -m pip install --no-cache-dir --disable-pip-version-check --index-url "$INDEX" '
              '--report /tmp/report.json "$REQUIREMENT"; cd /tmp; python -c "$PROBE"')
    res = engine.run_container(
        client,
        engine.ContainerSpec(
            image,
            ["/bin/sh", "-c", script],
            network_mode="host",
            labels=labels,
            env={
                "INDEX": index_url,
                "REQUIREMENT": requirement,
                "PROBE": probe,
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
            },
        ),
    )
    assert res.exit_code == 0, res.log[-4000:]
    line = next(ln for ln in reversed(res.log.splitlines()) if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_published_demo_cpu_installs_with_pip_from_a_folder_and_from_pypiserver(demo_cpu, services, docker_client,
                                                                                test_labels):
    artifact = Path(demo_cpu["artifact"])
    [wheel] = json.loads((artifact / "manifest.json").read_text())["wheels"]
    name, version, _, _ = parse_wheel_filename(wheel["file"])
    requirement = f"{name}=={version}"
    runtime = engine_names.image_tag("demo-cpu", demo_cpu["key"], TEST_NAMESPACE, "runtime")
    work, env = demo_cpu["work"], demo_cpu["env"]

    # (a) a static folder, served by python -m http.server
    folder = work / "index"
    published = invoke("publish", "--recipe", "demo-cpu", "--to", str(folder), "--json", env=env, cwd=work)
    assert published.returncode == 0, published.stderr
    assert [(w["file"], w["sha256"]) for w in json.loads(published.stdout)["wheels"]] == [(wheel["file"], wheel["sha256"])]
    with serve_folder(folder) as url:
        got = pip_install_in_fresh_container(docker_client, runtime, f"{url}simple/", requirement, test_labels)
    [installed] = got["installed"]
    assert unquote(installed["url"]) == f"{url}files/{name}/{wheel['file']}"  # '+' of a local label: %2B in links
    assert wheel["sha256"] in json.dumps(installed["archive"])
    assert got["add"] == 5 and got["version"] == str(version) and "/site-packages/demofw/" in got["file"]

    # (b) a real index server: pypiserver, with the upload password from the environment
    creds = {"BUILDCTL_PUBLISH_USERNAME": services.index_username, "BUILDCTL_PUBLISH_PASSWORD": services.index_password}
    uploaded = invoke("publish", "--artifact", str(artifact), "--to", services.index_url, "--json",
                      env={**env, **creds}, cwd=work)
    assert uploaded.returncode == 0, uploaded.stderr
    row = json.loads(uploaded.stdout)["wheels"][0]
    # "unchanged" when this server already took this very file (a reused server, same build)
    assert row["sha256"] == wheel["sha256"] and row["status"] in ("added", "unchanged")
    assert services.index_password not in uploaded.stdout + uploaded.stderr
    got = pip_install_in_fresh_container(docker_client, runtime, services.index_simple_url, requirement, test_labels)
    [installed] = got["installed"]
    assert installed["url"].startswith(services.index_url) and unquote(installed["url"]).endswith(wheel["file"])
    assert wheel["sha256"] in json.dumps(installed["archive"])
    assert got["add"] == 5 and got["version"] == str(version)


# ---------------------------------------------------------------------------------------------- pip on the host


def test_pip_installs_from_the_served_folder(tmp_path, store, wheel_dir):
    """What a team does: serve the folder with any web server, point pip at /simple/."""
    art = make_artifact(store, "demo-cpu", "k", make_wheel(wheel_dir, "bctl-demo", "1.0", body="VALUE = 7\n"))
    index = tmp_path / "index"
    publish.publish(str(index), artifact_dirs=[str(art)], root=store, environ={})
    target = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    with serve_folder(index) as url:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir", "--index-url",
                               f"{url}simple/", "--target", str(target), "bctl-demo==1.0"],
                              capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "bctl_demo" / "__init__.py").read_text() == "VALUE = 7\n"
