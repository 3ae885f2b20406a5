"""The shared compile cache's pure parts: URL checks, ccache's URL form, masking, the manifest's figures,
and that the URL stays out of the rendered files and the artifact key (the real server:
test_shared_cache_integration.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from invoke_here import invoke_here

from buildctl import recipe, render, secrets, urls
from buildctl.errors import InputError, RecipeError
from buildctl.pipeline import compile_cache, stages
from buildctl.pipeline.stages import artifact
from buildctl.pipeline.stages.compile import compile_credentials, container_env
from buildctl.store import key as key_mod

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3t-Passw0rd"
URL = f"redis://:{PASSWORD}@cache.example:6379/0"


@pytest.mark.parametrize("url", [
    "redis://cache.example", "redis://127.0.0.1:47101", URL, f"redis://ci:{PASSWORD}@10.0.0.5:6380/3",
    f"redis://{PASSWORD}@cache.example/", "redis://[::1]:6379",
])
def test_redis_urls_pass(url):
    assert urls.check_redis_url(url) == url


@pytest.mark.parametrize(("url", "why"), [
    (f"rediss://:{PASSWORD}@cache.example", "scheme rediss"),
    (f"http://:{PASSWORD}@cache.example", "scheme http"),
    ("cache.example:6379", "no redis://"),
    (f"ci:{PASSWORD}@cache.example:6379", "no redis://"),
    (f"redis://:{PASSWORD}@:6379", "no host name"),
    (f"redis://:{PASSWORD}@cache.example:99999", "port"),
    (f"redis://:{PASSWORD}@cache.example:0", "port"),
    (f"redis://:{PASSWORD}@cache.example/cache", "database number"),
    (f"redis://:{PASSWORD}@cache.example/0?password={PASSWORD}", "query"),
    (f"redis://:{PASSWORD}@cache.example/0 |read-only=true", "white space"),
    (f"redis://:{PASSWORD}@cache.example/0|read-only=true", "shell characters"),
])
def test_a_bad_url_is_one_line_with_the_password_masked(url, why):
    with pytest.raises(InputError) as e:
        urls.check_redis_url(url)
    message = str(e.value)
    assert "\n" not in message and why in message and "fix: " in message, message
    assert PASSWORD not in message


def test_the_cli_refuses_a_bad_url_in_one_line():
    """`invoke render --cache-url ...` (and BUILDCTL_CACHE_URL): exit 2, one line, no password."""
    proc = invoke_here("render", "--recipe", "demo-cpu", "--cache-url", f"https://:{PASSWORD}@cache.example", cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    # (the value is never shown: a URL that tools misread masks badly, issue 20)
    assert proc.stderr.count("\n") == 1 and "--cache-url (value not shown): not a Redis URL" in proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr


def test_a_recipe_site_url_is_checked_without_quoting_it():
    with pytest.raises(RecipeError) as e:
        recipe.load("demo-cpu", site={"cache_url": f"redis://:{PASSWORD}@cache.example/x"})
    assert "database number" in str(e.value) and PASSWORD not in str(e.value)


def test_ccache_takes_a_bare_password():
    """ccache sends `AUTH USER PASSWORD` for USER:PASSWORD@ and `AUTH PASSWORD` for PASSWORD@; the usual
    `redis://:PASSWORD@` would send an empty user name, which Redis refuses."""
    assert urls.ccache_form(URL) == f"redis://{PASSWORD}@cache.example:6379/0"
    assert urls.ccache_form("redis://ci:pw-1234@h") == "redis://ci:pw-1234@h"
    assert urls.ccache_form("redis://h:1") == "redis://h:1"
    assert compile_cache.runtime_env(None) == ()
    assert compile_cache.runtime_env(URL) == (("BUILDCTL_CACHE_URL", f"redis://{PASSWORD}@cache.example:6379/0"),)


def test_the_password_is_masked_in_both_forms():
    for form in (URL, urls.ccache_form(URL)):
        assert PASSWORD not in secrets.mask(f"ccache remote {form} failed")
        assert secrets.mask_url(form) == "redis://***@cache.example:6379/0"
    spec = recipe.load("demo-cpu", site={"cache_url": URL})
    assert PASSWORD in secrets.secret_values_from_site(spec.site)


STATS = {"direct_cache_hit": 7, "preprocessed_cache_hit": 1, "cache_miss": 2, "local_storage_hit": 0,
         "local_storage_miss": 10, "remote_storage_hit": 8, "remote_storage_miss": 2, "remote_storage_error": 0,
         "remote_storage_timeout": 1}


def test_stats_local_and_remote():
    out = compile_cache.stats(STATS, "used\n", URL)
    assert out["local_hits"] == 0 and out["local_misses"] == 10 and out["local_hit_rate"] == 0.0
    assert out["remote"] == {"url": "redis://***@cache.example:6379/0", "state": "used", "hits": 8, "misses": 2,
                             "hit_rate": 0.8, "errors": 0, "timeouts": 1}


def test_stats_without_a_server_and_with_an_unreachable_one():
    assert "remote" not in compile_cache.stats(STATS, "", None)
    out = compile_cache.stats(STATS, "unreachable cache.example:6379 did not answer (Connection refused)\n", URL)
    assert out["remote"] == {"url": "redis://***@cache.example:6379/0", "state": "unreachable",
                             "reason": "cache.example:6379 did not answer (Connection refused)"}


def test_the_state_line_from_the_container_is_one_bounded_line():
    out = compile_cache.stats(STATS, "unreachable " + "x" * 5000 + "\nused\n", URL)
    assert out["remote"]["state"] == "unreachable" and len(out["remote"]["reason"]) < 200
    assert "hits" not in out["remote"]


def test_pipeline_reads_the_build_scripts_files(tmp_path):
    (tmp_path / "cache-stats.txt").write_text("".join(f"{k}\t{v}\n" for k, v in STATS.items()))
    (tmp_path / "cache-remote.txt").write_text("used\n")
    out = artifact._cache_stats(tmp_path, URL)
    assert (out["hits"], out["misses"], out["hit_rate"]) == (8, 2, 0.8)
    assert out["remote"]["hits"] == 8 and PASSWORD not in str(out)


def test_the_url_is_not_rendered_and_not_keyed():
    """Same build, another cache server (or none): the same files and the same artifact key; the
    rendered files hold neither the password nor the server's address (the script reads it at run time)."""
    plain = render.render(recipe.load("demo-cpu"))
    shared = render.render(recipe.load("demo-cpu", site={"cache_url": URL}))
    other = render.render(recipe.load("demo-cpu", site={"cache_url": "redis://other.example:7000"}))
    for r in (shared, other):
        assert key_mod.artifact_key(r.files, "s", "b") == key_mod.artifact_key(plain.files, "s", "b")
        for name, text in r.files.items():
            assert PASSWORD not in text, name
            if name != "recipe.resolved.yaml":  # shown there masked, like a proxy
                assert "cache.example" not in text and "other.example" not in text, name
    assert "cache_url: redis://***@cache.example:6379/0" in shared.files["recipe.resolved.yaml"]
    assert "BUILDCTL_CACHE_URL" in plain.files["build.sh"]


