"""A VirtualServer's ``spec.listener`` against the GlobalConfiguration: the
listeners its host is served on, and NIC's warning when one does not fit.

NIC (internal/k8s/configuration.go) never rejects a VirtualServer for its
listeners: it warns (one warning, the first that applies, in this order) and
serves the host on the listeners that fit, which is none when nothing fits:
the http one must be an HTTP listener without ssl, the https one an HTTP
listener with ssl. A host with ``listener`` is never served on the default
ports (configs/http_listeners.py explains how requests are told apart).
"""

from __future__ import annotations

from ferryman.configs.http_listeners import HTTP
from ferryman.kinds.virtualserver.parse.virtualserver import Listeners
from ferryman.resources.global_configuration import GlobalConfiguration, Listener

NO_GLOBAL_CONFIGURATION = "Listeners defined, but no GlobalConfiguration is deployed"


def resolve_listeners(
    spec: Listeners, gc: GlobalConfiguration | None
) -> tuple[tuple[str, str], str | None]:
    """(http listener, https listener) the host is served on ("" for none), and
    NIC's warning, if any. Only names of the GlobalConfiguration's valid
    listeners (DNS-1035 labels) are returned: they go into the H record."""
    if gc is None:
        return ("", ""), NO_GLOBAL_CONFIGURATION
    by_name = {listener.name: listener for listener in gc.listeners}
    http = by_name.get(spec.http)
    https = by_name.get(spec.https)
    warning = None
    if http is not None and http.ssl:
        warning = (
            f"Listener {spec.http} can't be use in `listener.http` context as SSL is "
            "enabled for that listener."
        )
    elif https is not None and not https.ssl:
        warning = (
            f"Listener {spec.https} can't be use in `listener.https` context as SSL is "
            "not enabled for that listener."
        )
    elif spec.http and http is None:
        warning = f"Listener {spec.http} is not defined in GlobalConfiguration"
    elif spec.https and https is None:
        warning = f"Listener {spec.https} is not defined in GlobalConfiguration"
    return (_name(http, ssl=False), _name(https, ssl=True)), warning


def _name(listener: Listener | None, *, ssl: bool) -> str:
    if listener is None or listener.protocol != HTTP or listener.ssl != ssl:
        return ""
    return listener.name
