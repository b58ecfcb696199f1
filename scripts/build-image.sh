#!/usr/bin/env bash
# Builds the ferryman image with Debian's podman, on a Debian base image made
# here by debootstrap from Debian's packages (no image registry is needed).
# Both are cached by input hash: the base by this script, the image by the
# base, the Dockerfile and every file it copies; a build runs only when
# `podman image exists` says the tag is missing. The last line on stdout is
# the image's name. tests/container/ runs it as deploy/ does.
#
#   FERRYMAN_DEBIAN_MIRROR   Debian mirror (default: http://deb.debian.org/debian)
#
# podman runs with runc: crun fails on this machine class's hybrid cgroups.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v podman >/dev/null || need_apt+=(podman)
command -v runc >/dev/null || need_apt+=(runc)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "build-image: installing ${need_apt[*]} from Debian" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${need_apt[@]}" >/dev/null
fi

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

base_key=$( (cat scripts/build-image.sh; echo "$mirror") | sha256sum | cut -c1-16)
base="localhost/ferryman-base:bookworm-$base_key"
if ! "${podman[@]}" image exists "$base"; then
  echo "build-image: making $base with debootstrap" >&2
  start=$SECONDS
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  # As Debian's own images: packages never start services during a build.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
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
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*
  tar -C "$root" -c . | "${podman[@]}" import - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
  echo "build-image: base made in $((SECONDS - start))s" >&2
fi

inputs=(Dockerfile .dockerignore pyproject.toml uv.lock README.md scripts/build-module.sh)
mapfile -t sources < <(find src -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | LC_ALL=C sort)
key=$( (echo "$base"; sha256sum "${inputs[@]}" "${sources[@]}") | sha256sum | cut -c1-16)
image="localhost/ferryman:$key"
if ! "${podman[@]}" image exists "$image"; then
  echo "build-image: building $image" >&2
  start=$SECONDS
  ca=()
  # pip verifies PyPI against the host's CA bundle (which may hold a proxy's CA).
  host_ca=/etc/ssl/certs/ca-certificates.crt
  [ -e "$host_ca" ] && ca=(--volume "$host_ca:/run/host-ca.crt:ro" --build-arg PIP_CERT=/run/host-ca.crt)
  "${podman[@]}" build --jobs 2 --network=host "${ulimits[@]}" "${ca[@]}" --build-arg "BASE=$base" \
    --tag "$image" --file Dockerfile . >"$cache/build-image.log" 2>&1 \
    || { tail -40 "$cache/build-image.log" >&2; exit 1; }
  echo "build-image: built in $((SECONDS - start))s" >&2
fi
echo "$image"
