"""egressMTLS's per-request part in a real NGINX: the P item the translator writes
(kinds/policy/records/egress_mtls.py), decoded and enforced by ferryman_policy.lua and
ferryman_egress.lua, and the directives of nginx.conf.tmpl's slow path, make NGINX
present the Policy's client certificate and SNI name to a TLS backend that
requires a client certificate; a changed item (a rotated Secret, another name)
takes effect with the next request, with no reload.

A bare NGINX, because VirtualServer upstreams with ``tls.enable`` (``proxy_pass
https://``) are not routed in this branch yet; the directives are the same."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferryman.dataplane.main_file import LUA_DIR
from ferryman.kinds.policy.records.attach import attach
from ferryman.kinds.policy.records.base import ROUTE, Owner
from ferryman.resources.policy_ref import PolicyRef
from testkit.egress import Seen, _backend
from testkit.harness import free_port
from testkit.lua_nginx import running
from testkit.pki import authority, ca_secret, issue
from testkit.policy_objects import Objects

TEMPLATE = Path(LUA_DIR).parent.parent / "configs" / "templates" / "slow-path.conf.tmpl"

# The http block (lua_nginx.nginx_conf has the rest).
HTTP = """
    proxy_temp_path {dir}/proxy;
    lua_shared_dict items 1m;
    # As ferryman's: the peer set by balancer_by_lua (which resumes no TLS
    # session), and no keepalive (NIC's default): a TLS connection made with one
    # Policy's certificate is never reused for another's request.
    upstream tls_backend {{
        server 0.0.0.1:1;
        balancer_by_lua_block {{
            require("ngx.balancer").set_current_peer("127.0.0.1", {backend})
        }}
    }}
    server {{
        listen 127.0.0.1:{port};
        location = /item {{
            content_by_lua_block {{
                ngx.req.read_body()
                ngx.shared.items:set("P", ngx.req.get_body_data() or "")
                ngx.say("ok")
            }}
        }}
        location / {{
{egress}
            access_by_lua_block {{
                local policies = require("ferryman_policy")
                local config = policies.decode(policies.cut(ngx.shared.items:get("P"), "|"))
                policies.enforce({{ e = config }}, nil)
            }}
            proxy_pass https://tls_backend;
        }}
    }}"""


def _egress_directives() -> str:
    """The slow path's egressMTLS lines, as slow-path.conf.tmpl (nginx.conf.tmpl's
    slow-path locations) has them."""
    lines = TEMPLATE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "# egressMTLS" in line)
    end = next(i for i in range(start, len(lines)) if "proxy_ssl_server_name" in lines[i])
    return "\n".join(lines[start : end + 1]).replace("{", "{{").replace("}", "}}")


def _item(*objs: dict[str, Any]) -> str:
    """The P item the translator writes for the Policy "egress" among ``objs``."""
    owner = Owner("ns", "cafe", "ns", "cafe", ROUTE, "/", True, "ferryman")
    attached = attach([PolicyRef("egress", "ns")], owner, Objects(*objs))
    (config,) = attached.configs.values()
    return config.item()


def _policy(**spec: Any) -> dict[str, Any]:
    md = {"name": "egress", "namespace": "ns"}
    return {"apiVersion": "k8s.nginx.org/v1", "kind": "Policy", "metadata": md, "spec": spec}


def _tls(name: str, client: str) -> dict[str, Any]:
    issued = issue("egress-client-ca", client)
    data = {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem}
    return {
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "ns"},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[tuple[int, Seen]]:
    seen = Seen()
    backend = _backend(tmp_path, seen)
    port = free_port()
    (tmp_path / "proxy").mkdir()
    http = HTTP.format(
        dir=tmp_path, port=port, backend=backend.server_address[1], egress=_egress_directives()
    )
    try:
        with running(tmp_path, http, lambda: _post(port, "/item", "")):
            yield port, seen
    finally:
        backend.shutdown()


def _post(port: int, path: str, body: str) -> str:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body.encode())
    with urllib.request.urlopen(req) as r:
        return str(r.read().decode())


def _get(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_client_certificate_and_sni_per_request(nginx: tuple[int, Seen]) -> None:
    port, seen = nginx
    secret = _tls("client", "alice")
    named = _policy(egressMTLS={"tlsSecret": "client", "serverName": True, "sslName": "app.test"})
    _post(port, "/item", _item(named, secret))
    assert _get(port) == 200
    assert (seen.client[-1], seen.sni[-1]) == ("alice", "app.test")

    # The Secret rotated and serverName off: the next request presents bob's
    # certificate and no SNI (the same NGINX, never reloaded).
    _post(port, "/item", _item(_policy(egressMTLS={"tlsSecret": "client"}), _tls("client", "bob")))
    assert _get(port) == 200
    assert (seen.client[-1], seen.sni[-1]) == ("bob", None)

    # No tlsSecret: no client certificate, which this backend refuses: 502.
    _post(port, "/item", _item(_policy(egressMTLS={"sslName": "x.test"}), secret))
    assert _get(port) == 502


def test_the_directives_are_in_nginx_conf_template() -> None:
    text = _egress_directives()
    for directive in (
        "proxy_ssl_certificate $ferryman_egress_cert;",
        "proxy_ssl_certificate_key $ferryman_egress_key;",
        "proxy_ssl_name $ferryman_egress_name;",
        "proxy_ssl_server_name on;",
    ):
        assert directive in text


def test_verify_server_item_carries_the_trusted_cas() -> None:
    """verifyServer: the P item carries the CA Secret's certificates, verifyDepth and
    serverName (ferryman_upstream_verify.lua hands them to the module), and the
    name checked is sslName even without serverName (NGINX's proxy_ssl_name)."""
    ca = authority("backend-ca").cert_pem
    objs = (
        _policy(
            egressMTLS={
                "tlsSecret": "client",
                "trustedCertSecret": "ca",
                "verifyServer": True,
                "verifyDepth": 3,
                "sslName": "app.test",
            }
        ),
        _tls("client", "alice"),
        {**ca_secret("ca", ca, namespace="ns"), "kind": "Secret"},
    )
    fields = _item(*objs).split("|")
    assert fields[:2] == ["P", "e"]
    assert base64.b64decode(fields[4]) == b"app.test"
    assert base64.b64decode(fields[5]) == ca
    assert fields[6:] == ["3", "0", "", ""]  # no protocols, no ciphers
    # A depth past what OpenSSL's own default allows is handed on as that (100).
    objs[0]["spec"]["egressMTLS"]["verifyDepth"] = 10**12
    assert _item(*objs).split("|")[6] == "100"
