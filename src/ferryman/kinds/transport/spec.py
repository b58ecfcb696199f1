"""NIC's TransportServer and GlobalConfiguration (k8s.nginx.org/v1) as the engine knows them."""

from __future__ import annotations

from ferryman.engine.kind_spec import STATE, Crd
from ferryman.resources import nic_crds
from ferryman.resources.nic_crds import nic_kind

_REASON_COLUMN = {"name": "Reason", "type": "string", "jsonPath": ".status.reason"}
TRANSPORT_SERVER = nic_kind(
    "TransportServer", "transportservers",
    Crd("ts", nic_crds.TRANSPORT_SERVER_SPEC, nic_crds.STATE_STATUS,
        (nic_crds.STATE_COLUMN, _REASON_COLUMN, nic_crds.AGE_COLUMN), "transportserver.md"),
    status=STATE,
)  # fmt: skip
GLOBAL_CONFIGURATION = nic_kind(
    "GlobalConfiguration", "globalconfigurations",
    Crd("gc", nic_crds.GLOBAL_CONFIGURATION_SPEC, nic_crds.NO_STATUS, (nic_crds.AGE_COLUMN,),
        "transportserver.md"),
    counted=False,
)  # fmt: skip
SPECS = (TRANSPORT_SERVER, GLOBAL_CONFIGURATION)
