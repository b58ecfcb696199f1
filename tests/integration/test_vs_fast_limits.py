"""Rate limits in ngx_http_ferryman_module (ngx_http_ferryman_limit.c): a
VirtualServer route whose only policy is a rateLimit is served by the module,
with NGINX's limit_req numbers (burst, delay, nodelay, rejectCode, dryRun and
its log lines), and decides as NGINX's own limit_req does on the same
requests; no F record with limits, however malformed, crashes NGINX.

Which path answered is read from ferryman_fast_path_requests_total, as in
test_vs_fast_path.py (a request the module refuses is the module's too).
"""

from __future__ import annotations

import base64
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.fast_path import (
    _push_raw,
    _start,
    _workers,
    answer,
    virtual_server,
)
from testkit.harness import (
    Backends,
    Ferryman,
    at_once,
    eventually,
    fast_path_counts,
    free_port,
    service_with_backends,
)
from testkit.vs_fast import mutated
from testkit.vs_policies import policy

HOST = "vs-fast.example.com"


def rate_limit(name: str, **fields: Any) -> dict[str, Any]:
    return policy(name, rateLimit={"key": "${binary_remote_addr}", "zoneSize": "10M", **fields})


def limited(path: str, *policies: str, upstream: str = "a") -> dict[str, Any]:
    return {
        "path": path,
        "action": {"pass": upstream},
        "policies": [{"name": p} for p in policies],
    }


def moved(f: Ferryman, before: tuple[float, float]) -> tuple[int, int]:
    after = fast_path_counts(f)
    return int(after[0] - before[0]), int(after[1] - before[1])


def test_a_rate_limited_route_is_served_and_refused_by_the_module(
    ferryman: Ferryman, backends: Backends
) -> None:
    # egressMTLS: a policy the module does not enforce.
    allow = policy("allow", egressMTLS={"sslName": "backend.example.com"})
    routes = [
        limited("/limited", "burst2"),
        limited("/plain-limit", "once"),
        limited("/per-user", "per-user"),
        limited("/guarded", "guarded", "allow"),
        {"path": "/", "action": {"pass": "b"}},
    ]
    _start(
        ferryman,
        backends,
        rate_limit("burst2", rate="1r/m", burst=2, noDelay=True, rejectCode=429),
        rate_limit("once", rate="1r/m"),
        rate_limit("per-user", rate="1r/m", key="${http_x_user}"),
        rate_limit("guarded", rate="1r/m"),
        allow,
        virtual_server(routes),
    )
    eventually(lambda: answer(ferryman, "/")[0] == "b", 60, "VirtualServer live")
    # 1r/m, burst 2, nodelay: three pass, the fourth gets the rejectCode; all in C.
    got = [answer(ferryman, "/limited") for _ in range(4)]
    assert got == [("a", "module")] * 3 + [("429 <html>", "module")]
    # No burst: the default rejectCode, 503.
    assert [answer(ferryman, "/plain-limit") for _ in range(2)] == [
        ("a", "module"),
        ("503 <html>", "module"),
    ]
    # A header as key: a bucket per user; no header, no key: not limited.
    alice = {"X-User": "alice"}
    assert [answer(ferryman, "/per-user", headers=alice)[0] for _ in range(2)] == [
        "a",
        "503 <html>",
    ]
    assert answer(ferryman, "/per-user", headers={"X-User": "bob"}) == ("a", "module")
    assert [answer(ferryman, "/per-user") for _ in range(3)] == [("a", "module")] * 3
    # A rate limit beside another policy: the slow path's, as before.
    assert [answer(ferryman, "/guarded") for _ in range(2)] == [("a", "lua"), ("503 <html>", "lua")]
    assert ferryman.reloads() == 1


