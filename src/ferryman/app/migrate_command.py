"""``ferryman migrate``: its flags, where the Ingresses are read from (a
directory of manifests or the cluster), and what is printed or written.

Exit code: 0 when every Ingress would be served (with warnings or not), 1 when
one would be rejected, 2 for a usage or read error (no Ingress could be read)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(
    sub: argparse._SubParsersAction[Any], help_class: type[argparse.HelpFormatter]
) -> None:
    m = sub.add_parser(
        "migrate",
        help="say what ferryman would do with Ingresses written for ingress-nginx",
        description="Per Ingress and per nginx.ingress.kubernetes.io annotation: served, "
        "served with a difference, refused, not applied yet or unknown; and whether "
        "ferryman would serve the Ingress. Exit code 0: all would be served; "
        "1: one would be rejected; 2: nothing could be read.",
        formatter_class=help_class,
    )
    where = m.add_mutually_exclusive_group(required=True)
    where.add_argument("--manifests", type=Path, metavar="DIR", help="YAML files to read")
    where.add_argument("--kubeconfig", metavar="FILE", help="read the cluster's Ingresses")
    m.add_argument("--namespace", metavar="NS", help="with --kubeconfig: only this namespace")
    m.add_argument("--output", choices=("text", "json"), default="text", help="report format")
    m.add_argument(
        "--to", choices=("gateway-api",), help="also write the equivalent objects of this API"
    )
    m.add_argument(
        "--output-dir", type=Path, metavar="DIR", help="with --to: where the objects are written"
    )


async def _from_cluster(kubeconfig: str, namespace: str | None) -> list[tuple[dict[str, Any], str]]:
    from ferryman.kube import client as kube
    from ferryman.kube.resources import Ingress

    c = kube.make_client(kubeconfig)
    try:
        found = []
        async for ing in kube.items(c, Ingress, namespace=namespace):
            found.append((ing.to_dict(), "cluster"))
        return found
    finally:
        await c.close()


def main(args: argparse.Namespace) -> int:
    # Imported here, not with the parser every command builds: the report's
    # parsers, Gateway API's converter and PyYAML are ~0.1 s that ``ferryman
    # run`` never uses (issue 31).
    import yaml

    from ferryman.app import migrate, migrate_gateway

    if args.to and args.output_dir is None:
        print("ferryman migrate: --to needs --output-dir", file=sys.stderr)
        return 2
    problems: list[str]
    if args.manifests is not None:
        if not args.manifests.is_dir():
            print(f"ferryman migrate: {args.manifests}: not a directory", file=sys.stderr)
            return 2
        objects, problems = migrate.read_manifests(args.manifests)
    else:
        try:
            objects = asyncio.run(_from_cluster(args.kubeconfig, args.namespace))
        except Exception as e:  # the API's or the kubeconfig's: said, exit 2
            print(f"ferryman migrate: cannot read the cluster's Ingresses: {e}", file=sys.stderr)
            return 2
        problems = []
    found = migrate.reports(objects)
    converted = None
    if args.to == "gateway-api":
        converted = migrate_gateway.convert([o for o, _ in objects])
        args.output_dir.mkdir(parents=True, exist_ok=True)
        for obj in converted.objects:
            meta = obj["metadata"]
            name = f"{obj['kind'].lower()}-{meta['namespace']}-{meta['name']}.yaml"
            (args.output_dir / name).write_text(yaml.safe_dump(obj, sort_keys=False))
    if args.output == "json":
        out = migrate.as_json(found, problems)
        if converted is not None:
            out["gatewayApi"] = {"notExpressed": converted.not_expressed}
        print(json.dumps(out, indent=2))
    else:
        print(migrate.as_text(found, problems))
        if converted is not None:
            print(f"Gateway API objects written to {args.output_dir}")
            for key, missing in converted.not_expressed.items():
                for m in missing:
                    print(f"  {key}: not expressed: {m}")
    return migrate.exit_code(found)
