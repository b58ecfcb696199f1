"""``ferryman migrate --manifests DIR``: what ferryman would make of an
ingress-nginx cluster's Ingresses, before any traffic moves.

Per Ingress: each ``nginx.ingress.kubernetes.io/*`` annotation's verdict (served,
differs, refused, not applied yet, unknown) with the ``nginx.org/*`` annotation
it becomes, then the Ingress's own verdict from ferryman's parser itself (served,
served with warnings, rejected and why), and the class to serve it by. Exit
code 1 when any Ingress would be rejected, so a pipeline can gate on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ferryman.kinds.ingress.parse import ingress_nginx
from ferryman.kinds.ingress.parse.ingress import parse_ingress
from ferryman.kinds.ingress.parse.ingressclass import raw_class_name
from ferryman.resources.meta import InvalidResource
from ferryman.sources.manifest_yaml import Refused, load_all

VERDICTS = {
    ingress_nginx.SERVED: "served",
    ingress_nginx.DIFFERS: "served, differs",
    ingress_nginx.REFUSED: "refused",
    ingress_nginx.NOT_YET: "not applied yet",
}


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    m = sub.add_parser(
        "migrate", help="report what ferryman makes of ingress-nginx's Ingresses, and exit"
    )
    m.add_argument("--manifests", type=Path, required=True, metavar="DIR", help="the YAML files")
    m.add_argument("--output", choices=("text", "json"), default="text", help="the report's form")


def _ingresses(directory: Path) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    for path in sorted(directory.glob("*.y*ml")):
        try:
            docs = load_all(path.read_text())
        except (Refused, yaml.YAMLError, UnicodeDecodeError) as e:
            print(f"{path}: not read: {e}", file=sys.stderr)
            continue
        for doc in docs:
            items = doc.get("items") if isinstance(doc, Mapping) else None
            for obj in items if isinstance(items, list) else [doc]:
                if isinstance(obj, Mapping) and obj.get("kind") == "Ingress":
                    yield path, obj


def report(obj: Mapping[str, Any]) -> dict[str, Any]:
    """One Ingress's report (the JSON form's entry)."""
    md = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(md, Mapping)
    raw = md.get("annotations")
    annotations = {
        k: v for k, v in (raw if isinstance(raw, Mapping) else {}).items() if isinstance(v, str)
    }
    namespace = str(md.get("namespace") or "default")
    translated = ingress_nginx.translate(annotations, obj.get("spec"), namespace)
    rows = []
    for name in sorted(k for k in annotations if k.startswith(ingress_nginx.PREFIX)):
        key = name.removeprefix(ingress_nginx.PREFIX)
        e = ingress_nginx.entry(key)
        said = [w for w in (*translated.warnings, *translated.problems) if name in w]
        rows.append(
            {
                "annotation": name,
                "verdict": VERDICTS[e.status] if e else "unknown (misspelt?)",
                "how": e.note if e else "",
                "said": said,
            }
        )
    becomes = {
        k: v
        for k, v in translated.annotations.items()
        if k.startswith("nginx.org/") and annotations.get(k) != v
    }
    out: dict[str, Any] = {
        "ingress": f"{namespace}/{md.get('name', '')}",
        "class": raw_class_name(obj) or "",
        "annotations": rows,
        "becomes": becomes,
    }
    try:
        ing = parse_ingress(obj)
    except InvalidResource as e:
        out["verdict"], out["why"] = "rejected", e.errors
        return out
    out["verdict"] = "served with warnings" if ing.warnings else "served"
    out["why"] = list(ing.warnings)
    return out


def _text(r: Mapping[str, Any]) -> str:
    cls = r["class"] or "(none: the default class)"
    lines = [f"Ingress {r['ingress']} (class {cls}): {r['verdict']}"]
    for a in r["annotations"]:
        how = f" ({a['how']})" if a["how"] else ""
        lines.append(f"  {a['annotation']}: {a['verdict']}{how}")
        lines += [f"    {s}" for s in a["said"]]
    for k, v in sorted(r["becomes"].items()):
        lines.append(f"  -> {k}: {v}")
    if r["verdict"] == "rejected":
        said = {s for a in r["annotations"] for s in a["said"]}
        lines += [f"  rejected: {w}" for w in r["why"] if w not in said]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    if not args.manifests.is_dir():
        print(f"ferryman migrate: {args.manifests} is not a directory", file=sys.stderr)
        return 2
    reports = [report(obj) for _, obj in _ingresses(args.manifests)]
    if args.output == "json":
        print(json.dumps(reports, indent=2))
    else:
        classes = sorted({r["class"] for r in reports if r["class"]})
        for r in reports:
            print(_text(r))
        if classes:
            flags = ", ".join(f"--ingress-class {c}" for c in classes)
            print(f"classes named: {', '.join(classes)} (serve one with {flags})")
    return 1 if any(r["verdict"] == "rejected" for r in reports) else 0
