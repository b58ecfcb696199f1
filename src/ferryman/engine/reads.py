"""The objects a translator reads, recorded for the dependency index.

The controller hands a translator one ``Reads`` per resource it translates;
whatever the translator asks for is fetched (from the store, through the
caches here) and remembered in ``refs``, which the controller declares in
``dependencies.Dependencies``. So no translator keeps a list of what it refers
to beside the code that refers to it: a reference cannot be read and not
tracked.

``Cache`` holds what is costly to derive from an object (a Secret's checked
certificate, a Secret read by a policy) until that object changes or nothing
reads it any more; a kind keeps its own derivations beside them (``Derived``:
the Ingress kind's mergeable and canary Ingresses by host, the VirtualServer
kind's parsed VirtualServerRoutes, the Policy kind's parsed Policies), told of
the same changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, cast

from ferryman.configs.secret_state import SecretRead, SecretState
from ferryman.configs.tenancy import FROM_GROUP
from ferryman.engine.dependencies import ANY
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.resources.global_configuration import (
    GlobalConfiguration,
    parse_global_configuration,
)
from ferryman.resources.meta import InvalidResource, ObjectRef
from ferryman.resources.reference_grant import ReferenceGrant, parse_reference_grant

# The kinds only read by translators: a change to one translates its readers.
# A ReferenceGrant's change does too (tenant mode), but the controller hands
# it to Gateway API's translator as well, so it is not among them.
GRANT = "ReferenceGrant"
_GC = "GlobalConfiguration"
# A Secret's parser (``resources/secret_*.py``): the content, or InvalidResource.
SecretParser = Callable[[Mapping[str, Any]], Any]


class Derived(Protocol):
    """What a kind derives from stored objects (an index by host, say) and keeps
    until one of them changes: the kind's own cache, kept beside the engine's
    and told of every change (``Cache.forget``)."""

    def forget(self, ref: ObjectRef) -> None: ...


D = TypeVar("D", bound=Derived)


def own_ports(settings: Settings) -> dict[int, str]:
    """The ports ferryman itself opens besides the public HTTP and HTTPS ones
    (port -> its flag): no resource may take them, whoever binds first (the
    webhook binds after NGINX's first reload; a listener there would stop it)."""
    s = settings
    flags = (
        (s.listen.ready_port, "--ready-port"),
        (s.listen.metrics_port, "--metrics-port"),
        (s.nginx.status_port, "--nginx-status-port"),
        (s.gates.webhook_port, "--readiness-gate-webhook-port"),
    )
    return {port: flag for port, flag in flags if port}


def forbidden_ports(settings: Settings) -> frozenset[int]:
    """The ports no GlobalConfiguration listener may take: NIC forbids its own
    (HTTP, HTTPS, readiness, metrics, stub_status); ferryman its webhook's too."""
    return frozenset(
        {settings.listen.http_port, settings.listen.https_port, *own_ports(settings)} - {0}
    )


class Cache:
    def __init__(
        self, store: Store, secrets: SecretStore, settings: Settings | None = None
    ) -> None:
        """``settings``: which GlobalConfiguration is served (--global-configuration)
        and the ports its listeners may not take; None: none is."""
        self._store = store
        self._secrets = secrets
        self._gc_name = settings.transport.global_configuration if settings else None
        self._gc_forbidden = forbidden_ports(settings) if settings else frozenset()
        # The served GlobalConfiguration parsed ([None]: absent), once per change.
        self._gc: list[GlobalConfiguration | None] = []
        self._secret_states: dict[tuple[str, str], SecretState] = {}
        # A Secret's content per parser (htpasswd, API keys...).
        self._secret_reads: dict[tuple[str, str], dict[SecretParser, SecretRead[Any]]] = {}
        # The kinds' own caches, by the class (or factory) that made them.
        self._derived: dict[Callable[[Store], Derived], Derived] = {}
        # Tenant mode (--allowed-host-suffixes): references across namespaces
        # need a ReferenceGrant (configs/tenancy.py); the valid ones by namespace.
        self.tenant_mode = bool(settings and settings.allowed_host_suffixes)
        self._grants: dict[str, list[ReferenceGrant]] = {}

    def secret(self, namespace: str, name: str) -> SecretState:
        key = (namespace, name)
        state = self._secret_states.get(key)
        if state is None:
            state = self._secrets.update(namespace, name, self._store.get("Secret", *key))
            self._secret_states[key] = state
        return state

    def secret_read(self, namespace: str, name: str, parser: SecretParser) -> SecretRead[Any]:
        reads = self._secret_reads.setdefault((namespace, name), {})
        found = reads.get(parser)
        if found is None:
            found = _read_secret(self._store.get("Secret", namespace, name), parser)
            reads[parser] = found
        return found

    def global_configuration(self) -> GlobalConfiguration | None:
        if not self._gc:
            obj = self._store.get(_GC, *self._gc_name) if self._gc_name else None
            parsed = (
                parse_global_configuration(obj, forbidden_ports=self._gc_forbidden)
                if obj is not None
                else None
            )
            self._gc = [parsed.resource if parsed else None]
        return self._gc[0]

    def global_configuration_ref(self) -> ObjectRef | None:
        return ObjectRef(_GC, *self._gc_name) if self._gc_name else None

    def derived(self, make: Callable[[Store], D]) -> D:
        """The cache ``make`` builds from the store, made on first use."""
        found = self._derived.get(make)
        if found is None:
            found = self._derived[make] = make(self._store)
        return cast(D, found)

    def grants(self, namespace: str) -> list[ReferenceGrant]:
        """The valid ReferenceGrants of ``namespace``."""
        found = self._grants.get(namespace)
        if found is None:
            found = []
            for ref in self._store.refs(GRANT):
                if ref.namespace == namespace:
                    obj = self._store.get(GRANT, namespace, ref.name)
                    grant = parse_reference_grant(obj).resource if obj is not None else None
                    if grant is not None:
                        found.append(grant)
            self._grants[namespace] = found
        return found

    def refuse(self, ref: ObjectRef, why: str) -> None:
        """The data plane refused what ``ref`` holds: unusable until it changes."""
        if ref.kind == "Secret":
            self._secret_states[(ref.namespace, ref.name)] = SecretState(None, why)

    def forget(self, ref: ObjectRef) -> None:
        """``ref`` changed, or no resource reads it any more."""
        key = (ref.namespace, ref.name)
        if ref.kind == "Secret":
            self._secret_states.pop(key, None)
            self._secret_reads.pop(key, None)
        elif ref.kind == _GC:
            self._gc = []
        elif ref.kind == GRANT:
            self._grants.pop(ref.namespace, None)
        for derived in self._derived.values():
            derived.forget(ref)


class Reads:
    """One translation's reads: each is recorded in ``refs``."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self.refs: set[ObjectRef] = set()

    def secret(self, namespace: str, name: str) -> SecretState:
        self.refs.add(ObjectRef("Secret", namespace, name))
        return self._cache.secret(namespace, name)

    def secret_read(self, namespace: str, name: str, parser: SecretParser) -> SecretRead[Any]:
        """A Secret's content as ``parser`` reads it (a policy's htpasswd, API keys...)."""
        self.refs.add(ObjectRef("Secret", namespace, name))
        return self._cache.secret_read(namespace, name, parser)

    def global_configuration(self) -> GlobalConfiguration | None:
        """The GlobalConfiguration --global-configuration names, its valid
        listeners parsed (None: no flag, or the object is absent); its change
        translates the reader again."""
        if (ref := self._cache.global_configuration_ref()) is not None:
            self.refs.add(ref)
        return self._cache.global_configuration()

    def granted(
        self, from_kind: str, from_namespace: str, to: tuple[str, str], namespace: str, name: str
    ) -> bool:
        """Whether a ``from_kind`` in ``from_namespace`` may refer to the ``to``
        object namespace/name (``configs/tenancy.py``): always outside tenant mode
        and within one namespace; else a ReferenceGrant of ``namespace`` must
        allow it, and a change to that namespace's grants translates the reader again."""
        if not self._cache.tenant_mode or namespace == from_namespace:
            return True
        self.refs.add(ObjectRef(GRANT, namespace, ANY))
        group = FROM_GROUP[from_kind]
        return any(
            g.allows(group, from_kind, from_namespace, to[0], to[1], name)
            for g in self._cache.grants(namespace)
        )

    def depend(self, ref: ObjectRef) -> None:
        """The reader reads ``ref`` (a kind's own key, e.g. a host's Ingresses):
        a change the kind reports for it translates the reader again."""
        self.refs.add(ref)

    def derived(self, make: Callable[[Store], D]) -> D:
        """A kind's own cache (``Derived``); its reads say what they ``depend`` on."""
        return self._cache.derived(make)


def _read_secret(obj: Mapping[str, Any] | None, parser: SecretParser) -> SecretRead[Any]:
    if obj is None:
        return SecretRead(None, "", "secret doesn't exist or of an unsupported type")
    kind = obj.get("type")
    secret_type = kind if isinstance(kind, str) else ""
    try:
        return SecretRead(parser(obj), secret_type, None)
    except InvalidResource as e:
        return SecretRead(None, secret_type, str(e))
