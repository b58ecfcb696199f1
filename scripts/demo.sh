#!/usr/bin/env bash
# The ferryman demo: the cafe example (examples/cafe) served by ferryman in
# manifests mode, with a real NGINX and three HTTP backends on loopback.
#
#   ./scripts/demo.sh          set up, start, show a few requests, keep running (Ctrl-C stops)
#   ./scripts/demo.sh --once   set up, start, check the requests' answers, stop (0: all good)
#
# Environment: FERRYMAN_HTTP_PORT (8080), FERRYMAN_HTTPS_PORT (8443),
# FERRYMAN_READY_PORT (8081), FERRYMAN_METRICS_PORT (9113),
# DEMO_BACKEND_PORTS ("18101 18102 18103": coffee-1, coffee-2, tea-1),
# DEMO_ONCE=1 (same as --once).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

once=0
case ${DEMO_ONCE:-0} in "" | 0 | false | no) ;; *) once=1 ;; esac
for arg in "$@"; do
  case $arg in
    --once) once=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "demo: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

http_port=${FERRYMAN_HTTP_PORT:-8080}
https_port=${FERRYMAN_HTTPS_PORT:-8443}
ready_port=${FERRYMAN_READY_PORT:-8081}
metrics_port=${FERRYMAN_METRICS_PORT:-9113}
read -r coffee1_port coffee2_port tea_port <<<"${DEMO_BACKEND_PORTS:-18101 18102 18103}"

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
say() { printf 'demo: %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

./scripts/setup.sh

for port in "$http_port" "$https_port" "$ready_port" "$metrics_port" \
  "$coffee1_port" "$coffee2_port" "$tea_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is already in use (another demo running?); see --help to pick other ports"
  fi
done

# --- clean-up: every child goes, whatever way the script ends ----------------
work=$(mktemp -d "${TMPDIR:-/tmp}/ferryman-demo.XXXXXX")
chmod 755 "$work" # NGINX workers may run as another user (nobody, when we are root)
manifests=$work/manifests
state=$work/state
logs=$work/logs
mkdir -m 700 "$manifests"
mkdir "$logs"
backend_pids=()
ferryman_pid=""
tail_pid=""
keep_work=0

# Stops ferryman (it stops its NGINX) and waits for it; returns ferryman's exit status.
stop_ferryman() {
  local status=0 i
  [ -n "$ferryman_pid" ] || return 0
  kill -TERM "$ferryman_pid" 2>/dev/null || true
  for i in $(seq 150); do
    kill -0 "$ferryman_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$ferryman_pid" 2>/dev/null; then
    say "ferryman did not stop within 15 s of SIGTERM; killing it" >&2
    kill -KILL "$ferryman_pid" 2>/dev/null || true
  fi
  wait "$ferryman_pid" 2>/dev/null || status=$?
  ferryman_pid=""
  # NGINX is ferryman's child (in its own session): should ferryman have left it
  # behind, stop it through its pid file.
  local pid
  pid=$(cat "$state/nginx.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = nginx ]; then
    say "NGINX (pid $pid) outlived ferryman; stopping it" >&2
    [ "$status" != 0 ] || status=1
    kill -QUIT "$pid" 2>/dev/null || true
    for i in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  return "$status"
}

cleanup() {
  local code=$?
  trap - EXIT INT TERM
  stop_ferryman || true
  [ -z "$tail_pid" ] || kill "$tail_pid" 2>/dev/null || true
  for pid in "${backend_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$keep_work" = 1 ] || { [ "$code" != 0 ] && [ "$code" != 130 ] && [ "$code" != 143 ]; }; then
    say "logs and manifests kept in $work" >&2
  else
    rm -rf "$work"
  fi
  [ "$once" = 1 ] || say "stopped"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_log() {
  echo "--- last lines of $logs/ferryman.log ---" >&2
  tail -n 30 "$logs/ferryman.log" >&2 || true
  echo "---" >&2
}

# --- the manifests: a copy of examples/cafe plus a fresh self-signed Secret ---
cp examples/cafe/*.yaml "$manifests/"
sed -i \
  -e "s/port: 18101\$/port: $coffee1_port/;t" \
  -e "s/port: 18102\$/port: $coffee2_port/;t" \
  -e "s/port: 18103\$/port: $tea_port/" \
  "$manifests"/*.yaml
.venv/bin/python examples/cafe/make_secret.py --host cafe.example.com --name cafe-secret \
  --output "$manifests/cafe-secret.yaml"

# --- the backends and ferryman ---------------------------------------------------
start_backend() {
  .venv/bin/python examples/cafe/backend.py --name "$1" --port "$2" >"$logs/$1.log" 2>&1 &
  backend_pids+=("$!")
}
start_backend coffee-1 "$coffee1_port"
start_backend coffee-2 "$coffee2_port"
start_backend tea-1 "$tea_port"

.venv/bin/ferryman run --manifests "$manifests" --state-dir "$state" \
  --http-port "$http_port" --https-port "$https_port" \
  --ready-port "$ready_port" --metrics-port "$metrics_port" >"$logs/ferryman.log" 2>&1 &
ferryman_pid=$!
say "ferryman (pid $ferryman_pid) serving $manifests; log: $logs/ferryman.log"

for port in "$coffee1_port" "$coffee2_port" "$tea_port"; do
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
done
for pid in "${backend_pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || die "a backend did not start; see $logs/*.log"
done

ready_url=http://127.0.0.1:$ready_port/nginx-ready
deadline=$((SECONDS + 30))
until [ "$(curl -s -o /dev/null -w '%{http_code}' "$ready_url" || true)" = 200 ]; do
  if ! kill -0 "$ferryman_pid" 2>/dev/null; then
    show_log
    die "ferryman exited before it was ready"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    show_log
    die "$ready_url did not answer 200 within 30 s"
  fi
  sleep 0.2
done
say "ready: $ready_url answers 200"
echo

# --- the requests a user can type, run and checked ------------------------------
failures=()
out=""
# Prints a command as one would type it, runs it, prints what it printed.
run() {
  bold "\$ $1"
  out=$(timeout 10 bash -c "$1" 2>&1) || true
  printf '%s\n\n' "$out"
}
check() { # check DESCRIPTION COMMAND...: the check passes when COMMAND succeeds
  if ! "${@:2}"; then
    failures+=("$1")
    printf 'demo: CHECK FAILED: %s\n\n' "$1" >&2
  fi
}
has_line() { printf '%s\n' "$out" | tr -d '\r' | grep -Eq "$1"; }
server_name() { printf '%s\n' "$out" | sed -n 's/^Server name: //p' | head -n 1; }

different_coffee() { [ -n "$first" ] && [ "$(server_name)" != "$first" ]; }
https="curl -s --resolve cafe.example.com:$https_port:127.0.0.1 -k https://cafe.example.com:$https_port"

run "$https/coffee"
check "https /coffee is answered by a coffee backend" has_line '^Server name: coffee-[12]$'
first=$(server_name)

run "$https/coffee"
check "https /coffee (again) is answered by a coffee backend" has_line '^Server name: coffee-[12]$'
check "two /coffee requests are balanced over both coffee backends" different_coffee

run "$https/tea"
check "https /tea is answered by the tea backend" has_line '^Server name: tea-1$'

run "curl -si -H 'Host: cafe.example.com' http://127.0.0.1:$http_port/coffee"
check "http /coffee answers 301" has_line '^HTTP/[0-9.]+ 301( |$)'
check "the redirect goes to https://cafe.example.com:$https_port/coffee" \
  has_line "^[Ll]ocation: https://cafe\\.example\\.com:$https_port/coffee\$"

run "curl -s -o /dev/null -w '%{http_code}' -H 'Host: unknown.example.com' http://127.0.0.1:$http_port/"
check "an unknown host gets 404" [ "$out" = 404 ]

run "curl -s http://127.0.0.1:$metrics_port/metrics | grep nginx_ingress_controller_nginx_reloads_total"
check "/metrics has nginx_ingress_controller_nginx_reloads_total" \
  has_line '^nginx_ingress_controller_nginx_reloads_total'

if [ ${#failures[@]} -gt 0 ]; then
  show_log
  say "${#failures[@]} check(s) failed:" >&2
  printf '  - %s\n' "${failures[@]}" >&2
  [ "$once" = 0 ] || exit 1
else
  say "all checks passed"
fi

if [ "$once" = 1 ]; then
  status=0
  stop_ferryman || status=$?
  if [ "$status" != 0 ]; then
    show_log
    die "ferryman exited with status $status on SIGTERM"
  fi
  exit 0
fi

# --- interactive: keep running, follow ferryman's log ---------------------------
cat <<EOF

The manifests ferryman serves are in
    $manifests
Edit, add or delete a file there and ferryman applies it within a second: e.g.
change the path /tea to /chai in cafe-ingress.yaml, or take coffee-2 out of
rotation by setting its "ready: true" to false in coffee.yaml, then curl again.
Following ferryman's log; Ctrl-C stops everything.

EOF
tail -n 0 -f "$logs/ferryman.log" &
tail_pid=$!
status=0
wait "$ferryman_pid" || status=$?
ferryman_pid=""
# A terminal's Ctrl-C reaches ferryman too, which then stops cleanly (status 0).
[ "$status" = 0 ] && exit 0
show_log
die "ferryman exited by itself (status $status)"