def test_delay_and_burst_in_the_module(ferryman: Ferryman, backends: Backends) -> None:
    _start(
        ferryman,
        backends,
        # 2r/s: a request leaks in 0.5 s. burst 3, delay 1.
        rate_limit("two-stage", rate="2r/s", burst=3, delay=1),
        virtual_server([limited("/", "two-stage")]),
    )
    eventually(lambda: answer(ferryman, "/live")[0] == "a", 60, "VirtualServer live")
    time.sleep(1.1)  # the probe's excess leaked away
    before = fast_path_counts(ferryman)
    # Five at once: excess 0, 1, 2, 3 (delay 1: waits 0, 0, 0.5 s, 1 s), and
    # 4 beyond burst 3: refused at once.
    results = at_once(ferryman.http_port, HOST, "/x", 5)
    assert sorted(s for s, _ in results) == [200, 200, 200, 200, 503], results
    waits = sorted(t for s, t in results if s == 200)
    assert waits[0] < 0.35 and waits[1] < 0.35, results
    assert 0.4 < waits[2] < 0.9 and 0.9 < waits[3] < 1.5, results
    assert moved(ferryman, before) == (5, 0)
    # NGINX's lines: refusals at logLevel (error), delays one lower (warn).
    lines = ferryman.logs().splitlines()
    zone = "pol_rl_default_two_stage_default_fast_vs"
    refused = [x for x in lines if "limiting requests, excess: " in x and zone in x]
    delayed = [x for x in lines if "delaying request, excess: " in x and zone in x]
    assert len(refused) == 1 and "[error]" in refused[0], refused
    assert len(delayed) == 2 and all("[warn]" in x for x in delayed), delayed


def test_dry_run_passes_everything_and_logs_at_the_log_level(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(
        ferryman,
        backends,
        rate_limit("dry", rate="1r/m", dryRun=True, logLevel="warn"),
        virtual_server([limited("/", "dry")]),
    )
    eventually(lambda: answer(ferryman, "/")[0] == "a", 60, "VirtualServer live")
    started = time.monotonic()
    assert [answer(ferryman, "/x") for _ in range(4)] == [("a", "module")] * 4
    # Delays are only logged: 1r/m would otherwise hold these for minutes.
    assert time.monotonic() - started < 2
    line = eventually(
        lambda: [x for x in ferryman.logs().splitlines() if "limiting requests, dry run" in x],
        60,
        "NGINX's log line",
    )[0]
    assert "[warn]" in line and "by zone" in line
    assert "pol_rl_default_dry_default_fast_vs" in line


def test_the_virtual_servers_own_limit_counts_routes_and_no_route_in_the_module(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(
        ferryman,
        backends,
        rate_limit("host", rate="1r/m", burst=1, noDelay=True, rejectCode=429),
        rate_limit("waits", rate="2r/s", burst=2),
        virtual_server([{"path": "/plain", "action": {"pass": "a"}}], policies=[{"name": "host"}]),
        virtual_server(
            [{"path": "/plain", "action": {"pass": "a"}}],
            policies=[{"name": "waits"}],
            name="waits",
            host="waits.example.com",
        ),
    )
    eventually(lambda: answer(ferryman, "/plain")[0] == "a", 60, "VirtualServer live")
    # NIC's server-level limit_req: one bucket for the routes and the requests
    # no route takes (the module answers those 404 itself).
    assert answer(ferryman, "/nowhere") == ("404 <html>", "module")
    assert answer(ferryman, "/plain") == ("429 <html>", "module")
    assert answer(ferryman, "/nowhere") == ("429 <html>", "module")
    # Without nodelay, a 404 waits its turn too: at once, 0.5 s, 1 s.
    waits = "waits.example.com"
    eventually(lambda: answer(ferryman, "/plain", waits)[0] == "a", 60, "live")
    time.sleep(1.1)
    before = fast_path_counts(ferryman)

    results = at_once(ferryman.http_port, waits, "/x", 3)
    assert [s for s, _ in results] == [404] * 3, results
    assert results[0][1] < 0.35 and 0.4 < results[1][1] < 0.9 and 0.9 < results[2][1] < 1.5
    assert moved(ferryman, before) == (3, 0)


# Decisions against NGINX's own limit_req: the same limits, the same requests.

_examples = itertools.count()
PROBE = {"X-User": "probe", "Cookie": "c=probe"}
_KEYS = ["${http_x_user}", "${uri}", "${arg_k}", "${cookie_c}", "u-${http_x_user}.${arg_k}"]
_NGINX = """
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    proxy_temp_path {dir}/tmp;
    client_body_temp_path {dir}/tmp;
{zones}
    server {{
        listen 127.0.0.1:{port};
        location / {{
{limits}
            proxy_pass http://127.0.0.1:{backend};
        }}
    }}
}}
"""


class HandWritten:
    """NGINX with limit_req as a user writes it (NIC's directives), restarted
    per example so its zones start empty."""

    def __init__(self, work: Path, backend: int) -> None:
        self.work = work
        self.backend = backend
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, limits: list[dict[str, Any]], dry_run: bool, code: int) -> None:
        self.stop()
        self.port = free_port()
        (self.work / "tmp").mkdir(parents=True, exist_ok=True)
        zones, directives = [], []
        for i, lim in enumerate(limits):
            zones.append(f"    limit_req_zone {lim['key']} zone=z{i}:1m rate={lim['rate']};")
            extra = ""
            if lim.get("burst"):
                extra += f" burst={lim['burst']}"
            if lim.get("noDelay"):
                extra += " nodelay"
            elif lim.get("delay"):
                extra += f" delay={lim['delay']}"
            directives.append(f"            limit_req zone=z{i}{extra};")
        directives.append(f"            limit_req_status {code};")
        directives.append(f"            limit_req_dry_run {'on' if dry_run else 'off'};")
        conf = self.work / "nginx.conf"
        conf.write_text(
            _NGINX.format(
                dir=self.work,
                port=self.port,
                backend=self.backend,
                zones="\n".join(zones),
                limits="\n".join(directives),
            )
        )
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(self.work), "-c", str(conf), "-g", "daemon off;"],
            stderr=subprocess.DEVNULL,
        )
        eventually(lambda: self._up(), 60, "hand-written NGINX")

    def _up(self) -> bool:
        try:
            httpx.get(f"http://127.0.0.1:{self.port}/probe?k=probe", headers=PROBE, timeout=2)
        except httpx.TransportError:
            return False
        return True

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def both(
    ferryman: Ferryman, backends: Backends, tmp_path: Path
) -> Iterator[tuple[Ferryman, HandWritten]]:
    backend = backends.start("a")
    ferryman.write("svc", service_with_backends("a", [backend]))
    ferryman.start()
    plain = HandWritten(tmp_path / "handwritten", backend.port)
    yield ferryman, plain
    plain.stop()


