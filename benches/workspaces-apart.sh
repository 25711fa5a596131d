#!/usr/bin/env bash
# What keeping workspaces apart costs (issue 46): a network namespace and a
# uid per workspace (the defaults as root) against a server whose workspaces
# share the machine's network and user (`--workspace-network host
# --workspace-uids off`), in one run, rounds interleaved so that both see
# the same load. Each round, on each server: a no-op `abode start` of the
# stopped workspace (the example template plus a file server: its network
# and its processes are made again), then a download of a file in the
# workspace's home through `abode ssh WS -- cat` and through a path app
# (curl, the server, the agent, the app on the workspace's loopback).
# Goals: start at most 1.10x, ssh and app throughput at least 0.9x.
#
# Usage: benches/workspaces-apart.sh [--rounds N] [--size-mb N] [--bin PATH]
#   --rounds N   rounds (default 5)
#   --size-mb N  the downloaded file's size (default 100)
#   --bin PATH   the abode binary (default: target/release/abode, built if missing)
# Needs: root, cargo, terraform, bwrap, slirp4netns, curl, jq, python3.
set -euo pipefail

bench=workspaces-apart.sh
rounds=5
size_mb=100
bin="${ABODE_BIN:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --size-mb) size_mb="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/benches/lib.sh"
bench_require terraform bwrap slirp4netns curl jq python3
if [ "$(id -u)" != 0 ]; then
    echo "$bench: run it as root: a network and a uid per workspace need root" >&2
    exit 2
fi
bin="$(bench_binary "$root" "$bin")"
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

work="$(mktemp -d)"
chmod 755 "$work"
pids=()
cleanup() {
    for name in apart shared; do
        ABODE_CONFIG_DIR="$work/config-$name" "$bin" stop ws >/dev/null 2>&1 || true
    done
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
unset ABODE_URL ABODE_TOKEN

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { echo "$EPOCHREALTIME"; }
as() { local name="$1"; shift; ABODE_CONFIG_DIR="$work/config-$name" "$bin" "$@"; }
declare -A url token app_port

# The example template and a file server on the workspace's loopback, in its home.
template() {
    local dir="$1" port="$2"
    mkdir -p "$dir"
    cp "$root/examples/local-workspace/main.tf" "$dir/main.tf"
    cat >>"$dir/main.tf" <<TF

resource "abode_process" "files" {
  count   = data.abode_workspace.me.start_count
  command = ["python3", "-m", "http.server", "$port", "--bind", "127.0.0.1"]
  dir     = abode_volume.home.path
}

resource "abode_app" "files" {
  count    = data.abode_workspace.me.start_count
  agent_id = abode_agent.main[0].id
  slug     = "files"
  url      = "http://127.0.0.1:$port"
}
TF
}

wait_ready() {
    for _ in $(seq 1 300); do
        [ "$(as "$1" show ws --output json | jq -r .agent.status)" = ready ] && return 0
        sleep 0.1
    done
    echo "$bench: the agent on $1 is not ready" >&2
    return 1
}

for name in apart shared; do
    port="$(free_port)"
    flags=(--allow-path-apps)
    [ "$name" = shared ] && flags+=(--workspace-network host --workspace-uids off)
    "$bin" server --address "127.0.0.1:$port" --data-dir "$work/$name" \
        "${flags[@]}" >"$work/$name.log" 2>&1 &
    pids+=($!)
    url[$name]="http://127.0.0.1:$port"
    for _ in $(seq 1 100); do
        curl -fsS "${url[$name]}/api/v1/health" >/dev/null 2>&1 && break
        sleep 0.1
    done
    echo "bench-password" | as "$name" login "${url[$name]}" --first-user \
        --username bench --email bench@example.com --password-stdin >/dev/null
    app_port[$name]="$(free_port)"
    template "$work/template-$name" "${app_port[$name]}"
    as "$name" templates push files -d "$work/template-$name" >/dev/null 2>&1
    as "$name" create ws --template files >/dev/null 2>&1
    wait_ready "$name"
    token[$name]="$(as "$name" tokens create --name bench)"
    as "$name" ssh ws -- sh -c "head -c $((size_mb * 1024 * 1024)) /dev/urandom > \"\$HOME/big\""
done

# NAME's stopped workspace started (the stop before it untimed): seconds.
start_once() {
    local start end
    as "$1" stop ws >/dev/null 2>&1 || { echo "$bench: the stop on $1 failed" >&2; return 1; }
    start="$(now)"
    as "$1" start ws >"$work/start.log" 2>&1 \
        || { echo "$bench: the start on $1 failed: $(tail -1 "$work/start.log")" >&2; return 1; }
    end="$(now)"
    python3 -c "print(f'{$end - $start:.3f}')"
}
# The file through `abode ssh`: MB/s.
ssh_once() {
    local start end bytes
    start="$(now)"
    bytes="$(as "$1" ssh ws -- cat big | wc -c)"
    end="$(now)"
    [ "$bytes" = "$((size_mb * 1024 * 1024))" ] || { echo "$bench: ssh on $1 gave $bytes bytes" >&2; return 1; }
    python3 -c "print(f'{$size_mb / ($end - $start):.1f}')"
}
# The file through the app: MB/s (after the app answers at all).
app_once() {
    local start end app="${url[$1]}/@bench/ws/apps/files/big"
    for _ in $(seq 1 100); do
        curl -fsS -o /dev/null -r 0-0 -H "Authorization: Bearer ${token[$1]}" "$app" 2>/dev/null && break
        sleep 0.1
    done
    start="$(now)"
    curl -fsS -o /dev/null -H "Authorization: Bearer ${token[$1]}" "$app" \
        || { echo "$bench: the app on $1 failed" >&2; return 1; }
    end="$(now)"
    python3 -c "print(f'{$size_mb / ($end - $start):.1f}')"
}

results="$work/results"
printf '%-6s %9s %9s %10s %10s %10s %10s\n' round "start s" "shared s" "ssh MB/s" "shared" "app MB/s" "shared"
for round in $(seq 1 "$rounds"); do
    a_start="$(start_once apart)" || exit 1
    s_start="$(start_once shared)" || exit 1
    wait_ready apart && wait_ready shared
    a_ssh="$(ssh_once apart)" || exit 1
    s_ssh="$(ssh_once shared)" || exit 1
    a_app="$(app_once apart)" || exit 1
    s_app="$(app_once shared)" || exit 1
    printf '%-6s %9s %9s %10s %10s %10s %10s\n' "$round" "$a_start" "$s_start" "$a_ssh" "$s_ssh" "$a_app" "$s_app"
    echo "$a_start $s_start $a_ssh $s_ssh $a_app $s_app" >>"$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
def ratio(i, j):
    return statistics.median(r[i] / r[j] for r in rows)
print(f"median ratios, apart / shared: start {ratio(0, 1):.2f}x (goal <= 1.10x), "
      f"ssh {ratio(2, 3):.2f}x (goal >= 0.9x), app {ratio(4, 5):.2f}x (goal >= 0.9x)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
