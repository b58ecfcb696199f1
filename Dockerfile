# The ferryman controller image: Debian's NGINX with the Lua and stream modules,
# ferryman's own NGINX module, and ferryman in a virtualenv. Runs as a non-root user with a read-only root
# filesystem: everything ferryman and NGINX write lives under /var/lib/ferryman
# (mount an emptyDir there). Ports below 1024 need the pod sysctl
# net.ipv4.ip_unprivileged_port_start=0 (deploy/deployment.yaml sets it) or the
# capability NET_BIND_SERVICE (NIC's pod settings), which ferryman passes on to NGINX.
#
# BASE is any Debian bookworm image; scripts/build-image.sh makes one with
# debootstrap from Debian's packages, builds this file on it and tests it
# (tests/container/). Behind a TLS-intercepting proxy, give pip its CA bundle:
#   --volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS module
# ferryman's NGINX module (the fast path in C), built against Debian's nginx-dev.
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx nginx-dev gcc make
COPY scripts/build-module.sh scripts/build-h2c-module.sh /build/scripts/
COPY src/ferryman/dataplane/module /build/src/ferryman/dataplane/module
COPY src/ferryman/dataplane/module_h2c /build/src/ferryman/dataplane/module_h2c
# nginx alone ships no dynamic module, so the folder the script installs into is made here.
# The h2c module: HTTP/2 beside HTTP/1.1 on Gateway HTTP listeners (1.22 has no
# http2 directive; docs/gateway-api.md).
RUN install -d /usr/lib/nginx/modules && /build/scripts/build-module.sh \
 && /build/scripts/build-h2c-module.sh

FROM ${BASE} AS python
# The virtualenv, with exactly the versions and hashes in uv.lock: uv (pinned,
# only in this stage) turns the lock into a hashed requirements file and pip
# refuses anything else. ferryman itself goes in without dependencies. pip
# compiles every module's bytecode as it installs: the read-only root could not
# take it later, and each start would compile ferryman and its libraries again.
# The NGINX templates are compiled likewise, into the cache each start reads
# (ferryman/configs/render.py).
ARG PIP_CERT
ARG UV_VERSION=0.13.9
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates
RUN python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}"
COPY pyproject.toml uv.lock README.md /build/
COPY src /build/src
RUN cd /build \
 && /opt/uv/bin/uv export --frozen --no-dev --no-emit-project --no-header \
      --format requirements-txt --output-file /build/requirements.txt >/dev/null \
 && python3 -m venv /opt/ferryman \
 && /opt/ferryman/bin/pip install --no-cache-dir --require-hashes -r /build/requirements.txt \
 && /opt/ferryman/bin/pip install --no-cache-dir --no-deps /build \
 && /opt/ferryman/bin/python -m ferryman.configs.render

FROM ${BASE}

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      nginx libnginx-mod-http-lua lua-resty-core libnginx-mod-stream \
      python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default

COPY --from=module /usr/lib/nginx/modules/ngx_http_ferryman_module.so \
     /usr/lib/nginx/modules/ngx_stream_ferryman_module.so \
     /usr/lib/nginx/modules/ngx_stream_ferryman_h2c_module.so /usr/lib/nginx/modules/
COPY --from=python /opt/ferryman /opt/ferryman

RUN useradd --system --uid 101 --user-group --home-dir /var/lib/ferryman ferryman \
 && install -d -o ferryman -g ferryman -m 0711 /var/lib/ferryman

USER 101:101
WORKDIR /var/lib/ferryman
ENTRYPOINT ["/opt/ferryman/bin/ferryman"]
CMD ["run", "--state-dir=/var/lib/ferryman"]
