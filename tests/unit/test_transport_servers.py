"""transport_servers.TransportServers without NGINX: who holds each listener, the
records and stream.conf it writes, and the Events and states it reports."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import ListenSettings, Settings, TransportSettings
from ferryman.engine.store import Store
from ferryman.kinds.transport.records.stream import STREAM_FILE
from ferryman.kinds.transport.translate.servers import TransportServers
from ferryman.resources.meta import ObjectRef
from ferryman.translators.desired import Desired
from ferryman.wire.records import RecordKey

GC_REF = ObjectRef("GlobalConfiguration", "nginx-ingress", "gc")


class World:
    def __init__(self, *, stream: bool = True, owners: dict[str, ObjectRef] | None = None) -> None:
        self.store = Store()
        self.files: dict[str, str] = {}
        self.states: dict[ObjectRef, tuple[str, str, str]] = {}
        self.events: list[tuple[ObjectRef, str, str, str]] = []
        self.backends: dict[ObjectRef, frozenset[str]] = {}
        settings = Settings(
            Path("/nonexistent"),
            listen=ListenSettings(http_port=80),
            transport=TransportSettings(
                global_configuration=("nginx-ingress", "gc"),
                tls_passthrough=owners is not None,
            ),
        )
        hosts = owners if owners is not None else {}
        # The records are Desired's, which the other kinds writing S records share.
        self.desired = Desired(settings, self.store, SecretStore())
        self.ts = TransportServers(
            settings, self.store, self.files, stream=stream,
            served_class=lambda: "ferryman",
            state=lambda ref, *s: self.states.__setitem__(ref, s),
            event=lambda ref, *e: self.events.append((ref, *e)),
            set_backends=self.backends.__setitem__, owner=hosts.get,
            write_streams=self.desired.write_streams, write_records=self.desired.write_records,
        )  # fmt: skip

    @property
    def records(self) -> Mapping[RecordKey, str]:
        return self.desired.records

    @property
    def writers(self) -> dict[str, ObjectRef]:
        return self.desired.stream_writers()

    def put(self, obj: dict[str, Any]) -> ObjectRef:
        self.store.upsert(obj)
        md = obj["metadata"]
        ref = ObjectRef(obj["kind"], md["namespace"], md["name"])
        self.ts.sync(ref)
        return ref

    def drop(self, ref: ObjectRef) -> None:
        self.store.delete(ref)
        self.ts.sync(ref)


def gc(*ports: int) -> dict[str, Any]:
    listeners = [{"name": f"l{p}", "port": p, "protocol": "TCP"} for p in ports]
    return {
        "kind": "GlobalConfiguration",
        "metadata": {"name": "gc", "namespace": "nginx-ingress"},
        "spec": {"listeners": listeners},
    }


def ts(name: str, listener: str, created: str | None = None, **spec: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "default"}
    if created:
        md["creationTimestamp"] = created
    return {
        "kind": "TransportServer",
        "metadata": md,
        "spec": {
            "listener": {"name": listener, "protocol": "TCP"},
            "upstreams": [{"name": "a", "service": name, "port": 80}],
            "action": {"pass": "a"},
            **spec,
        },
    }


def test_the_oldest_holds_the_listener_and_the_next_takes_over() -> None:
    w = World()
    w.put(gc(7000))
    young = w.put(ts("young", "l7000", "2025-01-01T00:00:00Z"))
    old = w.put(ts("old", "l7000", "2024-01-01T00:00:00Z"))
    none = w.put(ts("none", "l7000"))  # no timestamp: newer than any that has one
    assert w.records == {("S", "l7000"): "default/old:80 random2lc 1 10000 0 0 0 0"}
    assert w.states[old][0:2] == ("Valid", "AddedOrUpdated")
    message = "Listener l7000 with host empty host is taken by another resource"
    assert w.states[young] == ("Warning", "Rejected", message)
    assert w.states[none] == ("Warning", "Rejected", message)
    assert w.backends[old] == frozenset({"default/old:80"})
    w.drop(old)
    assert w.records == {("S", "l7000"): "default/young:80 random2lc 1 10000 0 0 0 0"}
    assert w.states[young][0] == "Valid"
    assert w.backends[old] == frozenset()


def test_listeners_follow_the_global_configuration() -> None:
    w = World()
    t = w.put(ts("t", "l7001"))
    assert w.states[t] == ("Warning", "Rejected", "Listener l7001 doesn't exist")
    assert "server {" not in w.files[STREAM_FILE]
    w.put(gc(7001))
    assert w.states[t][0] == "Valid"
    assert "listen 7001;" in w.files[STREAM_FILE]
    assert w.events[-1][1:] == (
        "Normal",
        "Updated",
        "GlobalConfiguration nginx-ingress/gc was added or updated",
    )
    # Another GlobalConfiguration than the flag's is not read.
    w.put({**gc(7002), "metadata": {"name": "other", "namespace": "nginx-ingress"}})
    assert "listen 7002;" not in w.files[STREAM_FILE]
    w.drop(GC_REF)
    assert w.states[t] == ("Warning", "Rejected", "Listener l7001 doesn't exist")
    assert w.records == {}


def test_only_directive_settings_change_stream_conf() -> None:
    w = World()
    w.put(gc(7003))
    before = w.files[STREAM_FILE]
    w.put(ts("t", "l7003"))
    assert w.files[STREAM_FILE] == before  # NIC's defaults: no reload for a new holder
    w.put(ts("t", "l7003", upstreams=[{"name": "a", "service": "t", "port": 81,
                                       "loadBalancingMethod": "least_conn"}]))  # fmt: skip
    assert w.files[STREAM_FILE] == before
    assert w.records[("S", "l7003")].startswith("default/t:81 lc ")
    w.put(ts("t", "l7003", sessionParameters={"timeout": "1m"}))
    assert "proxy_timeout 60000ms;" in w.files[STREAM_FILE]


def test_a_class_of_another_controller_is_not_served() -> None:
    w = World()
    w.put(gc(7004))
    t = w.put(ts("t", "l7004", ingressClassName="nginx"))
    assert w.records == {} and t not in w.states


def test_without_the_stream_module_every_transport_server_is_refused() -> None:
    w = World(stream=False)
    w.put(gc(7005))
    t = w.put(ts("t", "l7005"))
    assert w.states[t][0:2] == ("Invalid", "Rejected")
    assert "ngx_stream_ferryman_module" in w.states[t][2]
    assert STREAM_FILE not in w.files


def test_a_refused_record_rejects_its_transport_server_until_it_changes() -> None:
    w = World()
    w.put(gc(7006))
    t = w.put(ts("t", "l7006"))
    assert w.ts.holder("l7006") == t
    w.ts.refuse(t, "the stream record l7006 is too large")
    assert w.states[t] == (
        "Invalid",
        "Rejected",
        "TransportServer default/t was rejected with error: the stream record l7006 is too large",
    )
    assert w.records == {} and w.ts.holder("l7006") is None
    w.put(ts("t", "l7006", sessionParameters={"timeout": "1m"}))  # changed: served again
    assert w.states[t][0] == "Valid" and w.ts.holder("l7006") == t


def test_a_change_leaves_the_records_other_kinds_wrote() -> None:
    """A Gateway's S records (gateway.<port>/<name>, kinds/gateway) share the
    records: a TransportServer's change used to remove every S record it had
    not written itself, a Gateway's TLSRoutes with them."""
    w = World()
    w.desired.write_records(
        "S", {"gateway.443/a.test": "default/tls:443 random2lc 1 10000 0 0 1 0"}, prefix="gateway."
    )
    w.put(gc(7007))
    t = w.put(ts("t", "l7007"))
    w.drop(t)
    assert w.records == {("S", "gateway.443/a.test"): "default/tls:443 random2lc 1 10000 0 0 1 0"}


