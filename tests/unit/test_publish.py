"""`invoke publish` to a static folder, without an engine: the PEP 503 pages, idempotence, and every
hostile artifact refused in one line before anything is written.

The index server side (uploads to a real pypiserver) is in test_services_integration.py; a real pip
install from the served folder, and the demo build installed from both kinds of index in a fresh
container, are in test_publish_integration.py.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from invoke.exceptions import Exit
from invoke_here import invoke_here
from publish_helpers import make_artifact, make_wheel, sha256

from buildctl import cli
from buildctl.errors import InputError
from buildctl.store import publish

ROOT = Path(__file__).resolve().parents[2]


def links(page: str) -> list[dict[str, str]]:
    """The anchors of a page as attribute dicts."""
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', attrs)) for attrs in re.findall(r"<a ([^>]*)>", page)]


def test_folder_index_has_pep503_pages_with_hashes(tmp_path, store, wheel_dir):
    a = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir / "a", "Bctl.Demo_Pkg", "1.0"))
    b = make_artifact(store, "other", "k2", make_wheel(wheel_dir / "b", "zz-other", "2.0", requires_python=None))
    index = tmp_path / "index"

    result = publish.publish(str(index), artifact_dirs=[str(a), str(b)], root=store, environ={})

    assert result["kind"] == "folder" and [w["status"] for w in result["wheels"]] == ["added", "added"]
    root = (index / "simple" / "index.html").read_text()
    assert [a["href"] for a in links(root)] == ["bctl-demo-pkg/", "zz-other/"]  # normalized names (PEP 503)
    page = (index / "simple" / "bctl-demo-pkg" / "index.html").read_text()
    [link] = links(page)
    wheel = index / "files" / "bctl-demo-pkg" / "Bctl.Demo_Pkg-1.0-py3-none-any.whl"
    assert link["href"] == f"../../files/bctl-demo-pkg/{wheel.name}#sha256={sha256(wheel)}"
    assert link["data-requires-python"] == "&gt;=3.8"  # escaped, as PEP 503 asks
    metadata = wheel.with_name(wheel.name + ".metadata")
    assert link["data-core-metadata"] == f"sha256={sha256(metadata)}" == link["data-dist-info-metadata"]
    assert b"Name: Bctl.Demo_Pkg" in metadata.read_bytes()
    # the artifact's manifest next to the wheel, byte for byte
    assert wheel.with_name(wheel.name + ".manifest.json").read_bytes() == (a / "manifest.json").read_bytes()
    assert "data-requires-python" not in (index / "simple" / "zz-other" / "index.html").read_text()
    assert sha256(wheel) == json.loads((a / "manifest.json").read_text())["wheels"][0]["sha256"]


def test_hrefs_are_percent_encoded_as_pip_reads_them(tmp_path, store, wheel_dir):
    """A local version's '+' (every torch wheel of a stack: 2.6.0+cpu) is %2B in the href, as PyPI and
    download.pytorch.org write it; pip decodes it back to the file's name (issue 20, item 12)."""
    art = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir, "bctl-demo", "1.0+cpu"))
    index = tmp_path / "index"
    publish.publish(str(index), artifact_dirs=[str(art)], root=store, environ={})
    [link] = links((index / "simple" / "bctl-demo" / "index.html").read_text())
    assert link["href"].startswith("../../files/bctl-demo/bctl_demo-1.0%2Bcpu-py3-none-any.whl#sha256=")
    assert (index / "files" / "bctl-demo" / "bctl_demo-1.0+cpu-py3-none-any.whl").is_file()


def test_a_folder_of_the_users_keeps_its_mode(tmp_path, store, wheel_dir):
    """`publish --to DIR` of a 0700 folder left it 0755 (issue 20, item 13); a folder it makes is 0755."""
    art = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    private, made = tmp_path / "private", tmp_path / "made" / "index"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    publish.publish(str(private), artifact_dirs=[str(art)], root=store, environ={})
    publish.publish(str(made), artifact_dirs=[str(art)], root=store, environ={})
    assert private.stat().st_mode & 0o777 == 0o700
    assert made.stat().st_mode & 0o777 == 0o755


