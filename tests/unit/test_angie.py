"""The Angie flavour: records -> servers/upstreams text (configs/angie.py), the
data plane that writes and reloads it, and the output run by a real Angie
(built from ../shared/vendor by scripts/build-angie.sh): ``angie -t`` on every
rendered configuration, and ``AngieDataPlane`` driving Angie with ferryman's
DNS server answering its ``resolve`` lookups.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import dns.message
import pytest
import yaml
from aiohttp import web
from hypothesis import HealthCheck, assume, event, given, settings

from ferryman.app import cli, flag_settings
from ferryman.configs.angie import (
    SERVERS_FILE,
    AngieRenderer,
    angie_config,
    backend_dns_name,
    certificate_files,
)
from ferryman.configs.model import MainConfig
from ferryman.configs.routes import encode_host
from ferryman.configs.secret_state import SecretState
from ferryman.dataplane.angie import ZONE_FILE, AngieDataPlane, AngieGeneration, AngiePaths
from ferryman.dataplane.dns import DnsServer, Zone
from ferryman.dataplane.errors import ConfigTestError, PushError
from ferryman.dataplane.nginx import NginxManager
from ferryman.dataplane.state_dir import prepare_state_dir
from ferryman.engine.secrets import SecretStore
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from ferryman.observability.latency import LatencyReceiver
from ferryman.observability.metrics import Metrics
from ferryman.resources.meta import ObjectRef
from testkit.harness import angie_binary
from testkit.nginx_cases import GOOD_SECRET, Case, ingress_cases, service_docs
from testkit.tls import b64, cert_pem, key_pem, tls_secret

CERT = "ns/site@0123456789abcdef"
CERT_RECORD = b64(cert_pem("a.example.com")) + "\t" + b64(key_pem("a.example.com"))
STATE = "/state"
RENDERER = AngieRenderer()

Records = dict[tuple[str, str], str]


def servers(records: Records, https_port: int = 443, health_uri: str = "") -> str:
    return RENDERER.servers(angie_config(records, STATE, health_uri), 80, https_port)


def server_block(text: str, name: str) -> str:
    """The server block whose server_name is ``name``."""
    for block in text.split("\nserver {")[1:]:
        if f"    server_name {name};" in block:
            return block
    raise AssertionError(f"no server {name} in:\n{text}")


def location_body(block: str, spec: str) -> str:
    m = re.search(rf"\n    location {re.escape(spec)} {{\n(.*?)\n    }}", block, re.S)
    assert m, f"no location {spec} in:\n{block}"
    return m.group(1).strip()


WEB = {("E", "ns/web:80"): "10.0.0.1#8080 10.0.0.2#8080"}


def test_exact_host_gets_its_own_server_with_path_semantics() -> None:
    text = servers(
        {
            ("H", "a.example.com"): "- 0 - rr:1:10 E|/e|ns/web:80 P|/p|ns/web:80",
            **WEB,
        }
    )
    block = server_block(text, "a.example.com")
    assert "    listen 80;" in block
    assert "ssl" not in block
    assert location_body(block, "= /e") == "proxy_pass http://ns_web_80_rr_1_10s;"
    assert location_body(block, "= /p") == "proxy_pass http://ns_web_80_rr_1_10s;"
    assert location_body(block, "/p/") == "proxy_pass http://ns_web_80_rr_1_10s;"
    assert location_body(block, "/") == "return 404;"  # no defaultBackend
    assert "location /e/" not in block


def upstream_block(text: str, name: str) -> str:
    m = re.search(rf"\nupstream {name} {{\n(.*?)\n}}\n", text, re.S)
    assert m, f"no upstream {name} in:\n{text}"
    return "\n".join(line for line in m.group(1).splitlines() if not line.strip().startswith("#"))


def test_upstream_resolves_the_backends_srv_name_with_passive_health() -> None:
    text = servers({("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80", **WEB})
    assert upstream_block(text, "ns_web_80_rr_1_10s") == (
        "    zone ferryman_upstreams 128m;\n"
        "    server 80.web.ns.ferryman.internal service=_http._tcp resolve"
        " max_fails=1 fail_timeout=10s;\n"
        "    keepalive 32;"
    )
    # The peers are DNS's business: the text does not name them.
    assert "10.0.0.1" not in text
    assert "least_conn" not in text


def test_endpoint_changes_leave_the_text_alone_but_not_the_first_or_last() -> None:
    host = {("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80"}
    before = servers({**host, **WEB})
    assert servers({**host, ("E", "ns/web:80"): "10.9.9.9#9999"}) == before
    assert servers(host) != before  # 0 endpoints: 503, no upstream


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("ns/web:80", "80.web.ns.ferryman.internal"),
        ("default/my-svc:http-alt", "http-alt.my-svc.default.ferryman.internal"),
    ],
)
def test_backend_dns_names_are_readable(key: str, name: str) -> None:
    assert backend_dns_name(key) == name


@pytest.mark.parametrize("key", ["ns/a.b:80", "NS/web:80", "ns/web:", "ns/-web:80"])
def test_backend_dns_name_refuses_what_is_not_a_label(key: str) -> None:
    with pytest.raises(ValueError, match="not a DNS label"):
        backend_dns_name(key)


def test_least_conn_max_fails_and_fractional_fail_timeout() -> None:
    text = servers(
        {
            ("H", "a.example.com"): "- 0 - lc:3:0.5 P|/|ns/web:80",
            ("E", "ns/web:80"): "fd00::1#8080",
        }
    )
    block = upstream_block(text, "ns_web_80_lc_3_1s")
    assert "    least_conn;\n" in block
    assert "service=_http._tcp resolve max_fails=3 fail_timeout=1s;" in block


def test_same_backend_with_two_balancings_gets_two_upstreams() -> None:
    text = servers(
        {
            ("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80",
            ("H", "b.example.com"): "- 0 - lc:0:10 P|/|ns/web:80",
            **WEB,
        }
    )
    assert "upstream ns_web_80_rr_1_10s {" in text
    assert "upstream ns_web_80_lc_0_10s {" in text
    block = server_block(text, "b.example.com")
    assert location_body(block, "/") == "proxy_pass http://ns_web_80_lc_0_10s;"


def test_exact_wins_over_prefix_for_the_same_location() -> None:
    text = servers(
        {
            ("H", "a.example.com"): "- 0 - rr:1:10 E|/p|ns/exact:80 P|/p|ns/web:80",
            ("E", "ns/exact:80"): "10.0.0.9#80",
            **WEB,
        }
    )
    block = server_block(text, "a.example.com")
    assert location_body(block, "= /p") == "proxy_pass http://ns_exact_80_rr_1_10s;"
    assert location_body(block, "/p/") == "proxy_pass http://ns_web_80_rr_1_10s;"
    assert block.count("location = /p ") == 1


def test_prefix_root_and_exact_root() -> None:
    text = servers(
        {
            ("H", "a.example.com"): "- 0 ns/other:80 rr:1:10 E|/|ns/web:80 P|/|ns/web:80",
            **WEB,
        }
    )
    block = server_block(text, "a.example.com")
    assert location_body(block, "= /") == "proxy_pass http://ns_web_80_rr_1_10s;"
    # Prefix / takes location / (not the defaultBackend).
    assert location_body(block, "/") == "proxy_pass http://ns_web_80_rr_1_10s;"
    assert block.count("location / ") == 1


def test_default_backend_is_the_fallback() -> None:
    text = servers({("H", "a.example.com"): "- 0 ns/web:80 rr:1:10 E|/e|ns/web:80", **WEB})
    block = server_block(text, "a.example.com")
    assert location_body(block, "/") == "proxy_pass http://ns_web_80_rr_1_10s;"


def test_backend_without_endpoints_answers_503_and_has_no_upstream() -> None:
    text = servers({("H", "a.example.com"): "- 0 ns/gone:80 rr:1:10 P|/p|ns/gone:80"})
    block = server_block(text, "a.example.com")
    assert location_body(block, "= /p") == "return 503;"
    assert location_body(block, "/p/") == "return 503;"
    assert location_body(block, "/") == "return 503;"
    assert "upstream" not in text


def test_wildcard_host_is_a_one_label_regex() -> None:
    text = servers({("H", "*.w.example.com"): "- 0 ns/web:80 rr:1:10", **WEB})
    block = server_block(text, r"~^[^.]+\.w\.example\.com$")
    assert location_body(block, "/") == "proxy_pass http://ns_web_80_rr_1_10s;"
    regex = re.compile(r"^[^.]+\.w\.example\.com$")
    assert regex.match("a.w.example.com")
    assert not regex.match("a.b.w.example.com")
    assert not regex.match("w.example.com")


def test_exact_servers_come_before_wildcards_and_the_default_last() -> None:
    text = servers(
        {
            ("H", "_"): "- 0 ns/web:80 rr:1:10",
            ("H", "*.example.com"): "- 0 ns/web:80 rr:1:10",
            ("H", "z.example.com"): "- 0 ns/web:80 rr:1:10",
            **WEB,
        }
    )
    names = re.findall(r"server_name (\S+);", text)
    assert names == ["z.example.com", r"~^[^.]+\.example\.com$", "_"]


def test_catch_all_is_the_default_server() -> None:
    text = servers({("H", "_"): "- 0 - rr:1:10 P|/app|ns/web:80", **WEB}, health_uri="/h")
    block = server_block(text, "_")
    assert "    listen 80 default_server;" in block
    assert "    listen 443 ssl default_server;" in block
    assert "ssl_reject_handshake on;" in block
    assert location_body(block, "/app/") == "proxy_pass http://ns_web_80_rr_1_10s;"
    assert "location = /h" not in block  # the catch-all routes every host
    assert text.count("default_server;") == 2


def test_without_catch_all_a_default_server_answers_404_and_health() -> None:
    text = servers({("H", "a.example.com"): "- 0 - rr:1:10", **WEB}, health_uri="/nginx-health")
    block = server_block(text, "_")
    assert "    listen 80 default_server;" in block
    assert "ssl_reject_handshake on;" in block
    assert location_body(block, "/") == "return 404;"
    assert 'return 200 "healthy\\n";' in location_body(block, "= /nginx-health")


def test_usable_tls_writes_certificate_files() -> None:
    records = {
        ("H", "a.example.com"): f"{CERT} 0 ns/web:80 rr:1:10",
        ("C", CERT): CERT_RECORD,
        **WEB,
    }
    config = angie_config(records, STATE)
    chain, key = certificate_files(CERT)
    assert chain == "certs/ns_site@0123456789abcdef.crt"
    assert config.certificates == {chain: cert_pem("a.example.com"), key: key_pem("a.example.com")}
    block = server_block(RENDERER.servers(config, 80, 443), "a.example.com")
    assert "    listen 443 ssl;" in block
    assert f"    ssl_certificate {STATE}/{chain};" in block
    assert f"    ssl_certificate_key {STATE}/{key};" in block
    assert "ssl_reject_handshake" not in block
    assert "return 301" not in block  # no redirect asked


@pytest.mark.parametrize(
    "records",
    [
        {("H", "a.example.com"): "! 0 ns/web:80 rr:1:10"},
        # A certificate id whose record is missing is as unusable.
        {("H", "a.example.com"): f"{CERT} 0 ns/web:80 rr:1:10"},
    ],
)
def test_unusable_tls_rejects_handshakes(records: Records) -> None:
    config = angie_config({**records, **WEB}, STATE)
    assert config.certificates == {}
    block = server_block(RENDERER.servers(config, 80, 443), "a.example.com")
    assert "    listen 443 ssl;" in block
    assert "ssl_reject_handshake on;" in block
    assert "ssl_certificate" not in block


@pytest.mark.parametrize(
    ("port", "target"),
    [(443, "https://$host$request_uri"), (8443, "https://$host:8443$request_uri")],
)
def test_redirect_to_https(port: int, target: str) -> None:
    records = {("H", "a.example.com"): f"{CERT} 1 ns/web:80 rr:1:10", ("C", CERT): CERT_RECORD}
    block = server_block(servers({**records, **WEB}, https_port=port), "a.example.com")
    assert f"    if ($scheme = http) {{\n        return 301 {target};\n    }}" in block


def test_version_server_has_angie_api_unless_asked_not_to() -> None:
    with_api = RENDERER.config_version("/run/v.sock", 7)
    assert "location /status/ {\n        api /status/;\n    }" in with_api
    assert 'return 200 "7";' in with_api
    assert "api " not in RENDERER.config_version("/run/v.sock", 7, api=False)


# ---- real angie -t ------------------------------------------------------------------


@pytest.fixture(scope="module")
def angie() -> str:
    """The Angie binary (scripts/build-angie.sh; an error without ../shared/vendor)."""
    return angie_binary()


DNS_PORT = 15353  # only written into angie.conf here; nothing listens


def zone_peers(zone: Zone, name: str) -> list[str]:
    """``addr:port`` for each SRV record of ``_http._tcp.NAME``, through ``Zone.answer``."""
    query = dns.message.make_query(f"_http._tcp.{name}", "SRV")
    wire = zone.answer(query.to_wire(), tcp=True)
    assert wire is not None
    answer = dns.message.from_wire(wire)
    peers = []
    for rrset in answer.answer:
        for srv in rrset:
            addresses = dns.message.make_query(srv.target, "A")
            a = dns.message.from_wire(zone.answer(addresses.to_wire()) or b"")
            for a_rrset in a.answer:
                peers += [f"{r.address}:{srv.port}" for r in a_rrset]
    return sorted(peers)


def main_config(state_dir: Path, public: bool = True) -> MainConfig:
    paths = AngiePaths(state_dir)
    return MainConfig(
        state_dir=str(state_dir),
        endpoints_socket="",
        http_port=18080,
        https_port=18443,
        lua_package_path="",
        modules=(),
        worker_processes="1",
        worker_shutdown_timeout="",
        worker_user=None,
        shared_dict_size="1m",
        fallback_certificate="",
        status_socket=str(paths.status_socket),
        status_port=0,
        status_allow=(),
        health_uri="/nginx-health",
        latency_socket="",
        public=public,
    )


def angie_test(angie: str, state: Path) -> None:
    result = subprocess.run(
        [angie, "-t", "-p", str(state), "-c", str(state / "angie.conf"), "-e", "stderr"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def angie_accepts(angie: str, records: Mapping[tuple[str, str], str]) -> str:
    """Write the whole Angie configuration for ``records`` and run ``angie -t`` on it."""
    with tempfile.TemporaryDirectory(prefix="ferryman-angie-") as tmp:
        state = Path(tmp)
        paths = AngiePaths(state)
        prepare_state_dir(paths, None)
        config = angie_config(records, str(state), "/nginx-health")
        (state / "angie.conf").write_text(RENDERER.main(main_config(state), DNS_PORT))
        (state / "config-version.conf").write_text(
            RENDERER.config_version(str(paths.version_socket), 1)
        )
        text = RENDERER.servers(config, 18080, 18443)
        (state / SERVERS_FILE).write_text(text)
        for rel, data in config.certificates.items():
            (state / rel).parent.mkdir(exist_ok=True)
            (state / rel).write_bytes(data)
        angie_test(angie, state)
        return text


def test_representative_configuration_passes_angie_t(angie: str) -> None:
    angie_accepts(
        angie,
        {
            ("H", "a.example.com"): f"{CERT} 1 ns/web:80 lc:3:0.5 E|/x|ns/web:80 P|/|ns/web:80 "
            "P|/x|ns/other:http P|/a(b)@c:d,e=f&g~h+i!j*k|ns/web:80",
            ("H", "*.w.example.com"): "! 0 ns/web:80 rr:1:10 P|/api|ns/web:80",
            ("H", "b.example.com"): "- 0 - rr:0:10 E|/|ns/gone:80",
            ("H", "_"): "- 0 - rr:1:10 E|/e|ns/none:80",
            ("E", "ns/web:80"): "10.0.0.1#8080 fd00::1#8080",
            ("C", CERT): CERT_RECORD,
        },
    )


def test_no_hosts_at_all_passes_angie_t(angie: str) -> None:
    text = angie_accepts(angie, {})
    assert "default_server" in text


def records_for(cases: list[Case], peers: dict[str, bool]) -> Records:
    """The records the controller would push for valid Ingresses (no host conflicts)."""
    store = SecretStore()
    records: Records = {}
    for case in cases:
        ing = parse_ingress(case.manifest)
        ns = ing.meta.namespace
        states = {GOOD_SECRET: store.update(ns, GOOD_SECRET, tls_secret(GOOD_SECRET, ns))}
        for t in ing.tls:
            states.setdefault(t.secret_name, SecretState(None, "not found"))
        vhosts, _ = virtual_hosts(ing, ing.hosts(), states)
        for vh in vhosts:
            records[("H", vh.host)] = encode_host(vh)
            if vh.cert_id is not None:
                record = store.record(vh.cert_id)
                assert record is not None
                records[("C", vh.cert_id)] = record
            backends = {r.backend for r in vh.routes} | (
                {vh.default_backend} if vh.default_backend else set()
            )
            for b in backends:
                if peers.setdefault(b, len(peers) % 3 != 0):
                    records[("E", b)] = "10.0.0.1#8080 10.0.0.2#80 fd00::5#443"
    return records


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(cases=ingress_cases())
def test_valid_ingresses_render_what_angie_accepts(angie: str, cases: list[Case]) -> None:
    valid = [c for c in cases if not c.invalid]
    assume(valid)  # the strategy makes one value in ten invalid (test_nginx_property)
    event(f"valid ingresses: {len(valid)}")
    text = angie_accepts(angie, records_for(valid, {}))
    for case in valid:
        for host in case.hosts:
            if host.startswith("*."):
                host = "~^[^.]+" + host[1:].replace(".", r"\.") + "$"
            assert f"server_name {host};" in text


# ---- the data plane ------------------------------------------------------------------


class FakeManager:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.applied: list[dict[str, str | None]] = []
        self.zone: Zone | None = None
        self.peers_at_reload: list[list[str]] = []  # what DNS said as Angie reloaded
        self.reasons: list[str] = []

    async def apply(self, files: Mapping[str, str | None], reason: str = "other") -> float:
        if self.zone is not None:
            self.peers_at_reload.append(zone_peers(self.zone, "80.web.ns.ferryman.internal"))
        if self.refuse:
            raise ConfigTestError("[emerg] refused", (SERVERS_FILE,))
        self.applied.append(dict(files))
        self.reasons.append(reason)
        return 0.0


def dataplane(state: Path, manager: FakeManager) -> AngieDataPlane:
    """An ``AngieDataPlane`` past its start-up reload (the public angie.conf is live)."""
    dp = AngieDataPlane(manager, AngiePaths(state), RENDERER, 80, 443)  # type: ignore[arg-type]
    asyncio.run(dp.apply({"angie.conf": "public"}))
    manager.applied.clear()
    manager.peers_at_reload.clear()
    manager.reasons.clear()
    return dp


def test_start_up_reloads_once_with_the_servers_pushed_so_far(tmp_path: Path) -> None:
    manager = FakeManager()
    dp = AngieDataPlane(manager, AngiePaths(tmp_path), RENDERER, 80, 443)  # type: ignore[arg-type]
    # Before the public angie.conf is live, pushes reload nothing.
    asyncio.run(dp.push({("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80"}, full=True))
    asyncio.run(dp.push(WEB, full=False))
    assert manager.applied == []
    assert zone_peers(dp.zone, "80.web.ns.ferryman.internal") == ["10.0.0.1:8080", "10.0.0.2:8080"]
    asyncio.run(dp.apply({"angie.conf": "public"}))
    [files] = manager.applied
    assert files["angie.conf"] == "public"
    assert "proxy_pass http://ns_web_80_rr_1_10s;" in (files[SERVERS_FILE] or "")


def test_start_up_with_nothing_pushed_still_brings_servers(tmp_path: Path) -> None:
    """No served Ingress: the public angie.conf includes servers.conf all the same,
    whose default server answers 404."""
    manager = FakeManager()
    dp = AngieDataPlane(manager, AngiePaths(tmp_path), RENDERER, 80, 443)  # type: ignore[arg-type]
    asyncio.run(dp.apply({"angie.conf": "public"}))
    servers = manager.applied[0][SERVERS_FILE] or ""
    assert location_body(server_block(servers, "_"), "/") == "return 404;"


def test_reload_reasons_tell_endpoint_transitions_from_the_rest(tmp_path: Path) -> None:
    manager = FakeManager()
    dp = dataplane(tmp_path, manager)
    asyncio.run(dp.push({("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80"}, full=True))
    asyncio.run(dp.push(WEB, full=False))  # 0 -> N: 503 becomes proxy_pass
    asyncio.run(dp.push({("H", "b.example.com"): "- 0 - rr:1:10 P|/|ns/web:80"}, full=False))
    asyncio.run(dp.push({("E", "ns/web:80"): "10.0.0.1#80"}, full=False))  # no reload
    asyncio.run(dp.push({("E", "ns/web:80"): ""}, full=False))  # N -> 0
    assert manager.reasons == ["other", "endpoints", "other", "endpoints"]


def test_push_renders_reloads_and_writes_private_certificates(tmp_path: Path) -> None:
    manager = FakeManager()
    dp = dataplane(tmp_path, manager)
    records = {
        ("H", "a.example.com"): f"{CERT} 0 ns/web:80 rr:1:10",
        ("C", CERT): CERT_RECORD,
        **WEB,
    }
    assert asyncio.run(dp.push(records, full=True)).version == 1
    assert len(manager.applied) == 1
    text = manager.applied[0][SERVERS_FILE]
    assert text is not None
    assert "server_name a.example.com;" in text
    chain, key = (tmp_path / f for f in certificate_files(CERT))
    assert chain.read_bytes() == cert_pem("a.example.com")
    assert key.read_bytes() == key_pem("a.example.com")
    assert chain.stat().st_mode & 0o777 == 0o600
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.parent.stat().st_mode & 0o777 == 0o700

    # Nothing that changes the text: no reload.
    asyncio.run(dp.push(records, full=True))
    assert len(manager.applied) == 1
    assert zone_peers(dp.zone, "80.web.ns.ferryman.internal") == [
        "10.0.0.1:8080",
        "10.0.0.2:8080",
    ]
    # An endpoint change does not reload: DNS answers the new endpoints.
    asyncio.run(dp.push({("E", "ns/web:80"): "10.0.0.3#8080 10.0.0.3#8081"}, full=False))
    assert len(manager.applied) == 1
    assert zone_peers(dp.zone, "80.web.ns.ferryman.internal") == [
        "10.0.0.3:8080",
        "10.0.0.3:8081",
    ]
    # The host leaves: its certificate files go.
    asyncio.run(dp.push({("H", "a.example.com"): "", ("C", CERT): ""}, full=False))
    assert not chain.exists()
    assert not key.exists()


def test_refused_configuration_is_a_push_error_and_keeps_old_records(tmp_path: Path) -> None:
    manager = FakeManager()
    dp = dataplane(tmp_path, manager)
    asyncio.run(dp.push({("H", "a.example.com"): "- 0 - rr:1:10"}, full=True))
    manager.refuse = True
    with pytest.raises(PushError):
        asyncio.run(dp.push({("H", "b.example.com"): "- 0 - rr:1:10"}, full=False))
    manager.refuse = False
    asyncio.run(dp.push({("H", "c.example.com"): "- 0 - rr:1:10"}, full=False))
    text = manager.applied[-1][SERVERS_FILE] or ""
    assert "server_name a.example.com;" in text
    assert "server_name c.example.com;" in text
    assert "b.example.com" not in text  # the refused push was not kept


def test_only_the_first_and_last_endpoint_reload_and_dns_is_ready_for_both(
    tmp_path: Path,
) -> None:
    manager = FakeManager()
    dp = dataplane(tmp_path, manager)
    manager.zone = dp.zone
    name = "80.web.ns.ferryman.internal"
    asyncio.run(dp.push({("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80"}, full=True))
    assert len(manager.applied) == 1  # 503 for /
    assert zone_peers(dp.zone, name) == []
    for peers in ["10.0.0.1#80", "10.0.0.1#80 10.0.0.2#80", "10.0.0.2#80", ""]:
        asyncio.run(dp.push({("E", "ns/web:80"): peers}, full=False))
    # 0 -> 1 and 1 -> 0 reloaded; the moves in between did not.
    assert len(manager.applied) == 3
    assert "proxy_pass" in (manager.applied[1][SERVERS_FILE] or "")
    assert "proxy_pass" not in (manager.applied[2][SERVERS_FILE] or "")
    # The new upstream's workers resolve at once, so DNS answered before that
    # reload; the emptied one kept its last answer until its locations said 503.
    assert manager.peers_at_reload[1:] == [["10.0.0.1:80"], ["10.0.0.2:80"]]
    assert zone_peers(dp.zone, name) == []


def test_refused_reload_puts_the_zone_back(tmp_path: Path) -> None:
    manager = FakeManager()
    dp = dataplane(tmp_path, manager)
    asyncio.run(dp.push({("H", "a.example.com"): "- 0 - rr:1:10 P|/|ns/web:80"}, full=True))
    manager.refuse = True
    with pytest.raises(PushError):
        asyncio.run(dp.push({("E", "ns/web:80"): "10.0.0.1#80"}, full=False))
    assert zone_peers(dp.zone, "80.web.ns.ferryman.internal") == []


def test_angie_paths_use_angie_conf(tmp_path: Path) -> None:
    assert AngiePaths(tmp_path).main == tmp_path / "angie.conf"
    # Bootstrap: no public servers, so servers.conf is not included yet.
    main = RENDERER.main(main_config(tmp_path, public=False), DNS_PORT)
    assert SERVERS_FILE not in main
    public = RENDERER.main(main_config(tmp_path), DNS_PORT)
    assert f"include {tmp_path}/{SERVERS_FILE};" in public
    assert f"    resolver 127.0.0.1:{DNS_PORT} valid=1s ipv6=on;\n" in public


# ---- wiring: ferryman render --data-plane angie, the binary flags ---------------------


@pytest.fixture
def root_logger() -> Iterator[None]:
    """``cli.main`` configures the root logger: put it back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


INGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {"name": "site", "namespace": "default"},
    "spec": {
        "ingressClassName": "ferryman",
        "tls": [{"hosts": ["a.example.com"], "secretName": GOOD_SECRET}],
        "rules": [
            {
                "host": "a.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/app",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"name": "http"}}},
                        }
                    ]
                },
            }
        ],
    },
}


def test_render_angie_writes_what_angie_accepts(
    angie: str, tmp_path: Path, root_logger: None
) -> None:
    manifests, out = tmp_path / "manifests", tmp_path / "out"
    manifests.mkdir()
    docs = [tls_secret(GOOD_SECRET), *service_docs("default"), INGRESS]
    (manifests / "all.yaml").write_text(yaml.safe_dump_all(docs))
    code = cli.main(
        [
            *("render", "--manifests", str(manifests), "--output", str(out)),
            *("--data-plane", "angie", "--http-port", "18080", "--https-port", "18443"),
        ]
    )
    assert code == 0
    assert not (out / "nginx.conf").exists()
    assert "api /status/;" in (out / "config-version.conf").read_text()
    text = (out / SERVERS_FILE).read_text()
    block = server_block(text, "a.example.com")
    assert location_body(block, "/app/") == "proxy_pass http://default_web_http_rr_1_10s;"
    assert (
        "server http.web.default.ferryman.internal service=_http._tcp resolve "
        "max_fails=1 fail_timeout=10s;"
    ) in text
    # What the DNS server would answer Angie, for operators to read.
    zone = (out / ZONE_FILE).read_text()
    assert (
        "_http._tcp.http.web.default.ferryman.internal. 1 IN SRV 0 1 8080 "
        "10-0-0-1.http.web.default.ferryman.internal."
    ) in zone
    assert "10-0-0-1.http.web.default.ferryman.internal. 1 IN A 10.0.0.1" in zone
    assert re.search(r"resolver 127\.0\.0\.1:\d+ valid=1s", (out / "angie.conf").read_text())
    certs = list((out / "certs").iterdir())
    assert len(certs) == 2
    assert all(c.stat().st_mode & 0o777 == 0o600 for c in certs)
    angie_test(angie, out)


