# The ferryman controller image: Debian's NGINX with the Lua and stream modules,
# ferryman's own NGINX module, and ferryman in a virtualenv. Runs as a non-root user with a read-only root
# filesystem: everything ferryman and NGINX write lives under /var/lib/ferryman
# (mount an emptyDir there). Ports below 1024 need the pod sysctl
# net.ipv4.ip_unprivileged_port_start=0 (deploy/deployment.yaml sets it).
#
# No container engine runs on the machines this project is built on, so this
# file is checked by reading, not by building; see docs/operations.md.
FROM debian:bookworm-slim AS module
# ferryman's NGINX module (the fast path in C), built against Debian's nginx-dev.
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx nginx-dev gcc make
COPY scripts/build-module.sh /build/scripts/
COPY src/ferryman/dataplane/module /build/src/ferryman/dataplane/module
RUN /build/scripts/build-module.sh

FROM debian:bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      nginx libnginx-mod-http-lua lua-resty-core libnginx-mod-stream \
      python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default

COPY --from=module /usr/lib/nginx/modules/ngx_http_ferryman_module.so /usr/lib/nginx/modules/
COPY pyproject.toml uv.lock README.md /build/
COPY src /build/src
RUN python3 -m venv /opt/ferryman \
 && /opt/ferryman/bin/pip install --no-cache-dir /build \
 && rm -rf /build

RUN useradd --system --uid 101 --user-group --home-dir /var/lib/ferryman ferryman \
 && install -d -o ferryman -g ferryman -m 0711 /var/lib/ferryman

USER 101:101
WORKDIR /var/lib/ferryman
ENTRYPOINT ["/opt/ferryman/bin/ferryman"]
CMD ["run", "--state-dir=/var/lib/ferryman"]
