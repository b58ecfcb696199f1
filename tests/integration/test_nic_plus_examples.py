"""NIC's examples of features ferryman does not offer (most are NGINX Plus's in
NIC), applied unchanged: each is refused with the reason docs/virtualserver.md
("Not supported, and why") gives, its host not served, and the rest of the
configuration unaffected; or, for ExternalName Services, served as the docs say.
The applications (Deployments) are ferryman's test backends behind Services of
the examples' names."""

from __future__ import annotations

import re

from testkit.harness import Backends, Ferryman, service_with_backends, tls_secret
from testkit.nic_fixtures import NIC_EXAMPLES

CAFE = "cafe.example.com"


def _cafe(f: Ferryman, backends: Backends) -> None:
    for app in ("tea", "coffee"):
        f.write(app, service_with_backends(f"{app}-svc", [backends.start(app)]))
    f.write("tls", tls_secret("tls-secret", [CAFE]))


def _example(f: Ferryman, path: str) -> None:
    f.write_text(path.replace("/", "-"), (NIC_EXAMPLES / path).read_text())


def _readme_block(folder: str, kind: str) -> str:
    readme = (NIC_EXAMPLES / folder / "README.md").read_text()
    blocks = re.findall(r"```ya?ml\n(.*?)```", readme, re.DOTALL)
    return next(b for b in blocks if f"kind: {kind}" in b)


def _rejected(f: Ferryman, kind: str, name: str) -> str:
    e = [e for e in f.events_for(name) if e.get("kind") == kind][-1]
    assert (e["type"], e["reason"]) == ("Warning", "Rejected"), e
    return e["message"]


def test_health_checks(ferryman: Ferryman, backends: Backends) -> None:
    """The README's VirtualServer (its only manifest): active health checks are NGINX
    Plus's; refused with NIC's own message for open-source NGINX."""
    f = ferryman
    _cafe(f, backends)
    f.write_text("health-checks.yaml", _readme_block("health-checks", "VirtualServer"))
    f.start()
    message = _rejected(f, "VirtualServer", "cafe")
    assert (
        "spec.upstreams[0].healthCheck: Forbidden: active health checks are only supported in "
        "NGINX Plus"
    ) in message
    assert f.get(CAFE, "/tea").status == 404


def test_cache_policy(ferryman: Ferryman, backends: Backends) -> None:
    """The cache Policy is refused by name (response caching is not implemented),
    and the VirtualServer for its server-snippets (raw NGINX configuration)."""
    f = ferryman
    _cafe(f, backends)
    _example(f, "cache-policy/cache.yaml")
    _example(f, "cache-policy/cafe-virtual-server.yaml")
    f.start()
    policy = _rejected(f, "Policy", "cache-policy")
    assert "spec.cache: Forbidden: not supported by ferryman: response caching is not" in policy
    vs = _rejected(f, "VirtualServer", "cafe")
    assert "spec.server-snippets: Forbidden: not supported by ferryman" in vs
    assert f.get(CAFE, "/tea").status == 404


def test_backup_directive(ferryman: Ferryman, backends: Backends) -> None:
    """backup and backupPort: backup servers are not implemented; refused by name.
    (The folder's transport-server half needs TransportServer, which ferryman does
    not read: nothing of it is served.)"""
    f = ferryman
    _cafe(f, backends)
    f.write("backup", service_with_backends("backup-svc", [backends.start("backup")]))
    _example(f, "backup-directive/virtual-server/cafe-virtual-server-backup.yaml")
    f.start()
    message = _rejected(f, "VirtualServer", "cafe")
    assert "spec.upstreams[1].backup: Forbidden: not supported by ferryman: backup servers" in (
        message
    )
    assert f.get(CAFE, "/coffee").status == 404


def test_externalname_services(ferryman: Ferryman) -> None:
    """The README's ExternalName Service and VirtualServer: NIC routes to the DNS
    name with NGINX Plus's resolver only; ferryman resolves no DNS names for
    upstreams, so the Service has no endpoints: the VirtualServer is served and
    its route answers 503, as for any upstream without endpoints (docs say so).
    (The folder's transport-server half needs TransportServer, not read.)"""
    f = ferryman
    f.write_text("externalname-svc.yaml", _readme_block("externalname-services", "Service"))
    f.write_text("externalname-vs.yaml", _readme_block("externalname-services", "VirtualServer"))
    f.start()
    r = f.get("example.com", "/")
    assert r.status == 503 and "503 Service Temporarily Unavailable" in r.text