@pytest.mark.parametrize(
    ("argv", "binary"),
    [
        ([], "nginx"),
        (["--nginx-binary", "/opt/nginx"], "/opt/nginx"),
        (["--data-plane", "angie"], "angie"),
        (["--data-plane", "angie", "--data-plane-binary", "/opt/angie"], "/opt/angie"),
        (["--data-plane-binary", "/opt/n2"], "/opt/n2"),
    ],
)
def test_data_plane_binary(argv: list[str], binary: str) -> None:
    args = cli.parser().parse_args(["run", *argv])
    assert flag_settings.data_plane_binary(args) == binary


def test_latency_log_names_the_route_of_proxied_locations_only() -> None:
    main = replace(main_config(Path("/s")), latency_socket="/s/latency.sock")
    text = RENDERER.main(main, DNS_PORT)
    assert "access_log syslog:server=unix:/s/latency.sock," in text
    assert "access_log off;" not in text.split("server {")[0]
    # Without the flag nothing is logged at all.
    assert "syslog" not in RENDERER.main(main_config(Path("/s")), DNS_PORT)
    records = {("H", "a.example.com"): "- 0 - rr:1:10 P|/p|ns/web:80", **WEB}
    config = angie_config(records, STATE)
    block = server_block(RENDERER.servers(config, 80, 443, latency=True), "a.example.com")
    assert [line.strip() for line in location_body(block, "/p/").splitlines()][-3:] == [
        'set $ferryman_vhost "a.example.com";',
        'set $ferryman_backend "ns/web:80";',
        "proxy_pass http://ns_web_80_rr_1_10s;",
    ]
    assert location_body(block, "/") == "return 404;"
    assert "ferryman_vhost" not in RENDERER.servers(config, 80, 443)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running_angie(
    angie: str,
    paths: AngiePaths,
    http_port: int,
    host: str,
    reply: Callable[[str], str],
    latency_socket: str = "",
) -> AsyncIterator[AngieDataPlane]:
    """A real Angie, driven by ``AngieDataPlane`` + ``NginxManager`` (the reload
    confirmed by Angie's generation) with ferryman's DNS server answering its
    ``resolve`` lookups, for one host record whose backend ``ns/web:80`` is a
    loopback server answering ``reply(path)``."""
    backend_port = _free_port()
    app = web.Application()

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=reply(request.path))

    app.router.add_get("/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", backend_port).start()
    dns_server = DnsServer(Zone(), 0)
    await dns_server.start()
    manager = NginxManager(
        angie, paths, 10, RENDERER.config_version, AngieGeneration(paths.version_socket)
    )
    dp = AngieDataPlane(
        manager,
        paths,
        RENDERER,
        http_port,
        _free_port(),
        zone=dns_server.zone,
        latency=bool(latency_socket),
    )
    main = replace(main_config(paths.state_dir), http_port=http_port, latency_socket=latency_socket)
    await manager.start({"angie.conf": RENDERER.main(replace(main, public=False), dns_server.port)})
    try:
        await dp.push(
            {("H", "a.example.com"): host, ("E", "ns/web:80"): f"127.0.0.1#{backend_port}"},
            full=True,
        )
        await dp.apply({"angie.conf": RENDERER.main(main, dns_server.port)})
        yield dp
    finally:
        await manager.stop()
        await dns_server.stop()
        await runner.cleanup()


