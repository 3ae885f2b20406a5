"""A hostile corpus of URL logins, for every URL option (issue 20, items 1, 2 and 9).

Each password holds one character a URL login must carry percent-encoded (`#`, `?`, `/`, `@`, a `%`
that starts no escape), or one it may carry as it is (`:`), between two random pieces; logins come
as user:password, :password (no user), a bare token and user: (no password), on a host name and on an
IPv6 host. Every option is given each login twice:

* as written (unencoded): pip, curl and apt read `https://ci:tok#en@pypi.corp/simple` as the host
  `ci`, so such a URL is refused, in one line, with the fix, and with no byte of the password in the
  message (before the fix it was accepted, and the password reached pip.conf, recipe.resolved.yaml,
  the manifest and the proxy variables of the compile container);
* percent-encoded: accepted, and no byte of it (raw, encoded or decoded, nor either piece) in any
  rendered file, the shown recipe, the manifest, a repro bundle, the container's variables or a
  masked log line; the tools get the real URL at run time.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from conftest import TEST_NAMESPACE
from invoke_here import invoke_here
from publish_helpers import assembled_artifact

from buildctl import recipe, render, secrets, urls
from buildctl.errors import InputError, RecipeError
from buildctl.failure import repro
from buildctl.pipeline import stages
from buildctl.pipeline.stages.compile import container_env
from buildctl.store.publish.server import Server, masker_for

REPO = Path(__file__).resolve().parents[2]
MUST_ENCODE = "#?/@"


def _piece() -> str:
    return "k" + uuid.uuid4().hex[:7]


# name: (left piece, hostile part, right piece); the password is their concatenation
SHAPES = {name: (_piece(), part, _piece()) for name, part in [
    ("hash", "#"), ("question", "?"), ("slash", "/"), ("at", "@"), ("colon", ":"), ("bad-escape", "%zz"),
    ("mixed", ":#?/@%")]}
LOGINS = ("user:password", ":password", "token", "token:")
HOSTS = ("pypi.corp.example:8443", "[fd00::5]:3128")


def password(shape: str) -> str:
    return "".join(SHAPES[shape])


def needles(shape: str) -> list[str]:
    """What must never be written or shown: the password raw, encoded, and each random piece."""
    left, _, right = SHAPES[shape]
    return [password(shape), quote(password(shape), safe=""), left, right]


def login(form: str, secret: str) -> str:
    return {"user:password": f"ci:{secret}", ":password": f":{secret}", "token": secret,
            "token:": f"{secret}:"}[form]


def url(scheme: str, form: str, host: str, shape: str, *, encoded: bool, path: str = "/simple") -> str:
    secret = quote(password(shape), safe="") if encoded else password(shape)
    return f"{scheme}://{login(form, secret)}@{host}{path}"


def refused_as_written(form: str, shape: str) -> bool:
    """Whether the unencoded login is one tools would misread (the rule, stated independently)."""
    written = login(form, password(shape))
    return bool(set(written) & set(MUST_ENCODE)) or bool(re.search(r"%(?![0-9A-Fa-f]{2})", written))


def leaks(text: str, shape: str) -> list[str]:
    return [n for n in needles(shape) if n in text]


CASES = [(form, host, shape) for form in LOGINS for host in HOSTS for shape in SHAPES]
SITE_OPTIONS = {"pip_index_url": "https", "apt_mirror": "http", "http_proxy": "http", "https_proxy": "http"}


def _site(option: str, value: str) -> dict:
    return {option: [value] if option == "pip_extra_index_urls" else value}


# ---------------------------------------------------------------------------------------- site options


@pytest.mark.parametrize("option", [*SITE_OPTIONS, "pip_extra_index_urls"])
@pytest.mark.parametrize(("form", "host", "shape"), CASES)
def test_site_url_as_written(option, form, host, shape):
    value = url(SITE_OPTIONS.get(option, "https"), form, host, shape, encoded=False)
    if not refused_as_written(form, shape):
        spec = recipe.load("demo-cpu", site=_site(option, value))
        assert leaks(json.dumps(recipe.masked_dump(spec)), shape) == []
        return
    with pytest.raises(RecipeError) as e:
        recipe.load("demo-cpu", site=_site(option, value))
    message = str(e.value)
    assert "\n" not in message and "fix: " in message and f"site.{option}" in message, message
    assert leaks(message, shape) == []


@pytest.mark.parametrize("option", [*SITE_OPTIONS, "pip_extra_index_urls"])
@pytest.mark.parametrize(("form", "host", "shape"), CASES)
def test_site_url_encoded_is_written_and_shown_nowhere(option, form, host, shape, tmp_path):
    value = url(SITE_OPTIONS.get(option, "https"), form, host, shape, encoded=True)
    spec = recipe.load("demo-cpu", site=_site(option, value))
    files = render.render(spec).files
    assert "recipe.resolved.yaml" in files  # recipe.resolved_yaml(spec), checked with the other files
    assert {name: leaks(text, shape) for name, text in files.items() if leaks(text, shape)} == {}
    assert leaks(json.dumps(recipe.masked_dump(spec)), shape) == []  # what `invoke show` prints
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    assert leaks(json.dumps([container_env(run, 2), secrets.proxy_env(spec)]), shape) == []
    # what the tools get at run time: the URL as given, and every form of the password is masked
    creds = secrets.split_credentials(spec)[1]
    real = [v for _, v in creds.env] + [creds.apt_auth]
    assert any(value in v or password(shape) in v for v in real), creds
    masker = secrets.Masker(creds.values())
    assert leaks(masker(f"pip: Looking in indexes: {value}\napt: {password(shape)}"), shape) == []


def test_a_manifest_and_a_bundle_of_encoded_logins_carry_none(tmp_path):
    """Every shape at once in every site option and the framework's git URL: manifest, artifact, bundle."""
    site = {"pip_index_url": url("https", "user:password", HOSTS[0], "mixed", encoded=True),
            "http_proxy": url("http", ":password", HOSTS[1], "hash", encoded=True, path="/"),
            "https_proxy": url("http", "token", HOSTS[0], "question", encoded=True, path="/"),
            "apt_mirror": url("http", "user:password", HOSTS[0], "at", encoded=True, path="/debian")}
    data = recipe.load("demo-cpu", site=site).model_dump(mode="json")
    data["framework"]["source"] = {"git": url("https", "token:", HOSTS[0], "slash", encoded=True, path="/d.git"),
                                   "ref": "main"}
    spec = type(recipe.load("demo-cpu")).model_validate(data)
    shapes = ["mixed", "hash", "question", "at", "slash"]
    staging, manifest = assembled_artifact(spec, tmp_path, "demofw-0.1.0-cp311-cp311-linux_x86_64.whl",
                                           "gcc=12.2.0\nsource_commit=abc\n")
    texts = {"manifest": json.dumps(manifest)}
    texts |= {str(p.relative_to(staging)): p.read_text(errors="replace") for p in staging.rglob("*") if p.is_file()}
    rendered = render.render(spec)
    context = render.write(rendered, tmp_path / "build" / spec.name)
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    bundle = repro.write_bundle(
        spec=spec,
        rendered=rendered,
        context_dir=context,
        secrets=run.secrets,
        root=tmp_path / "artifacts",
        failure=repro.FailedStep(
            step="source",
            exit_code=128,
            log=f"fatal: unable to access '{data['framework']['source']['git']}'",
            diagnosis=None,
        ),
        replay=repro.ReplayFacts(
            image_id="sha256:img",
            command=list(render.BUILD_COMMAND),
            env=container_env(run, 2),
            volumes={"w": "/work"},
            network="host",
            memory=None,
        ),
    )
    texts |= {f"bundle/{p.relative_to(bundle)}": p.read_text(errors="replace") for p in bundle.rglob("*")
              if p.is_file()}
    found = {name: [n for s in shapes for n in leaks(text, s)] for name, text in texts.items()}
    assert {k: v for k, v in found.items() if v} == {}
    assert manifest["source"]["git"] == f"https://***@{HOSTS[0]}/d.git"


