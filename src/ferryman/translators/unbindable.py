"""Ports NGINX could not bind, handed back to whoever asked for them.

A reload whose listener cannot bind (another program holds the port) fails
on NGINX's side after the test passed; retried with the same files, it would
fail for ever and hold back every later change that needs a reload. The
failed reload names the ports (``ReloadError.ports``): Ingresses and Gateway
listeners asking for one are refused it (listen_ports.py, gateway.py) and
the reload goes on at once without it; so are the GlobalConfiguration's
listeners, left out with its other problems until it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ferryman.dataplane.errors import DROPPED, GIVE_UP, RETRY
from ferryman.engine.settings import Settings
from ferryman.translators import Translator
from ferryman.translators.desired import Desired
from ferryman.translators.listen_ports import ListenPorts


class Unbindable:
    def __init__(
        self,
        settings: Settings,
        ports: ListenPorts,
        desired: Desired,
        translators: Sequence[Translator],
    ) -> None:
        """``translators``: each is told the ports (``refuse_ports``: the
        GlobalConfiguration's listeners give them up) and, when Ingresses gave
        some up, ``touch``ed (Gateway listeners may take them)."""
        self._settings = settings
        self._ports = ports
        self._d = desired
        self._translators = translators

    def refuse(self, ports: Mapping[int, str]) -> str:
        """Refuse ``ports`` (port -> NGINX's reason) to whoever asked for them
        (rendered again by the next flush, and told); what the reload does next."""
        changed, dropped = self._ports.block(ports)
        self._d.mark_stale(changed)
        if dropped:
            for translator in self._translators:
                translator.touch()
        refused = [t.refuse_ports(ports) for t in self._translators]
        if any(refused) or dropped:
            return DROPPED
        s = self._settings
        if ports.keys() & {s.listen.http_port, s.listen.https_port, s.nginx.status_port}:
            return RETRY
        return GIVE_UP
