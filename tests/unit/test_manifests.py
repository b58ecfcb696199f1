"""ferryman.sources.manifests: reading a manifests directory."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ferryman.kinds import REGISTRY
from ferryman.observability import logs
from ferryman.resources.meta import ObjectRef
from ferryman.sources import manifest_kinds, manifest_yaml, manifests
from ferryman.sources.manifests import ManifestsSource, parse_file
from testkit.strategies import yaml_values

KINDS = manifest_kinds(REGISTRY)

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  ports: [{name: http, port: 80}]
"""

INGRESS = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
"""


class Problems(list[tuple[str, str]]):
    def __call__(self, where: str, message: str) -> None:
        self.append((where, message))


def parse(path: Path, text: str) -> tuple[dict[ObjectRef, Mapping[str, Any]] | None, Problems]:
    path.write_text(text, encoding="utf-8")
    problems = Problems()
    return parse_file(path, problems, KINDS), problems


def test_multi_document_file(tmp_path: Path) -> None:
    objs, problems = parse(tmp_path / "app.yaml", f"---\n{SERVICE}---\n---\n{INGRESS}")
    assert objs is not None
    assert set(objs) == {
        ObjectRef("Service", "shop", "web"),
        ObjectRef("Ingress", "default", "web"),
    }
    assert problems == []


def test_json_file(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"ports": [{"port": 8080}]},
    }
    objs, problems = parse(tmp_path / "api.yaml", json.dumps(doc, indent=2))
    assert objs == {ObjectRef("Service", "shop", "api"): doc}
    assert problems == []


def test_kind_list(tmp_path: Path) -> None:
    items = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}", "namespace": "n"}}
        for i in range(3)
    ]
    objs, _ = parse(
        tmp_path / "list.yaml", json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    assert objs is not None
    assert sorted(r.name for r in objs) == ["s0", "s1", "s2"]


def test_namespaced_objects_default_to_the_default_namespace(tmp_path: Path) -> None:
    text = (
        INGRESS
        + "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\n"
        + "metadata: {name: ferryman}\nspec: {controller: ferryman.io/ingress-controller}\n"
    )
    objs, _ = parse(tmp_path / "a.yaml", text)
    assert objs is not None
    ing = objs[ObjectRef("Ingress", "default", "web")]
    assert ing["metadata"]["namespace"] == "default"
    # Cluster-scoped objects get no namespace.
    cls = objs[ObjectRef("IngressClass", "", "ferryman")]
    assert "namespace" not in cls["metadata"]


def test_unknown_kinds_are_ignored_silently(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: cfg}\n---\n" + SERVICE
    )
    objs, problems = parse(tmp_path / "a.yaml", text)
    assert objs is not None
    assert list(objs) == [ObjectRef("Service", "shop", "web")]
    assert problems == []


def test_yaml_syntax_error_is_reported_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    objs, problems = parse(path, SERVICE + "  bad: [unclosed\n")
    assert objs is None
    ((where, message),) = problems
    assert where == str(path)
    assert "invalid YAML" in message
    assert "line" in message
    assert "\n" not in message


def test_duplicate_objects_in_one_file_are_reported_and_the_first_is_used(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    objs, problems = parse(path, SERVICE + "---\n" + SERVICE.replace("port: 80", "port: 81"))
    assert objs is not None
    (svc,) = objs.values()
    assert svc["spec"]["ports"][0]["port"] == 80
    ((where, message),) = problems
    assert str(path) in where
    assert "document 2" in where
    assert "Service shop/web" in message
    assert "twice" in message


def test_same_name_in_different_namespaces_is_not_a_duplicate(tmp_path: Path) -> None:
    objs, problems = parse(tmp_path / "a.yaml", SERVICE + "---\n" + SERVICE.replace("shop", "b"))
    assert objs is not None
    assert len(objs) == 2
    assert problems == []


def test_malformed_documents_are_reported(tmp_path: Path) -> None:
    text = "- just\n- a list\n---\nkind: Service\nmetadata: {name: x}\n---\n" + (
        "apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n"
    )
    objs, problems = parse(tmp_path / "bad.yaml", text)
    assert objs == {}
    messages = [m for _, m in problems]
    assert len(messages) == 3
    assert "mapping" in messages[0]
    assert "apiVersion and kind" in messages[1]
    assert "metadata.name" in messages[2]


def test_timestamps_stay_text_as_kubectl_keeps_them(tmp_path: Path) -> None:
    """PyYAML resolves these as timestamps, then cannot build them (ValueError,
    AttributeError: not YAMLError, so they escaped the reader)."""
    text = SERVICE.replace(
        "  namespace: shop\n",
        "  namespace: shop\n  creationTimestamp: 1921-01-01 00:00:00-05:48:52\n"
        "  annotations: {released: 2024-02-30, built: 2024-01-02T03:04:05Z}\n",
    )
    objs, problems = parse(tmp_path / "a.yaml", text)
    assert problems == []
    assert objs is not None
    (svc,) = objs.values()
    assert svc["metadata"]["creationTimestamp"] == "1921-01-01 00:00:00-05:48:52"
    assert svc["metadata"]["annotations"] == {
        "released": "2024-02-30",
        "built": "2024-01-02T03:04:05Z",
    }


@pytest.mark.parametrize(
    "value",
    [
        "!!int x",  # ValueError from int()
        "!!float x",  # ValueError from float()
        "!!bool x",  # KeyError
        "!!int 1.5",
        "!!int",  # IndexError: PyYAML reads the first character of an empty value
        "!!int _",
        "!!int +",
        "1" * 5000,  # past Python's 4,300 digits for int()
        "0x" + "f" * 5000,  # read, but str() of it raises
        "9223372036854775808",  # past int64
        "[1, {b: !!bool maybe}]",
    ],
)
def test_values_pyyaml_cannot_build_are_reported_with_the_line(tmp_path: Path, value: str) -> None:
    path = tmp_path / "a.yaml"
    objs, problems = parse(path, SERVICE + f"  extra: {value}\n")
    assert objs is None
    ((where, message),) = problems
    assert where == str(path)
    assert message.startswith("invalid YAML: ")
    assert "line 8" in message


def test_int64_is_read(tmp_path: Path) -> None:
    text = SERVICE + "  big: 9223372036854775807\n  small: -9223372036854775808\n"
    path = tmp_path / "a.yaml"
    objs, problems = parse(path, text)
    assert problems == []
    assert objs is not None
    (svc,) = objs.values()
    assert (svc["spec"]["big"], svc["spec"]["small"]) == (2**63 - 1, -(2**63))


def test_empty_file(tmp_path: Path) -> None:
    assert parse(tmp_path / "empty.yaml", "") == ({}, [])


def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"kind: \xff\n")
    problems = Problems()
    assert parse_file(path, problems, KINDS) is None
    assert problems[0][0] == str(path)


class RecordingSink:
    def __init__(self) -> None:
        self.objects: dict[ObjectRef, Mapping[str, Any]] = {}

    def upsert(self, obj: Mapping[str, Any]) -> None:
        md = obj["metadata"]
        self.objects[ObjectRef(obj["kind"], md.get("namespace", ""), md["name"])] = obj

    def delete(self, ref: ObjectRef) -> None:
        del self.objects[ref]


def test_directory_load_first_file_wins_and_only_yaml_files_count(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SERVICE)
    (tmp_path / "b.yml").write_text(SERVICE.replace("port: 80", "port: 81") + "---\n" + INGRESS)
    (tmp_path / "c.txt").write_text(SERVICE.replace("web", "ignored"))
    (tmp_path / ".hidden.yaml").write_text(SERVICE.replace("web", "hidden"))
    sink, problems = RecordingSink(), Problems()
    ManifestsSource(tmp_path, sink, problems, REGISTRY).load()
    assert set(sink.objects) == {
        ObjectRef("Service", "shop", "web"),
        ObjectRef("Ingress", "default", "web"),
    }
    assert sink.objects[ObjectRef("Service", "shop", "web")]["spec"]["ports"][0]["port"] == 80
    ((where, message),) = problems
    assert where == str(tmp_path / "b.yml")
    assert "already defined" in message


def test_the_first_load_parses_in_a_thread_and_delivers_on_the_loop(tmp_path: Path) -> None:
    """``run`` loads while NGINX starts: the event loop must go on meanwhile,
    and the sink (the store, the queue) is only ever called on its thread."""
    (tmp_path / "a.yaml").write_text(SERVICE)
    (tmp_path / "b.yaml").write_text(SERVICE + "---\n" + INGRESS)
    (tmp_path / "c.yaml").write_text("a: [")
    threads: set[int] = set()

    class ThreadRecordingSink(RecordingSink):
        def upsert(self, obj: Mapping[str, Any]) -> None:
            threads.add(threading.get_ident())
            super().upsert(obj)

    async def main() -> tuple[int, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        before = ticks
        await source.load_in_thread()
        ticker.cancel()
        return before, ticks

    sink, problems = ThreadRecordingSink(), Problems()
    source = ManifestsSource(tmp_path, sink, problems, REGISTRY)
    before, after = asyncio.run(main())
    assert after > before  # the loop ran while the files were parsed
    assert threads == {threading.get_ident()}
    assert set(sink.objects) == {
        ObjectRef("Service", "shop", "web"),
        ObjectRef("Ingress", "default", "web"),
    }
    # b.yaml defines a.yaml's Service again; c.yaml is not YAML.
    assert sorted(w for w, _ in problems) == [str(tmp_path / "b.yaml"), str(tmp_path / "c.yaml")]


def _load_in_thread(directory: Path) -> tuple[RecordingSink, Problems]:
    sink, problems = RecordingSink(), Problems()
    asyncio.run(ManifestsSource(directory, sink, problems, REGISTRY).load_in_thread())
    return sink, problems


def _directory_of_many(directory: Path) -> None:
    for n in range(7):
        (directory / f"f{n}.yaml").write_text(SERVICE.replace("web", f"web{n}") + "---\n" + INGRESS)
    (directory / "g.yaml").write_text("a: [")  # not YAML
    (directory / "h.yaml").write_text("kind: Service\n")  # no apiVersion


def test_a_large_first_load_is_parsed_by_two_processes_with_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _directory_of_many(tmp_path)
    plain_sink, plain_problems = RecordingSink(), Problems()
    ManifestsSource(tmp_path, plain_sink, plain_problems, REGISTRY).load()
    monkeypatch.setattr(manifests, "SPLIT_MIN_FILES", 4)
    parents: list[int] = []
    fork = manifests.forked.fork

    def counted(work: Any) -> Any:
        parents.append(os.getpid())
        return fork(work)

    monkeypatch.setattr(manifests.forked, "fork", counted)
    sink, problems = _load_in_thread(tmp_path)
    assert parents == [os.getpid()]
    assert sink.objects == plain_sink.objects
    assert len(sink.objects) == 8  # seven Services, one Ingress (defined seven times)
    assert sorted(problems) == sorted(plain_problems)
    # One file of each half (every other file, by name) cannot be read.
    assert {w.split(" ")[0] for w, _ in problems} >= {
        str(tmp_path / "g.yaml"),
        str(tmp_path / "h.yaml"),
    }


def test_when_the_second_process_fails_its_files_are_parsed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _directory_of_many(tmp_path)
    plain_sink, plain_problems = RecordingSink(), Problems()
    ManifestsSource(tmp_path, plain_sink, plain_problems, REGISTRY).load()
    monkeypatch.setattr(manifests, "SPLIT_MIN_FILES", 4)

    def fails(*_: object) -> bytes:
        raise RuntimeError("the child fails")

    monkeypatch.setattr(manifests, "_encode", fails)
    with caplog.at_level(logging.WARNING, logger="ferryman.manifests"):
        sink, problems = _load_in_thread(tmp_path)
    assert sink.objects == plain_sink.objects
    assert sorted(problems) == sorted(plain_problems)
    assert "parsing in a second process failed" in caplog.text


def test_a_second_process_that_hangs_is_ended_and_its_files_parsed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a deadline, a stuck child held ferryman's first load, and so its
    readiness, for ever."""
    _directory_of_many(tmp_path)
    plain_sink, plain_problems = RecordingSink(), Problems()
    ManifestsSource(tmp_path, plain_sink, plain_problems, REGISTRY).load()
    monkeypatch.setattr(manifests, "SPLIT_MIN_FILES", 4)
    monkeypatch.setattr(manifests, "CHILD_WAIT_MIN", 0.5)

    def hangs(*_: object) -> bytes:
        time.sleep(3600)
        return b""

    monkeypatch.setattr(manifests, "_encode", hangs)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="ferryman.manifests"):
        sink, problems = _load_in_thread(tmp_path)
    assert time.monotonic() - started < 10
    assert sink.objects == plain_sink.objects
    assert sorted(problems) == sorted(plain_problems)
    assert "the second parsing process is late" in caplog.text


