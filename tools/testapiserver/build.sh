#!/usr/bin/env bash
# Build the testapiserver binary into a cache keyed by the sha256 of
# go.mod + go.sum + the *.go files + this script, skipping the build when that
# binary exists.
# The last line on stdout is always the binary's absolute path.
#
#   FERRYMAN_CACHE   cache root (default: $HOME/.cache/ferryman)
#
# A cold build compiles most of Kubernetes: expect 10+ minutes on 2 cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${FERRYMAN_CACHE:-${HOME}/.cache/ferryman}"

key="$(cd "$here" && cat go.mod go.sum ./*.go build.sh | sha256sum | cut -d' ' -f1)"
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
# Stamp the real release into /version (otherwise "v0.0.0-master+$Format:%H$").
k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$here/go.mod")"
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
vpkg=k8s.io/component-base/version
ldflags="-s -w -X ${vpkg}.gitVersion=${k8s_version} -X ${vpkg}.gitMajor=1 -X ${vpkg}.gitMinor=${k8s_minor} -X ${vpkg}.gitTreeState=clean"
(
    cd "$here"
    GOFLAGS="${GOFLAGS:--mod=mod}" CGO_ENABLED=0 \
        go build -trimpath -ldflags="$ldflags" -o "$tmp" .
)
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"   # atomic: a concurrent build.sh never sees a partial binary
trap - EXIT
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$bin"