async def _until(port: int, host: str, path: str, want: tuple[int, str]) -> tuple[int, str]:
    """Angie's answer once it is ``want`` (its workers resolve a new upstream's
    peers within milliseconds of a reload), or the last one after 3 s."""
    for _ in range(60):
        answer = await asyncio.to_thread(_get, port, host, path)
        if answer == want:
            break
        await asyncio.sleep(0.05)
    return answer


async def _generation(generation: AngieGeneration, want: int) -> int:
    """Angie's generation once it is ``want``, or the last reading after 2 s: an
    old worker may still answer the socket for a moment after a reload."""
    for _ in range(40):
        if (value := await generation.read()) == want:
            break
        await asyncio.sleep(0.05)
    return value


def test_data_plane_serves_and_reloads_with_real_angie(angie: str, tmp_path: Path) -> None:
    """Routes, 404/503, an endpoint change reloading to 503; each reload moved
    Angie's own generation on by one."""
    http_port = _free_port()

    async def scenario() -> list[tuple[int, str]]:
        paths = AngiePaths(tmp_path)
        prepare_state_dir(paths, None)
        host = "- 0 - rr:1:10 P|/app|ns/web:80 E|/gone|ns/gone:80"
        generation = AngieGeneration(paths.version_socket)
        answers = []
        async with running_angie(angie, paths, http_port, host, lambda p: f"backend {p}") as dp:
            # Started, then the one start-up reload.
            assert await _generation(generation, 2) == 2
            answers.append(
                await _until(http_port, "a.example.com", "/app/x", (200, "backend /app/x"))
            )
            for host, path in [("a", "/apple"), ("a", "/gone"), ("b", "/app")]:
                answers.append(
                    await asyncio.to_thread(_get, http_port, f"{host}.example.com", path)
                )
            await dp.push({("E", "ns/web:80"): ""}, full=False)
            answers.append(await _until(http_port, "a.example.com", "/app", (503, "")))
            assert await _generation(generation, 3) == 3
        return answers

    assert asyncio.run(scenario()) == [
        (200, "backend /app/x"),
        (404, ""),
        (503, ""),
        (404, ""),
        (503, ""),
    ]