# ---------------------------------------------------------------------------------------- recipe fields


def _recipe_with(tmp_path: Path, field: str, value: str) -> Path:
    """A recipe extending demo-cpu with `value` at `field` (a framework source or a patch download)."""
    body = {"extends": str(REPO / "recipes" / "demo-cpu.yaml")}
    if field == "framework.source.git":
        body["framework"] = {"source": {"git": value, "ref": "main", "path": None}}
    elif field == "framework.source.tarball.url":
        body["framework"] = {"source": {"tarball": {"url": value, "sha256": "ab" * 32}, "path": None}}
    else:
        body["framework"] = {"patches": [{"download": {"url": value, "sha256": "cd" * 32}}]}
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.mark.parametrize("field", ["framework.source.git", "framework.source.tarball.url",
                                   "framework.patches.0.download.url"])
@pytest.mark.parametrize(("form", "shape"), [(f, s) for f in LOGINS for s in SHAPES])
def test_recipe_url_fields(field, form, shape, tmp_path):
    path_part = "/o/demofw.git" if field.endswith("git") else "/files/x.tar.gz"
    raw = url("https", form, HOSTS[0], shape, encoded=False, path=path_part)
    if refused_as_written(form, shape):
        with pytest.raises(RecipeError) as e:
            recipe.load(str(_recipe_with(tmp_path, field, raw)))
        message = str(e.value)
        assert "\n" not in message and "fix: " in message and field.rsplit(".", 1)[0] in message, message
        assert leaks(message, shape) == []
    encoded = url("https", form, HOSTS[0], shape, encoded=True, path=path_part)
    spec = recipe.load(str(_recipe_with(tmp_path, field, encoded)))
    files = render.render(spec).files
    assert {name: leaks(text, shape) for name, text in files.items() if leaks(text, shape)} == {}
    assert leaks(json.dumps(recipe.masked_dump(spec)), shape) == []
    # the fetch and git helpers get the real URL through the URL map
    assert encoded in dict(secrets.split_credentials(spec)[1].urls).values()


