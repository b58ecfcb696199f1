#!/usr/bin/env bash
# Build the Gateway API conformance suite (a test binary) and its echo backend
# (echo-basic, from the same module version) into a cache keyed by the sha256
# of go.mod + go.sum + the *.go files + this script; skipped when both exist.
# Prints three lines: the suite binary's path, echo-basic's, and the directory of
# the release's standard-channel CRDs (the suite refuses any other bundle version).
#
#   FERRYMAN_CACHE   cache root (default: $HOME/.cache/ferryman)
#
# A cold build takes about 1.5 minutes on 2 cores (measured: 93 s), then seconds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${FERRYMAN_CACHE:-${HOME}/.cache/ferryman}"

key="$(cd "$here" && cat go.mod go.sum ./*.go build.sh | sha256sum | cut -d' ' -f1)"
out_dir="${cache_root}/conformance/${key}"
suite="${out_dir}/conformance.test"
echo_bin="${out_dir}/echo-basic"

if [[ -x "$suite" && -x "$echo_bin" ]]; then
    echo "$suite"
    echo "$echo_bin"
    echo "$out_dir/crds"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: go is not installed" >&2; exit 1; }

mkdir -p "$out_dir"
tmp_suite="$(mktemp "${out_dir}/.suite.XXXXXX")"
tmp_echo="$(mktemp "${out_dir}/.echo.XXXXXX")"
trap 'rm -f "$tmp_suite" "$tmp_echo"' EXIT

echo "build.sh: building the Gateway API conformance suite (cache key ${key:0:12})" >&2
start=$SECONDS
(
    cd "$here"
    export GOFLAGS="${GOFLAGS:--mod=mod}" CGO_ENABLED=0
    go test -c -trimpath -o "$tmp_suite" .
    go build -trimpath -o "$tmp_echo" sigs.k8s.io/gateway-api/conformance/echo-basic
    # The standard channel's CRDs of the same release, which the suite insists on.
    rm -rf "$out_dir/crds"
    cp -r "$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)/config/crd/standard" "$out_dir/crds"
    chmod -R u+w "$out_dir/crds"
    # Its base manifests (embedded in the suite too), for tests of the environment.
    suite_dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api/conformance)"
    cp "$suite_dir/base/manifests.yaml" "$out_dir/base-manifests.yaml"
    # And every test's manifests, which ferryman's parsers must read as the API server does.
    rm -rf "$out_dir/tests"
    mkdir -p "$out_dir/tests"
    cp "$suite_dir"/tests/*.yaml "$out_dir/tests/"
    chmod -R u+w "$out_dir/base-manifests.yaml" "$out_dir/tests"
)
chmod 0755 "$tmp_suite" "$tmp_echo"
mv -f "$tmp_echo" "$echo_bin"
mv -f "$tmp_suite" "$suite"   # last: its presence says both are there
trap - EXIT
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$suite"
echo "$echo_bin"
echo "$out_dir/crds"