def test_publishing_again_changes_nothing(tmp_path, store, wheel_dir):
    art = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    index = tmp_path / "index"
    publish.publish(str(index), artifact_dirs=[str(art)], root=store, environ={})
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in index.rglob("*") if p.is_file()}

    again = publish.publish(str(index), recipe="demo-cpu", root=store, environ={})

    assert [w["status"] for w in again["wheels"]] == ["unchanged"]
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in index.rglob("*") if p.is_file()} == before


def test_a_second_version_joins_the_project_page(tmp_path, store, wheel_dir):
    index = tmp_path / "index"
    for version in ("1.0", "1.1"):
        art = make_artifact(store, "demo-cpu", f"k{version}", make_wheel(wheel_dir / version, "bctl-demo", version))
        publish.publish(str(index), artifact_dirs=[str(art)], root=store, environ={})
    hrefs = [a["href"].split("#")[0].rsplit("/", 1)[1] for a in
             links((index / "simple" / "bctl-demo" / "index.html").read_text())]
    assert hrefs == ["bctl_demo-1.0-py3-none-any.whl", "bctl_demo-1.1-py3-none-any.whl"]
    assert [a["href"] for a in links((index / "simple" / "index.html").read_text())] == ["bctl-demo/"]


def test_selection_latest_of_a_recipe_or_of_every_recipe(store, wheel_dir):
    old = make_artifact(store, "demo-cpu", "old", make_wheel(wheel_dir / "o", "bctl-demo", "1.0"))
    new = make_artifact(store, "demo-cpu", "new", make_wheel(wheel_dir / "n", "bctl-demo", "1.1"))
    os.utime(old / "manifest.json", (1, 1))
    other = make_artifact(store, "other", "k", make_wheel(wheel_dir / "x", "zz-other", "1.0"))
    (store / "failures" / "demo-cpu-x").mkdir(parents=True)  # failure bundles are not artifacts

    assert publish.select_artifacts("demo-cpu", [], store) == [new]
    assert publish.select_artifacts(None, [], store) == [new, other]
    with pytest.raises(InputError, match=r"no artifact of nope in .*; fix: invoke build --recipe nope"):
        publish.select_artifacts("nope", [], store)
    with pytest.raises(InputError, match="not a recipe name"):
        publish.select_artifacts("../../etc", [], store)


def test_a_build_staging_its_artifact_is_never_the_latest(store, wheel_dir):
    """A build between writing its manifest and publishing (or one killed there) leaves .tmp-<key>-*/ with a
    manifest newer than every artifact: `publish --recipe` and `verify --recipe` take the published one."""
    from buildctl.store import artifacts

    published = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir / "a", "bctl-demo", "1.0"))
    os.utime(published / "manifest.json", (1, 1))
    with artifacts.staging("demo-cpu", "k2", store) as staging:
        (staging / "manifest.json").write_text((published / "manifest.json").read_text())
        assert staging.name.startswith(".tmp-k2-")
        assert artifacts.newest("demo-cpu", store) == published
        assert artifacts.latest("demo-cpu", store) == published
        assert publish.select_artifacts("demo-cpu", [], store) == [published]
        assert publish.select_artifacts(None, [], store) == [published]


# ---------------------------------------------------------------------------------------------- hostile


def _manifest(art: Path) -> dict:
    return json.loads((art / "manifest.json").read_text())


def _set_manifest(art: Path, **entry) -> None:
    m = _manifest(art)
    m["wheels"][0].update(entry)
    (art / "manifest.json").write_text(json.dumps(m))


