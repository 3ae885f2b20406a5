#!/usr/bin/env bash
# buildctl-fetch URL SHA256 OUT: take a pre-staged file by its sha256, else download; verify before use.
# URL is the recipe's URL as rendered, without credentials; when it had some, the real URL comes from
# this build's credentials (secrets.sh), so it is in no layer, history or command line of the image.
set -eu
[ -n "${BUILDCTL_SECRETS_TAKEN:-}" ] || . /usr/local/lib/buildctl/secrets.sh
url=$1 sha=$2 out=$3
name=${url%%\?*}
name=${name##*/}
if [ -f "/tmp/downloads/$sha" ]; then
  echo "buildctl: using pre-staged $name"
  cp "/tmp/downloads/$sha" "$out"
else
  echo "buildctl: downloading $name"
  real=$(printf '%s\n' "${BUILDCTL_URL_MAP:-}" | awk -v u="$url" '$1 == u { print $2; exit }')
  curl -fsSL --retry 3 -o "$out" "${real:-$url}"
fi
got=$(sha256sum "$out" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
  rm -f "$out"
  echo "buildctl: sha256 mismatch for $name: expected $sha, got $got" >&2
  exit 1
fi