def test_build_env_values_holding_misread_urls_are_stripped_and_handed_over():
    """build.env is free text, not a URL field: a misread URL in it is not refused, but stripped by shape
    in what is rendered and handed to the build as written."""
    for shape in ("hash", "question", "slash", "at"):
        value = f"--extra {url('https', 'user:password', HOSTS[0], shape, encoded=False)} --more"
        spec = recipe.load("demo-cpu", [f"build.env.EXTRA_ARGS={json.dumps(value)}"])
        files = render.render(spec).files
        assert leaks(files["build.sh"], shape) == [], shape
        assert dict(secrets.split_credentials(spec)[1].env)["EXTRA_ARGS"] == value


# ---------------------------------------------------------------------------------------- other consumers


@pytest.mark.parametrize(("form", "shape"), [(f, s) for f in LOGINS for s in SHAPES])
def test_redis_cache_url(form, shape):
    from buildctl.pipeline import compile_cache

    raw = url("redis", form, "cache.example:6379", shape, encoded=False, path="/0")
    if refused_as_written(form, shape):
        with pytest.raises(InputError) as e:
            urls.check_redis_url(raw)
        assert "\n" not in str(e.value) and leaks(str(e.value), shape) == []
    encoded = url("redis", form, "cache.example:6379", shape, encoded=True, path="/0")
    if form == "token:" and ":" in password(shape):  # a user name ccache cannot take, encoded or not
        with pytest.raises(InputError) as e:
            urls.check_redis_url(encoded)
        assert "user name holding ':'" in str(e.value) and leaks(str(e.value), shape) == []
        return
    urls.check_redis_url(encoded)
    handed = urls.ccache_form(encoded)
    # ccache percent-decodes the login, then splits it at its first ':' (USER:PASSWORD, else PASSWORD)
    userinfo = handed.partition("://")[2].rpartition("@")[0]
    user, colon, secret = _ccache_split(userinfo)
    expected_user, expected_password = {"user:password": ("ci", password(shape)), ":password": (None, password(shape)),
                                        "token": (None, password(shape)), "token:": (password(shape), "")}[form]
    if form in (":password", "token") and ":" in password(shape):
        expected_user = "default"
    assert (user, secret) == (expected_user, expected_password), handed
    assert compile_cache.stats({}, "used", encoded)["remote"]["url"] == "redis://***@cache.example:6379/0"


