"""A kind of the tests' own, registered the way a new kind of ferryman is: a
``KindSpec``, a parser, a translator writing one host record, and one entry in
the registry and the translator list handed to ``cli.main``. No engine module
knows it (tests/integration/test_plugin_kind.py serves it end to end).

``StaticRoute`` (example.ferryman.test/v1): every path of ``spec.host`` goes to
``spec.service``'s ``spec.port``. It claims its host as Ingresses do (the
oldest claimant wins, across kinds).

Run as ``python -m testkit.plugin_kind <ferryman> <ferryman's arguments>``
(the harness's ``command_prefix``): the first argument, the ``ferryman``
command the harness would have run, is dropped.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ferryman.app import cli
from ferryman.app.wiring import BUILT_IN, Kinds
from ferryman.configs.model import Route, VirtualHost, backend_key
from ferryman.engine.kind_spec import KindSpec
from ferryman.kinds.translators import build as built_in_translators
from ferryman.report import ADDED_OR_UPDATED, NORMAL, REJECTED, WARNING
from ferryman.resources import validation
from ferryman.resources.meta import InvalidResource, Meta, ObjectRef, parse_meta
from ferryman.translators import Translator
from ferryman.translators.context import Context

KIND = "StaticRoute"
SPEC = KindSpec(KIND, "example.ferryman.test", "v1", "staticroutes", keeps=("spec",))


@dataclass(frozen=True)
class StaticRoute:
    kind: ClassVar[str] = KIND
    variety: ClassVar[str] = ""  # its gauge has no split (Claimant)
    meta: Meta
    host: str
    service: str
    port: int

    def hosts(self) -> tuple[str, ...]:
        return (self.host,)


def parse(obj: Mapping[str, Any]) -> StaticRoute:
    meta = parse_meta(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InvalidResource(["spec: Required value"])
    host, service, port = spec.get("host"), spec.get("service"), spec.get("port")
    errors = []
    if not isinstance(host, str) or (why := validation.host(host)) is not None:
        errors.append(f"spec.host: Invalid value: {host!r}: {why if host else 'required'}")
    if not isinstance(service, str) or validation.dns1035_label(service) is not None:
        errors.append(f"spec.service: Invalid value: {service!r}: a DNS-1035 label is required")
    if isinstance(port, bool) or not isinstance(port, int) or validation.port_number(port):
        errors.append(f"spec.port: Invalid value: {port!r}: a port number is required")
    if errors:
        raise InvalidResource(errors)
    assert isinstance(host, str) and isinstance(service, str) and isinstance(port, int)
    return StaticRoute(meta, host, service, port)


class StaticRouteTranslator(Translator):
    kinds = (KIND,)
    renders = (KIND,)

    def __init__(self, context: Context) -> None:
        self._c = context

    def sync(self, ref: ObjectRef) -> None:
        d = self._c.desired
        obj = self._c.store.get(KIND, ref.namespace, ref.name)
        route = None
        if obj is not None:
            try:
                route = parse(obj)
            except InvalidResource as e:
                d.event(ref, WARNING, REJECTED, f"{ref.namespace}/{ref.name} was rejected: {e}")
        affected = d.config.upsert(route) if route else d.config.delete(ref)
        self._c.renders.render_all(affected | {ref})

    def render(self, ref: ObjectRef) -> None:
        d = self._c.desired
        route = d.config.get(ref)
        owned = set(d.config.owned_hosts(ref)) if isinstance(route, StaticRoute) else set()
        d.drop_hosts_of(ref, keep=owned)
        if not isinstance(route, StaticRoute):
            d.endpoints.set_backends(ref, frozenset())
            return
        backend = backend_key(ref.namespace, route.service, str(route.port))
        for host in owned:
            d.write_host(ref, VirtualHost(host, (Route(False, "/", backend),), None), None)
        d.endpoints.set_backends(ref, frozenset({backend}) if owned else frozenset())
        served = ", ".join(sorted(owned)) or "no host (another resource holds it)"
        message = f"Configuration for {ref.namespace}/{ref.name} was added or updated: {served}"
        d.event(ref, NORMAL, ADDED_OR_UPDATED, message)


def translators(context: Context) -> Sequence[Translator]:
    return [*built_in_translators(context), StaticRouteTranslator(context)]


KINDS = Kinds((*BUILT_IN.specs, SPEC), translators)


if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[2:], kinds=KINDS))
