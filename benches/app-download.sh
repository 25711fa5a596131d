#!/usr/bin/env bash
# App downloads through the server (issue 33): a file served in a workspace
# by `python3 -m http.server`, downloaded with curl through the server (a
# path app: the server, the agent, the app) and straight from the port on
# loopback, alternately, in one run; first with the agent dialing back a
# connection per request (the default), then, the server restarted with
# `--app-dial-back off`, through the agent's tunnel. Each also times 200
# small requests through the server (what a dial-back costs per request).
# Floor: through the server at least 0.5x the direct throughput.
#
# Usage: benches/app-download.sh [--size-mb N] [--rounds N] [--bin PATH]
#   --size-mb N  the file's size (default 200)
#   --rounds N   downloads each way (default 5)
#   --bin PATH   the abode binary (default: the release build, built if
#                missing)
# Needs: cargo, terraform, curl, jq, python3.
set -euo pipefail
size_mb=200
rounds=5
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --size-mb) size_mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "app-download.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench=app-download.sh
. "$root/benches/lib.sh"
bench_require terraform curl jq python3
bin="$(bench_binary "$root" "$bin")"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    bench_cleanup "$work" "$server_pid"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/files" "$work/template"
head -c "$((size_mb * 1024 * 1024))" /dev/urandom >"$work/files/big"
cat >"$work/template/main.tf" <<TF
terraform {
  required_providers {
    abode = { source = "abode/abode" }
  }
}
data "abode_workspace" "me" {}
resource "abode_agent" "main" {
  count = data.abode_workspace.me.start_count
  os    = "linux"
  arch  = "amd64"
}
resource "abode_process" "agent" {
  count   = data.abode_workspace.me.start_count
  command = ["sh", "-c", abode_agent.main[0].init_script]
  env     = { ABODE_AGENT_TOKEN = abode_agent.main[0].token }
}
resource "abode_process" "files" {
  count   = data.abode_workspace.me.start_count
  command = ["python3", "-m", "http.server", "$port", "--bind", "127.0.0.1", "--directory", "$work/files"]
}
resource "abode_app" "files" {
  count    = data.abode_workspace.me.start_count
  agent_id = abode_agent.main[0].id
  slug     = "files"
  url      = "http://127.0.0.1:$port"
}
TF
bench_start_server "$bin" "$work" 1 --allow-path-apps --terraform-sandbox off
"$bin" templates push files -d "$work/template" >/dev/null
"$bin" create ws --template files >/dev/null
for _ in $(seq 1 300); do
    [ "$("$bin" show ws --output json | jq -r .agent.status)" = ready ] && break
    sleep 0.2
done
token="$("$bin" tokens create --name bench)"
direct="http://127.0.0.1:$port/big"
proxied="$server_url/@bench/ws/apps/files/big"
curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$proxied" \
    || { echo "$bench: the app does not answer through the server" >&2; exit 1; }

printf 'small\n' >"$work/files/small"
now() { echo "$EPOCHREALTIME"; }
# rounds LABEL: the downloads, alternately straight and through the server;
# then 200 small requests through the server (one curl, one connection to
# the server, a stream to the agent each), their median and p90 in ms.
# Appends "LABEL direct_seconds proxied_seconds median p90" to $work/results.
rounds() {
    local label="$1" direct_total=0 proxied_total=0 start end
    for round in $(seq 1 "$rounds"); do
        start="$(now)"; curl -fsS -o /dev/null "$direct"; end="$(now)"
        direct_total="$(python3 -c "print($direct_total + $end - $start)")"
        start="$(now)"; curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$proxied"; end="$(now)"
        proxied_total="$(python3 -c "print($proxied_total + $end - $start)")"
    done
    local urls=()
    for _ in $(seq 1 200); do urls+=(-o /dev/null "$server_url/@bench/ws/apps/files/small"); done
    curl -fsS -H "Authorization: Bearer $token" -w '%{time_total}\n' "${urls[@]}" >"$work/small-$label"
    python3 - "$label" "$direct_total" "$proxied_total" "$work/small-$label" >>"$work/results" <<'PY'
import statistics, sys
label, direct, proxied, small = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
times = sorted(float(line) * 1000 for line in open(small) if line.strip())
print(label, direct, proxied, statistics.median(times), times[int(len(times) * 0.9)])
PY
}
# wait_ready: until the workspace's agent is connected again.
wait_ready() {
    for _ in $(seq 1 300); do
        [ "$("$bin" show ws --output json 2>/dev/null | jq -r .agent.status)" = ready ] \
            && curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$proxied" 2>/dev/null && return 0
        sleep 0.2
    done
    echo "$bench: the agent did not come back after the restart" >&2
    exit 1
}
rounds dial-back
# The same server, data and workspace, restarted with every app request on
# the agent's tunnel.
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true
"$bin" server --address "${server_url#http://}" --data-dir "$work/data" --provisioners 1 \
    --allow-path-apps --terraform-sandbox off --app-dial-back off >>"$work/server.log" 2>&1 &
server_pid=$!
wait_ready
rounds tunnel
python3 - "$size_mb" "$rounds" "$work/results" <<'PY'
import sys
size, rounds = float(sys.argv[1]), int(sys.argv[2])
rows = [line.split() for line in open(sys.argv[3])]
print(f"{'carried':<10} {'direct MB/s':>12} {'server MB/s':>12} {'ratio':>6} {'small median ms':>16} {'small p90 ms':>13}")
for label, direct, proxied, median, p90 in rows:
    d, p = size * rounds / float(direct), size * rounds / float(proxied)
    print(f"{label:<10} {d:>12.0f} {p:>12.0f} {p / d:>6.2f} {float(median):>16.2f} {float(p90):>13.2f}")
print("floor: through the server at least 0.5x the direct download (dial-back, the default)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
