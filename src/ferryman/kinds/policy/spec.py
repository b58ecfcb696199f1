"""NIC's Policy (k8s.nginx.org/v1) as the engine knows it."""

from __future__ import annotations

from ferryman.engine.kind_spec import STATE, Crd
from ferryman.resources import nic_crds
from ferryman.resources.nic_crds import nic_kind

POLICY = nic_kind(
    "Policy", "policies",
    Crd("pol", nic_crds.POLICY_SPEC, nic_crds.STATE_STATUS,
        (nic_crds.STATE_COLUMN, nic_crds.AGE_COLUMN), "virtualserver.md"),
    keeps=("spec",), status=STATE,
)  # fmt: skip
SPECS = (POLICY,)
