"""NIC's VirtualServer and VirtualServerRoute (k8s.nginx.org/v1) as the engine knows them."""

from __future__ import annotations

from ferryman.engine.kind_spec import ROUTING, Crd
from ferryman.resources import nic_crds
from ferryman.resources.nic_crds import nic_kind

VIRTUAL_SERVER = nic_kind(
    "VirtualServer", "virtualservers",
    Crd("vs", nic_crds.VIRTUAL_SERVER_SPEC, nic_crds.ROUTING_STATUS, nic_crds.ROUTING_COLUMNS,
        "virtualserver.md"),
    keeps=("spec",), status=ROUTING,
)  # fmt: skip
VIRTUAL_SERVER_ROUTE = nic_kind(
    "VirtualServerRoute", "virtualserverroutes",
    Crd("vsr", nic_crds.VIRTUAL_SERVER_ROUTE_SPEC, nic_crds.ROUTE_STATUS,
        nic_crds.ROUTING_COLUMNS, "virtualserver.md"),
    keeps=("spec",), status=ROUTING,
)  # fmt: skip
SPECS = (VIRTUAL_SERVER, VIRTUAL_SERVER_ROUTE)
