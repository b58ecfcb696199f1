#!/usr/bin/env bash
# End-to-end check of testapiserver with nothing but curl and python3:
# build (cached), start on a temp --dir, create/list a Namespace, Service,
# EndpointSlice and Ingress, watch an Ingress change, restart on the same
# --dir and check the data and the old kubeconfig survive, stop cleanly;
# then once more with --controllers all: a Deployment gets its ReplicaSet and
# Pods, a new namespace its ServiceAccount, deletion cascades (garbage
# collector) and a deleted namespace goes away (namespace controller).
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$("$here/build.sh" | tail -n1)" || { echo "build failed" >&2; exit 1; }
dir="$(mktemp -d "${TMPDIR:-/tmp}/testapiserver-smoke.XXXXXX")"
pid=""
passed=0
failed=0

cleanup() {
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

check() { # check NAME COMMAND...
    if "${@:2}" >/dev/null 2>&1; then
        passed=$((passed + 1)); echo "ok   $1"
    else
        failed=$((failed + 1)); echo "FAIL $1"
    fi
}

start() { # start [testapiserver flags]
    : >"$dir/out"
    "$bin" --dir "$dir/kas" "$@" -- --v=0 >"$dir/out" 2>>"$dir/log" &
    pid=$!
    local t0=$SECONDS
    until grep -q '^KUBECONFIG=' "$dir/out"; do
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS - t0 > 180)); then
            echo "testapiserver did not become ready; log:" >&2
            tail -n 30 "$dir/log" >&2
            exit 1
        fi
        sleep 0.1
    done
}

stop() {
    kill -TERM "$pid"
    wait "$pid"
    local rc=$?
    last_pid=$pid
    pid=""
    return $rc
}

# Reads server and credentials out of a kubeconfig, so the kubeconfig
# itself is what gets tested.
use_kubeconfig() {
    python3 - "$1" "$dir" <<'EOF'
import base64, re, sys
text = open(sys.argv[1]).read()
def field(k): return re.search(k + r": (\S+)", text).group(1)
for name, key in (("ca", "certificate-authority-data"), ("crt", "client-certificate-data"),
                  ("key", "client-key-data")):
    open(f"{sys.argv[2]}/kc.{name}", "wb").write(base64.b64decode(field(key)))
open(f"{sys.argv[2]}/kc.server", "w").write(field("server"))
EOF
    server="$(cat "$dir/kc.server")"
}

k() { # k METHOD PATH [JSON-BODY [CONTENT-TYPE]]
    curl -sS --fail-with-body --cacert "$dir/kc.ca" --cert "$dir/kc.crt" --key "$dir/kc.key" \
        -X "$1" -H "Content-Type: ${4:-application/json}" ${3:+--data "$3"} "$server$2"
}

names() { python3 -c 'import json,sys; print(" ".join(i["metadata"]["name"] for i in json.load(sys.stdin)["items"]))'; }

start
kubeconfig="$(sed -n 's/^KUBECONFIG=//p' "$dir/out")"
check "exactly one stdout line" test "$(wc -l <"$dir/out")" -eq 1
check "kubeconfig path is absolute" test "${kubeconfig:0:1}" = /
use_kubeconfig "$kubeconfig"
cp "$kubeconfig" "$dir/kubeconfig.first"

check "create Namespace" k POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"smoke"}}'
check "create Service" k POST /api/v1/namespaces/smoke/services \
    '{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"spec":{"ports":[{"name":"http","port":80,"targetPort":8080}]}}'
check "create EndpointSlice" k POST /apis/discovery.k8s.io/v1/namespaces/smoke/endpointslices \
    '{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-1","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[{"addresses":["10.1.0.5"],"conditions":{"ready":true}}]}'
check "create Ingress" k POST /apis/networking.k8s.io/v1/namespaces/smoke/ingresses \
    '{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web"},"spec":{"rules":[{"host":"web.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}'

check "list Services" test "$(k GET /api/v1/namespaces/smoke/services | names)" = web
check "list EndpointSlices" test "$(k GET '/apis/discovery.k8s.io/v1/namespaces/smoke/endpointslices?labelSelector=kubernetes.io/service-name%3Dweb' | names)" = web-1
check "list Ingresses (all namespaces)" test "$(k GET /apis/networking.k8s.io/v1/ingresses | names)" = web

rv="$(k GET /apis/networking.k8s.io/v1/namespaces/smoke/ingresses | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')"
k GET "/apis/networking.k8s.io/v1/namespaces/smoke/ingresses?watch=1&resourceVersion=$rv&timeoutSeconds=5" >"$dir/watch" 2>/dev/null &
watcher=$!
sleep 1
check "patch Ingress status" k PATCH /apis/networking.k8s.io/v1/namespaces/smoke/ingresses/web/status \
    '{"status":{"loadBalancer":{"ingress":[{"ip":"127.0.0.1"}]}}}' application/merge-patch+json
wait "$watcher"
check "watch saw MODIFIED with new status" grep -q '"type":"MODIFIED".*"ip":"127.0.0.1"' "$dir/watch"

check "stop exits 0" stop
start
check "restart reuses kubeconfig unchanged" cmp -s "$dir/kubeconfig.first" "$kubeconfig"
use_kubeconfig "$dir/kubeconfig.first"
check "data survives restart (via old kubeconfig)" test \
    "$(k GET /apis/networking.k8s.io/v1/namespaces/smoke/ingresses/web | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["loadBalancer"]["ingress"][0]["ip"])')" = 127.0.0.1
check "stop exits 0 again" stop
check "no process left" bash -c "! kill -0 $last_pid"

eventually() { # eventually NAME COMMAND...: COMMAND succeeds within 30 s
    local t0=$SECONDS
    until "${@:2}" >/dev/null 2>&1; do
        ((SECONDS - t0 > 30)) && break
        sleep 0.2
    done
    check "$@"
}
start --controllers all
use_kubeconfig "$kubeconfig"
check "create Namespace (controllers)" k POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ctl"}}'
eventually "serviceaccount controller adds default" k GET /api/v1/namespaces/ctl/serviceaccounts/default
check "create Deployment" k POST /apis/apps/v1/namespaces/ctl/deployments \
    '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}'
pods() { test "$(k GET /api/v1/namespaces/ctl/pods | names | wc -w)" -eq "$1"; }
eventually "deployment+replicaset controllers create 2 pods" pods 2
check "delete Deployment" k DELETE /apis/apps/v1/namespaces/ctl/deployments/web
eventually "garbage collector deletes its pods" pods 0
check "delete Namespace" k DELETE /api/v1/namespaces/ctl
gone() { test "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$dir/kc.ca" --cert "$dir/kc.crt" --key "$dir/kc.key" "$server/api/v1/namespaces/ctl")" = 404; }
eventually "namespace controller finishes the deletion" gone
check "stop exits 0 (controllers)" stop

echo "$passed passed, $failed failed"
((failed == 0))
