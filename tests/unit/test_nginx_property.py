"""Random Ingress manifests -> ``ferryman.app.render.render`` -> a real ``nginx -t``.

Whatever users write, the configuration ferryman renders must be accepted by
NGINX, every record it would push must follow the record grammar the Lua side
parses, every Ingress holding an invalid value must be rejected (and reported)
and no hostile character may reach NGINX; every valid Ingress must be served.
"""

from __future__ import annotations

import asyncio
import base64
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, event, given, settings

from ferryman.app.render import render
from ferryman.configs.routes import encode_host
from ferryman.configs.secret_state import SecretState
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import ListenSettings, Settings
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts
from testkit.nginx_cases import (
    GOOD_SECRET,
    HOSTILE,
    NAMESPACES,
    SERVICE,
    Case,
    ingress_cases,
    service_docs,
)
from testkit.tls import tls_secret

# ---- the record grammar (see dataplane/lua/ferryman.lua, configs/routes.py) -------------

_LABEL = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
_DNS = rf"{_LABEL}(\.{_LABEL})*"
HOST_KEY = re.compile(rf"(\*\.)?{_DNS}|_")
BACKEND = re.compile(rf"{_LABEL}/{_LABEL}:([0-9]+|[a-z0-9-]+)")
CERT_ID = re.compile(rf"{_LABEL}/{_DNS}@[0-9a-f]{{16}}")
PATH = re.compile(r"/[A-Za-z0-9\-._~/!*+,=:@&()]*")
BALANCING = re.compile(r"(rr|lc):[0-9]+:[0-9.]+")
PEER = re.compile(r"([0-9.]+|[0-9a-f:]+)#([0-9]+)")
BASE64 = re.compile(r"[A-Za-z0-9+/]+=*")
RECORD = re.compile(r"[EHC]\t[^\t\n ]+\t")
HOSTILE_CHARS = {c for h in HOSTILE for c in h if not c.isalnum()}


def parse_records(text: str) -> dict[tuple[str, str], str]:
    """records.txt -> (kind, key) -> value, checking the grammar of every line."""
    assert text.endswith("\n")
    header, *lines = text[:-1].split("\n")
    assert header == "0 full"
    records: dict[tuple[str, str], str] = {}
    for line in lines:
        assert RECORD.match(line), line
        kind, key, value = line.split("\t", 2)
        assert (kind, key) not in records, line
        records[(kind, key)] = value
        if kind == "H":
            atoms = check_host_record(key, value)
        elif kind == "E":
            atoms = check_endpoint_record(key, value)
        else:
            atoms = check_certificate_record(key, value)
        # Outside base64 certificate fields, no hostile character anywhere.
        for atom in atoms:
            assert not HOSTILE_CHARS & set(atom), (atom, line)
    return records


def check_host_record(key: str, value: str) -> list[str]:
    assert HOST_KEY.fullmatch(key), key
    tokens = value.split(" ")
    assert len(tokens) >= 4, value
    tls, redirect, default, balancing, *routes = tokens
    assert tls in ("-", "!") or CERT_ID.fullmatch(tls), tls
    assert redirect in ("0", "1"), redirect
    assert default == "-" or BACKEND.fullmatch(default), default
    assert BALANCING.fullmatch(balancing), balancing
    atoms = [key, tls, redirect, default, balancing]
    for r in routes:
        kind, path, backend = r.split("|")
        assert kind in ("E", "P"), r
        assert PATH.fullmatch(path), r
        assert BACKEND.fullmatch(backend), r
        atoms += [kind, path, backend]
    return atoms


def check_endpoint_record(key: str, value: str) -> list[str]:
    assert BACKEND.fullmatch(key), key
    atoms = [key]
    for peer in value.split(" "):
        m = PEER.fullmatch(peer)
        assert m, value
        atoms += [m.group(1), m.group(2)]
    return atoms


def check_certificate_record(key: str, value: str) -> list[str]:
    assert CERT_ID.fullmatch(key), key
    chain_b64, key_b64 = value.split("\t")
    assert BASE64.fullmatch(chain_b64)
    assert BASE64.fullmatch(key_b64)
    chain = base64.b64decode(chain_b64, validate=True)
    assert x509.load_pem_x509_certificates(chain)
    serialization.load_pem_private_key(base64.b64decode(key_b64, validate=True), password=None)
    return [key]


def expected_host_records(case: Case) -> dict[str, str]:
    """What the Ingress's virtual hosts should be pushed as, computed directly."""
    ing = parse_ingress(case.manifest)
    store = SecretStore()
    ns = ing.meta.namespace
    states = {GOOD_SECRET: store.update(ns, GOOD_SECRET, tls_secret(GOOD_SECRET, ns))}
    for t in ing.tls:
        states.setdefault(t.secret_name, SecretState(None, "not found"))
    vhosts, _ = virtual_hosts(ing, ing.hosts(), states)
    return {vh.host: encode_host(vh) for vh in vhosts}


