#!/bin/sh
# buildctl-git-fetch URL REF DIR: shallow checkout of a tag, branch or commit, with submodules.
set -eu
url=$1 ref=$2 dir=$3 submodules=${4:-1}
mkdir -p "$dir"
cd "$dir"
if [ ! -d .git ]; then git init -q .; fi
git config --global --add safe.directory '*'
git fetch -q --depth 1 "$url" "$ref" || { echo "buildctl: git ref $ref not found in $url" >&2; exit 1; }
git checkout -q --force FETCH_HEAD
if [ "$submodules" = 1 ] && [ -f .gitmodules ]; then
  git submodule -q update --init --recursive --depth 1
fi
