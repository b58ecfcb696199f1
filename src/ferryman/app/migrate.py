"""``ferryman migrate``: what ferryman would do with Ingresses written for
ingress-nginx (issue 30), read before the class is switched.

Per Ingress and per ``nginx.ingress.kubernetes.io/*`` annotation it says how
ferryman serves it (``ingress_nginx.entry``, read, never copied: the table
grows), the ``nginx.org/*`` annotations it becomes (``ingress_nginx.translate``)
and the verdict ferryman's own ``parse_ingress`` gives the whole Ingress, so the
report cannot disagree with a run. Pure: objects in, a report out.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ferryman.kinds.ingress.parse import ingress_nginx
from ferryman.kinds.ingress.parse.ingress import LEGACY_CLASS_ANNOTATION, Ingress, parse_ingress
from ferryman.kinds.ingress.records.canary_host import paired
from ferryman.resources.meta import InvalidResource
from ferryman.sources.manifest_yaml import Refused, load_all

SERVED, WARNINGS, REJECTED = "served", "served with warnings", "rejected"
UNKNOWN = "unknown"
# ingress-nginx's default class name; ferryman serves it with --ingress-class nginx.
NGINX_CLASS = "nginx"


@dataclass
class AnnotationReport:
    key: str  # the whole annotation name
    value: str
    status: str  # an Entry status, or "unknown"
    note: str
    becomes: dict[str, str] = field(default_factory=dict)  # nginx.org annotations set
    # What translating it said (a value not applied, a rejection), for this one alone.
    said: list[str] = field(default_factory=list)


@dataclass
class IngressReport:
    namespace: str
    name: str
    source: str  # file (document n), or "cluster"
    verdict: str  # SERVED, WARNINGS or REJECTED
    class_name: str | None
    class_note: str
    annotations: list[AnnotationReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _class(obj: Mapping[str, Any]) -> tuple[str | None, str]:
    spec = obj.get("spec")
    name = spec.get("ingressClassName") if isinstance(spec, Mapping) else None
    where = "spec.ingressClassName"
    if name is None:
        meta = obj.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        if isinstance(annotations, Mapping):
            name = annotations.get(LEGACY_CLASS_ANNOTATION)
            where = LEGACY_CLASS_ANNOTATION
    if not isinstance(name, str):
        return None, (
            "no class: served only by the default IngressClass "
            "(or with ferryman run --ingress-class and no class required)"
        )
    if name == NGINX_CLASS:
        return name, (
            f"{where}: {name}: serve it with `ferryman run --ingress-class {NGINX_CLASS}` "
            "(no edit needed), or change the class to ferryman's"
        )
    return name, f"{where}: {name}: served when ferryman runs with --ingress-class {name}"


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata")
    raw = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _unknown(key: str) -> str:
    """A misspelt name's likely intended one (ingress-nginx ignored it silently)."""
    known = [*ingress_nginx.ENTRIES, *ingress_nginx.KNOWN_NOT_YET]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    hint = f": did you mean {ingress_nginx.PREFIX}{close[0]}?" if close else ""
    return f"not an ingress-nginx annotation (misspelt?){hint}"


def _per_annotation(annotations: Mapping[str, str], spec: Any) -> list[AnnotationReport]:
    out: list[AnnotationReport] = []
    for name in sorted(k for k in annotations if k.startswith(ingress_nginx.PREFIX)):
        key = name.removeprefix(ingress_nginx.PREFIX)
        e = ingress_nginx.entry(key)
        value = annotations[name]
        if e is None:
            out.append(AnnotationReport(name, value, UNKNOWN, _unknown(key)))
            continue
        becomes: dict[str, str] = {}
        said: list[str] = []
        if e.status in (ingress_nginx.SERVED, ingress_nginx.DIFFERS):
            # What this one annotation alone adds (plus the ones it reads with).
            alone = {n: v for n, v in annotations.items() if not n.startswith(ingress_nginx.PREFIX)}
            alone[name] = value
            for r in e.reads:
                if (ingress_nginx.PREFIX + r) in annotations:
                    alone[ingress_nginx.PREFIX + r] = annotations[ingress_nginx.PREFIX + r]
            result = ingress_nginx.translate(alone, spec)
            said = [m for m in (*result.warnings, *result.problems) if name in m]
            # What the annotations read with it become on their own is theirs
            # (limit-allowlist reads the limits it exempts from).
            base = dict(alone)
            base.pop(name)
            theirs = ingress_nginx.translate(base, spec).annotations if e.reads else {}
            becomes = {
                k: v
                for k, v in result.annotations.items()
                if alone.get(k) != v and theirs.get(k) != v
            }
            becomes.pop(name, None)
            for r in e.reads:
                becomes.pop(ingress_nginx.PREFIX + r, None)
        out.append(AnnotationReport(name, value, e.status, e.note, becomes, said))
    return out