_limit = st.fixed_dictionaries(
    {"key": st.sampled_from(_KEYS), "burst": st.integers(0, 3)},
    optional={"noDelay": st.just(True)},
)
_request = st.tuples(
    st.sampled_from(["", "ann", "bob"]),  # X-User
    st.sampled_from(["/x", "/y"]),
    st.sampled_from(["", "?k=1", "?k=2"]),
    st.sampled_from(["", "c=1"]),  # Cookie
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    limits=st.lists(_limit, min_size=1, max_size=2),
    dry_run=st.booleans(),
    code=st.sampled_from([429, 503]),
    requests=st.lists(_request, min_size=1, max_size=20),
)
def test_the_module_decides_as_nginx_limit_req(
    both: tuple[Ferryman, HandWritten],
    limits: list[dict[str, Any]],
    dry_run: bool,
    code: int,
    requests: list[tuple[str, str, str, str]],
) -> None:
    f, plain = both
    # 1r/m: a bucket leaks 16 thousandths a second, never a whole request in an
    # example, so both count the same whatever their clocks. Without nodelay,
    # delay = burst: no request waits (a wait at 1r/m is a minute).
    for lim in limits:
        lim["rate"] = "1r/m"
        if not lim.get("noDelay") and lim["burst"]:
            lim["delay"] = lim["burst"]
    name = f"cmp{next(_examples)}"
    host = f"{name}.example.com"
    docs: list[dict[str, Any]] = []
    for i, lim in enumerate(limits):
        first = {"dryRun": dry_run, "rejectCode": code} if i == 0 else {}
        fields = {k: v for k, v in {**lim, **first}.items() if v not in (0, False)}
        docs.append(policy(f"{name}-{i}", rateLimit={"zoneSize": "1M", **fields}))
    docs.append(
        virtual_server(
            [limited("/", *(f"{name}-{i}" for i in range(len(limits))))], name=name, host=host
        )
    )
    f.write("docs", docs)
    plain.start(limits, dry_run, code)
    # The probes' keys are buckets no request below shares.
    probe = {"Host": host, **PROBE}
    base = f"http://127.0.0.1:{f.http_port}"
    eventually(
        lambda: httpx.get(base + "/probe?k=probe", headers=probe).status_code != 404, 60, "live"
    )
    before = fast_path_counts(f)
    wrong = []
    with httpx.Client(timeout=10) as c:
        for user, path, query, cookie in requests:
            headers = {
                **({"X-User": user} if user else {}),
                **({"Cookie": cookie} if cookie else {}),
            }
            ours = c.get(base + path + query, headers={"Host": host, **headers}).status_code
            theirs = c.get(f"http://127.0.0.1:{plain.port}{path}{query}", headers=headers)
            if ours != theirs.status_code:
                wrong.append((user, path, query, cookie, ours, theirs.status_code))
    assert not wrong, f"{limits} dry_run={dry_run}: (request, ferryman, NGINX) {wrong}"
    assert moved(f, before) == (len(requests), 0)