def tampered_wheel(art: Path, outside: Path) -> str:
    """The wheel changed after the build (a publish without the hash check serves it under the build's
    manifest and name, and pip's hash check then fails on every machine that installs it)."""
    wheel = next(art.glob("*.whl"))
    with wheel.open("ab") as fh:
        fh.write(b"tampered")
    return "does not match its manifest"


def escaping_name(art: Path, outside: Path) -> str:
    """The manifest names a file outside the artifact: a publish that joins the name to the folder copies
    whatever that path holds (here a real wheel of another project, with its right sha256) into the index."""
    stray = make_wheel(outside, "stray", "9.9")
    _set_manifest(art, file=f"../../../{outside.name}/{stray.name}", sha256=sha256(stray))
    return "is not a plain file name in the artifact folder"


def symlinked_wheel(art: Path, outside: Path) -> str:
    """The wheel is a symlink to a file elsewhere on the host with the sha256 the manifest records: a
    publish that follows it copies that file into the index, where every client can download it."""
    wheel = next(art.glob("*.whl"))
    stray = make_wheel(outside, wheel.name.split("-")[0].replace("_", "-"), wheel.name.split("-")[1], body="STRAY\n")
    wheel.unlink()
    wheel.symlink_to(stray)
    _set_manifest(art, sha256=sha256(stray))
    return "is a symlink, not a plain file"


def symlinked_manifest(art: Path, outside: Path) -> str:
    """manifest.json is a symlink: the publish would put whatever file it points at next to the wheel."""
    real = outside / "manifest.json"
    outside.mkdir(exist_ok=True)
    real.write_text((art / "manifest.json").read_text())
    (art / "manifest.json").unlink()
    (art / "manifest.json").symlink_to(real)
    return "manifest.json is a symlink, not a plain file"


def fifo_wheel(art: Path, outside: Path) -> str:
    """The wheel is a FIFO: reading it to hash it blocks the publish forever."""
    wheel = next(art.glob("*.whl"))
    wheel.unlink()
    os.mkfifo(wheel)
    return "is not a plain file"


def metadata_disagrees(art: Path, outside: Path) -> str:
    """METADATA names another project than the file name: the index would list it under a name pip then
    refuses to install ("has inconsistent name")."""
    wheel = next(art.glob("*.whl"))
    liar = make_wheel(outside, "bctl-demo", "1.0", metadata_name="torch")
    wheel.write_bytes(liar.read_bytes())
    _set_manifest(art, sha256=sha256(wheel))
    return "METADATA says torch 1.0, the file name bctl-demo 1.0"


def markup_in_requires_python(art: Path, outside: Path) -> str:
    """A Requires-Python that is markup, not a specifier: it would go into the page's attribute."""
    wheel = next(art.glob("*.whl"))
    evil = make_wheel(outside, "bctl-demo", "1.0", requires_python='>=3"><script>alert(1)</script>')
    wheel.write_bytes(evil.read_bytes())
    _set_manifest(art, sha256=sha256(wheel))
    return "is not a version specifier"


def not_a_wheel_name(art: Path, outside: Path) -> str:
    wheel = next(art.glob("*.whl"))
    wheel.rename(art / "evil.whl")
    _set_manifest(art, file="evil.whl")
    return "is not a wheel file name"


def url_characters_in_a_tag(art: Path, outside: Path) -> str:
    """A platform tag holding '#' (issue 20, item 12): packaging parses it, but the index's href would end
    at the '#' and pip would fetch another file."""
    wheel = next(art.glob("*.whl"))
    wheel.rename(art / "bctl_demo-1.0-py3-none-linux#x86_64.whl")
    _set_manifest(art, file="bctl_demo-1.0-py3-none-linux#x86_64.whl")
    return "is not a wheel file name (PEP 427"


def not_json(art: Path, outside: Path) -> str:
    (art / "manifest.json").write_text("{nope")
    return "not JSON"