# ---- hostile files: size, depth and alias limits ---------------------------------------


def nested(depth: int) -> str:
    """A Service whose spec holds a list nested ``depth`` levels in all."""
    inner = "[" * (depth - 2) + "1" + "]" * (depth - 2)
    return SERVICE + f"  extra: {inner}\n"


def alias_bomb(levels: int) -> str:
    """Each level lists the previous one nine times: 9**levels nodes in ~70 bytes a level."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return SERVICE + "".join(f"  {line}\n" for line in lines)


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    objs, problems = parse(tmp_path / "deep.yaml", nested(manifest_yaml.MAX_DEPTH))
    assert problems == []
    assert objs is not None and len(objs) == 1


def test_nesting_beyond_the_limit_is_reported_and_nothing_is_built(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    objs, problems = parse(path, nested(manifest_yaml.MAX_DEPTH + 1))
    assert objs is None
    assert problems == [
        (
            str(path),
            f"not read: collections nest deeper than {manifest_yaml.MAX_DEPTH} levels (line 8)",
        )
    ]


def test_a_deeply_nested_file_does_not_crash_ferryman(tmp_path: Path) -> None:
    """40,000 ``[`` overflowed libyaml's recursive composer: a segfault, at every start.

    ``ferryman render`` runs in its own process, so a crash fails this test
    instead of taking pytest down with it.
    """
    manifests_dir = tmp_path / "manifests"
    manifests_dir.mkdir()
    (manifests_dir / "web.yaml").write_text(SERVICE)
    (manifests_dir / "deep.yaml").write_text("[" * 40_000)
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "ferryman"),
            "render",
            "--manifests",
            str(manifests_dir),
            "--output",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"{manifests_dir / 'deep.yaml'}: not read: collections nest deeper" in result.stderr


def test_an_alias_bomb_is_reported_and_nothing_is_built(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    objs, problems = parse(path, alias_bomb(8))  # 43 million nodes in 660 bytes
    assert objs is None
    ((where, message),) = problems
    assert where == str(path)
    limit = manifest_yaml.MAX_ALIAS_NODES
    assert message.startswith(f"not read: aliases stand for more than {limit}")


@pytest.mark.parametrize(
    "loop", ["  extra: &a [1, *a]\n", "  extra: &a {b: {c: *a}}\n", "  extra: &a [[[*a]]]\n"]
)
def test_an_alias_inside_what_it_names_is_refused(tmp_path: Path, loop: str) -> None:
    """It built an object holding itself: comparing two versions of it (every edit
    of the file) raised RecursionError out of the manifests source."""
    path = tmp_path / "web.yaml"
    path.write_text(SERVICE + loop)
    sink, problems = RecordingSink(), Problems()
    source = ManifestsSource(tmp_path, sink, problems, REGISTRY)
    source.load()
    path.write_text(SERVICE + loop + "# edited\n")  # the same objects: compared in full
    source._reload({path})
    assert sink.objects == {}
    assert [m for _, m in problems] == [
        "not read: alias *a is inside the collection it names (line 8)"
    ] * 2


def test_ordinary_aliases_are_read(tmp_path: Path) -> None:
    text = (
        "apiVersion: v1\nkind: Service\n"
        "metadata: {name: a, namespace: shop, labels: &labels {app: web, tier: front}}\n"
        "spec:\n  selector: *labels\n  ports: [{port: 80}]\n"
    )
    objs, problems = parse(tmp_path / "a.yaml", text)
    assert problems == []
    assert objs is not None
    (svc,) = objs.values()
    assert svc["spec"]["selector"] == {"app": "web", "tier": "front"}


def test_aliases_may_expand_as_far_as_the_file_is_long(tmp_path: Path) -> None:
    """Past MAX_ALIAS_NODES, aliases may stand for as many nodes as the file writes."""
    block = "  shared: &s [" + ",".join(str(i) for i in range(99)) + "]\n"
    uses = "".join(f"  u{i}: *s\n" for i in range(1_100))  # 110,000 nodes by alias
    padding = "  pad: [" + ",".join("0" * 1 for _ in range(120_000)) + "]\n"
    objs, problems = parse(tmp_path / "a.yaml", SERVICE + padding + block + uses)
    assert problems == []
    assert objs is not None


def depth(text: str) -> int:
    """How deep the loader would get: up to a syntax error, if there is one."""
    deepest = level = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                level += 1
                deepest = max(deepest, level)
            elif isinstance(event, yaml.CollectionEndEvent):
                level -= 1
    except yaml.YAMLError:
        pass
    return deepest


@pytest.mark.parametrize(
    "text",
    ["- - - - x\n", "? - a\n: b\n", "[[[]]]", "{a: {b: {}}}", "a:\n  b:\n    - c\n", "!!map {}"],
)
def test_the_nesting_bound_holds_for_compact_forms(text: str) -> None:
    assert depth(text) <= manifest_yaml.nesting_bound(text)


@settings(max_examples=150, deadline=None)
@given(value=yaml_values, flow=st.booleans() | st.none())
def test_the_nesting_bound_holds(value: object, flow: bool | None) -> None:
    """Files under the bound skip the event walk: the bound must never be low."""
    text = yaml.safe_dump(value, default_flow_style=flow)
    assert depth(text) <= manifest_yaml.nesting_bound(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="[]{}-:?!&*|>#,'\" \nab", max_size=60))
def test_the_nesting_bound_holds_for_any_text(text: str) -> None:
    assert depth(text) <= manifest_yaml.nesting_bound(text)


def test_a_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(SERVICE + "#" * manifests.MAX_FILE_BYTES)
    problems = Problems()
    assert parse_file(path, problems, KINDS) is None
    assert problems == [
        (str(path), f"file is larger than {manifests.MAX_FILE_BYTES} bytes: not read")
    ]


def test_a_hostile_edit_keeps_the_previous_objects(tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(SERVICE)
    sink, problems = RecordingSink(), Problems()
    source = ManifestsSource(tmp_path, sink, problems, REGISTRY)
    source.load()
    before = dict(sink.objects)
    for hostile in (nested(manifest_yaml.MAX_DEPTH + 1), alias_bomb(8)):
        path.write_text(hostile.replace("port: 80", "port: 81"))
        source._reload({path})
        assert sink.objects == before
    assert [m.split(":")[0] for _, m in problems] == ["not read", "not read"]


# ---- log noise -------------------------------------------------------------------------


@pytest.fixture
def root_logger() -> Iterator[None]:
    """``logs.setup`` configures the root logger: put it back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_logger")
def test_watchfiles_own_lines_stay_out_of_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """watchfiles logs "N changes detected" at INFO for every batch of edits."""
    logs.setup("text", "info")
    sink = RecordingSink()
    source = ManifestsSource(tmp_path, sink, Problems(), REGISTRY)
    source.load()

    async def edit_and_watch() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(source.run(stop))
        for port in range(81, 84):
            await asyncio.sleep(0.3)  # let the watch start, then one batch per edit
            (tmp_path / "web.yaml").write_text(SERVICE.replace("port: 80", f"port: {port}"))
        # Until the last edit is read: written again each second, for a watch that
        # started after the edits (a loaded machine) sees only later writes.
        for i in range(600):
            await asyncio.sleep(0.1)
            refs = list(sink.objects.values())
            if refs and refs[0]["spec"]["ports"][0]["port"] == 83:
                break
            if i % 10 == 9:
                (tmp_path / "web.yaml").write_text(SERVICE.replace("port: 80", "port: 83"))
        stop.set()
        await asyncio.wait_for(task, 10)

    asyncio.run(edit_and_watch())
    assert sink.objects[ObjectRef("Service", "shop", "web")]["spec"]["ports"][0]["port"] == 83
    err = capsys.readouterr().err
    assert "logger=watchfiles" not in err


class _PyYAMLConstructor(manifest_yaml.Loader):
    """The loader as it was: PyYAML's own resolver and constructor throughout."""

    resolve = yaml.SafeLoader.resolve
    construct_document = yaml.SafeLoader.construct_document


def _read(text: str, loader: type[Any]) -> str:
    """What a loader makes of ``text``, as repr (a .nan is not == to itself), or its error."""
    try:
        return repr(list(yaml.load_all(text, Loader=loader)))
    except yaml.YAMLError as e:
        return f"{type(e).__name__}: {e}"


@settings(max_examples=200, deadline=None)
@given(value=yaml_values, flow=st.booleans() | st.none())
def test_documents_read_as_pyyaml_builds_them(value: object, flow: bool | None) -> None:
    text = yaml.safe_dump_all([value, {"k": value}], default_flow_style=flow)
    assert _read(text, manifest_yaml.Loader) == _read(text, _PyYAMLConstructor)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x {b: [1, 2]}\nc: *x\nd: {<<: *x, e: 3}\n",  # aliases and a merge key
        "a: &x [1, 2]\nb: [*x, *x]\n",
        "? [a, b]\n: c\n",  # a collection as a key: PyYAML refuses it
        "= : v\nb: !!str 1\nc: !!float 1\nd: !!binary aGk=\ne: !!set {a, b}\n",
        "a: yes\nb: ~\nc: 0x1F\nd: 1_000\ne: .inf\nf: 2024-01-02\ng: ''\nh: -\n",
        "!!omap [a: 1]\n",
        "a: !custom 1\n",
        # A !!set scalar: as a key it once raised TypeError (unhashable) out of the
        # parser; as a value it read as an empty set where PyYAML finds no mapping.
        "!!set apiVersion: v1\nkind: Service\n",
        "a: !!set b\n",
        "a: {b: !!binary aGk=, c: !!timestamp 2001-12-14}\n",
        # Two scalars it refuses: the one PyYAML constructs first is reported.
        "- - 9223372036854775808\n- 9223372036854775808\n",
    ],
)
def test_the_unusual_reads_as_pyyaml_builds_it(text: str) -> None:
    assert _read(text, manifest_yaml.Loader) == _read(text, _PyYAMLConstructor)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="[]{}-:?!&*<=|>#,'\" \nab01.~", max_size=60))
