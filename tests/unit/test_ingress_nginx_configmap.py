"""ingress-nginx's ConfigMap keys as NIC's (configs/ingress_nginx_configmap.py)
and the ConfigMap state that reads both (configs/configmap.py)."""

from __future__ import annotations

from ferryman.configs.configmap import NOT_APPLIED, ConfigMapState
from ferryman.configs.ingress_nginx_configmap import KNOWN, SERVED, merged, translate
from ferryman.resources.configmap import GLOBAL_KEYS, ROUTE_KEYS, STATUS_KEYS


def test_keys_become_nics() -> None:
    t = translate(
        {
            "proxy-body-size": "20m",
            "proxy-read-timeout": "120",
            "keep-alive": "75",
            "max-worker-connections": "4096",
            "use-http2": "true",
            "hsts": "false",
        }
    )
    assert t.data == {
        "client-max-body-size": "20m",
        "proxy-read-timeout": "120s",
        "keepalive-timeout": "75s",
        "worker-connections": "4096",
        "http2": "true",
        "hsts": "false",
        "hsts-preload": "false",  # ingress-nginx's default, not NIC's
    }
    assert t.warnings == []


def test_forwarded_headers_as_ingress_nginx_writes_real_ip() -> None:
    t = translate({"use-forwarded-headers": "true"})
    assert t.data == {
        "real-ip-header": "X-Forwarded-For",
        "real-ip-recursive": "True",
        "set-real-ip-from": "0.0.0.0/0",
    }
    t = translate(
        {
            "enable-real-ip": "true",
            "forwarded-for-header": "CF-Connecting-IP",
            "proxy-real-ip-cidr": "10.0.0.0/8, 192.0.2.0/24",
        }
    )
    assert t.data["real-ip-header"] == "CF-Connecting-IP"
    assert t.data["set-real-ip-from"] == "10.0.0.0/8,192.0.2.0/24"
    assert translate({"use-forwarded-headers": "false", "proxy-real-ip-cidr": "1.2.3.4"}).data == {}


def test_log_format_variables_ferryman_lacks_are_said() -> None:
    t = translate({"log-format-upstream": "$remote_addr $req_id $proxy_upstream_name"})
    assert t.data == {"log-format": "$remote_addr $request_id -"}
    assert t.warnings == [
        "log-format-upstream: $proxy_upstream_name logged as - (ferryman has no such variable)"
    ]


def test_warnings_for_snippets_unknown_not_yet_and_bad_values() -> None:
    t = translate(
        {
            "server-snippet": "x",
            "enable-brotli": "true",
            "proxy-conect-timeout": "5",
            "proxy-send-timeout": "5s",
        }
    )
    assert t.data == {}
    assert t.warnings == [
        "enable-brotli: not applied by ferryman yet",
        "proxy-conect-timeout: not an ingress-nginx ConfigMap key (misspelt?): ignored",
        "proxy-send-timeout: '5s' must be a whole number of seconds: not applied",
        "server-snippet: NGINX text from users is never applied (ferryman)",
    ]


def test_every_target_is_a_nic_key_and_the_tables_do_not_overlap() -> None:
    targets = set(translate({k: "1" for k in SERVED}).data)
    assert targets <= set(GLOBAL_KEYS) | set(ROUTE_KEYS) | set(STATUS_KEYS)
    assert not KNOWN & SERVED


def test_nics_keys_win() -> None:
    data, notes = merged({"client-max-body-size": "2k"}, {"proxy-body-size": "1k"})
    assert data == {"client-max-body-size": "2k"}
    assert notes == ["client-max-body-size: the NIC ConfigMap's value is used (--nginx-configmaps)"]


def _cm(data: dict[str, str], ns: str, name: str) -> dict[str, object]:
    return {"metadata": {"namespace": ns, "name": name}, "data": data}


def test_state_reads_both_and_says_each_note_once_whichever_comes_first() -> None:
    state = ConfigMapState("nic", "cfg", lambda t: {}, ("inn", "ctl"))
    assert state.watches("inn", "ctl") and state.watches("nic", "cfg")
    assert not state.watches("inn", "other")
    state.update(
        _cm({"proxy-body-size": "1k", "enable-brotli": "true"}, "inn", "ctl"), ("inn", "ctl")
    )
    first = state.ingress_nginx_notes()
    assert first == [
        (
            "Warning",
            NOT_APPLIED,
            "ConfigMap inn/ctl: not applied: enable-brotli: not applied by ferryman yet",
        )
    ]
    assert state.values["client-max-body-size"] == "1k"
    state.update(_cm({"client-max-body-size": "2k"}, "nic", "cfg"), ("nic", "cfg"))
    assert state.values["client-max-body-size"] == "2k"
    assert state.ingress_nginx_notes() == [
        (
            "Warning",
            NOT_APPLIED,
            "ConfigMap inn/ctl: not applied: client-max-body-size: the NIC ConfigMap's value "
            "is used "
            "(--nginx-configmaps)",
        )
    ]
    state.update(
        _cm({"client-max-body-size": "2k", "worker-processes": "2"}, "nic", "cfg"), ("nic", "cfg")
    )
    assert state.ingress_nginx_notes() == []  # said already
    state.update(None, ("inn", "ctl"))  # deleted: its keys go
    assert state.ingress_nginx_notes() == []
    assert state.values["client-max-body-size"] == "2k"


def test_only_ingress_nginxs_configmap() -> None:
    state = ConfigMapState("", "", lambda t: {}, ("inn", "ctl"))
    state.update(_cm({"proxy-read-timeout": "9"}, "inn", "ctl"), ("inn", "ctl"))
    assert state.route_defaults()["proxy-read-timeout"] == "9s"
    assert state.who == "inn/ctl"


def test_compute_full_forwarded_for_false_names_the_flag() -> None:
    assert translate({"compute-full-forwarded-for": "true"}).warnings == []
    (warning,) = translate({"compute-full-forwarded-for": "false"}).warnings
    assert "--compute-full-forwarded-for=false" in warning
