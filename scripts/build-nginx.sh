#!/usr/bin/env bash
# Builds current NGINX (1.30.4), or with `angie` Angie 1.12.1, with the Lua
# runtime and ferryman's modules from the vendored sources (../shared/vendor/,
# see its README), so ferryman's records data plane runs on it as on Debian's
# NGINX 1.22 (issue 26). Cached
# under ~/.cache/ferryman by a hash of the archives, this script and the
# module's source; warm runs only check the hash. The last line on stdout is
# always the binary's absolute path.
#
# The tree beside the binary is what `ferryman run --nginx-binary PATH` finds
# on its own (dataplane/flavour.py):
#   <prefix>/sbin/nginx     the server (sbin/angie for Angie)
#   <prefix>/modules/       ndk, lua, stream and ferryman's dynamic modules
#   <prefix>/lua/           lua-resty-core and lua-resty-lrucache
#   <prefix>/luajit/        LuaJIT (the binary and the lua module find it by rpath)
#
#   FERRYMAN_CACHE   cache root (default: $HOME/.cache/ferryman)
#   FERRYMAN_PREFIX  install there instead of the cache (the container image)
#   FERRYMAN_VENDOR  the vendored sources (default: ../shared/vendor from the
#                    repository's root, where CI has them)
#
# A cold build takes about 3-4 minutes on 2 cores (LuaJIT, then NGINX and the
# four dynamic modules).
set -euo pipefail
cd "$(dirname "$0")/.."

vendor="${FERRYMAN_VENDOR:-../shared/vendor}"
server="${1:-nginx}"
case "$server" in
  nginx) name=nginx-1.30.4 binary=nginx configure=auto/configure ;;
  angie) name=angie-1.12.1 binary=angie configure=./configure ;;
  *) echo "build-nginx: $server: nginx or angie" >&2; exit 2 ;;
esac
nginx_tar="$vendor/$name.tar.gz"
luajit_tar="$vendor/luajit2-2.1-20240314.tar.gz"
ndk_tar="$vendor/ngx_devel_kit-0.3.4.tar.gz"
lua_tar="$vendor/lua-nginx-module-0.10.30rc2.tar.gz"
core_tar="$vendor/lua-resty-core-0.1.33rc2.tar.gz"
lru_tar="$vendor/lua-resty-lrucache-0.15.tar.gz"
archives=("$nginx_tar" "$luajit_tar" "$ndk_tar" "$lua_tar" "$core_tar" "$lru_tar")
for a in "${archives[@]}"; do
  [ -f "$a" ] || { echo "build-nginx: $a is missing" >&2; exit 1; }
done
module="$PWD/src/ferryman/dataplane/module"
# Debian's NGINX's modules, less those needing libraries ferryman never uses
# (GeoIP, image filter, perl, XSLT, mail): the templates may use any of these.
flags=(--with-compat --with-pcre-jit --with-threads --with-http_ssl_module
  --with-http_stub_status_module --with-http_realip_module --with-http_auth_request_module
  --with-http_v2_module --with-http_slice_module --with-http_sub_module
  --with-http_gunzip_module --with-http_gzip_static_module --with-http_secure_link_module
  --with-stream=dynamic --with-stream_ssl_module --with-stream_ssl_preread_module
  --with-stream_realip_module)
key=$( (cat "${archives[@]}" "$0" "$module/config" "$module"/*.c "$module"/*.h; echo "${flags[*]}") \
  | sha256sum | cut -c1-16)
# FERRYMAN_PREFIX installs at a fixed place instead (the image's /opt/server):
# LuaJIT's path is compiled into the binary and the Lua module, so the tree
# runs only where it was built for.
prefix="${FERRYMAN_PREFIX:-${FERRYMAN_CACHE:-$HOME/.cache/ferryman}/$name-lua-$key}"
bin="$prefix/sbin/$binary"

if [ ! -x "$bin" ]; then
  missing=()
  [ -e /usr/include/pcre2.h ] || missing+=(libpcre2-dev)
  [ -e /usr/include/zlib.h ] || missing+=(zlib1g-dev)
  [ -e /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
  command -v cc >/dev/null || missing+=(gcc)
  command -v make >/dev/null || missing+=(make)
  # Only when something is missing: the image's build stage installs them first
  # and has no apt-install.sh.
  [ ${#missing[@]} -eq 0 ] || scripts/apt-install.sh build-nginx "${missing[@]}"
  echo "build-nginx: building $name with Lua and ferryman's modules (cache key $key)" >&2
  start=$SECONDS
  work=$(mktemp -d)
  staging="$prefix.tmp.$$"
  trap 'rm -rf "$work" "$staging"' EXIT
  for a in "${archives[@]}"; do tar xzf "$a" -C "$work"; done
  jobs=$(nproc)
  (
    cd "$work"/luajit2-*/
    # The prefix is where LuaJIT's own files are looked up at run time; the
    # final prefix, not the staging one (the tree is renamed into place).
    make -j"$jobs" PREFIX="$prefix/luajit" >build.log 2>&1 \
      && make install PREFIX="$prefix/luajit" DESTDIR="$work/dest" >>build.log 2>&1 \
      || { tail -50 build.log >&2; exit 1; }
  )
  mkdir -p "$staging"
  cp -a "$work/dest$prefix/luajit" "$staging/luajit"
  (
    cd "$work/$name"/
    # lua-nginx-module's config reads these; the rpath is the final prefix.
    export LUAJIT_LIB="$staging/luajit/lib" LUAJIT_INC="$staging/luajit/include/luajit-2.1"
    $configure --prefix="$prefix" --modules-path="$prefix/modules" "${flags[@]}" \
      --with-cc-opt="-O2 -fPIC" --with-ld-opt="-Wl,-rpath,$prefix/luajit/lib" \
      --add-dynamic-module="$(echo "$work"/ngx_devel_kit-*)" \
      --add-dynamic-module="$(echo "$work"/lua-nginx-module-*)" \
      --add-dynamic-module="$module" >build.log 2>&1 \
      || { tail -50 build.log >&2; exit 1; }
    make -j"$jobs" >>build.log 2>&1 || { tail -50 build.log >&2; exit 1; }
    mkdir -p "$staging/sbin" "$staging/modules"
    cp "objs/$binary" "$staging/sbin/$binary"
    cp objs/*.so "$staging/modules/"
  )
  mkdir -p "$staging/lua"
  for lib in "$work"/lua-resty-core-*/lib "$work"/lua-resty-lrucache-*/lib; do
    cp -a "$lib/." "$staging/lua/"
  done
  # Installing under a temporary name then renaming keeps a concurrent run
  # from seeing half a tree.
  mkdir -p "$(dirname "$prefix")"
  mv -T "$staging" "$prefix" 2>/dev/null || [ -x "$bin" ]
  echo "build-nginx: built in $((SECONDS - start))s" >&2
fi
echo "$bin"