def _ccache_split(userinfo: str) -> tuple[str | None, str, str]:
    from urllib.parse import unquote

    decoded = unquote(userinfo)
    left, colon, right = decoded.partition(":")
    return (left, colon, right) if colon else (None, "", left)


@pytest.mark.parametrize(("form", "host", "shape"), CASES)
def test_publish_server_url(form, host, shape):
    raw = url("http", form, host, shape, encoded=False, path="/")
    if refused_as_written(form, shape):
        with pytest.raises(InputError) as e:
            Server.from_url(raw, {})
        assert "\n" not in str(e.value) and leaks(str(e.value), shape) == []
    encoded = url("http", form, host, shape, encoded=True, path="/")
    server = Server.from_url(encoded, {})
    assert leaks(server.url, shape) == []
    if form in ("user:password", ":password"):
        assert server.password == password(shape)  # twine gets it decoded
    masker = masker_for(encoded, server, {})
    assert leaks(masker(f"upload to {encoded} failed for {password(shape)}"), shape) == []


# ---------------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("flag", ["--pip-index-url", "--apt-mirror", "--http-proxy", "--https-proxy", "--cache-url"])
def test_the_cli_refuses_a_misread_url_in_one_line_and_writes_nothing(flag, tmp_path):
    scheme = "redis" if flag == "--cache-url" else "http"
    value = url(scheme, "user:password", HOSTS[0], "mixed", encoded=False, path="/0" if scheme == "redis" else "/")
    out = tmp_path / "out"
    proc = invoke_here("render", "--recipe", "demo-cpu", flag, value, "--out", str(out), "--json", cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and flag in proc.stderr and "fix: " in proc.stderr, proc.stderr
    assert leaks(proc.stdout + proc.stderr, "mixed") == []
    assert not out.exists()


def test_the_cli_json_of_an_encoded_login_carries_none(tmp_path):
    value = url("https", "user:password", HOSTS[1], "mixed", encoded=True)
    proc = invoke_here("render", "--recipe", "demo-cpu", "--pip-index-url", value, "--out", str(tmp_path / "out"),
                       "--json", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert leaks(proc.stdout + proc.stderr, "mixed") == []
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file() and leaks(p.read_text(errors="replace"), "mixed")] == []


# ---------------------------------------------------------------------------------------- --set typos


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("separator", [":", " ", ""])
def test_a_set_item_without_an_equals_sign_is_refused_without_its_value(shape, separator):
    """Issue 35, item 1: `--set framework.source.git:https://ci:TOKEN@host/x.git` (a ':' or a space typed for
    '=') ended in `--set: <the item, unmasked>: expected KEY=VALUE`. The item is never quoted whole; the key
    it starts with is named when it is one of the recipe's."""
    for value in (url("https", "user:password", HOSTS[0], shape, encoded=True, path="/o/x.git"),
                  url("https", "token", HOSTS[0], shape, encoded=False, path="/o/x.git"), password(shape)):
        item = f"framework.source.git{separator}{value}"
        with pytest.raises(RecipeError) as e:
            recipe.load("demo-cpu", [item])
        message = str(e.value)
        assert "expected KEY=VALUE" in message and "fix: " in message and "\n" not in message, message
        assert leaks(message, shape) == [], message
        if separator:
            assert "framework.source.git" in message, message


def test_a_set_typo_on_the_command_line_shows_no_token():
    secret = password("mixed")
    for item in (f"framework.source.git:https://ci:{quote(secret, safe='')}@git.example/o/x.git",
                 f"build.env.GH_TOKEN {secret}", secret):
        proc = invoke_here("show", "--recipe", "demo-cpu", "--set", item, "--json", cwd=REPO)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "expected KEY=VALUE" in proc.stderr and leaks(proc.stdout + proc.stderr, "mixed") == [], proc.stderr


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("separator", [":", " "])
def test_a_set_typo_whose_value_holds_a_later_equals_sign_shows_no_login(shape, separator):
    """Issue 43, item 4: `--set 'framework.source.tarball.url:https://ci:TOKEN@host/get?path=x'` split at the
    query's `=` and quoted everything before it, the login included."""
    for value in (url("https", "user:password", HOSTS[0], shape, encoded=True, path="/get?path=x"),
                  url("https", "token", HOSTS[1], shape, encoded=True, path="/get?path=x&y=z")):
        item = f"framework.source.tarball.url{separator}{value}"
        with pytest.raises(RecipeError) as e:
            recipe.load("demo-cpu", [item])
        message = str(e.value)
        assert "expected KEY=VALUE" in message and "fix: " in message and "\n" not in message, message
        assert leaks(message, shape) == [] and "framework.source.tarball.url" in message, message


# ---------------------------------------------------------------------------------------- engines
# Issue 35, item 2: an engine URL's login was quoted as given in every connection error (`invoke doctor
# --engine URL --json`, `invoke build --engine URL`), and an ssh:// engine with user:password ran
# `ssh -p 9 bob:SECRET@host docker system dial-stdio` (the password in ssh's argv, taken as the user).
# Nothing listens on port 1 of the loopback: each connection is refused at once.

ENGINE_HOSTS = ("127.0.0.1:1", "[::1]:1")
ENGINE_CASES = [(form, host, shape) for form in LOGINS for host in ENGINE_HOSTS for shape in SHAPES]


@pytest.mark.parametrize("scheme", ["tcp", "https"])
@pytest.mark.parametrize(("form", "host", "shape"), ENGINE_CASES)
def test_an_engine_urls_login_is_in_no_connection_error(scheme, form, host, shape):
    from buildctl import engine
    from buildctl.errors import BuildctlError

    for encoded in (False, True):
        value = url(scheme, form, host, shape, encoded=encoded, path="")
        with pytest.raises(BuildctlError) as e:
            engine.connect(value, environ=os.environ)
        message = str(e.value)
        assert "\n" not in message and "fix: " in message, message
        assert leaks(message, shape) == [], message
        assert leaks(engine.display_name(value), shape) == []


def _fake_ssh(tmp_path: Path, monkeypatch) -> Path:
    """An `ssh` on PATH that records its argv (one line per run) and fails as an unreachable host does."""
    bindir, calls = tmp_path / "bin", tmp_path / "ssh-calls.txt"
    bindir.mkdir()
    (bindir / "ssh").write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\necho 'ssh: connect to host x: No route' >&2\n"
                                "exit 255\n")
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return calls


