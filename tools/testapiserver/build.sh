#!/usr/bin/env bash
# Build the testapiserver binary into a cache keyed by the sha256 of
# go.mod + go.sum + main.go, skipping the build when that binary exists.
# The last line on stdout is always the binary's absolute path.
#
#   FERRYMAN_CACHE   cache root (default: $HOME/.cache/ferryman)
#
# A cold build compiles most of Kubernetes: expect 10+ minutes on 2 cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${FERRYMAN_CACHE:-${HOME}/.cache/ferryman}"

key="$(cd "$here" && cat go.mod go.sum main.go | sha256sum | cut -d' ' -f1)"
out_dir="${cache_root}/testapiserver/${key}"
bin="${out_dir}/testapiserver"

if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: go is not installed" >&2; exit 1; }

mkdir -p "$out_dir"
tmp="$(mktemp "${out_dir}/.testapiserver.XXXXXX")"
trap 'rm -f "$tmp"' EXIT

echo "build.sh: building testapiserver (cache key ${key:0:12}); a cold build takes many minutes" >&2
start=$SECONDS
(
    cd "$here"
    GOFLAGS="${GOFLAGS:--mod=mod}" CGO_ENABLED=0 \
        go build -trimpath -ldflags='-s -w' -o "$tmp" .
)
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"   # atomic: a concurrent build.sh never sees a partial binary
trap - EXIT
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$bin"