def test_any_text_reads_as_pyyaml_builds_it(text: str) -> None:
    assert _read(text, manifest_yaml.Loader) == _read(text, _PyYAMLConstructor)


def test_manifests_build_with_a_fraction_of_pyyaml_s_calls() -> None:
    """PyYAML's constructor was half of the start-up at 10,000 Ingresses (issue
    17): per node a generator, a recursion guard, a cache entry. Maps, lists
    and strings are built directly. Counted in Python calls, which is what the
    time went to and which, unlike CPU time, a busy machine does not change
    (bench.run's startup scenario has the time)."""
    docs = [yaml.safe_load(SERVICE), yaml.safe_load(INGRESS)] * 20
    text = yaml.safe_dump_all(docs)

    def calls(loader: type[Any]) -> int:
        count = 0

        def profile(frame: Any, event: str, arg: Any) -> None:
            nonlocal count
            count += event == "call"

        sys.setprofile(profile)
        try:
            built = list(yaml.load_all(text, Loader=loader))
        finally:
            sys.setprofile(None)
        assert built == docs
        return count

    ours, pyyaml = calls(manifest_yaml.Loader), calls(_PyYAMLConstructor)
    assert ours < 0.7 * pyyaml, (ours, pyyaml)  # 0.57 when written


GATEWAY_API = """\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ferryman, namespace: ignored}
spec: {controllerName: ferryman.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec: {gatewayClassName: ferryman, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop}
spec: {parentRefs: [{name: gw, namespace: default}]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-shop}
spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}],
       to: [{group: "", kind: Service}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: a}}
"""


def test_gateway_api_kinds_and_namespaces_are_read(tmp_path: Path) -> None:
    """Gateway API's kinds, and Namespaces (their labels: allowedRoutes selectors);
    the cluster-scoped ones without a namespace, even when the file gives one
    (kubectl ignores it), so the translator finds them under ("", name)."""
    objs, problems = parse(tmp_path / "gw.yaml", GATEWAY_API)
    assert objs is not None and problems == []
    assert set(objs) == {
        ObjectRef("GatewayClass", "", "ferryman"),
        ObjectRef("Gateway", "default", "gw"),
        ObjectRef("HTTPRoute", "shop", "web"),
        ObjectRef("ReferenceGrant", "default", "from-shop"),
        ObjectRef("Namespace", "", "shop"),
    }
    assert "namespace" not in objs[ObjectRef("GatewayClass", "", "ferryman")]["metadata"]
    assert objs[ObjectRef("Namespace", "", "shop")]["metadata"]["labels"] == {"team": "a"}