@pytest.mark.parametrize("form", ["user:password", ":password", "token:"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_ssh_engine_with_a_password_is_refused_before_ssh_runs(form, shape, tmp_path, monkeypatch):
    """ssh takes no password from a URL: one line with the fix (a key), the password nowhere, ssh not run."""
    from buildctl import engine

    calls = _fake_ssh(tmp_path, monkeypatch)
    for encoded in (False, True):
        value = url("ssh", form, "build-box:2222", shape, encoded=encoded, path="")
        with pytest.raises(InputError) as e:
            engine.connect(value, environ=os.environ)
        message = str(e.value)
        assert "\n" not in message and "password" in message and "fix: " in message, message
        assert leaks(message, shape) == [] and leaks(engine.display_name(value), shape) == [], message
    assert not calls.exists(), calls.read_text()


def test_an_ssh_engine_with_a_user_name_runs_ssh_with_that_user(tmp_path, monkeypatch):
    from buildctl import engine
    from buildctl.errors import EngineError

    calls = _fake_ssh(tmp_path, monkeypatch)
    with pytest.raises(EngineError) as e:
        engine.connect("ssh://builder@build-box:2222", environ=os.environ)
    assert "`ssh -p 2222 builder@build-box docker system dial-stdio`" in str(e.value)
    assert calls.read_text().split("\n")[0].endswith("-p 2222 -- builder@build-box docker system dial-stdio")


@pytest.mark.parametrize("shape", ["mixed", "hash", "colon"])
def test_the_cli_shows_no_engine_login(shape, tmp_path, monkeypatch):
    """`invoke doctor --engine URL --json` (each recipe's reason quotes the engine's error too) and `invoke
    build --engine URL`, through the flag and through BUILDCTL_ENGINES."""
    _fake_ssh(tmp_path, monkeypatch)
    engines = [url("tcp", "user:password", "127.0.0.1:1", shape, encoded=True, path=""),
               url("https", "token", "[::1]:1", shape, encoded=False, path=""),
               url("ssh", "user:password", "build-box", shape, encoded=True, path="")]
    for value in engines:
        proc = invoke_here("doctor", "--recipe", "demo-cpu", "--engine", value, "--json", cwd=REPO)
        assert proc.returncode == 1 and json.loads(proc.stdout)["engines"][0]["engine"]["ok"] is False, proc.stderr
        assert leaks(proc.stdout + proc.stderr, shape) == [], proc.stdout
        for args, env in (((("--engine", value)), {}), ((), {"BUILDCTL_ENGINES": value})):
            proc = invoke_here("build", "--recipe", "demo-cpu", *args, "--json", cwd=REPO,
                               env={"BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"), **env})
            assert proc.returncode == 2 and proc.stderr.splitlines()[-1].startswith("error: "), proc.stderr
            assert leaks(proc.stdout + proc.stderr, shape) == [], proc.stderr


@pytest.mark.parametrize("shape", ["colon", "mixed"])
def test_an_engine_address_without_a_scheme_is_quoted_nowhere(shape):
    """Issue 43, item 5: `--engine 'alice:PASSWORD@127.0.0.1:9'` (no scheme) was quoted as given in the error,
    and `invoke doctor --json` printed the password 22 times."""
    from buildctl import engine
    from buildctl.errors import BuildctlError

    for value in (f"alice:{password(shape)}@127.0.0.1:9", f"{quote(password(shape), safe='')}@127.0.0.1:9",
                  f"alice:{quote(password(shape), safe='')}@[::1]:9/x"):
        with pytest.raises(BuildctlError) as e:
            engine.connect(value, environ=os.environ)
        message = str(e.value)
        assert "\n" not in message and "fix: " in message, message
        assert leaks(message, shape) == [] and leaks(engine.display_name(value), shape) == [], message
        proc = invoke_here("doctor", "--recipe", "demo-cpu", "--engine", value, "--json", cwd=REPO)
        assert proc.returncode in (1, 2) and proc.stdout, proc.stderr
        assert leaks(proc.stdout + proc.stderr, shape) == [], proc.stdout


# ---------------------------------------------------------------------------------------- registries
# Issue 35: the registry engines share images through (--registry, BUILDCTL_REGISTRY) takes Docker's
# HOST[:PORT][/PATH]; a login there is refused (it belongs to `docker login`), and the refusal quotes none.


@pytest.mark.parametrize(("form", "shape"), [(f, s) for f in LOGINS for s in SHAPES])
def test_a_registry_with_a_login_is_refused_without_it(form, shape):
    from buildctl.settings import Settings

    for encoded in (False, True):
        secret = quote(password(shape), safe="") if encoded else password(shape)
        for value in (f"{login(form, secret)}@registry.corp.example:5000/ml",
                      f"https://{login(form, secret)}@registry.corp.example:5000/ml"):
            with pytest.raises(InputError) as e:
                Settings.from_cli("build", environ=os.environ, registry=value)
            message = str(e.value)
            assert "\n" not in message and "fix: " in message and "--registry" in message, message
            assert leaks(message, shape) == [], message


def test_the_cli_refuses_a_registry_login_in_one_line_through_flag_and_variable(tmp_path):
    value = f"{login('user:password', quote(password('mixed'), safe=''))}@registry.corp.example:5000/ml"
    for args, env in ((("--registry", value), {}), ((), {"BUILDCTL_REGISTRY": value})):
        proc = invoke_here("build", "--recipe", "demo-cpu", *args, "--json", cwd=REPO,
                           env={"BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"), **env})
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert leaks(proc.stdout + proc.stderr, "mixed") == [], proc.stderr


