#!/usr/bin/env bash
# App downloads through the server (issue 33): a file served in a workspace
# by `python3 -m http.server`, downloaded with curl through the server (a
# path app: the server, the agent's tunnel, the agent) and straight from
# the port on loopback, alternately, in one run. Floor: through the server
# at least 0.5x the direct throughput.
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
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    for proc in /proc/[0-9]*; do
        case "$(readlink "$proc/cwd" 2>/dev/null)" in
        "$work"/*) kill -9 "${proc#/proc/}" 2>/dev/null || true ;;
        esac
    done
    rm -rf "$work"
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

now() { echo "$EPOCHREALTIME"; }
rate() { python3 -c "print(f'{$size_mb / ($2 - $1):.0f}')"; }
direct_total=0
proxied_total=0
for round in $(seq 1 "$rounds"); do
    start="$(now)"; curl -fsS -o /dev/null "$direct"; end="$(now)"
    direct_total="$(python3 -c "print($direct_total + $end - $start)")"
    d="$(rate "$start" "$end")"
    start="$(now)"; curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$proxied"; end="$(now)"
    proxied_total="$(python3 -c "print($proxied_total + $end - $start)")"
    p="$(rate "$start" "$end")"
    echo "round $round: direct $d MB/s, through the server $p MB/s"
done
python3 - "$size_mb" "$rounds" "$direct_total" "$proxied_total" <<'PY'
import sys
size, rounds, direct, proxied = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
d, p = size * rounds / direct, size * rounds / proxied
print(f"mean: direct {d:.0f} MB/s, through the server {p:.0f} MB/s, ratio {p / d:.2f} (floor 0.5)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
