"""The keys the work queue holds, and which keys a stored object's change queues.

Most keys are the ``ObjectRef`` of a resource; a few name no resource and ask
the worker for something else (flush, recompute a pod's Services, take the
leaving Nodes into account). They live apart from the controller because the
sources' sink (``sink.py``, above the controller) maps events to them too, and
that mapping is pure: objects in, keys out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman.resources.meta import ObjectRef
from ferryman.resources.pod import addresses_to_resync
from ferryman.resources.service import service_name_of

# A key that syncs nothing: it wakes the worker so that it flushes.
RESYNC = ObjectRef("Resync", "", "")
# The key of a pod's address (readiness gates): its name is the address.
POD_ADDRESS = "PodAddress"
# The key that takes the Nodes being drained (machine lifecycle hooks) into account.
LEAVING_NODES = ObjectRef("LeavingNodes", "", "")


def keys_for_event(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[ObjectRef]:
    """Map a stored object (and its previous version) to the keys to sync."""
    kind = str(obj.get("kind"))
    md = obj.get("metadata") or {}
    ns, name = str(md.get("namespace") or ""), str(md.get("name") or "")
    if kind == "EndpointSlice":
        keys = []
        for o in (obj, old):
            if o is not None and (svc := service_name_of(o)):
                keys.append(ObjectRef("Service", ns, svc))
        return keys
    if kind == "Pod":
        return [ObjectRef(POD_ADDRESS, ns, ip) for ip in addresses_to_resync(obj, old)]
    return [ObjectRef(kind, ns, name)]
