"""ingress-nginx's ``limit-connections`` and ``limit-allowlist`` on the Ingress's
routes: NGINX's ``limit_conn`` enforced in Lua, no reload.

ingress-nginx declares ``limit_conn_zone`` per Ingress keyed by the client's
address (empty for a client of the allow list, which NGINX does not limit) and
writes ``limit_conn <zone> <n>`` into each of its locations: a client has at
most ``n`` requests being served at once over all of the Ingress's paths, and
one more is answered ``limit-conn-status-code`` (503). NGINX runs limit_req
before limit_conn (both in the preaccess phase), so a request refused by the
rate is never counted as a connection: ferryman_policy.lua's order.

P item: ``n|<zone, base64>|<connections>|<status>|<exempt networks>``
(``access.networks_field``, empty for none); ferryman_policy_conn.lua counts
in the ``ferryman_limits`` dict and uncounts in the log phase. The C module
has no connection limit: a route with one is routed by the Lua slow path
(``fast.py`` serves rate limits only).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ferryman.configs.record_text import b64
from ferryman.kinds.ingress.parse.ingress_nginx_limits import ClientLimits
from ferryman.kinds.policy.records.access import networks_field
from ferryman.kinds.policy.records.attach import NONE, Attached
from ferryman.kinds.policy.records.base import Enforced
from ferryman.kinds.policy.records.rate import RateLimits

# ingress-nginx's limit-conn-status-code (its ConfigMap key's default).
STATUS = 503


@dataclass(frozen=True)
class Connections(Enforced):
    zone: str
    connections: int
    status: int
    exempt: tuple[str, ...]
    letter = "n"

    def fields(self) -> tuple[str, ...]:
        return (
            b64(self.zone),
            str(self.connections),
            str(self.status),
            networks_field(self.exempt),
        )


def client_limits_policy(
    namespace: str, name: str, limits: ClientLimits | None, rate: Attached
) -> Attached:
    """``rate`` (the Ingress's limit-req) with the allow list's exemption, and
    the connection limit, as its routes enforce them."""
    if limits is None:
        return rate
    configs = dict(rate.configs)
    limit_req = configs.get(RateLimits)
    if isinstance(limit_req, RateLimits) and limits.exempt:
        exempt = tuple(replace(one, exempt=limits.exempt) for one in limit_req.limits)
        configs[RateLimits] = replace(limit_req, limits=exempt)
    if limits.connections:
        zone = f"ingress/{namespace}/{name}"
        configs[Connections] = Connections(zone, limits.connections, STATUS, limits.exempt)
    if not configs:
        return NONE
    return Attached(configs, rate.warnings, rate.error)
