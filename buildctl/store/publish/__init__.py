"""`invoke publish`: put published wheels, with their manifests, on a PEP 503 index pip installs from.

Two kinds of destination:

* a folder, served by any static web server (`pip install --index-url http://HOST/simple/ …`):

      simple/index.html                        the projects (PEP 503 root page)
      simple/<project>/index.html              links `../../files/<project>/<wheel>#sha256=…` with
                                               data-requires-python and data-core-metadata
      files/<project>/<wheel>                  the wheel
      files/<project>/<wheel>.metadata         its METADATA (PEP 658: pip resolves without a download)
      files/<project>/<wheel>.manifest.json    the artifact's manifest.json (what built it)

  The pages of the touched projects and the root page are regenerated from the files there on every
  publish (idempotent: an unchanged page is not rewritten). Publishes to one folder serialise on a lock.
  No PEP 691 JSON pages: a static server cannot negotiate them, and pip reads the HTML ones.

* an index server's upload URL (pypiserver `http://host:8080/`, devpi `http://host:3141/USER/INDEX/`),
  uploaded with twine; credentials come from the URL, BUILDCTL_PUBLISH_USERNAME/PASSWORD or ~/.netrc and
  are masked in every message. The server's simple page is read before (a file already there with the
  same sha256 is "unchanged") and after the upload (the index must list the file with our sha256).

An artifact is untrusted input: its manifest must parse, each wheel it names must be a plain file in the
artifact folder with a valid wheel name, the sha256 the manifest records and METADATA that agrees with
the file name; otherwise a one-line InputError and nothing is written. A file name the index already
holds with other contents is refused (pip caches by name: two different wheels of one name break
installs), before anything is written.

The modules: wheels (select and check the artifacts), folder (a static index), server (an upload).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from buildctl.errors import InputError
from buildctl.secrets import mask_url
from buildctl.store import artifacts
from buildctl.store.publish.folder import publish_to_folder
from buildctl.store.publish.server import Server, masker_for, publish_to_server
from buildctl.store.publish.wheels import PublishError, Wheel, check_selection, load_wheels, select_artifacts

LOCK_WAIT_S = 120  # for `invoke clean` to finish removing what it started on (then: LockTimeout, one line)


def publish(to: str, *, recipe: str | None = None, artifact_dirs: Iterable[str] = (), root: Path | None = None,
            environ: Mapping[str, str]) -> dict:
    """Check the selected artifacts, then publish their wheels to `to` (a folder or an http(s) URL); `environ`:
    the command's environment (an index server's credentials, REQUESTS_CA_BUNDLE: server.publish_to_server)."""
    if not to:
        raise InputError("--to is required; fix: --to FOLDER (a static index) or --to http://HOST:PORT/ "
                         "(an index server's upload URL) [BUILDCTL_PUBLISH_TO]")
    scheme = urlsplit(to).scheme.lower() if "://" in to else ""
    if scheme and scheme not in ("http", "https"):
        raise InputError(f"--to (value not shown): {scheme}:// is not a destination; fix: a folder path, or an "
                         "http(s):// upload URL")
    with contextlib.ExitStack() as held:
        # Each artifact's key lock, shared, while its files are read and copied (as a build reading it holds
        # it): `invoke clean`, which takes it exclusively, removes none of them meanwhile.
        dirs = select_artifacts(recipe, artifact_dirs, root)
        for d in dirs:
            held.enter_context(artifacts.key_lock(d.parent.name, d.name, d.parent.parent, shared=True,
                                                  timeout=LOCK_WAIT_S))
        wheels = check_selection([w for d in dirs for w in load_wheels(d)])
        if scheme:
            rows, simple = publish_to_server(wheels, to, environ)
            return {"to": mask_url(to), "kind": "server", "index_url": simple, "wheels": rows}
        index = Path(to).expanduser()
        rows = publish_to_folder(wheels, index)
        return {"to": str(index), "kind": "folder", "index_url": None, "simple_dir": str(index / "simple"),
                "wheels": rows}


__all__ = ["PublishError", "Server", "Wheel", "masker_for", "publish", "select_artifacts"]
