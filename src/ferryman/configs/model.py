"""The NGINX configuration model: what the templates render, nothing more.

Every string here has passed ``ferryman.resources.validation`` or was built by
ferryman itself; templates only loop and branch over these values.
"""

from __future__ import annotations

from dataclasses import dataclass

# A backend is named in NGINX by its endpoints key: "namespace/service:port"
# with the port as the Ingress wrote it (number or Service port name).
BackendKey = str


def backend_key(namespace: str, service: str, port_ref: str) -> BackendKey:
    return f"{namespace}/{service}:{port_ref}"


@dataclass(frozen=True)
class Location:
    exact: bool
    path: str
    backend: BackendKey | None  # None: answer 404


@dataclass(frozen=True)
class TLSConfig:
    bundle_path: str | None  # None: the certificate is unusable, reject handshakes


@dataclass(frozen=True)
class Server:
    host: str
    tls: TLSConfig | None
    redirect_https: bool
    locations: tuple[Location, ...]

    @property
    def server_name(self) -> str:
        if self.host.startswith("*."):
            # NGINX's own "*.example.com" would also match "b.a.example.com";
            # Kubernetes wildcards cover exactly one label.
            return "~^[^.]+" + self.host[1:].replace(".", r"\.") + "$"
        return self.host


@dataclass(frozen=True)
class MainConfig:
    state_dir: str
    endpoints_socket: str
    http_port: int
    https_port: int
    lua_dir: str
    lua_package_path: str
    modules: tuple[str, ...]
    worker_processes: str
    worker_user: str | None
    endpoints_dict_size: str
