"""What the VirtualServers ferryman serves ask of cert-manager, as their
translator last read them (kinds/virtualserver/translate/virtualserver.py
says what each asks); the writer is told when it changes."""

from __future__ import annotations

from collections.abc import Callable

from ferryman.certificates.decide import Wanted
from ferryman.resources.meta import ObjectRef


class Asked:
    def __init__(self) -> None:
        self._wanted: dict[ObjectRef, Wanted] = {}
        self._served: dict[ObjectRef, tuple[str, str]] = {}  # ref -> (uid, name)
        self.changed: Callable[[], None] = lambda: None

    def set(
        self, ref: ObjectRef, served: tuple[str, str] | None, wanted: Wanted | None = None
    ) -> None:
        """``ref`` is served (``served``: its uid and name; None: not served, or
        gone), asking for the Certificate ``wanted`` (None: none)."""
        before = (self._wanted.get(ref), self._served.get(ref))
        if served is None:
            self._served.pop(ref, None)
        else:
            self._served[ref] = served
        if served is None or wanted is None:
            self._wanted.pop(ref, None)
        else:
            self._wanted[ref] = wanted
        if (self._wanted.get(ref), self._served.get(ref)) != before:
            self.changed()

    def wanted(self) -> list[Wanted]:
        return list(self._wanted.values())

    def served(self) -> dict[str, str]:
        """uid -> name of every VirtualServer served."""
        return {uid: name for uid, name in self._served.values() if uid}