def passthrough_ts(name: str, host: str) -> dict[str, Any]:
    obj = ts(name, "tls-passthrough", host=host)
    obj["spec"]["listener"]["protocol"] = "TLS_PASSTHROUGH"
    return obj


def test_a_passthrough_host_an_ingress_takes_over_keeps_the_ingress_record() -> None:
    """The host's owner writes tls-passthrough/<host>; when an (older) Ingress with
    ssl-passthrough takes the host and writes it first, the TransportServer's
    next change does not remove the Ingress's record (Desired.stream_writer)."""
    owners: dict[str, ObjectRef] = {}
    w = World(owners=owners)
    t = ObjectRef("TransportServer", "default", "t")
    owners["p.test"] = t
    w.put(passthrough_ts("t", "p.test"))
    assert w.records == {("S", "tls-passthrough/p.test"): "default/t:80 random2lc 1 10000 0 0 0 0"}
    assert w.writers == {"tls-passthrough/p.test": t}
    ing = ObjectRef("Ingress", "default", "old")
    owners["p.test"] = ing
    ingress_record = "default/app:443 random2lc 1 10000 0 0 0 0"
    w.desired.write_streams(ing, {"tls-passthrough/p.test": ingress_record})
    w.ts.host_owners_changed()
    assert w.states[t] == ("Warning", "Rejected", "Host is taken by another resource")
    assert w.records == {("S", "tls-passthrough/p.test"): ingress_record}
    assert w.writers == {"tls-passthrough/p.test": ing}
