"""The readiness gate webhook against a real kube-apiserver: the API server calls
ferryman at each pod's creation, and the created pod shows the gate (or not).

No kubelet: pods stay Pending, which is all injection needs. Each test registers
deploy/webhook.yaml's configuration with its URL pointed at ferryman on this
host, and its namespaceSelector narrowed to the test's namespace, so other
tests' opted-in namespaces never call it.
"""

# The cluster_objects and pods_namespace fixtures are testkit.webhook's,
# imported by name (pytest binds imported fixtures as the module's own).
# ruff: noqa: F811

from __future__ import annotations

import base64
import copy
import ssl
from pathlib import Path

import httpx
from lightkube import ApiError, Client
from lightkube.resources.admissionregistration_v1 import MutatingWebhookConfiguration
from lightkube.resources.core_v1 import Secret
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from ferryman.resources.readiness_gate import INJECT_LABEL
from ferryman.webhook.certificate import generate
from testkit.apiserver import APIServer, apply, wait_until
from testkit.harness import free_port, ingress, path, rule
from testkit.webhook import (  # noqa: F401 (fixtures)
    GATE,
    _configuration,
    _ferryman,
    _gated_once_trusted,
    _opt_in,
    _pod,
    _service,
    cluster_objects,
    pods_namespace,
)

OTHER = "example.com/warmed-up"


def _ca_bundles(kube: Client, name: str) -> list[str | None]:
    config = kube.get(MutatingWebhookConfiguration, name)
    return [w.clientConfig.caBundle for w in config.webhooks or []]


def _secret_ca(kube: Client, namespace: str, name: str) -> str:
    secret = kube.get(Secret, name, namespace=namespace)
    assert secret.data is not None
    return str(secret.data["ca.crt"])


def test_gates_go_to_pods_of_served_services_in_opted_in_namespaces(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,
    cluster_objects: list[str],
) -> None:  # fmt: skip
    ns = pods_namespace
    config, port = f"gates-{ns}", free_port()
    apply(
        kube,
        _service("web", ns, {"app": "web"}),
        _service("unrouted", ns, {"app": "db"}),
        _service("foreign", ns, {"app": "foreign"}),
        ingress("web", [rule("web.test", path("/", "web"))], namespace=ns),
        ingress("foreign", [rule("foreign.test", path("/", "foreign"))], namespace=ns,
                class_name="someone-else"),
    )  # fmt: skip
    cluster_objects.append(config)
    doc = _configuration(config, ns, port)
    doc["webhooks"][0]["failurePolicy"] = "Ignore"  # what it spares is checked at the end
    apply(kube, doc)
    f = _ferryman(tmp_path, apiserver, ns, port, config)
    f.start()
    try:
        # ferryman made the certificate, stored it, and had the configuration trust it.
        wait_until(lambda: _ca_bundles(kube, config) == [_secret_ca(kube, ns, "webhook-cert")],
                   60, "caBundle")  # fmt: skip

        _gated_once_trusted(kube, ns, {"app": "web", "pod-template-hash": "1"})
        assert _pod(kube, ns, {"app": "db"}) == []  # no served Ingress routes to it
        assert _pod(kube, ns, {"app": "foreign"}) == []  # another class's Ingress does
        assert _pod(kube, ns, {}) == []
        # An existing gate is left alone; others are kept, ours appended.
        assert _pod(kube, ns, {"app": "web"}, (GATE,)) == [GATE]
        assert _pod(kube, ns, {"app": "web"}, (OTHER,)) == [OTHER, GATE]
        assert _pod(kube, ns, {"app": "web"}, (OTHER, GATE)) == [OTHER, GATE]
        # ferryman's own pods carry the opt-out label.
        assert _pod(kube, ns, {"app": "web", INJECT_LABEL: "disabled"}) == []

        # An Ingress routing to db: its pods get the gate once ferryman serves it.
        apply(kube, ingress("db", [rule("db.test", path("/", "unrouted"))], namespace=ns))
        wait_until(lambda: f.get("db.test", "/").status == 503, 60, "db.test served")
        assert _pod(kube, ns, {"app": "db"}) == [GATE]

        # Whoever else calls: no AdmissionReview is HTTP 400, more than the API
        # server would send (3 MiB) 413; both counted, nothing else changes.
        ca = base64.b64decode(_secret_ca(kube, ns, "webhook-cert")).decode()
        url = f"https://127.0.0.1:{port}/readiness-gates"
        with httpx.Client(verify=ssl.create_default_context(cadata=ca)) as client:
            assert client.post(url, content=b"{not json").status_code == 400
            # Deeper than json's decoder recurses: 400, not a 500 with a traceback.
            nested = client.post(url, content=b"[" * 100_000)
            assert (nested.status_code, nested.json()) == (400, {"error": "nested too deeply"})
            assert client.post(url, json={"request": {"object": {}}}).status_code == 400
            assert client.post(url, content=b" " * (3 * 1024 * 1024 + 1)).status_code == 413
        # On IPv6 too (the API server calls the pod's address; its name is not in
        # the certificate, so unverified here).
        with httpx.Client(verify=False) as client:
            v6 = f"https://[::1]:{port}/readiness-gates"
            assert client.post(v6, content=b"{not json").status_code == 400

        # Called for every pod above but the opted-out one.
        reviews = {k: v for k, v in f.metrics().items() if "readiness_gate_webhook" in k}
        assert reviews == {
            'ferryman_readiness_gate_webhook_reviews_total{result="injected"}': 3,
            'ferryman_readiness_gate_webhook_reviews_total{result="unchanged"}': 5,
            'ferryman_readiness_gate_webhook_reviews_total{result="error"}': 5,
        }

        # A namespace without the label is never asked about. (The API server
        # matches namespaceSelector against its cache of namespaces: a label
        # change takes effect within moments, so pods are created until it has.)
        _opt_in(kube, ns, False)
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [], 60, "no gate once opted out")
        _opt_in(kube, ns, True)
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [GATE], 60, "gate once opted in")
    finally:
        assert f.stop() == 0

    # Webhook down, failurePolicy Ignore (not deploy/'s): pods are created, without the gate.
    assert _pod(kube, ns, {"app": "web"}) == []


