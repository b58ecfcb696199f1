"""Resources left to another class: said once each, listed, counted.

NIC's examples name class ``nginx``; ferryman serves ``ferryman`` by default.
Such an object is no one's error (another controller may serve it), so it is
neither rejected nor reported, but a newcomer must not meet a silent 404: each
object of another class is said once in the log (info), again only when the
class it names changes, and forgotten when it is served or deleted (memory
bounded by the objects present). ``ferryman render`` lists them as skipped and
the start-up line counts them.
"""

from __future__ import annotations

from collections import Counter

from ferryman.resources.meta import ObjectRef


def skipped_reason(class_name: str, served: str) -> str:
    """Why a resource naming ``class_name`` ("" for none) is skipped, and how to serve it."""
    if not class_name:
        return (
            f"no class, ferryman serves {served} (IngressClass {served} is not the default); "
            f"set spec.ingressClassName: {served}"
        )
    return (
        f"class {class_name}, ferryman serves {served}; set spec.ingressClassName: "
        f"{served} or run ferryman with --ingress-class={class_name}"
    )


class OtherClass:
    """What ferryman skipped for its class: ref -> the class it names ("": none)."""

    def __init__(self) -> None:
        # ref -> (the class it names, why it is not served: None for the
        # IngressClass reason, skipped_reason's).
        self._skipped: dict[ObjectRef, tuple[str, str | None]] = {}

    def checked(
        self, ref: ObjectRef, class_name: str | None, served: bool, why: str | None = None
    ) -> bool:
        """``ref`` names ``class_name`` and ferryman ``served`` it (a deleted
        object counts as served: nothing to say); ``why``: the reason, when not
        the IngressClass one (a Gateway's GatewayClass). True when the skip is
        news, to be said: the first time, or with another class or reason."""
        if served:
            self._skipped.pop(ref, None)
            return False
        entry = (class_name or "", why)
        if self._skipped.get(ref) == entry:
            return False
        self._skipped[ref] = entry
        return True

    def reason(self, ref: ObjectRef, served: str) -> str:
        named, why = self._skipped[ref]
        return why if why is not None else skipped_reason(named, served)

    def lines(self, served: str) -> list[str]:
        """``skipped: <kind> ns/name: <reason>`` for each, sorted."""
        return [f"skipped: {r}: {self.reason(r, served)}" for r in sorted(self._skipped)]

    def counts(self) -> Counter[str]:
        """Kind -> how many of its objects are skipped."""
        return Counter(r.kind for r in self._skipped)

    def __len__(self) -> int:
        return len(self._skipped)