def not_a_zip(art: Path, outside: Path) -> str:
    wheel = next(art.glob("*.whl"))
    wheel.write_bytes(b"PK not really")
    _set_manifest(art, sha256=sha256(wheel))
    return "not a readable wheel"


HOSTILE = [tampered_wheel, escaping_name, symlinked_wheel, symlinked_manifest, fifo_wheel, metadata_disagrees,
           markup_in_requires_python, not_a_wheel_name, url_characters_in_a_tag, not_json, not_a_zip]


@pytest.mark.parametrize("make_hostile", HOSTILE, ids=[f.__name__ for f in HOSTILE])
def test_hostile_artifact_is_refused_before_anything_is_written(tmp_path, store, wheel_dir, make_hostile):
    art = make_artifact(store, "demo-cpu", "k", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    expected = make_hostile(art, tmp_path / "outside")
    index = tmp_path / "index"
    with pytest.raises(InputError) as err:
        publish.publish(str(index), artifact_dirs=[str(art)], root=store, environ={})
    message = str(err.value)
    assert expected in message and "fix:" in message and "\n" not in message, message
    assert not index.exists()


def test_a_different_file_of_the_same_name_in_the_index_is_refused(tmp_path, store, wheel_dir):
    """Replacing a published wheel by another of the same name breaks every pip that cached or pinned the
    first by hash; the index keeps the first and the publish fails, writing nothing."""
    index = tmp_path / "index"
    first = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir / "1", "bctl-demo", "1.0", body="A = 1\n"))
    second = make_artifact(store, "demo-cpu", "k2", make_wheel(wheel_dir / "2", "bctl-demo", "1.0", body="A = 2\n"))
    publish.publish(str(index), artifact_dirs=[str(first)], root=store, environ={})
    before = {p: p.read_bytes() for p in index.rglob("*") if p.is_file()}
    with pytest.raises(publish.PublishError, match=r"already holds bctl_demo-1.0-py3-none-any.whl with sha256 "
                                                   r"\w+…, not this build's"):
        publish.publish(str(index), artifact_dirs=[str(second)], root=store, environ={})
    assert {p: p.read_bytes() for p in index.rglob("*") if p.is_file()} == before


def test_two_artifacts_making_one_file_name_differently_are_refused(tmp_path, store, wheel_dir):
    """Two recipes with one framework.version make one file name: one index cannot hold both (the demo
    recipes carry their stack as a local label, +cpu and +cu132, for this reason)."""
    a = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir / "1", "bctl-demo", "1.0", body="A = 1\n"))
    b = make_artifact(store, "demo-cuda13", "k2", make_wheel(wheel_dir / "2", "bctl-demo", "1.0", body="A = 2\n"))
    with pytest.raises(InputError, match="both make it with different contents.*framework.version"):
        publish.publish(str(tmp_path / "index"), root=store, environ={})
    assert not (tmp_path / "index").exists()
    same = make_artifact(store, "demo-again", "k3", a / "bctl_demo-1.0-py3-none-any.whl")
    rows = publish.publish(str(tmp_path / "index"), artifact_dirs=[str(a), str(same)], root=store, environ={})["wheels"]
    assert [r["artifact"] for r in rows] == [str(a)]  # the same file from two artifacts: published once
    assert b.is_dir()


def test_credentials_are_taken_from_url_env_or_netrc_and_masked(tmp_path, monkeypatch):
    server = publish.Server.from_url("http://ci:s3cret-pw@127.0.0.1:8080", {})
    assert (server.url, server.username, server.password) == ("http://127.0.0.1:8080/", "ci", "s3cret-pw")
    env = {"BUILDCTL_PUBLISH_USERNAME": "bot", "BUILDCTL_PUBLISH_PASSWORD": "tok-123456"}
    assert publish.Server.from_url("https://idx.example/team/dev", env).password == "tok-123456"
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine idx.example login nbot password nrc-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert publish.Server.from_url("https://idx.example/", {}).password == "nrc-secret"
    masker = publish.masker_for("http://ci:s3cret-pw@h/", server, env)
    assert "s3cret-pw" not in masker("401 for http://ci:s3cret-pw@h/ and s3cret-pw")
    assert "tok-123456" not in masker("token tok-123456")