def test_failure_policy_fail_refuses_pods_while_the_webhook_is_down(
    kube: Client, pods_namespace: str, cluster_objects: list[str]
) -> None:
    """What failurePolicy Ignore spares: with Fail (the default), no replica
    answering means no pod of an opted-in namespace is created."""
    config = f"fail-{pods_namespace}"
    doc = _configuration(config, pods_namespace, free_port())  # nothing listens there
    doc["webhooks"][0]["failurePolicy"] = "Fail"
    cluster_objects.append(config)
    apply(kube, doc)

    def refused() -> str | None:
        """Why the pod was refused; None while the API server does not yet call
        the new configuration (its webhooks are read from a cache too)."""
        try:
            _pod(kube, pods_namespace, {"app": "web"})
        except ApiError as e:
            return str(e.status.message)
        return None

    assert "readiness-gates.ferryman.io" in wait_until(refused, 60, "pod refused")


def test_replicas_serve_one_certificate_and_follow_the_secret(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,
    cluster_objects: list[str],
) -> None:  # fmt: skip
    """Two replicas started together make at most one certificate between them: one
    creates the Secret, the other reads it. With failurePolicy Fail and one
    configuration per replica, a pod is created only if the API server trusted
    both replicas' certificates. A Secret replaced (cert-manager renewing it) is
    served and trusted without a restart."""
    ns = pods_namespace
    apply(
        kube,
        _service("web", ns, {"app": "web"}),
        ingress("web", [rule("web.test", path("/", "web"))], namespace=ns),
    )
    replicas = []
    for name in ("a", "b"):
        config, port = f"{name}-{ns}", free_port()
        doc = _configuration(config, ns, port)
        doc["webhooks"][0]["failurePolicy"] = "Fail"
        cluster_objects.append(config)
        apply(kube, doc)
        replicas.append((config, _ferryman(tmp_path, apiserver, ns, port, config, name)))
    for _, f in replicas:
        f.start(wait=False)
    try:
        for _, f in replicas:
            f.wait_ready()
        wait_until(
            lambda: all(_ca_bundles(kube, c) == [_secret_ca(kube, ns, "webhook-cert")]
                        for c, _ in replicas),
            60, "both caBundles",
        )  # fmt: skip
        _gated_once_trusted(kube, ns, {"app": "web"})

        # The Secret replaced by a new CA and certificate.
        renewed = generate(["127.0.0.1"])
        kube.patch(
            Secret, "webhook-cert", {"data": renewed.secret_data()}, namespace=ns,
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        want = base64.b64encode(renewed.ca).decode()
        wait_until(lambda: all(_ca_bundles(kube, c) == [want] for c, _ in replicas), 60,
                   "the renewed CA trusted")  # fmt: skip
        # Both serve the renewed certificate (else the Fail policy refuses the pod).
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [GATE], 60, "a pod admitted")

        # The Secret deleted: both replicas see it at once and race to make a new
        # one; one creates it, the other's create conflicts and it reads the winner's.
        kube.delete(Secret, "webhook-cert", namespace=ns)

        def remade() -> str | None:
            ca = _secret_ca(kube, ns, "webhook-cert")
            return ca if ca != want else None

        new = wait_until(remade, 60, "a new Secret")
        wait_until(lambda: all(_ca_bundles(kube, c) == [new] for c, _ in replicas), 60,
                   "the new CA trusted")  # fmt: skip
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [GATE], 60, "a pod admitted")
        # One create won each time: the first Secret and this one.
        made = [f.logs().count("made a certificate") for _, f in replicas]
        assert sum(made) == 2, made
    finally:
        for _, f in replicas:
            assert f.stop() == 0


