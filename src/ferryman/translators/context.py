"""What a kind's translator is built from: the worker's parts it may use, the
shape of the data plane, and where Kubernetes mode's status goes.

The worker builds one ``Context`` and hands it to the registered translator
factories (``ferryman.kinds.translators``): it names no kind itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from ferryman.engine.kind_spec import KindSpec
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.report import GatewayStatusSink, IngressStatusSink
from ferryman.translators import Translator
from ferryman.translators.desired import Desired
from ferryman.translators.listen_ports import ListenPorts
from ferryman.translators.renders import Renders


@dataclass(frozen=True)
class Shape:
    """What the data plane can serve."""

    # nginx.conf has the stream block (TransportServers).
    stream: bool = False
    # Where ferryman's HTTPS server listens behind TLS passthrough.
    tls_socket: str = ""
    # Plaintext listeners serve HTTP/2 with prior knowledge (h2c) beside
    # HTTP/1.1: NGINX 1.25.1 and later, Angie, ferryman's module on Debian's
    # 1.22 (ferryman_h2c_detect), or through the hop below
    # (dataplane/server_version.py, dataplane/main_file.py).
    h2c: bool = False
    # ... through the stream block's hop (Debian's 1.22 with a module built
    # before ferryman_h2c_detect): the Gateway's HTTP sockets are stream
    # servers (kinds/gateway/records/servers.py).
    h2c_hop: bool = False


@dataclass(frozen=True)
class Sinks:
    """Where status goes in Kubernetes mode (None: manifests mode, logs only)."""

    ingress: IngressStatusSink | None = None
    gateway: GatewayStatusSink | None = None


@dataclass(frozen=True)
class Context:
    settings: Settings
    store: Store
    queue: WorkQueue[QueueKey]
    desired: Desired
    # Other kinds' resources rendered again, or rejected (a host changed hands).
    renders: Renders
    # The ConfigMap's route-level keys in force, which annotations override
    # (every resource is rendered again when they change).
    route_defaults: Callable[[], Mapping[str, str]]
    # The configuration files NGINX runs (path -> text), as desired.
    files: MutableMapping[str, str]
    secrets: SecretStore
    ports: ListenPorts
    shape: Shape
    sinks: Sinks


# The registered kinds' translators, built for one worker.
TranslatorFactory = Callable[[Context], Sequence[Translator]]


@dataclass(frozen=True)
class Kinds:
    """The kinds a run serves: their specs (sources, store, reporter, the
    worker's dependency index) and the factory of their translators."""

    specs: tuple[KindSpec, ...]
    translators: TranslatorFactory