# ---------------------------------------------------------------------------------------------- CLI


def invoke(*args: str, env_extra: dict | None = None, cwd: Path | None = None):
    return invoke_here("-r", str(ROOT), *args, env=env_extra, cwd=cwd or os.getcwd())


def test_cli_publish_json_and_exit_codes(tmp_path, store, wheel_dir):
    art = make_artifact(store, "demo-cpu", "0123456789abcdef", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    env = {"BUILDCTL_ARTIFACTS": str(store)}
    ok = invoke("publish", "--recipe", "demo-cpu", "--key", art.name, "--to", str(tmp_path / "index"), "--json",
                env_extra=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["wheels"][0]["status"] == "added"

    tampered_wheel(art, tmp_path)
    bad = invoke("publish", "--artifact", str(art), "--to", str(tmp_path / "index2"), env_extra=env)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.startswith("error: ") and "does not match its manifest" in bad.stderr
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert not (tmp_path / "index2").exists()


def run_cli(capsys, *args, **kwargs) -> tuple[int, str, str]:
    """cli.publish in this process (an `invoke` process costs seconds on a loaded machine)."""
    try:
        cli.publish(*args, **kwargs)
        code = 0
    except Exit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_publish_human_output_and_refusals(tmp_path, store, wheel_dir, capsys, monkeypatch):
    art = make_artifact(store, "demo-cpu", "k", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    monkeypatch.setenv("BUILDCTL_PUBLISH_TO", str(tmp_path / "index"))
    code, out, _ = run_cli(capsys, None, [str(art)], to=None, as_json=False)
    assert code == 0 and "added" in out
    assert "python3 -m http.server --directory" in out and "pip install --index-url" in out and "bctl-demo==1.0" in out

    monkeypatch.delenv("BUILDCTL_PUBLISH_TO")
    code, _, err = run_cli(capsys, None, [str(art)], to=None, as_json=False)
    assert code == 2 and err.count("\n") == 1 and "--to is required" in err

    code, _, err = run_cli(capsys, None, [str(art)], to="ftp://u:hunter22@h/", as_json=False)
    assert code == 2 and "ftp:// is not a destination" in err and "hunter22" not in err

    code, _, err = run_cli(capsys, "demo-cpu", [str(art)], to=str(tmp_path / "i"), as_json=False)
    assert code == 2 and "not both" in err


# ------------------------------------------------------------------------ issue 35: suspicions, decided


class _Index:
    """An index server stand-in on this machine: records each request's path and Authorization header and
    answers every page with `page` (bytes). `address` is where it listens."""

    def __init__(self, address: str, page: bytes = b"<html><body></body></html>"):
        import http.server
        import threading

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                seen.append((self.path, self.headers.get("Authorization")))
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                try:
                    self.wfile.write(page)
                except OSError:  # the reader stopped: what a capped read does
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _address_not_on_the_loopback() -> str:
    """This machine's address on its default route (a UDP connect sends nothing): another host, as a URL
    names it."""
    import contextlib
    import socket

    for target in ("192.0.2.1", "198.51.100.1", "10.255.255.1"):  # documentation / private: never reached
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, contextlib.suppress(OSError):
            s.connect((target, 9))
            address = s.getsockname()[0]
            if not address.startswith("127."):
                return address
    address = socket.gethostbyname(socket.gethostname())
    assert not address.startswith("127."), "this machine has no address but the loopback"
    return address


def test_credentials_never_go_to_an_index_over_plain_http_on_another_host(store, wheel_dir, monkeypatch):
    """Issue 35, suspicion (proved): `invoke publish --to http://ci:PASSWORD@index.corp:8080/` sent the
    basic-auth credentials in clear to another host (the index here on this machine's own network address:
    it received `Authorization: Basic ...`). pip refuses a plain-http index that is not a trusted host; now
    publish refuses the credentials before any request, in one line with the fix. The loopback (a server
    on this machine, CI's pypiserver) and https are as before."""
    art = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    address = _address_not_on_the_loopback()
    monkeypatch.setenv("NETRC", os.devnull)
    with _Index("0.0.0.0") as index:
        for to, env in ((f"http://ci:s3cret-pw@{address}:{index.port}/", {}),
                        (f"http://{address}:{index.port}/", {"BUILDCTL_PUBLISH_USERNAME": "ci",
                                                            "BUILDCTL_PUBLISH_PASSWORD": "s3cret-pw"})):
            with pytest.raises(InputError) as e:
                publish.publish(to, artifact_dirs=[str(art)], root=store, environ=env)
            message = str(e.value)
            assert "\n" not in message and "unencrypted" in message and "fix: " in message and "https://" in message
            assert "s3cret-pw" not in message, message
        assert index.seen == []  # not one request: the credentials went nowhere


def test_an_index_page_is_read_within_a_cap(store, wheel_dir, monkeypatch):
    """Issue 35, suspicion (proved): the server's simple pages were read whole (requests' .text): a server
    answering gigabytes was read into memory. Now a page is read within MAX_PAGE_BYTES and one beyond it is
    refused in one line (here the cap lowered to 64 KiB and a page of 1 MiB, on the loopback)."""
    from buildctl.store.publish import server

    monkeypatch.setattr(server, "MAX_PAGE_BYTES", 64 << 10, raising=False)
    art = make_artifact(store, "demo-cpu", "k1", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    with _Index("127.0.0.1", page=b"<a href='x'>x</a>" * (1 << 16)) as index:
        with pytest.raises(publish.PublishError) as e:
            publish.publish(f"http://127.0.0.1:{index.port}/", artifact_dirs=[str(art)], root=store, environ={})
    message = str(e.value)
    assert "\n" not in message and "larger than 64 KiB" in message and "fix: " in message, message


def test_publish_holds_the_artifacts_it_reads_against_clean(tmp_path, store, wheel_dir, monkeypatch):
    """Issue 35, suspicion (proved): `invoke publish` read an artifact without its key's lock, shared, so an
    `invoke clean` meanwhile removed it under the publish (which then failed on the missing wheel, an
    internal error). Now publish holds each selected artifact's lock, shared, until it is done: clean
    leaves it ("a build of this key is running"), and the publish completes."""
    from buildctl.host import clean
    from buildctl.store import artifacts as store_mod
    from buildctl.store.publish import folder

    art = make_artifact(store, "demo-cpu", "0123456789abcdef", make_wheel(wheel_dir, "bctl-demo", "1.0"))
    store_mod.record_use({"artifact": ["demo-cpu/0123456789abcdef"]}, store)
    old = 1_000_000_000
    os.utime(store_mod._stamp(store, "artifact", "demo-cpu/0123456789abcdef"), (old, old))
    real = folder.publish_to_folder
    cleaned = []

    def clean_comes_meanwhile(wheels, index):
        cleaned.append(clean.clean(older_than_days=1, root=store, objects=()))
        return real(wheels, index)

    monkeypatch.setattr(publish, "publish_to_folder", clean_comes_meanwhile)
    result = publish.publish(str(tmp_path / "index"), artifact_dirs=[str(art)], root=store, environ={})
    assert [w["status"] for w in result["wheels"]] == ["added"] and art.is_dir()
    assert cleaned[0]["removed"] == [] and cleaned[0]["failed"] == [
        {"kind": "artifact", "name": "demo-cpu/0123456789abcdef", "error": "a build of this key is running (its lock is held)"}]