def _serve_web_with_given_secret(kube: Client, ns: str, data: dict[str, str]) -> None:
    """The kubernetes.io/tls Secret "given" (a certificate someone else keeps,
    ``--readiness-gate-webhook-cert-secret``), and a Service and Ingress "web" whose
    pods the webhook gates."""
    secret = {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "given", "namespace": ns}, "data": data,
    }  # fmt: skip
    apply(
        kube,
        secret,
        _service("web", ns, {"app": "web"}),
        ingress("web", [rule("web.test", path("/", "web"))], namespace=ns),
    )


def test_a_secret_given_is_used_as_it_is(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,
    cluster_objects: list[str],
) -> None:  # fmt: skip
    """A certificate someone else keeps (cert-manager's three keys): served, its
    CA trusted, never replaced."""
    ns = pods_namespace
    given = generate(["127.0.0.1"])
    _serve_web_with_given_secret(kube, ns, given.secret_data())
    config, port = f"given-{ns}", free_port()
    cluster_objects.append(config)
    # Two webhooks in the configuration: each gets the caBundle.
    doc = _configuration(config, ns, port)
    second = copy.deepcopy(doc["webhooks"][0]) | {"name": "second.ferryman.io"}
    doc["webhooks"].append(second)
    apply(kube, doc)
    f = _ferryman(tmp_path, apiserver, ns, port, config, secret="given")
    f.start()
    try:
        want = base64.b64encode(given.ca).decode()
        wait_until(lambda: _ca_bundles(kube, config) == [want, want], 60, "caBundles")
        _gated_once_trusted(kube, ns, {"app": "web"})
        assert kube.get(Secret, "given", namespace=ns).data == given.secret_data()
        # Someone wipes the caBundle (a re-applied manifest): ferryman puts it back.
        before = f.logs().count("caBundle set")
        apply(kube, doc)
        wait_until(lambda: _ca_bundles(kube, config) == [want, want], 60, "caBundle restored")
        # Its log line follows the write the API server already shows (a loaded
        # run read the log between the two and counted one short).
        restored = lambda: f.logs().count("caBundle set") > before  # noqa: E731
        wait_until(restored, 60, "the restore logged")
        # A replica starting finds everything as it should be: it writes nothing
        # (the API server would not tell: it drops a patch that changes nothing).
        written = f.logs().count("caBundle set")
        checked = f.logs().count("caBundle current")
        assert f.stop() == 0
        f.extra_args += ["--log-level", "debug"]
        f.start()
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [GATE], 60, "serving again")
        # Its two watches (the Secret's, the configuration's) have each delivered
        # their object and found the caBundle current.
        current = lambda: f.logs().count("caBundle current") >= checked + 2  # noqa: E731
        wait_until(current, 60, "the configuration checked")
        assert f.logs().count("caBundle set") == written
    finally:
        assert f.stop() == 0


