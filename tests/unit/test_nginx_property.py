"""Random Ingress manifests -> ``ferryman.app.render`` -> a real ``nginx -t``.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ferryman.app import render
from ferryman.configs.model import CATCH_ALL
from ferryman.configs.routes import encode_host
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.records.virtual_hosts import SecretState, virtual_hosts
from ferryman.secrets import SecretStore
from ferryman.settings import Settings
from testkit.tls import tls_secret

NAMESPACES = ("default", "team-a")
GOOD_SECRET = "good-tls"
SERVICE = "web"
HOSTILE = [
    ";",
    "{",
    "}",
    '"',
    "'",
    "$",
    " ",
    "\t",
    "\n",
    "\r",
    "\\",
    "#",
    "%",
    "?",
    "${host}",
    "; return 200 pwned;",
    "\n}\nserver {",
]


@dataclass
class Case:
    manifest: dict[str, Any]
    invalid: bool  # holds at least one value the API server or the whitelist refuses

    @property
    def ref(self) -> str:
        md = self.manifest["metadata"]
        return f"Ingress {md['namespace']}/{md['name']}"

    @property
    def hosts(self) -> set[str]:
        """The virtual hosts the Ingress asks for ("_" for host-less rules)."""
        return {r.get("host") or CATCH_ALL for r in self.manifest["spec"]["rules"]}


def _spliced(draw: st.DrawFn, valid: str, start: int = 0) -> str:
    """``valid`` with a hostile string inserted somewhere at or after ``start``."""
    at = draw(st.integers(start, len(valid)))
    return valid[:at] + draw(st.sampled_from(HOSTILE)) + valid[at:]


def _bad(draw: st.DrawFn) -> bool:
    """One value in ten is invalid."""
    return draw(st.integers(0, 9)) == 0


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
# "web" has a Service with ready endpoints (port 80, named "http"): endpoint records.
_service = st.one_of(
    st.just(SERVICE), st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
)
_segment = st.text(alphabet="abcXYZ019-._~!*+,=:@&()", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
_valid_path = st.builds(
    lambda segs, slash: "/" + "/".join(segs) + ("/" if slash and segs else ""),
    st.lists(_segment, max_size=3),
    st.booleans(),
)


@st.composite
def _path(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    path_type = draw(st.sampled_from(["Exact", "Prefix", "ImplementationSpecific"]))
    path = draw(_valid_path)
    invalid = False
    if path_type == "ImplementationSpecific" and draw(st.booleans()):
        path = draw(st.sampled_from(["/a//b", "/a/./b", "/a/../b", "/a/..", "//"]))
    if _bad(draw):
        invalid = True
        kind = draw(st.integers(0, 3))
        if kind == 0 or path_type == "ImplementationSpecific":
            path = _spliced(draw, path, start=1)
        elif kind == 1:
            path = path.lstrip("/") or "relative"
        elif kind == 2:
            path = path.rstrip("/") + "//x"
        else:
            path = path.rstrip("/") + "/../x"
    return {"path": path, "pathType": path_type, "backend": draw(_backend())[0]}, invalid


@st.composite
def _backend(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    name = draw(_service)
    port: dict[str, Any]
    if draw(st.booleans()):
        port = {"number": draw(st.one_of(st.just(80), st.integers(1, 65535)))}
    else:
        port = {"name": draw(st.sampled_from(["http", "web", "h2c", "grpc-web", "1a"]))}
    invalid = False
    if _bad(draw):
        invalid = True
        which = draw(st.integers(0, 2))
        if which == 0:
            name = (
                draw(st.sampled_from(["1svc", "Svc", "svc_1", "a.b"]))
                if draw(st.booleans())
                else _spliced(draw, name)
            )
        elif which == 1:
            port = {"number": draw(st.sampled_from([0, 65536, -1, 100000]))}
        else:
            port = {"name": draw(st.sampled_from(["HTTP", "a--b", "123", "-x"]))}
            if draw(st.booleans()):
                port = {"name": _spliced(draw, "http")}
    return {"service": {"name": name, "port": port}}, invalid


@st.composite
def ingress_case(draw: st.DrawFn, i: int) -> Case:
    invalid = False
    hosts: list[str] = []
    rules = []
    for j in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["exact", "exact", "wildcard"] + (["none"] if i == 0 else [])))
        rule: dict[str, Any] = {}
        if kind == "exact":
            host = f"{draw(_label)}.i{i}r{j}.example.com"
        elif kind == "wildcard":
            host = f"*.i{i}r{j}.example.com"
        else:
            host = ""
        if host and _bad(draw):
            invalid = True
            host = draw(
                st.sampled_from(
                    [
                        _spliced(draw, host),
                        host.upper(),
                        f"a.*.i{i}r{j}.example.com",
                        f"10.0.{i}.{j}",
                        "x" * 64 + f".i{i}r{j}.example.com",
                    ]
                )
            )
        elif host:
            hosts.append(host)
        if host:
            rule["host"] = host
        paths = []
        for _ in range(draw(st.integers(1, 3))):
            path, bad_path = draw(_path())
            backend, bad_backend = draw(_backend())
            path["backend"] = backend
            invalid |= bad_path or bad_backend
            paths.append(path)
        rule["http"] = {"paths": paths}
        rules.append(rule)
    spec: dict[str, Any] = {"rules": rules}
    if draw(st.booleans()):
        backend, bad_backend = draw(_backend())
        spec["defaultBackend"] = backend
        invalid |= bad_backend
    if hosts and draw(st.booleans()):
        secret = draw(st.sampled_from([GOOD_SECRET, GOOD_SECRET, f"missing-{i}"]))
        if _bad(draw):
            invalid = True
            secret = draw(st.sampled_from(["Bad_Secret", _spliced(draw, secret)]))
        tls_hosts = draw(st.lists(st.sampled_from(hosts), min_size=1, unique=True))
        spec["tls"] = [{"hosts": tls_hosts, "secretName": secret}]
    metadata: dict[str, Any] = {
        "name": f"ing-{i}",
        "namespace": draw(st.sampled_from(NAMESPACES)),
        "annotations": {"nginx.org/ssl-redirect": draw(st.sampled_from(["true", "false"]))},
    }
    if draw(st.booleans()):
        spec["ingressClassName"] = "ferryman"
    else:
        metadata["annotations"]["kubernetes.io/ingress.class"] = "ferryman"
    manifest = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": spec,
    }
    return Case(manifest, invalid)


@st.composite
def ingress_cases(draw: st.DrawFn) -> list[Case]:
    return [draw(ingress_case(i)) for i in range(draw(st.integers(1, 4)))]


def service_docs(namespace: str) -> list[dict[str, Any]]:
    """Service "web" (port 80 "http" -> 8080) with two ready endpoints and one not ready."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": namespace},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-1",
                "namespace": namespace,
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [
                {"addresses": ["10.0.0.1", "10.0.0.2"], "conditions": {"ready": True}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": False}},
            ],
        },
    ]


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
                Settings(state_dir=out, manifests=manifests, http_port=18080, https_port=18443),
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
