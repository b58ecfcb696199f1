"""What the VirtualServers ferryman serves ask of cert-manager, as their
translator last read them; the writer is told when it changes."""

from __future__ import annotations

from collections.abc import Callable

from ferryman.certificates.decide import Wanted
from ferryman.kinds.virtualserver.parse.virtualserver import VirtualServer
from ferryman.resources.meta import ObjectRef


class Asked:
    def __init__(self) -> None:
        self._wanted: dict[ObjectRef, Wanted] = {}
        self._served: dict[ObjectRef, tuple[str, str]] = {}  # ref -> (uid, name)
        self.changed: Callable[[], None] = lambda: None

    def set(self, ref: ObjectRef, vs: VirtualServer | None) -> None:
        """``ref`` is served as ``vs`` (None: not served, or gone)."""
        before = (self._wanted.get(ref), self._served.get(ref))
        if vs is None:
            self._wanted.pop(ref, None)
            self._served.pop(ref, None)
        else:
            self._served[ref] = (vs.meta.uid, vs.meta.name)
            cm = vs.tls.cert_manager if vs.tls is not None else None
            if cm is not None and vs.tls is not None and vs.tls.secret:
                self._wanted[ref] = Wanted(
                    vs.meta.namespace,
                    vs.meta.name,
                    vs.meta.uid,
                    tuple(sorted(vs.meta.labels.items())),
                    vs.host,
                    vs.tls.secret,
                    cm,
                )
            else:
                self._wanted.pop(ref, None)
        if (self._wanted.get(ref), self._served.get(ref)) != before:
            self.changed()

    def wanted(self) -> list[Wanted]:
        return list(self._wanted.values())

    def served(self) -> dict[str, str]:
        """uid -> name of every VirtualServer served."""
        return {uid: name for uid, name in self._served.values() if uid}
