#!/usr/bin/env bash
# Builds ngx_stream_ferryman_h2c_module (src/ferryman/dataplane/module_h2c)
# against Debian's nginx-dev and installs it beside the other dynamic modules
# (--nginx-modules-dir), as build-module.sh does ferryman's own modules. Only
# Debian's NGINX 1.22 needs it: its Gateway HTTP sockets read HTTP/2's preface
# ahead in the stream block (h2c beside HTTP/1.1; NGINX 1.25.1 and Angie tell
# the two apart themselves). Cached by a hash of its inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$PWD/src/ferryman/dataplane/module_h2c"
modules_dir="${FERRYMAN_NGINX_MODULES_DIR:-/usr/lib/nginx/modules}"
ngx_src=/usr/share/nginx/src
hash=$( (cat "$src/config" "$src"/*.c "$0" "$ngx_src/conf_flags"; nginx -v 2>&1) | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ferryman/nginx-h2c-module-$hash"
so=ngx_stream_ferryman_h2c_module.so

if [ ! -e "$cache/$so" ]; then
  echo "build-h2c-module: building $so against $(nginx -v 2>&1)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "$ngx_src/." "$work/nginx"
  (
    cd "$work/nginx"
    # shellcheck disable=SC1091
    . ./conf_flags
    # Debian's flags and its libnginx-mod-stream's (as build-module.sh).
    ./configure "${NGX_CONF_FLAGS[@]}" --with-stream=dynamic --with-stream_ssl_module \
      --with-stream_ssl_preread_module --with-stream_realip_module --with-cc-opt="-O2 -fPIC -Wall -Werror" \
      --with-ld-opt="-Wl,-z,relro -Wl,-z,now -fPIC" --add-dynamic-module="$src" >build.log 2>&1 \
      || { cat build.log >&2; exit 1; }
    make -f objs/Makefile "objs/$so" >>build.log 2>&1 || { cat build.log >&2; exit 1; }
  )
  mkdir -p "$cache"
  cp "$work/nginx/objs/$so" "$cache/$so.tmp"
  mv "$cache/$so.tmp" "$cache/$so"
fi

if ! cmp -s "$cache/$so" "$modules_dir/$so"; then
  SUDO=""; [ -w "$modules_dir" ] || SUDO="sudo"
  # Renamed over the old name, never written in place (build-module.sh).
  tmp="$modules_dir/.$so.$$"
  $SUDO install -m 0644 "$cache/$so" "$tmp"
  $SUDO mv -f "$tmp" "$modules_dir/$so"
fi
