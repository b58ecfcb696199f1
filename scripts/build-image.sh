#!/usr/bin/env bash
# Builds the ferryman image with Debian's podman, on a Debian base image made
# here by debootstrap from Debian's packages (no image registry is needed).
# Both are cached by input hash: the base by the function that makes it and the
# mirror, the image by the base, the Dockerfile and every file it copies; a build
# runs only when `podman image exists` says the tag is missing. The last line on stdout is
# the image's name. tests/container/ runs it as deploy/ does.
#
#   scripts/build-image.sh              Debian's NGINX 1.22 (the default image)
#   scripts/build-image.sh nginx-1.30   that image with NGINX 1.30.4 (Dockerfile.server)
#   scripts/build-image.sh angie        that image with Angie 1.12.1 (--data-plane=angie)
#
#   FERRYMAN_DEBIAN_MIRROR   Debian mirror (default: http://deb.debian.org/debian)
#   FERRYMAN_VENDOR          the servers' sources (default: ../shared/vendor)
#
# podman runs with runc: crun fails on this machine class's hybrid cgroups.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v podman >/dev/null || need_apt+=(podman)
command -v runc >/dev/null || need_apt+=(runc)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
scripts/apt-install.sh build-image ${need_apt[@]+"${need_apt[@]}"}

mirror="${FERRYMAN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
podman=(podman --runtime runc)
# runc sets the container's limits and may not raise them past the host's.
nofile=$(ulimit -n); [ "$nofile" = unlimited ] || [ "$nofile" -le 16384 ] || nofile=16384
nproc=$(ulimit -u); [ "$nproc" = unlimited ] || [ "$nproc" -le 4096 ] || nproc=4096
[ "$nofile" != unlimited ] || nofile=16384
[ "$nproc" != unlimited ] || nproc=4096
ulimits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")

cache="${FERRYMAN_CACHE:-$HOME/.cache/ferryman}"
mkdir -p "$cache"
# One build at a time on a machine; a second caller then finds the tag.
exec 9>"$cache/build-image.lock"
flock 9

# The Debian root filesystem the image starts from, in "$1".
make_base() {
  debootstrap --variant=minbase bookworm "$1" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log" >&2; return 1; }
  # As Debian's own images: packages never start services during a build.
  printf '#!/bin/sh\nexit 101\n' >"$1/usr/sbin/policy-rc.d"
  chmod 0755 "$1/usr/sbin/policy-rc.d"
  rm -f "$1/etc/apt/sources.list"
  cat >"$1/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* "$1"/var/log/*
}

# The Dockerfile on "$1" (the base), tagged "$2".
build_image() {
  local ca=()
  # pip verifies PyPI against the host's CA bundle (which may hold a proxy's CA).
  local host_ca=/etc/ssl/certs/ca-certificates.crt
  [ -e "$host_ca" ] && ca=(--volume "$host_ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
  # --jobs 2: the module and the virtualenv stages build side by side.
  "${podman[@]}" build --jobs 2 --network=host "${ulimits[@]}" "${ca[@]}" --build-arg "BASE=$1" \
    --tag "$2" --file Dockerfile . >"$cache/build-image.log" 2>&1 \
    || { tail -40 "$cache/build-image.log" >&2; return 1; }
}

# Each key covers the function that makes the thing, so editing the rest of this
# script rebuilds nothing.
base_key=$( (declare -f make_base; echo "$mirror") | sha256sum | cut -c1-16)
base="localhost/ferryman-base:bookworm-$base_key"
if ! "${podman[@]}" image exists "$base"; then
  echo "build-image: making $base with debootstrap" >&2
  start=$SECONDS
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  make_base "$root"
  tar -C "$root" -c . | "${podman[@]}" import - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
  echo "build-image: base made in $((SECONDS - start))s" >&2
fi

inputs=(Dockerfile .dockerignore pyproject.toml uv.lock README.md scripts/build-module.sh
        scripts/build-h2c-module.sh)
mapfile -t sources < <(find src -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort)
key=$( (echo "$base"; declare -f build_image; sha256sum "${inputs[@]}" "${sources[@]}") \
  | sha256sum | cut -c1-16)
image="localhost/ferryman:$key"
if ! "${podman[@]}" image exists "$image"; then
  echo "build-image: building $image" >&2
  start=$SECONDS
  build_image "$base" "$image"
  echo "build-image: built in $((SECONDS - start))s" >&2
fi

server="${1:-}"
case "$server" in
  "") echo "$image"; exit 0 ;;
  nginx-1.30) build=nginx ;;
  angie) build=angie ;;
  *) echo "build-image: $server: nginx-1.30 or angie" >&2; exit 2 ;;
esac
vendor=$(realpath "${FERRYMAN_VENDOR:-../shared/vendor}")
# The server's stage (Dockerfile.server) on the same base, added to the image.
build_server_image() {
  "${podman[@]}" build --network=host "${ulimits[@]}" --volume "$vendor:/vendor:ro" \
    --build-arg "BASE=$1" --build-arg "IMAGE=$2" --build-arg "SERVER=$3" \
    --tag "$4" --file Dockerfile.server . >"$cache/build-image-$3.log" 2>&1 \
    || { tail -40 "$cache/build-image-$3.log" >&2; return 1; }
}
mapfile -t server_inputs < <(find "$vendor" -maxdepth 1 -name '*.tar.gz' | LC_ALL=C sort)
server_key=$( (echo "$image $build"; declare -f build_server_image
  sha256sum Dockerfile.server scripts/build-nginx.sh "${server_inputs[@]}") \
  | sha256sum | cut -c1-16)
server_image="localhost/ferryman-$server:$server_key"
if ! "${podman[@]}" image exists "$server_image"; then
  echo "build-image: building $server_image" >&2
  start=$SECONDS
  build_server_image "$base" "$image" "$build" "$server_image"
  echo "build-image: built in $((SECONDS - start))s" >&2
fi
echo "$server_image"
