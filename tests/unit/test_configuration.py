"""ferryman.engine.configuration.Configuration: one owner per host, the oldest wins."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.engine.configuration import Configuration
from ferryman.kinds.ingress.parse.ingress import Ingress, parse_ingress
from ferryman.resources.meta import ObjectRef

T1 = "2024-01-01T00:00:00Z"
T2 = "2024-02-01T00:00:00Z"
T3 = "2024-03-01T00:00:00Z"


def ingress(
    name: str,
    hosts: tuple[str, ...] = ("a.example.com",),
    ts: str | None = None,
    namespace: str = "default",
    default_backend: bool = False,
) -> Ingress:
    backend = {"service": {"name": "svc", "port": {"number": 80}}}
    md: dict[str, Any] = {"name": name, "namespace": namespace}
    if ts is not None:
        md["creationTimestamp"] = ts
    spec: dict[str, Any] = {
        "rules": [
            {
                "host": h,
                "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
            }
            for h in hosts
        ]
    }
    if default_backend:
        spec["defaultBackend"] = backend
    return parse_ingress({"kind": "Ingress", "metadata": md, "spec": spec})


def ref(name: str, namespace: str = "default") -> ObjectRef:
    return ObjectRef("Ingress", namespace, name)


def test_single_ingress_owns_its_hosts() -> None:
    c = Configuration()
    assert c.upsert(ingress("a", ("x.example.com", "y.example.com"))) == {ref("a")}
    assert c.owner("x.example.com") == ref("a")
    assert c.owned_hosts(ref("a")) == ("x.example.com", "y.example.com")
    assert c.lost_hosts(ref("a")) == {}
    assert len(c) == 1
    assert c.refs() == [ref("a")]


def test_oldest_creation_timestamp_wins_whatever_the_order() -> None:
    for order in (("old", "new"), ("new", "old")):
        c = Configuration()
        ings = {"old": ingress("zzz-old", ts=T1), "new": ingress("aaa-new", ts=T2)}
        for key in order:
            c.upsert(ings[key])
        assert c.owner("a.example.com") == ref("zzz-old"), order
        assert c.owned_hosts(ref("aaa-new")) == ()
        assert c.lost_hosts(ref("aaa-new")) == {"a.example.com": ref("zzz-old")}


def test_equal_timestamps_fall_back_to_namespace_then_name() -> None:
    c = Configuration()
    c.upsert(ingress("a", ts=T1, namespace="zeta"))
    c.upsert(ingress("z", ts=T1, namespace="alpha"))
    c.upsert(ingress("b", ts=T1, namespace="alpha"))
    assert c.owner("a.example.com") == ref("b", "alpha")


def test_without_timestamps_namespace_then_name_decides() -> None:
    c = Configuration()
    c.upsert(ingress("b"))
    c.upsert(ingress("c"))
    c.upsert(ingress("a"))
    assert c.owner("a.example.com") == ref("a")
    c.upsert(ingress("zzz", namespace="aaa"))
    assert c.owner("a.example.com") == ref("zzz", "aaa")


def test_resource_without_timestamp_loses_to_one_with_a_timestamp() -> None:
    c = Configuration()
    c.upsert(ingress("a"))  # sorts first by name, but has no timestamp
    c.upsert(ingress("z", ts=T3))
    assert c.owner("a.example.com") == ref("z")
    assert c.lost_hosts(ref("a")) == {"a.example.com": ref("z")}


def test_timestamps_are_compared_as_instants_not_text() -> None:
    # Unquoted YAML timestamps arrive as datetimes, possibly with an offset:
    # 00:30+01:00 is 23:30 UTC the day before, so it is the older one.
    older = datetime.datetime(
        2024, 1, 1, 0, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
    )
    newer = datetime.datetime(2024, 1, 1, 0, 0, tzinfo=datetime.UTC)
    for order in ((older, newer), (newer, older)):
        c = Configuration()
        for ts in order:
            name = "older" if ts is older else "newer"
            md = {"name": name, "namespace": "default", "creationTimestamp": ts}
            raw = {
                "kind": "Ingress",
                "metadata": md,
                "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}},
            }
            c.upsert(parse_ingress(raw))
        assert c.owner("") == ref("older"), order


def test_deleting_the_owner_hands_the_host_to_the_next_oldest() -> None:
    c = Configuration()
    c.upsert(ingress("first", ts=T1))
    c.upsert(ingress("third", ts=T3))
    c.upsert(ingress("second", ts=T2))
    affected = c.delete(ref("first"))
    assert affected == {ref("first"), ref("second")}
    assert c.owner("a.example.com") == ref("second")
    assert c.owned_hosts(ref("second")) == ("a.example.com",)
    assert c.lost_hosts(ref("third")) == {"a.example.com": ref("second")}
    assert c.get(ref("first")) is None
    c.delete(ref("second"))
    c.delete(ref("third"))
    assert c.owner("a.example.com") is None
    assert len(c) == 0


def test_deleting_a_loser_changes_no_ownership() -> None:
    c = Configuration()
    c.upsert(ingress("old", ts=T1))
    c.upsert(ingress("new", ts=T2))
    c.delete(ref("new"))
    assert c.owner("a.example.com") == ref("old")


def test_deleting_an_unknown_ingress_affects_nothing() -> None:
    assert Configuration().delete(ref("ghost")) == set()


def test_upsert_returns_both_the_old_and_the_new_owner() -> None:
    c = Configuration()
    assert c.upsert(ingress("new", ts=T2)) == {ref("new")}
    # An older Ingress arrives and takes the host: both must be re-rendered.
    assert c.upsert(ingress("old", ts=T1)) == {ref("old"), ref("new")}
    assert c.owner("a.example.com") == ref("old")
    # A newer one arrives and loses: it and the owner (unchanged) are affected.
    assert c.upsert(ingress("newest", ts=T3)) >= {ref("newest")}


def test_changing_hosts_releases_the_old_ones() -> None:
    c = Configuration()
    c.upsert(ingress("old", ("a.example.com",), ts=T1))
    c.upsert(ingress("new", ("a.example.com",), ts=T2))
    affected = c.upsert(ingress("old", ("b.example.com",), ts=T1))
    assert ref("new") in affected
    assert c.owner("a.example.com") == ref("new")
    assert c.owner("b.example.com") == ref("old")
    assert c.owned_hosts(ref("old")) == ("b.example.com",)


def test_hosts_are_owned_independently() -> None:
    c = Configuration()
    c.upsert(ingress("old", ("a.example.com", "b.example.com"), ts=T1))
    c.upsert(ingress("new", ("b.example.com", "c.example.com"), ts=T2))
    assert c.owned_hosts(ref("new")) == ("c.example.com",)
    assert c.lost_hosts(ref("new")) == {"b.example.com": ref("old")}


def test_catch_all_host_is_owned_like_any_other() -> None:
    c = Configuration()
    c.upsert(ingress("fallback-new", (), ts=T2, default_backend=True))
    c.upsert(ingress("fallback-old", (), ts=T1, default_backend=True))
    c.upsert(ingress("hostless", ("",), ts=T3))
    assert c.owner("") == ref("fallback-old")
    assert c.lost_hosts(ref("hostless")) == {"": ref("fallback-old")}


# ---- property: ownership is always the model's, and changes are all reported --------

_NAMES = [("default", "a"), ("default", "b"), ("other", "a"), ("other", "c")]
_HOSTS = ["x.example.com", "y.example.com", "*.example.com", ""]
_TIMES = [None, T1, T2, T3]

_upsert = st.tuples(
    st.just("upsert"),
    st.sampled_from(_NAMES),
    st.sampled_from(_TIMES),
    st.lists(st.sampled_from(_HOSTS), min_size=1, max_size=3, unique=True),
)
_delete = st.tuples(st.just("delete"), st.sampled_from(_NAMES), st.none(), st.just([]))


def _model_owner(model: dict[ObjectRef, tuple[str | None, list[str]]], host: str) -> ObjectRef:
    claimants = [r for r, (_, hosts) in model.items() if host in hosts]
    return min(
        claimants,
        key=lambda r: (model[r][0] is None, model[r][0] or "", r.namespace, r.name),
    )


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.one_of(_upsert, _delete), max_size=12))
def test_ownership_matches_a_model_and_every_change_is_reported(
    ops: list[tuple[str, tuple[str, str], str | None, list[str]]],
) -> None:
    c = Configuration()
    model: dict[ObjectRef, tuple[str | None, list[str]]] = {}

    def served() -> dict[ObjectRef, tuple[str, ...]]:
        return {r: c.owned_hosts(r) for r in model}

    for op, (ns, name), ts, hosts in ops:
        r = ref(name, ns)
        before = served()
        if op == "upsert":
            model[r] = (ts, hosts)
            affected = c.upsert(ingress(name, tuple(hosts), ts=ts, namespace=ns))
        else:
            model.pop(r, None)
            affected = c.delete(r)
        after = served()
        changed = {x for x in before.keys() | after.keys() if before.get(x) != after.get(x)}
        assert changed <= affected, (op, r)
        assert sorted(c.refs()) == sorted(model)
        for host in {h for _, hs in model.values() for h in hs}:
            assert c.owner(host) == _model_owner(model, host)
        for x, (_, hs) in model.items():
            assert set(c.owned_hosts(x)) | set(c.lost_hosts(x)) == set(hs)
            assert all(c.owner(h) == w != x for h, w in c.lost_hosts(x).items())


def test_a_wildcard_owner_learns_which_names_another_namespace_serves() -> None:
    config = Configuration()
    wild = ingress("wild", ("*.example.com",), T1, namespace="a")
    config.upsert(wild)
    w = ObjectRef("Ingress", "a", "wild")
    mine = ingress("mine", ("x.example.com",), T2, namespace="a")
    config.upsert(mine)
    assert config.shadowed(w) == {}  # the same tenant's
    theirs = ingress("theirs", ("y.example.com", "z.y.example.com"), T3, namespace="b")
    # The wildcard's owner is among those to re-render when a name under it changes hands.
    assert w in config.upsert(theirs)
    assert config.shadowed(w) == {"y.example.com": ObjectRef("Ingress", "b", "theirs")}
    assert w in config.delete(ObjectRef("Ingress", "b", "theirs"))
    assert config.shadowed(w) == {}


def test_host_policy_allows_only_a_namespaces_suffixes() -> None:
    from ferryman.engine.configuration import HostPolicy

    policy = HostPolicy([("a", "a.example.com"), ("a", "shop.test"), ("admin", "*")])
    assert policy.allows("a", "a.example.com")
    assert policy.allows("a", "www.a.example.com")
    assert policy.allows("a", "*.a.example.com")
    assert policy.allows("a", "shop.test")
    assert not policy.allows("a", "xa.example.com")  # not under: a label boundary
    assert not policy.allows("a", "*.example.com")
    assert not policy.allows("a", "")  # the catch-all needs *
    assert not policy.allows("b", "b.example.com")  # unlisted: nothing
    assert policy.allows("admin", "") and policy.allows("admin", "any.test")


def test_a_denied_host_is_never_claimed() -> None:
    from ferryman.engine.configuration import HostPolicy

    config = Configuration(HostPolicy([("a", "a.example.com"), ("b", "b.example.com")]))
    intruder = ingress("intruder", ("a.example.com", "b.example.com"), T1, namespace="b")
    config.upsert(intruder)
    owner = ingress("owner", ("a.example.com",), T2, namespace="a")
    config.upsert(owner)
    ref = ObjectRef("Ingress", "b", "intruder")
    # Older, yet a.example.com is the rightful namespace's.
    assert config.owner("a.example.com") == ObjectRef("Ingress", "a", "owner")
    assert config.owned_hosts(ref) == ("b.example.com",)
    assert config.denied_hosts(ref) == ["a.example.com"]
    assert config.lost_hosts(ref) == {}


def _virtual_server(name: str, host: str, ts: str | None) -> Any:
    from ferryman.kinds.virtualserver.parse.virtualserver import parse_virtual_server

    md: dict[str, Any] = {"name": name, "namespace": "default"}
    if ts is not None:
        md["creationTimestamp"] = ts
    obj = {
        "kind": "VirtualServer",
        "metadata": md,
        "spec": {"host": host, "upstreams": [], "routes": []},
    }
    vs = parse_virtual_server(obj).resource
    assert vs is not None
    return vs


def test_ingress_and_virtual_server_compete_for_a_host_oldest_wins() -> None:
    vs_ref = ObjectRef("VirtualServer", "default", "same")
    for ing_ts, vs_ts, winner in ((T1, T2, ref("same")), (T2, T1, vs_ref)):
        c = Configuration()
        c.upsert(ingress("same", ("a.example.com",), ts=ing_ts))
        affected = c.upsert(_virtual_server("same", "a.example.com", vs_ts))
        assert c.owner("a.example.com") == winner
        assert vs_ref in affected
        loser = vs_ref if winner == ref("same") else ref("same")
        assert c.owned_hosts(loser) == ()
        assert c.lost_hosts(loser) == {"a.example.com": winner}
        # The winner leaves: the other kind takes the host over.
        assert loser in c.delete(winner)
        assert c.owner("a.example.com") == loser
        assert c.count("Ingress") + c.count("VirtualServer") == 1