def check(cases: list[Case]) -> dict[tuple[str, str], str]:
    """Render ``cases``, check everything, and return the records."""
    with tempfile.TemporaryDirectory(prefix="ferryman-prop-") as tmp:
        root = Path(tmp)
        manifests, out = root / "manifests", root / "out"
        manifests.mkdir()
        docs = [tls_secret(GOOD_SECRET, ns) for ns in NAMESPACES]
        docs += [d for ns in NAMESPACES for d in service_docs(ns)]
        (manifests / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
        for n, case in enumerate(cases):
            (manifests / f"ingress-{n}.yaml").write_text(yaml.safe_dump(case.manifest))
        problems = asyncio.run(
            render(
                Settings(
                    state_dir=out,
                    manifests=manifests,
                    listen=ListenSettings(http_port=18080, https_port=18443),
                ),
                out,
            )
        )
        result = subprocess.run(
            ["nginx", "-t", "-p", str(out), "-c", str(out / "nginx.conf"), "-e", "stderr"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        records_file = out / "records.txt"
        # render() writes records.txt only when there is something to push: with
        # every Ingress rejected it is missing (reported; src is not ours to fix).
        text = records_file.read_text() if records_file.exists() else "0 full\n"
        records = parse_records(text)
        for hostile in HOSTILE:
            if len(hostile) > 1:
                assert hostile not in text, hostile
        hosts = {k: v for (kind, k), v in records.items() if kind == "H"}
        for case in cases:
            rejected = [p for p in problems if p.startswith(f"{case.ref}: Rejected")]
            if case.invalid:
                assert rejected, f"{case.ref} holds an invalid value but was accepted"
                # Its hosts (unique to it) are not served.
                assert not case.hosts & hosts.keys(), case.hosts & hosts.keys()
            else:
                assert not rejected, rejected
                want = expected_host_records(case)
                assert want.keys() == case.hosts
                assert {h: hosts.get(h) for h in want} == want
        # Every certificate a host names is pushed; every backend with ready
        # endpoints has its endpoint set, and only those.
        backends = set()
        for value in hosts.values():
            tls, _, default, _, *routes = value.split(" ")
            if tls not in ("-", "!"):
                assert ("C", tls) in records, tls
            backends |= {r.split("|")[2] for r in routes}
            if default != "-":
                backends.add(default)
        # (A path shadowed by an earlier duplicate still references its backend.)
        referenced = {
            f"{c.manifest['metadata']['namespace']}/{b.service}:{b.port_ref}"
            for c in cases
            if not c.invalid
            for b in parse_ingress(c.manifest).services()
        }
        assert backends <= referenced
        with_peers = {k for k in referenced if re.fullmatch(rf"[a-z-]+/{SERVICE}:(80|http)", k)}
        pushed = {k for (kind, k) in records if kind == "E"}
        assert backends & with_peers <= pushed <= with_peers
        for key in pushed:
            assert records[("E", key)] == "10.0.0.1#8080 10.0.0.2#8080"
        # Nothing else went wrong: only the invalid Ingresses were reported.
        expected = {c.ref for c in cases if c.invalid}
        assert {p.split(":")[0] for p in problems} <= expected, problems
        return records


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases=ingress_cases())
def test_random_ingresses_render_to_a_configuration_nginx_accepts(cases: list[Case]) -> None:
    records = check(cases)
    for kind in "HCE":
        event(f"{kind} records: {any(k == kind for k, _ in records)}")


def _ingress(path: str = "/", host: str = "a.example.com", **backend: Any) -> dict[str, Any]:
    service = {"name": backend.get("service", "web"), "port": backend.get("port", {"number": 80})}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "attack", "namespace": "default"},
        "spec": {
            "ingressClassName": "ferryman",
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {"path": path, "pathType": "Prefix", "backend": {"service": service}}
                        ]
                    },
                }
            ],
        },
    }


BENIGN = Case(
    {**_ingress("/ok", "ok.example.com"), "metadata": {"name": "ok", "namespace": "default"}},
    invalid=False,
)


@pytest.mark.parametrize(
    "manifest",
    [
        _ingress("/x; return 200 pwned; #"),
        _ingress("/x {\n}\nlocation /y"),
        _ingress("/x\n"),
        _ingress("/${host}"),
        _ingress(host="a.example.com; return 200 pwned"),
        _ingress(host="a.example.com\n"),
        _ingress(service="web\n"),
        _ingress(service='web"; proxy_pass http://evil; #'),
        _ingress(port={"name": "http\n"}),
        _ingress(port={"name": "http;"}),
    ],
    ids=repr,
)
def test_injection_attempts_are_rejected(manifest: dict[str, Any]) -> None:
    check([Case(manifest, True), BENIGN])
