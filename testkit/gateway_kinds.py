"""Gateway API's kinds as lightkube resources (from their ``KindSpec``s, as
the reporter builds them), for tests that create, read and write them."""

from __future__ import annotations

from typing import Any

from ferryman.kinds.gateway.spec import SPECS
from ferryman.kube.resources import resource_for

RESOURCES: dict[str, Any] = {s.kind: resource_for(s) for s in SPECS}