def test_the_compile_container_gets_the_url_as_a_credential_only_with_ccache():
    spec = recipe.load("demo-cpu", site={"cache_url": URL})
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE))
    creds = compile_credentials(run)
    assert ("BUILDCTL_CACHE_URL", urls.ccache_form(URL)) in creds.env
    assert PASSWORD in creds.values() and PASSWORD in run.secrets
    assert "BUILDCTL_CACHE_URL" not in str(container_env(run, 4))  # the container's config: no URL
    sccache = stages.Run.of(recipe.load("demo-cpu", ["build.cache=sccache"], site={"cache_url": URL}),
                            stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE))
    assert "BUILDCTL_CACHE_URL" not in dict(compile_credentials(sccache).env)


def test_the_configure_run_asks_no_cache_server():
    """The build script runs twice (configure, then compile): only the compile asks the server, so a
    server that does not answer is one warning, not one per run."""
    run = stages.Run.of(recipe.load("demo-cpu", site={"cache_url": URL}), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE))
    assert "BUILDCTL_CACHE_URL" not in dict(compile_credentials(run, shared_cache=False).env)
    assert PASSWORD not in str(compile_credentials(run, shared_cache=False).env)


def test_the_summary_shows_both_levels():
    from buildctl.cli.build import _cache_rows

    used = {"hits": 8, "misses": 2, **compile_cache.stats(STATS, "used", URL)}
    assert _cache_rows(used) == [("  local", "0% hits (0/10)"),
                                 ("  shared", "80% hits (8/10) at redis://***@cache.example:6379/0, 1 failed lookups")]
    dead = compile_cache.stats(STATS, "unreachable cache.example:6379 did not answer (Connection refused)", URL)
    assert _cache_rows(dead)[1] == ("  shared", "not used: cache.example:6379 did not answer (Connection refused)")
    assert _cache_rows({"hits": 1, "misses": 0}) == []


def test_a_build_with_a_server_writes_its_local_hits_there_too():
    """ccache writes to its remote storage on a local miss only: a machine whose local volume is warm would
    never fill a new (or evicted) server. With a server set the compile container has `reshare` on; not
    without one, nor in the reproducibility rebuild (no cache at all)."""
    run = stages.Run.of(recipe.load("demo-cpu", site={"cache_url": URL}), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE))
    assert container_env(run, 4)["CCACHE_RESHARE"] == "1"
    assert "CCACHE_RESHARE" not in container_env(stages.Run.of(recipe.load("demo-cpu"), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE)), 4)
    rebuild = stages.Run.of(recipe.load("demo-cpu", site={"cache_url": URL}), stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, rebuild_dir="/rebuild"))
    assert "CCACHE_RESHARE" not in container_env(rebuild, 4)