# Malformed records with limits: never a crash.


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# A valid record: "/" limited (burst 1, nodelay, key a header) and passing to a.
BASE = (
    f"1 u {_b64('default/a:80')} 0 1 10000 0 0 0 0 l P {_b64('/')} 0 q 0 4 429 1"
    f" {_b64('default/p/default/fast')} 16 1 0 1 3 - {_b64('http_x_user')} - 0 1 100 1"
)
TOKENS = ["1", "0", "3", "4", "7", "8", "429", "600", "399", "q", "f", "l", "s", "h", "-",
          "1000000000000", "10000000000000", "999999999", _b64("jwt_claim_sub"), _b64("uri"),
          _b64(""), _b64("a\0b"), "", " "]  # fmt: skip


@pytest.fixture
def limited_host(ferryman: Ferryman, backends: Backends) -> tuple[Ferryman, set[int]]:
    _start(ferryman, backends, virtual_server([{"path": "/", "action": {"pass": "a"}}]))
    eventually(lambda: answer(ferryman, "/")[1] == "module", 60, "VirtualServer live")
    _push_raw(ferryman, f"F\t{HOST}\t{BASE}")
    eventually(
        lambda: answer(ferryman, "/", headers={"X-User": "u"})[0] == "429 <html>", 60, "limit"
    )
    # The start-up reload's old workers exit in their own time (test_vs_fast_path).
    eventually(lambda: len(_workers(ferryman)) == 2, 60, "the old workers gone")
    return ferryman, _workers(ferryman)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(record=mutated(BASE, TOKENS))
def test_no_f_record_with_limits_crashes_nginx(
    limited_host: tuple[Ferryman, set[int]], record: str
) -> None:
    f, workers = limited_host
    _push_raw(f, f"F\t{HOST}\t{record.strip()}")
    for user in ("", "u", "v"):
        try:
            r = httpx.get(
                f"http://127.0.0.1:{f.http_port}/",
                headers={"Host": HOST, **({"X-User": user} if user else {})},
                timeout=10,
            )
        except httpx.RemoteProtocolError:
            # A record can set millisecond timeouts (its read timeout "8"): NGINX
            # then ends an answer whose body the backend sent a little after its
            # headers, as it should. Whether a worker survived is checked below.
            continue
        # The same timeouts end a slow answer before its headers: 504, as NGINX
        # should (a busy machine makes any backend slower than 1 ms).
        assert r.status_code in (200, 404, 429, 503, 504), (record, r.status_code)
    assert _workers(f) == workers, f"a worker died on F record {record!r}"


# A full zone: the least recently used buckets go, traffic goes on.


def test_a_full_zone_evicts_the_least_recently_used_and_serves_on(
    ferryman: Ferryman, backends: Backends
) -> None:
    _start(
        ferryman,
        backends,
        rate_limit("users", rate="1r/m", key="${http_x_user}"),
        virtual_server([limited("/", "users")]),
    )
    eventually(lambda: answer(ferryman, "/")[0] == "a", 60, "VirtualServer live")
    # The zone at its smallest (8 pages: room for ~150 buckets), by the
    # module's own directive, and NGINX reloaded to take it (a new size is a
    # new, empty zone; the records stay).
    conf = ferryman.state / "nginx.conf"
    text = conf.read_text()
    conf.write_text(
        text.replace("ferryman_fast_zone", "ferryman_limit_zone 32k;\n    ferryman_fast_zone", 1)
    )
    master = ferryman.nginx_master_pid()
    assert master is not None
    workers = _workers(ferryman)
    os.kill(master, signal.SIGHUP)
    eventually(lambda: _workers(ferryman).isdisjoint(workers), 60, "new workers")
    url = f"http://127.0.0.1:{ferryman.http_port}/"
    with httpx.Client(timeout=10) as c:

        def status(user: str) -> int:
            return c.get(url, headers={"Host": HOST, "X-User": user}).status_code

        assert [status("first"), status("first")] == [200, 503]
        # 600 users, keys of 1 to 300 bytes (slab chunks of 128 to 512 bytes):
        # each one's first request passes, however full the zone.
        firsts = [status(f"{i}-" + "k" * (i * 7 % 300)) for i in range(600)]
        assert firsts == [200] * 600
        # The recent ones are still counted; "first" was evicted long ago.
        assert status("599-" + "k" * (599 * 7 % 300)) == 503
        assert status("first") == 200
    assert "could not allocate node" not in ferryman.logs()
