"""A VirtualServer's ``tls.cert-manager``: the cert-manager Certificate NIC makes
for its host (``--enable-cert-manager``; ``certificates/`` writes it).

NIC's rules (its VirtualServer validation and its cert-manager controller):
without cert-manager enabled the field is forbidden, it needs ``tls.secret``
(the Certificate's name and secretName), exactly one of ``issuer`` and
``cluster-issuer``, and with ``cluster-issuer`` neither ``issuer-kind`` nor
``issuer-group``; ``duration`` and ``renew-before`` are Go durations, ``usages``
cert-manager's key usages, comma-separated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ferryman.resources.nic_fields import Obj, forbidden, invalid

KEYS = frozenset(
    {
        "cluster-issuer",
        "issuer",
        "issuer-kind",
        "issuer-group",
        "common-name",
        "duration",
        "renew-before",
        "usages",
        "issue-temp-cert",
    }
)

# cert-manager's KeyUsage values (its API's KeyUsage constants).
USAGES = frozenset(
    [
        "signing", "digital signature", "content commitment", "key encipherment",
        "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
        "decipher only", "any", "server auth", "client auth", "code signing",
        "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
        "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
    ]
)  # fmt: skip
# cert-manager's default usages (its DefaultKeyUsages).
DEFAULT_USAGES: tuple[str, ...] = ("digital signature", "key encipherment")
# A Go duration: a sequence of decimal numbers with a unit each.
_GO_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h)")


def go_duration(value: str) -> bool:
    text = value[1:] if value[:1] in "+-" else value
    return text == "0" or (
        bool(text) and re.fullmatch(f"(?:{_GO_DURATION.pattern})+", text) is not None
    )


@dataclass(frozen=True)
class CertManager:
    issuer: str  # the Issuer's or ClusterIssuer's name
    issuer_kind: str  # "Issuer", "ClusterIssuer" or issuer-kind's
    issuer_group: str  # "cert-manager.io" unless issuer-group says
    common_name: str = ""
    duration: str = ""
    renew_before: str = ""
    usages: tuple[str, ...] = DEFAULT_USAGES
    issue_temp_cert: bool = False


def parse_cert_manager(t: Obj, secret: str, enabled: bool) -> CertManager | None:
    """``tls.cert-manager`` (``t``: the tls object), NIC's problems added to its context."""
    c = t.obj("cert-manager", KEYS)
    if c is None:
        return None
    ctx, where = c.ctx, t.at("cert-manager")
    if not enabled:
        ctx.add(forbidden(where, "field requires cert-manager enablement (--enable-cert-manager)"))
    if not secret:
        ctx.add(forbidden(where, "field requires TLS.Secret to be specified"))
    issuer, cluster = c.text("issuer"), c.text("cluster-issuer")
    kind, group = c.text("issuer-kind"), c.text("issuer-group")
    if not issuer and not cluster:
        ctx.add(forbidden(where, "either issuer or cluster-issuer must be set"))
    if issuer and cluster:
        ctx.add(
            forbidden(
                where,
                'both "tls.cert-manager.issuer" and "tls.cert-manager.cluster-issuer" may not '
                "be set",
            )
        )
    if cluster and (kind or group):
        ctx.add(forbidden(where, "cluster-issuer takes neither issuer-kind nor issuer-group"))
    for key in ("duration", "renew-before"):
        value = c.text(key)
        if value and not go_duration(value):
            ctx.add(invalid(c.at(key), value, "must be a duration (e.g. 2160h)"))
    usages = DEFAULT_USAGES
    if raw := c.text("usages"):
        usages = tuple(u.strip() for u in raw.split(","))
        for u in usages:
            if u not in USAGES:
                ctx.add(invalid(c.at("usages"), raw, f"unknown key usage {u!r}"))
    return CertManager(
        issuer=cluster or issuer,
        issuer_kind=("ClusterIssuer" if cluster else kind or "Issuer"),
        issuer_group=group or "cert-manager.io",
        common_name=c.text("common-name"),
        duration=c.text("duration"),
        renew_before=c.text("renew-before"),
        usages=usages,
        issue_temp_cert=c.boolean("issue-temp-cert") is True,
    )
