"""``ferryman render``: the configuration a run would start with, written once
into a directory (nginx.conf and records.txt), with every problem found;
nothing is started."""

from __future__ import annotations

from pathlib import Path

from ferryman.app.wiring import BUILT_IN, Kinds, prepared, shape
from ferryman.dataplane.fallback import ensure_fallback_certificate
from ferryman.dataplane.main_file import MainFile, checked_paths
from ferryman.dataplane.output import OutputDirectory
from ferryman.dataplane.state_dir import Paths, remove_short_socket_dir
from ferryman.engine.controller import Controller
from ferryman.engine.queue_keys import QueueKey
from ferryman.engine.secrets import SecretStore
from ferryman.engine.settings import Settings
from ferryman.engine.sink import QueueingSink
from ferryman.engine.store import Store
from ferryman.engine.workqueue import WorkQueue
from ferryman.observability.metrics import Metrics
from ferryman.report import REJECTED, RecordingReporter
from ferryman.sources.manifests import ManifestsSource


async def render(
    settings: Settings,
    output: Path,
    notes: list[str] | None = None,
    kinds: Kinds = BUILT_IN,
) -> list[str]:
    """Render once into ``output``; returns every problem found (empty: all good)
    and adds to ``notes`` what was left out but is no problem (another class's).

    ``output`` gets nginx.conf (as it would run) and records.txt (what would be
    pushed to NGINX's memory, in the push format), the same for every server.
    """
    paths = prepared(checked_paths(output), None, "--output")
    try:
        return await _render(settings, paths, notes if notes is not None else [], kinds)
    finally:
        # Named in the output as a run would name its own; nothing listens there.
        remove_short_socket_dir(paths)


async def _render(settings: Settings, paths: Paths, notes: list[str], kinds: Kinds) -> list[str]:
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
    for ref, _, reason, message in reporter.events:
        if reason == REJECTED or reason.endswith("WithError"):
            problems.append(f"{ref}: {reason}: {message}")
    return problems
