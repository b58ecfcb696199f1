#!/usr/bin/env bash
# Builds Angie from the vendored release source (../shared/vendor/, see its
# README) for the Angie flavour's tests, cached under ~/.cache/ferryman by the
# archive's sha256 and the configure flags, so warm runs only check the hash.
# The last line on stdout is always the binary's absolute path.
#
#   FERRYMAN_CACHE   cache root (default: $HOME/.cache/ferryman)
#   FERRYMAN_VENDOR  the vendored sources (default: ../shared/vendor from the
#                    repository's root, where CI has them)
#
# A cold build takes about 30 s on 2 cores (configure + make -j2).
set -euo pipefail
cd "$(dirname "$0")/.."

archive="${FERRYMAN_VENDOR:-../shared/vendor}/angie-1.12.1.tar.gz"
[ -f "$archive" ] || { echo "build-angie: $archive is missing" >&2; exit 1; }
# The modules the templates use: TLS (SNI, ssl_reject_handshake), HTTP/2,
# stub_status for --nginx-status-port; stream for parity with the NGINX flavour.
# Angie's api, status_zone, upstream zone/resolve are built in.
flags=(--with-http_ssl_module --with-http_v2_module --with-http_stub_status_module
  --with-stream --with-stream_ssl_module --with-stream_ssl_preread_module)
key=$( (sha256sum <"$archive"; echo "${flags[*]}") | sha256sum | cut -c1-16)
prefix="${FERRYMAN_CACHE:-$HOME/.cache/ferryman}/angie-$key"
bin="$prefix/sbin/angie"

if [ ! -x "$bin" ]; then
  missing=()
  [ -e /usr/include/pcre2.h ] || missing+=(libpcre2-dev)
  [ -e /usr/include/zlib.h ] || missing+=(zlib1g-dev)
  [ -e /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
  command -v cc >/dev/null || missing+=(gcc)
  command -v make >/dev/null || missing+=(make)
  scripts/apt-install.sh build-angie ${missing[@]+"${missing[@]}"}
  echo "build-angie: building Angie from $archive (cache key $key)" >&2
  start=$SECONDS
  work=$(mktemp -d)
  staging="$prefix.tmp.$$"
  trap 'rm -rf "$work" "$staging"' EXIT
  tar xzf "$archive" -C "$work"
  (
    cd "$work"/angie-*/
    ./configure --prefix="$staging" "${flags[@]}" >build.log 2>&1 \
      || { cat build.log >&2; exit 1; }
    make -j"$(nproc)" >>build.log 2>&1 && make install >>build.log 2>&1 \
      || { tail -50 build.log >&2; exit 1; }
  )
  # The binary keeps its configure prefix only as a default (ferryman passes
  # -p and -c); installing under a temporary name then renaming keeps a
  # concurrent run from seeing half a tree.
  mkdir -p "$(dirname "$prefix")"
  mv -T "$staging" "$prefix" 2>/dev/null || [ -x "$bin" ]
  echo "build-angie: built in $((SECONDS - start))s" >&2
fi
echo "$bin"