def test_an_unusable_secret_costs_the_gates_not_ferryman(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,
    cluster_objects: list[str],
) -> None:  # fmt: skip
    """A Secret whose key does not match its certificate: ferryman keeps routing,
    says why in its log, and serves the webhook once the Secret is fixed."""
    ns = pods_namespace
    good, other = generate(["127.0.0.1"]), generate(["127.0.0.1"])
    broken = good.secret_data() | {"tls.key": other.secret_data()["tls.key"]}
    _serve_web_with_given_secret(kube, ns, broken)
    config, port = f"broken-{ns}", free_port()
    cluster_objects.append(config)
    doc = _configuration(config, ns, port)
    doc["webhooks"][0]["failurePolicy"] = "Ignore"
    apply(kube, doc)
    f = _ferryman(tmp_path, apiserver, ns, port, config, secret="given")
    f.start()
    try:
        wait_until(lambda: "no certificate yet" in f.logs(), 60, "the reason logged")
        assert "do not load" in f.logs()
        assert _pod(kube, ns, {"app": "web"}) == []  # failurePolicy Ignore
        assert f.get("web.test", "/").status == 503  # routing as ever (no endpoints)
        kube.patch(Secret, "given", {"data": good.secret_data()}, namespace=ns,
                   patch_type=PatchType.MERGE)  # fmt: skip
        want = base64.b64encode(good.ca).decode()
        wait_until(lambda: _ca_bundles(kube, config) == [want], 60, "caBundle")
        _gated_once_trusted(kube, ns, {"app": "web"})
    finally:
        assert f.stop() == 0


def test_a_namespace_without_the_label_gets_no_gate_whatever_the_configuration_says(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,
    cluster_objects: list[str],
) -> None:  # fmt: skip
    """A configuration whose namespaceSelector lost the opt-in label (edited by
    hand, an old chart) has the API server call for every pod; ferryman still
    gates only pods of namespaces that carry the label, as its cache knows them."""
    ns = pods_namespace
    config, port = f"gates-{ns}", free_port()
    apply(kube, _service("web", ns, {"app": "web"}),
          ingress("web", [rule("web.test", path("/", "web"))], namespace=ns))  # fmt: skip
    doc = _configuration(config, ns, port)
    for hook in doc["webhooks"]:
        del hook["namespaceSelector"]["matchLabels"][INJECT_LABEL]
    cluster_objects.append(config)
    apply(kube, doc)
    f = _ferryman(tmp_path, apiserver, ns, port, config)
    f.start()
    try:
        wait_until(lambda: _ca_bundles(kube, config) == [_secret_ca(kube, ns, "webhook-cert")],
                   60, "caBundle")  # fmt: skip
        _gated_once_trusted(kube, ns, {"app": "web"})
        _opt_in(kube, ns, False)
        wait_until(lambda: _pod(kube, ns, {"app": "web"}) == [], 60, "no gate once opted out")
        reviews = f.metrics()
        assert reviews['ferryman_readiness_gate_webhook_reviews_total{result="unchanged"}'] >= 1
    finally:
        assert f.stop() == 0


def test_an_ingress_asking_for_the_webhooks_port_is_refused_it(
    tmp_path: Path, apiserver: APIServer, kube: Client, pods_namespace: str,
    cluster_objects: list[str],
) -> None:  # fmt: skip
    """The webhook's port is ferryman's: bound before NGINX's listeners open
    and refused to an Ingress's listen-ports, which is told; the webhook
    serves, where NGINX taking the port first once stopped every replica."""
    ns = pods_namespace
    config, port = f"port-{ns}", free_port()
    asks = {"nginx.org/listen-ports": str(port)}
    apply(
        kube,
        _service("web", ns, {"app": "web"}),
        ingress("web", [rule("web.test", path("/", "web"))], namespace=ns),
        ingress("greedy", [rule("greedy.test", path("/", "web"))], namespace=ns,
                annotations=asks),
    )  # fmt: skip
    cluster_objects.append(config)
    apply(kube, _configuration(config, ns, port))
    f = _ferryman(tmp_path, apiserver, ns, port, config)
    f.start()
    try:
        wait_until(lambda: _ca_bundles(kube, config) == [_secret_ca(kube, ns, "webhook-cert")],
                   60, "caBundle")  # fmt: skip
        _gated_once_trusted(kube, ns, {"app": "web"})

        def warned() -> list[str]:
            return [
                e.note or ""
                for e in kube.list(Event, namespace=ns)
                if e.regarding is not None
                and e.regarding.name == "greedy"
                and e.reason == "AddedOrUpdatedWithWarning"
            ]

        note = wait_until(warned, 60, "Warning Event")[-1]
        assert f"port {port} is ferryman's --readiness-gate-webhook-port" in note
        assert f.proc is not None and f.proc.poll() is None
    finally:
        assert f.stop() == 0
