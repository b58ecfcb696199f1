"""NIC's Policy (k8s.nginx.org/v1) as the engine knows it."""

from __future__ import annotations

from ferryman.kind_spec import STATE, Crd, KindSpec
from ferryman.resources import nic_crds

POLICY = KindSpec(
    "Policy",
    nic_crds.GROUP,
    "v1",
    "policies",
    custom=True,
    keeps=("spec",),
    status=STATE,
    crd=Crd(
        "pol",
        nic_crds.POLICY_SPEC,
        nic_crds.STATE_STATUS,
        (nic_crds.STATE_COLUMN, nic_crds.AGE_COLUMN),
        "virtualserver.md",
    ),
)
SPECS = (POLICY,)
