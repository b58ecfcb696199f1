#!/usr/bin/env bash
# Build the helm CLI from Go modules (helm.sh/helm/v3, pinned below) into
#   ${FERRYMAN_CACHE:-$HOME/.cache/ferryman}/helm/<version>/helm
# and skip the build when that binary exists.
# The last line on stdout is always the binary's absolute path.
#
#   FERRYMAN_CACHE   cache root (default: $HOME/.cache/ferryman)
#
# A cold build downloads and compiles helm's dependencies: a few minutes on 2 cores.
set -euo pipefail

HELM_VERSION="v3.22.0"

cache_root="${FERRYMAN_CACHE:-${HOME}/.cache/ferryman}"
out_dir="${cache_root}/helm/${HELM_VERSION}"
bin="${out_dir}/helm"

if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: go is not installed" >&2; exit 1; }

mkdir -p "$out_dir"
# Install into a private directory, then move atomically: a concurrent
# build.sh never sees a partial binary.
tmp_dir="$(mktemp -d "${out_dir}/.build.XXXXXX")"
trap 'rm -rf "$tmp_dir"' EXIT

echo "build.sh: building helm ${HELM_VERSION}; a cold build takes minutes" >&2
start=$SECONDS
# Stamp what helm's Makefile stamps: the release into `helm version`, and the
# Kubernetes version of its client-go (v0.X.Y -> 1.X) as the default capabilities
# of `helm template`/`helm lint` (otherwise 1.20).
gomod="$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
client_go="$(awk '$1 == "k8s.io/client-go" {print $2; exit}' "$gomod")"
k8s_minor="$(echo "$client_go" | cut -d. -f2)"
[[ "$k8s_minor" =~ ^[0-9]+$ ]] || { echo "build.sh: cannot read client-go's version from $gomod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${k8s_minor}"
done
(
    cd "$tmp_dir"
    GOBIN="$tmp_dir" CGO_ENABLED=0 \
        go install -trimpath -ldflags="$ldflags" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
)
chmod 0755 "$tmp_dir/helm"
mv -f "$tmp_dir/helm" "$bin"
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$bin"