def test_latency_metrics_from_real_angie(angie: str) -> None:
    """Angie's latency log, into the histogram: one sample per proxied request,
    labelled with its route."""
    http_port = _free_port()
    metrics = Metrics()
    # Angie's workers (nobody) must reach the socket: pytest's tmp_path is 0700.
    state = Path(tempfile.mkdtemp(prefix="ferryman-latency-", dir="/tmp"))
    state.chmod(0o755)

    async def scenario() -> None:
        paths = AngiePaths(state)
        prepare_state_dir(paths, None)
        owner = ObjectRef("Ingress", "ns", "web")
        receiver = LatencyReceiver(paths.latency_socket, metrics, lambda *where: owner)
        # NGINX run by root without a user directive: workers are nobody:nogroup.
        receiver.bind(pwd.getpwnam("nobody").pw_gid if os.geteuid() == 0 else None)
        receiving = asyncio.create_task(receiver.run())
        try:
            async with running_angie(
                angie,
                paths,
                http_port,
                "- 0 - rr:1:10 P|/app|ns/web:80",
                lambda path: "ok",
                latency_socket=str(paths.latency_socket),
            ):
                first = await _until(http_port, "a.example.com", "/app", (200, "ok"))
                answers = [first] + [
                    await asyncio.to_thread(_get, http_port, "a.example.com", path)
                    for path in ["/app/1", "/app/2", "/nothing"]
                ]
                assert answers == [(200, "ok")] * 3 + [(404, "")]
                for _ in range(100):  # the datagrams arrive on their own time
                    if _latency_count(metrics) >= 3:
                        break
                    await asyncio.sleep(0.02)
        finally:
            receiving.cancel()

    try:
        asyncio.run(scenario())
    finally:
        shutil.rmtree(state, ignore_errors=True)
    # The proxied requests, none for the 404 (the first may have been retried
    # while the new upstream resolved: at least three).
    assert _latency_count(metrics) >= 3


def _latency_count(metrics: Metrics) -> float:
    """Samples of the latency histogram for ns/web:80 answering 200."""
    return sum(
        sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name.endswith("latency_ms_count")
        and sample.labels["upstream"] == "ns/web:80"
        and sample.labels["code"] == "200"
    )


def _get(port: int, host: str, path: str) -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
