"""One resource's failure rejects that resource only (issue 11): records too large,
not encodable or refused by a full NGINX memory, and unexpected errors while
syncing. Everything else keeps updating."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

import ferryman.engine.endpoint_sets
import ferryman.kinds.ingress.translate.ingress
import ferryman.translators.desired
from ferryman.dataplane.fake import FakeDataPlane
from ferryman.engine.settings import NginxSettings
from ferryman.resources.meta import ObjectRef
from testkit.controller_kit import Kit, _service
from testkit.harness import ingress, path, rule, tls_secret


def _small(name: str, host: str, svc: str = "app", namespace: str = "default") -> dict[str, Any]:
    return ingress(name, [rule(host, path("/", svc))], namespace=namespace)


def _big(name: str, host: str, paths: int = 40, namespace: str = "default") -> dict[str, Any]:
    """A host record of about ``paths`` x 110 bytes."""
    return ingress(
        name,
        [rule(host, *[path(f"/{i:03d}/" + "p" * 90, "app") for i in range(paths)])],
        namespace=namespace,
    )


def _hosts(kit: Kit) -> set[str]:
    return {k for kind, k in kit.dataplane.records if kind == "H"}


def test_a_record_over_the_cap_rejects_its_ingress_and_clears_its_status(tmp_path: Path) -> None:
    kit = Kit(tmp_path, nginx=NginxSettings(max_record_bytes=2000))
    kit.controller.set_addresses(("192.0.2.1",))
    kit.add(*_service("app", "10.0.0.1"), _small("big", "big.test"), _small("ok", "ok.test"))
    asyncio.run(kit.drain())
    big = ObjectRef("Ingress", "default", "big")
    assert kit.statuses[-2:] == [
        (big, ("192.0.2.1",)),
        (ObjectRef("Ingress", "default", "ok"), ("192.0.2.1",)),
    ]

    kit.add(_big("big", "big.test"), _small("ok", "ok.test", svc="other"))
    asyncio.run(kit.drain())
    assert kit.reasons("big") == ["AddedOrUpdated", "Rejected"]
    message = kit.messages("big")[-1]
    assert "virtual host big.test is " in message and "more than --max-record-bytes 2000" in message
    # Withdrawn (its old record too), its status cleared; the other change applied.
    assert _hosts(kit) == {"ok.test"}
    assert (big, ()) in kit.statuses[-2:]
    assert ("E", "default/app:80") not in kit.dataplane.records
    assert kit.dataplane.records[("H", "ok.test")].endswith("P|/|default/other:80")
    assert kit.metric("ferryman_records_refused_total", {"reason": "too_large"}) == 1

    # Fixed: served again.
    kit.add(_small("big", "big.test"))
    asyncio.run(kit.drain())
    assert kit.reasons("big")[-1] == "AddedOrUpdated"
    assert _hosts(kit) == {"ok.test", "big.test"}


def test_records_that_do_not_fit_reject_only_their_ingresses(tmp_path: Path) -> None:
    # Room for about two big host records and everything small.
    kit = Kit(tmp_path, FakeDataPlane(capacity=12_000))
    kit.add(*_service("app", "10.0.0.1"), *_service("web", "10.0.0.9", namespace="web"))
    kit.add(_small("web", "web.test", svc="web", namespace="web"))
    kit.add(*(_big(f"hog-{n}", f"hog-{n}.test", namespace="hog") for n in range(4)))
    asyncio.run(kit.drain())
    rejected = {ref.name for ref, _, r, _ in kit.reporter.events if r == "Rejected"}
    live = {ref.name for ref, _, r, _ in kit.reporter.events if r == "AddedOrUpdated"}
    assert 0 < len(rejected) < 4 and not rejected & live
    assert "web" in live
    assert _hosts(kit) == {"web.test"} | {f"{n}.test" for n in live - {"web"}}
    message = kit.messages(sorted(rejected)[0])[-1]
    assert "does not fit in NGINX's record memory (--records-memory-size 128m" in message
    assert kit.metric("ferryman_records_refused_total", {"reason": "no_memory"}) == len(rejected)

    # Memory stays full of hogs; another tenant's endpoint change and new Ingress
    # still go through.
    kit.add(*_service("web", "10.0.0.10", namespace="web"))
    kit.add(*_service("late", "10.0.0.11", namespace="late"))
    kit.add(_small("late", "late.test", svc="late", namespace="late"))
    asyncio.run(kit.drain())
    assert kit.dataplane.records[("E", "web/web:80")] == "10.0.0.10#8080"
    assert "late.test" in _hosts(kit)
    assert kit.reasons("late") == ["AddedOrUpdated"]


def test_removals_then_endpoint_sets_go_first(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"), _small("a", "a.test"))
    asyncio.run(kit.drain())
    kit.controller.set_file("nginx.conf", "bootstrap")
    kit.add(*_service("app", "10.0.0.2"), _small("b", "b.test"))
    kit.sink.delete(ObjectRef("Ingress", "default", "a"))
    kit.add(tls_secret("tls", ["c.test"]))
    kit.add(
        ingress(
            "c",
            [rule("c.test", path("/", "app"))],
            tls=[{"hosts": ["c.test"], "secretName": "tls"}],
        )
    )
    asyncio.run(kit.drain())
    kinds = [(kind, bool(v)) for (kind, _), v in kit.dataplane.pushed[-1].items()]
    assert kinds == [("H", False), ("E", True), ("C", True), ("H", True), ("H", True)]


def test_an_unencodable_record_rejects_its_resource_not_the_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encode = ferryman.translators.desired.encode_host
    monkeypatch.setattr(
        ferryman.translators.desired,
        "encode_host",
        lambda vh: encode(vh) + ("\nH\tevil.test\t- 0 -" if vh.host == "bad.test" else ""),
    )
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"), _small("bad", "bad.test"), _small("good", "good.test"))
    asyncio.run(kit.drain())
    assert kit.reasons("bad") == ["Rejected"]
    assert "cannot be pushed to NGINX: its value holds a line break" in kit.messages("bad")[0]
    assert kit.reasons("good") == ["AddedOrUpdated"]
    assert _hosts(kit) == {"good.test"}


def test_an_endpoint_set_over_the_cap_rejects_the_ingresses_routing_to_it(tmp_path: Path) -> None:
    kit = Kit(tmp_path, nginx=NginxSettings(max_record_bytes=300))
    kit.add(*_service("app", *(f"10.0.0.{n}" for n in range(1, 40))), *_service("web", "10.0.1.1"))
    kit.add(_small("a", "a.test"), _small("b", "b.test"), _small("w", "w.test", svc="web"))
    asyncio.run(kit.drain())
    for name in ("a", "b"):
        assert kit.reasons(name) == ["Rejected"]
        message = kit.messages(name)[0]
        assert "the endpoint set default/app:80 is " in message
        assert "more than --max-record-bytes 300" in message
    assert kit.reasons("w") == ["AddedOrUpdated"]
    assert _hosts(kit) == {"w.test"}
    assert [k for k in kit.dataplane.records if k[0] == "E"] == [("E", "default/web:80")]


def test_an_unusable_certificate_record_leaves_its_hosts_without_tls(tmp_path: Path) -> None:
    kit = Kit(tmp_path, nginx=NginxSettings(max_record_bytes=600))
    kit.add(*_service("app", "10.0.0.1"), tls_secret("tls", ["s.test"]))
    kit.add(
        ingress(
            "s",
            [rule("s.test", path("/", "app"))],
            tls=[{"hosts": ["s.test"], "secretName": "tls"}],
        )
    )
    asyncio.run(kit.drain())
    assert kit.reasons("s") == ["AddedOrUpdatedWithWarning"]
    assert "its certificate is " in kit.messages("s")[0]
    assert "more than --max-record-bytes 600" in kit.messages("s")[0]
    assert kit.dataplane.records[("H", "s.test")].startswith("! ")
    assert not [k for k in kit.dataplane.records if k[0] == "C"]


def test_a_failed_push_reports_nothing_live_until_it_goes_through(tmp_path: Path) -> None:
    async def scenario(kit: Kit) -> None:
        kit.dataplane.fail_pushes = True
        kit.add(*_service("app", "10.0.0.1"), _small("a", "a.test"))
        kit.add(ingress("bad", [rule("Bad_Host", path("/", "app"))]))
        await kit.drain()
        assert kit.reasons("a") == []
        assert kit.reasons("bad") == ["Rejected"]  # not about records
        kit.dataplane.fail_pushes = False
        task = asyncio.create_task(kit.controller.run())  # the retry comes by itself
        for _ in range(200):
            await asyncio.sleep(0.01)
            if kit.reasons("a"):
                break
        task.cancel()

    kit = Kit(tmp_path)
    asyncio.run(scenario(kit))
    assert kit.reasons("a") == ["AddedOrUpdated"]
    assert ("H", "a.test") in kit.dataplane.records


def test_a_failing_push_is_told_until_one_goes_through(tmp_path: Path) -> None:
    """following.py holds readiness once pushes have failed for a Lease's duration,
    and until the controller has settled (everything queued in NGINX)."""

    async def scenario(kit: Kit) -> None:
        kit.dataplane.fail_pushes = True
        kit.add(*_service("app", "10.0.0.1"), _small("a", "a.test"))
        await kit.drain()
        assert kit.controller.push_failing_since() is not None
        assert not kit.controller.settled()
        kit.dataplane.fail_pushes = False
        task = asyncio.create_task(kit.controller.run())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if kit.controller.settled():
                break
        task.cancel()
        assert kit.controller.push_failing_since() is None

    kit = Kit(tmp_path)
    asyncio.run(scenario(kit))
    assert ("H", "a.test") in kit.dataplane.records


def test_memory_fill_ratio_is_exported_and_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kit = Kit(tmp_path, FakeDataPlane(capacity=5_000))
    kit.add(*_service("app", "10.0.0.1"), _big("a", "a.test"))
    with caplog.at_level(logging.INFO, "ferryman.records"):
        asyncio.run(kit.drain())
        ratio = kit.metric("ferryman_records_memory_ratio", {"store": "dict"})
        assert 0.8 < ratio <= 1
        assert "NGINX's record memory is filling up" in caplog.text
        kit.add(_small("a", "a.test"))
        asyncio.run(kit.drain())
    assert kit.metric("ferryman_records_memory_ratio", {"store": "dict"}) < 0.1
    assert "below the warning ratio again" in caplog.text


# ---- unexpected errors -----------------------------------------------------------------


def test_an_error_rendering_one_ingress_never_stops_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: an Ingress releases a host while its render fails; the
    new owner must still get the host, and the failing one is withdrawn."""
    kit = Kit(tmp_path)
    old = _small("old", "shared.test")
    old["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    old["spec"]["rules"].append(rule("old.test", path("/", "app")))
    new = ingress("new", [rule("shared.test", path("/", "web"))])
    new["metadata"]["creationTimestamp"] = "2021-01-01T00:00:00Z"
    kit.add(*_service("app", "10.0.0.1"), *_service("web", "10.0.0.2"), old, new)
    asyncio.run(kit.drain())
    assert kit.reasons("new") == ["Rejected"]  # the host is old's

    virtual_hosts = ferryman.kinds.ingress.translate.ingress.virtual_hosts

    def failing(ing: Any, hosts: Any, states: Any) -> Any:
        if ing.meta.name == "old":
            raise RuntimeError("boom")
        return virtual_hosts(ing, hosts, states)

    monkeypatch.setattr(ferryman.kinds.ingress.translate.ingress, "virtual_hosts", failing)
    old["spec"]["rules"] = old["spec"]["rules"][1:]  # releases shared.test
    kit.add(old)
    asyncio.run(kit.drain())
    assert kit.reasons("old")[-1] == "Rejected"
    assert "internal error (RuntimeError: boom)" in kit.messages("old")[-1]
    assert kit.reasons("new")[-1] == "AddedOrUpdated"
    assert _hosts(kit) == {"shared.test"}
    assert kit.dataplane.records[("H", "shared.test")].endswith("P|/|default/web:80")
    assert ("E", "default/app:80") not in kit.dataplane.records
    assert not len(kit.queue)  # not retried: it changes, or it stays rejected


def test_an_unexpected_parser_error_rejects_that_ingress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parse = ferryman.kinds.ingress.translate.ingress.parse_ingress

    def failing(obj: Any) -> Any:
        if obj["metadata"]["name"] == "odd":
            raise KeyError("spec")
        return parse(obj)

    monkeypatch.setattr(ferryman.kinds.ingress.translate.ingress, "parse_ingress", failing)
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"), _small("odd", "odd.test"), _small("fine", "fine.test"))
    asyncio.run(kit.drain())
    assert kit.reasons("odd") == ["Rejected"]
    assert "internal error (KeyError: 'spec')" in kit.messages("odd")[0]
    assert kit.reasons("fine") == ["AddedOrUpdated"]
    assert _hosts(kit) == {"fine.test"}
    assert not len(kit.queue)


def test_an_error_computing_endpoints_rejects_their_users_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = Kit(tmp_path)
    kit.add(*_service("app", "10.0.0.1"), *_service("web", "10.0.0.2"))
    kit.add(_small("a", "a.test"), _small("w", "w.test", svc="web"))
    asyncio.run(kit.drain())
    resolve = ferryman.engine.endpoint_sets.resolve_peers

    def failing(service: Any, *args: Any) -> Any:
        if service is not None and service.name == "app":
            raise ValueError("bad slice")
        return resolve(service, *args)

    monkeypatch.setattr(ferryman.engine.endpoint_sets, "resolve_peers", failing)
    kit.add(*_service("app", "10.0.0.3"), *_service("web", "10.0.0.4"))
    asyncio.run(kit.drain())
    assert kit.reasons("a")[-1] == "Rejected"
    assert (
        "computing the endpoint set default/app:80 failed: internal error" in kit.messages("a")[-1]
    )
    assert _hosts(kit) == {"w.test"}
    assert kit.dataplane.records[("E", "default/web:80")] == "10.0.0.4#8080"
    assert not len(kit.queue)


def test_a_chain_of_rejections_settles_over_more_flushes(tmp_path: Path) -> None:
    """Each rejected owner hands the host to the next claimant, whose record is
    screened in the next round; past PUSH_ROUNDS another flush comes by itself."""

    async def scenario(kit: Kit) -> None:
        await kit.drain()
        task = asyncio.create_task(kit.controller.run())
        for _ in range(300):
            await asyncio.sleep(0.01)
            if kit.reasons("small")[-1:] == ["AddedOrUpdated"]:
                break
        task.cancel()

    kit = Kit(tmp_path, nginx=NginxSettings(max_record_bytes=2000))
    claimants = [_big(f"big-{n}", "shared.test") for n in range(6)] + [
        _small("small", "shared.test")
    ]
    for n, obj in enumerate(claimants):
        obj["metadata"]["creationTimestamp"] = f"2020-01-0{n + 1}T00:00:00Z"
    kit.add(*_service("app", "10.0.0.1"), *claimants)
    asyncio.run(scenario(kit))
    # Never reported live: their records never reached NGINX.
    assert all(kit.reasons(f"big-{n}")[-1] == "Rejected" for n in range(6))
    assert not [r for n in range(6) for r in kit.reasons(f"big-{n}") if r == "AddedOrUpdated"]
    assert kit.reasons("small")[-1] == "AddedOrUpdated"
    assert kit.dataplane.records[("H", "shared.test")] == "- 0 - rr:1:10 P|/|default/app:80"


def test_a_wildcard_owner_is_warned_when_another_namespace_takes_a_name(tmp_path: Path) -> None:
    kit = Kit(tmp_path)
    kit.add(
        *_service("app", "10.0.0.1", namespace="a"), *_service("app", "10.0.0.2", namespace="b")
    )
    kit.add(_small("wild", "*.example.com", namespace="a"))
    asyncio.run(kit.drain())
    kit.add(_small("exact", "shop.example.com", namespace="b"))
    asyncio.run(kit.drain())
    assert kit.reasons("wild") == ["AddedOrUpdated", "AddedOrUpdatedWithWarning"]
    assert (
        "host shop.example.com under *.example.com is served by b/exact" in kit.messages("wild")[-1]
    )
    kit.sink.delete(ObjectRef("Ingress", "b", "exact"))
    asyncio.run(kit.drain())
    assert kit.reasons("wild")[-1] == "AddedOrUpdated"


def test_a_host_policy_keeps_a_namespace_to_its_suffixes(tmp_path: Path) -> None:
    kit = Kit(tmp_path, allowed_host_suffixes=(("a", "a.example.com"), ("b", "b.example.com")))
    kit.add(
        *_service("app", "10.0.0.1", namespace="a"), *_service("app", "10.0.0.2", namespace="b")
    )
    squat = ingress(
        "squat",
        [rule("www.a.example.com", path("/", "app")), rule("b.example.com", path("/", "app"))],
        namespace="b",
    )
    squat["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    kit.add(squat, _small("www", "www.a.example.com", namespace="a"))
    kit.add(_small("other", "c.example.com", namespace="c"))
    asyncio.run(kit.drain())
    assert kit.reasons("www") == ["AddedOrUpdated"]
    assert kit.dataplane.records[("H", "www.a.example.com")].endswith("P|/|a/app:80")
    assert kit.reasons("squat") == ["AddedOrUpdatedWithWarning"]
    assert (
        "host www.a.example.com is not allowed in namespace b (--allowed-host-suffixes)"
        in kit.messages("squat")[0]
    )
    assert kit.reasons("other") == ["Rejected"]
    assert kit.messages("other")[0].startswith("No host can be served: host c.example.com")
    assert _hosts(kit) == {"www.a.example.com", "b.example.com"}
