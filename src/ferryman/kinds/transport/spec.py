"""NIC's TransportServer and GlobalConfiguration (k8s.nginx.org/v1) as the engine knows them."""

from __future__ import annotations

from ferryman.kind_spec import STATE, Crd, KindSpec
from ferryman.resources import nic_crds

TRANSPORT_SERVER = KindSpec(
    "TransportServer",
    nic_crds.GROUP,
    "v1",
    "transportservers",
    custom=True,
    status=STATE,
    crd=Crd(
        "ts",
        nic_crds.TRANSPORT_SERVER_SPEC,
        nic_crds.STATE_STATUS,
        (
            nic_crds.STATE_COLUMN,
            {"name": "Reason", "type": "string", "jsonPath": ".status.reason"},
            nic_crds.AGE_COLUMN,
        ),
        "transportserver.md",
    ),
)
GLOBAL_CONFIGURATION = KindSpec(
    "GlobalConfiguration",
    nic_crds.GROUP,
    "v1",
    "globalconfigurations",
    custom=True,
    crd=Crd(
        "gc",
        nic_crds.GLOBAL_CONFIGURATION_SPEC,
        nic_crds.NO_STATUS,
        (nic_crds.AGE_COLUMN,),
        "transportserver.md",
    ),
)
SPECS = (TRANSPORT_SERVER, GLOBAL_CONFIGURATION)
