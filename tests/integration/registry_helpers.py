"""What the registry tests share (a plain module: the services plugin is imported by pytest itself)."""

from __future__ import annotations

import requests


def delete_from_registry(registry: str, name: str, tag: str) -> None:
    """Remove a test's manifest (the registry runs with delete enabled), so that tags do not pile up."""
    url = f"http://{registry}/v2/{name}/manifests/"
    head = requests.head(url + tag, timeout=30, headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    digest = head.headers.get("Docker-Content-Digest")
    if head.ok and digest:
        requests.delete(url + digest, timeout=30).raise_for_status()
