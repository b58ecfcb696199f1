"""ingress-nginx's canary joined to its main Ingress: which paths it joins, what
its Event says, and the main's V record (kinds/ingress/records/canary_host.py)."""

from __future__ import annotations

from typing import Any

from ferryman.configs.record_text import b64
from ferryman.kinds.ingress.parse.ingress import Ingress, parse_ingress
from ferryman.kinds.ingress.records.canary_host import canary_event, canary_outcome, joined_paths
from ferryman.kinds.ingress.records.hosts import ingress_records
from ferryman.kinds.ingress.records.virtual_hosts import virtual_hosts

P = "nginx.ingress.kubernetes.io/"
HOST = "c.test"
BACKEND = {"service": {"name": "s", "port": {"number": 80}}}


def ing(
    name: str,
    paths: dict[str, str],
    annotations: dict[str, str] | None = None,
    created: str | None = None,
    host: str = HOST,
    path_type: str = "Prefix",
) -> Ingress:
    md: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations or {}}
    if created:
        md["creationTimestamp"] = created
    return parse_ingress(
        {
            "metadata": md,
            "spec": {
                "rules": [
                    {
                        "host": host,
                        "http": {
                            "paths": [
                                {
                                    "path": p,
                                    "pathType": path_type,
                                    "backend": {"service": {"name": s, "port": {"number": 80}}},
                                }
                                for p, s in paths.items()
                            ]
                        },
                    }
                ]
            },
        }
    )


def canary(
    name: str,
    paths: dict[str, str],
    created: str | None = None,
    path_type: str = "Prefix",
    **kw: str,
) -> Ingress:
    annotations = {P + "canary": "true", **{P + k.replace("_", "-"): v for k, v in kw.items()}}
    return ing(name, paths, annotations, created, path_type=path_type)


def test_a_canary_claims_no_host_and_ignores_other_annotations() -> None:
    c = canary("c", {"/": "new"}, canary_weight="10", rewrite_target="/x")
    assert c.canary is not None and c.canary.weight == 10
    assert c.hosts() == ()
    assert P + "rewrite-target" not in c.meta.annotations
    assert c.paths.rewrite_target is None
    assert any("rewrite-target ignored on a canary" in w for w in c.warnings)
    raw = {
        "metadata": {"name": "t", "namespace": "default", "annotations": {P + "canary": "true"}},
        "spec": {"tls": [{"hosts": [HOST], "secretName": "s"}], "defaultBackend": BACKEND},
    }
    assert "spec.tls ignored on a canary Ingress" in parse_ingress(raw).warnings[-1]


def test_joined_paths_the_oldest_canary_of_a_path() -> None:
    main = ing("main", {"/": "old", "/api": "api"})
    first = canary("b-first", {"/api": "api2"}, "2026-01-01T00:00:00Z", canary_weight="30")
    later = canary("a-later", {"/api": "api3", "/": "new"}, "2026-02-01T00:00:00Z")
    other_host = canary("x", {"/": "z"})
    joined = joined_paths(main, HOST, [later, first, other_host])
    api, root = ("/api", "Prefix"), ("/", "Prefix")
    assert sorted(joined) == [root, api]
    assert (joined[api].name, joined[api].backend.service) == ("default/b-first", "api2")
    assert joined[api].canary.weight == 30
    assert joined[root].name == "default/a-later"
    # ingress-nginx matches the pathType too.
    exact = canary("exact", {"/api": "e"}, path_type="Exact")
    assert joined_paths(main, HOST, [exact]) == {}
    # A mergeable main takes no canary.
    master = ing("m", {}, {"nginx.org/mergeable-ingress-type": "master"})
    assert joined_paths(master, HOST, [first]) == {}


def test_canary_outcome_says_what_it_joins_and_why_not() -> None:
    main = ing("main", {"/": "old"})
    first = canary("first", {"/": "n1", "/none": "n1"}, "2026-01-01T00:00:00Z")
    second = canary("second", {"/": "n2"}, "2026-02-01T00:00:00Z")
    served, reasons = canary_outcome(first, {HOST: main}, {HOST: [first, second]})
    assert served == [f"{HOST}/ of default/main"]
    assert reasons == [f"{HOST}/none: no main Ingress serves it"]
    served, reasons = canary_outcome(second, {HOST: main}, {HOST: [first, second]})
    assert served == []
    assert reasons == [f"{HOST}/: default/first is already its canary (one canary per rule)"]
    assert canary_outcome(second, {HOST: None}, {HOST: [second]}) == (
        [],
        [f"{HOST}/: no main Ingress serves it"],
    )


def _routes(main: Ingress, canaries: list[Ingress]) -> list[list[str]]:
    vhosts, _ = virtual_hosts(main, [HOST], {})
    joined = {HOST: joined_paths(main, HOST, canaries)}
    out = ingress_records(
        main,
        vhosts,
        None,  # type: ignore[arg-type]
        "ferryman",
        {},
        canaries=joined,
    )
    (written,) = out.written
    assert written.routing is not None
    return [i.split("|") for i in written.routing.split(" ") if i.startswith(("R|", "U|"))]


def test_the_main_path_a_canary_joins_has_its_matches_and_split() -> None:
    main = ing("main", {"/": "old", "/api": "api"})
    c = canary("c", {"/api": "new"}, canary_weight="25", canary_by_header="X-Canary")
    items = _routes(main, [c])
    upstreams = [i[1] for i in items if i[0] == "U"]
    assert sorted(upstreams) == ["default/api:80", "default/new:80", "default/old:80"]
    api, new, old = (upstreams.index(f"default/{s}:80") + 1 for s in ("api", "new", "old"))
    routes = {i[2]: i for i in items if i[0] == "R"}
    # /api is written as "= /api" and "/api/": both take the canary.
    for path in ("/api", "/api/"):
        r = routes[b64(path)]
        matches, default = r[4], r[5]
        assert default.startswith(f"75:p.{api}.") and f",25:p.{new}." in default
        header = b64("http_x_canary")
        assert matches.startswith(f"{header}.{b64('~^always$')}>100:p.{new}.")
        assert f";{header}.{b64('~^never$')}>100:p.{api}." in matches
    # / is the main's alone.
    assert (routes[b64("/")][4], routes[b64("/")][5]) == ("", f"100:p.{old}.......")


def test_the_main_without_canaries_is_the_fast_paths() -> None:
    main = ing("main", {"/": "old"})
    vhosts, _ = virtual_hosts(main, [HOST], {})
    plain = ingress_records(main, vhosts, None, "ferryman", {})  # type: ignore[arg-type]
    assert plain.written[0].routing is None  # the fast path's H record alone


def test_canary_event() -> None:
    c = canary("c", {"/": "n"}, canary_weight="10")
    assert canary_event(c, [f"{HOST}/ of default/main"], []) == (
        False,
        "AddedOrUpdated",
        f"Configuration for default/c was added or updated (canary of {HOST}/ of default/main)",
    )
    assert canary_event(c, [], ["why"]) == (
        True,
        "Rejected",
        "default/c was rejected: canary not served: why",
    )
    rounded = canary("r", {"/": "n"}, canary_weight="1", canary_weight_total="1000")
    warn, reason, message = canary_event(rounded, ["x"], ["y"])
    assert (warn, reason) == (True, "AddedOrUpdatedWithWarning")
    assert message == (
        "Configuration for default/r was added or updated with warning(s): canary of x; y; "
        f"{P}canary-weight: 1/1000 served as 1%"
    )