# ---------------------------------------------------------------------------------------- indexes
# `invoke publish --to URL`: what it prints when the index cannot be reached or is refused (port 1 of
# the loopback refuses at once; another host over plain http is refused before any request).


@pytest.mark.parametrize(("form", "shape"), [(f, s) for f in LOGINS for s in SHAPES])
def test_an_index_urls_login_is_in_no_publish_message(form, shape, tmp_path, monkeypatch):
    from publish_helpers import make_artifact, make_wheel

    from buildctl.errors import BuildctlError
    from buildctl.store import publish

    monkeypatch.setenv("NETRC", os.devnull)
    art = make_artifact(tmp_path / "artifacts", "demo-cpu", "k1", make_wheel(tmp_path / "wheels", "bctl-demo", "1.0"))
    for encoded in (False, True):
        for scheme, host in (("http", "127.0.0.1:1"), ("https", "[::1]:1"), ("http", HOSTS[0])):
            value = url(scheme, form, host, shape, encoded=encoded, path="/")
            with pytest.raises(BuildctlError) as e:
                publish.publish(value, artifact_dirs=[str(art)], root=tmp_path / "artifacts", environ={})
            message = str(e.value)
            assert "\n" not in message and leaks(message, shape) == [], message


def test_the_cli_publish_shows_no_index_login(tmp_path):
    from publish_helpers import make_artifact, make_wheel

    art = make_artifact(tmp_path / "artifacts", "demo-cpu", "k1", make_wheel(tmp_path / "wheels", "bctl-demo", "1.0"))
    for value in (url("http", "user:password", "127.0.0.1:1", "mixed", encoded=True, path="/"),
                  url("http", "token", HOSTS[0], "mixed", encoded=True, path="/"),
                  url("https", ":password", "[::1]:1", "mixed", encoded=False, path="/")):
        proc = invoke_here("publish", "--artifact", str(art), "--to", value, "--json", cwd=REPO,
                           env={"NETRC": os.devnull})
        assert proc.returncode in (1, 2) and proc.stderr.count("\n") == 1, proc.stderr
        assert leaks(proc.stdout + proc.stderr, "mixed") == [], proc.stderr


