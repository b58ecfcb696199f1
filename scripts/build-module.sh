#!/usr/bin/env bash
# Builds ferryman's NGINX module (src/ferryman/dataplane/module) against
# Debian's nginx-dev and installs it beside the other dynamic modules, where
# ferryman looks for it (--nginx-modules-dir). The build is cached by a hash of
# its inputs (the module's source, this script, NGINX's version and configure
# flags), so only a change of one of them rebuilds it.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$PWD/src/ferryman/dataplane/module"
modules_dir="${FERRYMAN_NGINX_MODULES_DIR:-/usr/lib/nginx/modules}"
ngx_src=/usr/share/nginx/src
hash=$( (cat "$src/config" "$src"/*.c "$src"/*.h "$0" "$ngx_src/conf_flags"; nginx -v 2>&1) | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ferryman/nginx-module-$hash"
so=ngx_http_ferryman_module.so
# TransportServers' stream balancer, built from the same config (its own .so:
# see the module's config file).
stream_so=ngx_stream_ferryman_module.so

if [ ! -e "$cache/$so" ]; then
  echo "build-module: building $so against $(nginx -v 2>&1)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$ngx_src/." "$work/nginx"
  (
    cd "$work/nginx"
    # shellcheck disable=SC1091
    . ./conf_flags
    # NGINX's own flags: --with-compat makes the module loadable by Debian's binary.
    # The stream flags are those of Debian's libnginx-mod-stream (nginx -V):
    # they make the stream headers available to ngx_stream_ferryman_module.
    ./configure "${NGX_CONF_FLAGS[@]}" --with-stream=dynamic --with-stream_ssl_module \
      --with-stream_ssl_preread_module --with-stream_realip_module --with-cc-opt="-O2 -fPIC -Wall -Werror" \
      --with-ld-opt="-Wl,-z,relro -Wl,-z,now -fPIC" --add-dynamic-module="$src" >build.log 2>&1 \
      || { cat build.log >&2; exit 1; }
    make -f objs/Makefile "objs/$so" "objs/$stream_so" >>build.log 2>&1 || { cat build.log >&2; exit 1; }
  )
  mkdir -p "$cache"
  cp "$work/nginx/objs/$stream_so" "$cache/$stream_so"
  cp "$work/nginx/objs/$so" "$cache/$so.tmp"
  mv "$cache/$so.tmp" "$cache/$so"
fi

for so in "$stream_so" "$so"; do
if ! cmp -s "$cache/$so" "$modules_dir/$so"; then
  SUDO=""; [ -w "$modules_dir" ] || SUDO="sudo"
  # A whole new file renamed over the old name: NGINX processes running with
  # the old module keep its inode mapped, and one that starts now loads either
  # the old file or the new one, never a half-written one (install(1) alone
  # unlinks the old name and writes the new file under it).
  tmp="$modules_dir/.$so.$$"
  $SUDO install -m 0644 "$cache/$so" "$tmp"
  $SUDO mv -f "$tmp" "$modules_dir/$so"
fi
done
