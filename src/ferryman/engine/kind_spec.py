"""What the engine knows of a resource kind: its identity, when it is read,
what its parser keeps and the CRD it comes with.

The kinds' packages (``ferryman.kinds``) each declare ``KindSpec`` values and
``kinds.REGISTRY`` lists them; the composition root hands that registry to the
sources (which kinds to watch or accept from manifests), the store (what of an
object to keep) and the CRD files. None of those names a kind of a package
there: a kind is added by its package and one line in the registry
(controller-runtime's builder and lightkube's registry keyed by apiVersion and
kind are the models).

The engine's own inputs (Services and EndpointSlices for endpoints, Secrets,
the ConfigMap, Namespaces and Pods) are ``CORE`` here: the engine reads them
itself, whatever kinds are registered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ferryman.engine.settings import Settings

Schema = dict[str, Any]


def always(settings: Settings) -> bool:
    return True


# KindSpec.status
STATE = "state"
ROUTING = "routing"
OWN = "own"


@dataclass(frozen=True)
class Crd:
    """A custom resource's definition as ferryman installs it: names, the
    structural schema of what its parsers read, and ``kubectl get``'s columns."""

    short_name: str
    spec: Schema
    status: Schema
    columns: tuple[Mapping[str, Any], ...]
    # The doc (under docs/) the generated file points its readers to.
    doc: str


@dataclass(frozen=True)
class KindSpec:
    kind: str
    # "" for the core API group.
    group: str
    version: str
    plural: str
    namespaced: bool = True
    # A custom resource: its CRD may be missing from a cluster, which reads
    # then as no objects (and is asked again).
    custom: bool = False
    # Whether the kind is read with these settings (Gateway API's behind its flag).
    enabled: Callable[[Settings], bool] = always
    # Top-level fields its parsers read besides apiVersion, kind and metadata;
    # None: the object is kept whole (metadata too).
    keeps: tuple[str, ...] | None = None
    # Top-level fields kept for the reporter alone, never read by a parser
    # (an Ingress's status: NIC reads it from its informer's cache to skip a
    # write that changes nothing). An update that changes only these (and
    # resourceVersion: ferryman's own status write comes back so) syncs nothing.
    reported: tuple[str, ...] = ()
    # Every update syncs, even one that changes nothing kept: a Namespace's
    # (the Pod informers' own state, a namespace opting in again while
    # drained, rides on its updates).
    syncs_unchanged: bool = False
    # The CRD ferryman ships for it (NIC's); None for a kind someone else defines.
    crd: Crd | None = field(default=None, compare=False)
    # The status ferryman writes into its objects (leader only): "" none,
    # STATE NIC's state, reason and message, ROUTING those and the addresses
    # it is reached at, OWN the whole status its translator says (Gateway
    # API's, through report/gateway_status.py).
    status: str = ""
    # The engine's own kinds it reads beyond those always watched (Gateway
    # API's listeners select Namespaces by label: every Namespace is watched).
    needs: tuple[str, ...] = ()
    # With "ConfigMap" in ``needs``: the keys of a ConfigMap's ``data`` it reads
    # (BackendTLSPolicy's CA bundles: ca.crt). Every ConfigMap of the watched
    # namespaces is then held with those keys only, not whole (a cluster's
    # ConfigMaps hold dashboards and scripts of megabytes); () reads them whole.
    configmap_keys: tuple[str, ...] = ()
    # Read by other resources' translations (the dependency index): a change
    # translates its readers again, whatever translator syncs it.
    referenced: bool = False
    # Counted in the start-up line ("ready ingresses=... virtualservers=..."):
    # what users write to be served, not the classes and grants that configure it.
    counted: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def crd_object(self) -> dict[str, Any]:
        """The CustomResourceDefinition object of this kind (``crd`` must be set)."""
        assert self.crd is not None, self.kind
        schema: Schema = {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": self.crd.spec,
                "status": self.crd.status,
            },
        }
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{self.plural}.{self.group}"},
            "spec": {
                "group": self.group,
                "names": {
                    "kind": self.kind,
                    "listKind": f"{self.kind}List",
                    "plural": self.plural,
                    "singular": self.kind.lower(),
                    "shortNames": [self.crd.short_name],
                },
                "scope": "Namespaced" if self.namespaced else "Cluster",
                "versions": [
                    {
                        "name": self.version,
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}},
                        "additionalPrinterColumns": list(self.crd.columns),
                        "schema": {"openAPIV3Schema": schema},
                    }
                ],
            },
        }


# The engine's own inputs, those a manifests directory may declare too. Their
# store projections are raw.py's (each read field by field). Pods (readiness
# gates) are watched by sources/pods.py alone: no one declares a pod to an
# ingress controller.
SERVICE = KindSpec("Service", "", "v1", "services")
ENDPOINT_SLICE = KindSpec("EndpointSlice", "discovery.k8s.io", "v1", "endpointslices")
SECRET = KindSpec("Secret", "", "v1", "secrets", referenced=True)
CONFIG_MAP = KindSpec("ConfigMap", "", "v1", "configmaps")
NAMESPACE = KindSpec("Namespace", "", "v1", "namespaces", namespaced=False, syncs_unchanged=True)
CORE = (SERVICE, ENDPOINT_SLICE, SECRET, CONFIG_MAP, NAMESPACE)


def enabled(specs: Iterable[KindSpec], settings: Settings) -> list[KindSpec]:
    """The kinds these settings read (Kubernetes mode watches them)."""
    return [spec for spec in specs if spec.enabled(settings)]


def ready_counts(
    specs: Iterable[KindSpec],
    settings: Settings,
    count: Callable[[str], int],
    skipped: Mapping[str, int],
) -> dict[str, int]:
    """The start-up line's fields: for each kind read and counted (registry
    order, so Ingresses first), its objects less those of another class
    (``skipped``: kind -> how many), keyed by its plural; then
    ``other_class``, every object left to another class."""
    out = {
        spec.plural: count(spec.kind) - skipped.get(spec.kind, 0)
        for spec in enabled(specs, settings)
        if spec.counted
    }
    out["other_class"] = sum(skipped.values())
    return out


def by_kind(specs: Iterable[KindSpec]) -> dict[str, KindSpec]:
    """Kind name -> spec; one name registered twice is a programming error."""
    out: dict[str, KindSpec] = {}
    for spec in specs:
        assert spec.kind not in out, f"{spec.kind} is registered twice"
        out[spec.kind] = spec
    return out