# ---------------------------------------------------------------------------------------- git mirrors


@pytest.mark.parametrize(("form", "shape"), [(f, s) for f in LOGINS for s in SHAPES])
def test_a_git_mirrors_login_is_refused_or_kept_out_of_everything_written(form, shape, tmp_path):
    """--git-mirror PREFIX=MIRROR: a login in MIRROR is a credential (git gets it at run time only)."""
    raw = url("https", form, HOSTS[0], shape, encoded=False, path="/github/")
    if refused_as_written(form, shape):
        with pytest.raises(RecipeError) as e:
            recipe.load("demo-cpu", site={"git_mirrors": [f"https://github.com/={raw}"]})
        assert "\n" not in str(e.value) and leaks(str(e.value), shape) == [], str(e.value)
    encoded = url("https", form, HOSTS[0], shape, encoded=True, path="/github/")
    spec = recipe.load("demo-cpu", site={"git_mirrors": [f"https://github.com/={encoded}"]})
    files = render.render(spec).files
    assert {name: leaks(text, shape) for name, text in files.items() if leaks(text, shape)} == {}
    assert leaks(json.dumps(recipe.masked_dump(spec)), shape) == []
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    assert leaks(json.dumps(container_env(run, 2)), shape) == []
    assert any(encoded in v for _, v in secrets.split_credentials(spec)[1].env)  # git gets it, at run time


# ---------------------------------------------------------------------------------------- base images


@pytest.mark.parametrize(("form", "shape"), [(f, s) for f in LOGINS for s in SHAPES])
def test_a_base_image_mirror_with_a_login_is_refused_before_debootstrap(form, shape):
    """`invoke base-image --mirror URL`: a login would stand in debootstrap's command line, the image's
    sources.list and its buildctl.mirror label. Refused before anything runs, quoting none of it."""
    from buildctl.host import base_images

    for encoded in (False, True):
        value = url("http", form, HOSTS[0], shape, encoded=encoded, path="/debian")
        with pytest.raises(base_images.BaseImageError) as e:
            base_images.make_base_image(None, "bookworm", host=base_images.HostRun(os.environ), mirror=value)
        assert "\n" not in str(e.value) and leaks(str(e.value), shape) == [], str(e.value)
    with pytest.raises(base_images.BaseImageError):  # a login too short to be masked is still a login
        base_images.make_base_image(None, "bookworm", host=base_images.HostRun(os.environ),
                                    mirror="http://ab:cd@deb.example/debian")
