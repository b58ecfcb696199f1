"""NIC's VirtualServer and VirtualServerRoute (k8s.nginx.org/v1) as the engine knows them."""

from __future__ import annotations

from ferryman.kind_spec import ROUTING, Crd, KindSpec
from ferryman.resources import nic_crds

VIRTUAL_SERVER = KindSpec(
    "VirtualServer",
    nic_crds.GROUP,
    "v1",
    "virtualservers",
    custom=True,
    keeps=("spec",),
    status=ROUTING,
    crd=Crd(
        "vs",
        nic_crds.VIRTUAL_SERVER_SPEC,
        nic_crds.ROUTING_STATUS,
        nic_crds.ROUTING_COLUMNS,
        "virtualserver.md",
    ),
)
VIRTUAL_SERVER_ROUTE = KindSpec(
    "VirtualServerRoute",
    nic_crds.GROUP,
    "v1",
    "virtualserverroutes",
    custom=True,
    keeps=("spec",),
    status=ROUTING,
    crd=Crd(
        "vsr",
        nic_crds.VIRTUAL_SERVER_ROUTE_SPEC,
        nic_crds.ROUTE_STATUS,
        nic_crds.ROUTING_COLUMNS,
        "virtualserver.md",
    ),
)
SPECS = (VIRTUAL_SERVER, VIRTUAL_SERVER_ROUTE)
