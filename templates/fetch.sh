#!/bin/sh
# buildctl-fetch URL SHA256 OUT: take a pre-staged file by its sha256, else download; verify before use.
set -eu
url=$1 sha=$2 out=$3
name=${url##*/}
if [ -f "/tmp/downloads/$sha" ]; then
  echo "buildctl: using pre-staged $name"
  cp "/tmp/downloads/$sha" "$out"
else
  echo "buildctl: downloading $name"
  curl -fsSL --retry 3 -o "$out" "$url"
fi
got=$(sha256sum "$out" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  rm -f "$out"
  echo "buildctl: sha256 mismatch for $name: expected $sha, got $got" >&2
  exit 1
fi
