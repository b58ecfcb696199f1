"""``ferryman render``: the configuration a run would start with, written once
into a directory (nginx.conf, records.txt and routes.txt), with every problem
and Warning found; nothing is started."""

from __future__ import annotations

from pathlib import Path

from ferryman.app.wiring import BUILT_IN, Kinds, prepared, shape
from ferryman.dataplane.fallback import ensure_fallback_certificate
from ferryman.dataplane.main_file import MainFile, checked_paths
from ferryman.dataplane.output import OutputDirectory
from ferryman.dataplane.state_dir import Paths, render_socket_dir
from ferryman.engine.controller import Controller
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.sink import QueueingSink
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.observability.metrics import Metrics
from ferryman.report import REJECTED, WARNING, RecordingReporter
from ferryman.resources.meta import ObjectRef
from ferryman.sources.manifests import ManifestsSource
from ferryman.wire import route_table
from ferryman.wire.records import RecordKey

ROUTES_FILE = "routes.txt"


async def render(
    settings: Settings,
    output: Path,
    notes: list[str] | None = None,
    kinds: Kinds = BUILT_IN,
    warnings: list[str] | None = None,
) -> list[str]:
    """Render once into ``output``; returns every problem found (empty: all good)
    and adds to ``notes`` what was left out but is no problem (another class's),
    to ``warnings`` every other Warning Event (``<object>: <reason>: <message>``).

    ``output`` gets nginx.conf (as it would run), records.txt (what would be
    pushed to NGINX's memory, in the push format), the same for every server,
    and routes.txt: those records read back as a table of routes
    (``wire/route_table.py``).
    """
    paths = prepared(
        checked_paths(output), None, "--output", short_dir=lambda: render_socket_dir(output)
    )
    return await _render(
        settings, paths, notes if notes is not None else [],
        warnings if warnings is not None else [], kinds,
    )  # fmt: skip


async def _render(
    settings: Settings, paths: Paths, notes: list[str], warnings: list[str], kinds: Kinds
) -> list[str]:
    assert settings.manifests is not None
    main = MainFile(settings, paths)
    problems: list[str] = []
    ensure_fallback_certificate(paths.fallback_certificate)
    store = Store(kinds.specs)
    queue: WorkQueue[QueueKey] = WorkQueue()
    reporter = RecordingReporter()
    dataplane = OutputDirectory(paths.state_dir)
    files = {
        main.name: main.main(None, public=True),
        "config-version.conf": main.config_version(str(paths.version_socket), 0),
    }
    await dataplane.apply(files)
    await dataplane.push({}, full=True)  # records.txt exists even when nothing is served
    controller = Controller(
        settings, store, queue, dataplane, SecretStore(), reporter, Metrics(), files,
        kinds, shape=shape(main, None), configmap=main.configmap(None),
    )  # fmt: skip
    source = ManifestsSource(
        settings.manifests,
        QueueingSink(store, queue),
        lambda w, m: problems.append(f"{w}: {m}"),
        kinds.specs,
    )
    source.load()
    await controller.drain()
    notes += controller.skipped()
    for ref, type_, reason, message in reporter.events:
        line = f"{ref}: {reason}: {message}"
        if reason == REJECTED or reason.endswith("WithError"):
            problems.append(line)
        elif type_ == WARNING and line not in warnings:
            warnings.append(line)  # a resource synced twice reports twice

    def holder(key: RecordKey) -> str | None:
        ref: ObjectRef | None = controller.holder(key)
        return f"{ref.kind}/{ref.namespace}/{ref.name}" if ref else None

    rows = route_table.rows(dataplane.records, holder)
    (paths.state_dir / ROUTES_FILE).write_text(route_table.table(rows), encoding="utf-8")
    return problems