def report(obj: Mapping[str, Any], source: str) -> IngressReport:
    """What ferryman would do with one Ingress."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    class_name, class_note = _class(obj)
    r = IngressReport(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        source=source,
        verdict=SERVED,
        class_name=class_name,
        class_note=class_note,
        annotations=_per_annotation(_annotations(obj), obj.get("spec")),
    )
    if not meta.get("namespace"):
        obj = {**obj, "metadata": {**meta, "namespace": "default"}}
    try:
        parsed = parse_ingress(obj)
    except InvalidResource as e:
        r.verdict, r.errors = REJECTED, list(e.errors)
        return r
    r.warnings = list(parsed.warnings)
    if r.warnings:
        r.verdict = WARNINGS
    return r


def read_manifests(directory: Path) -> tuple[list[tuple[dict[str, Any], str]], list[str]]:
    """Every Ingress in the directory's YAML files (as render reads them), with
    where it was found, and the files that could not be read."""
    found: list[tuple[dict[str, Any], str]] = []
    problems: list[str] = []
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".yaml", ".yml") or path.name.startswith("."):
            continue
        try:
            docs = load_all(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, Refused) as e:
            problems.append(f"{path}: not read: {e}")
            continue
        except Exception as e:  # yaml.YAMLError and its kin: reported, not raised
            problems.append(f"{path}: invalid YAML: {' '.join(str(e).split())}")
            continue
        for i, doc in enumerate(docs):
            items = (
                doc.get("items")
                if isinstance(doc, Mapping) and doc.get("kind") == "List"
                else [doc]
            )
            for obj in items if isinstance(items, list) else []:
                if isinstance(obj, dict) and obj.get("kind") == "Ingress":
                    found.append((obj, f"{path} (document {i + 1})"))
    return found, problems


def reports(objects: Iterable[tuple[Mapping[str, Any], str]]) -> list[IngressReport]:
    read = list(objects)
    found = [report(obj, source) for obj, source in read]
    _canaries(found, [obj for obj, _ in read])
    return found


def _canaries(found: list[IngressReport], objects: list[Mapping[str, Any]]) -> None:
    """A canary Ingress's verdict by its main among the Ingresses read (of its
    class): not served without one, as a run's Event says (records/canary_host.py)."""
    by_class: dict[str | None, list[Ingress]] = {}
    for r, obj in zip(found, objects, strict=True):
        if r.verdict != REJECTED and (ing := _parsed(obj)) is not None:
            by_class.setdefault(r.class_name, []).append(ing)
    left_out: dict[str, tuple[str, ...]] = {}
    joined: set[str] = set()
    for ingresses in by_class.values():
        pairing = paired(ingresses)
        left_out.update(pairing.left_out)
        joined |= {name for _, name, _ in pairing.joined.values()}
    for r in found:
        reasons = left_out.get(f"{r.namespace}/{r.name}")
        if not reasons:
            continue
        if f"{r.namespace}/{r.name}" in joined:
            r.warnings += [f"canary: {why}" for why in reasons]
            r.verdict = WARNINGS
        else:
            r.errors += [f"canary not served: {why}" for why in reasons]
            r.verdict = REJECTED


def _parsed(obj: Mapping[str, Any]) -> Ingress | None:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    if not meta.get("namespace"):
        obj = {**obj, "metadata": {**meta, "namespace": "default"}}
    try:
        return parse_ingress(obj)
    except InvalidResource:
        return None


def exit_code(found: list[IngressReport]) -> int:
    """0: every Ingress would be served (warnings included); 1: one is rejected."""
    return 1 if any(r.verdict == REJECTED for r in found) else 0


def as_json(found: list[IngressReport], problems: list[str]) -> dict[str, Any]:
    return {
        "ingresses": [asdict(r) for r in found],
        "problems": problems,
        "summary": {v: sum(r.verdict == v for r in found) for v in (SERVED, WARNINGS, REJECTED)},
    }


_SAYS = {
    ingress_nginx.SERVED: "served",
    ingress_nginx.DIFFERS: "served with a difference",
    ingress_nginx.REFUSED: "refused",
    ingress_nginx.NOT_YET: "not applied yet",
    UNKNOWN: "unknown",
}


def as_text(found: list[IngressReport], problems: list[str]) -> str:
    lines: list[str] = [f"problem: {p}" for p in problems]
    for r in found:
        lines.append(f"Ingress {r.namespace}/{r.name} ({r.source}): {r.verdict}")
        lines.append(f"  class: {r.class_note}")
        for a in r.annotations:
            line = f"  {a.key}: {_SAYS.get(a.status, a.status)}"
            if a.note and a.status != ingress_nginx.NOT_YET:  # its note says the status again
                line += f": {a.note}"
            lines.append(line)
            for k, v in a.becomes.items():
                lines.append(f"      becomes {k}: {v!r}")
            lines += [f"      but: {m}" for m in a.said]
        lines += [f"  warning: {w}" for w in r.warnings]
        lines += [f"  error: {e}" for e in r.errors]
    counts = as_json(found, [])["summary"]
    lines.append(
        f"{len(found)} Ingress(es): {counts[SERVED]} served, "
        f"{counts[WARNINGS]} served with warnings, {counts[REJECTED]} rejected"
    )
    return "\n".join(lines)
