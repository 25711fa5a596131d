#!/usr/bin/env bash
# Production access (issue 28): what TLS costs the connections into
# workspaces, measured against the same without it in one run.
#
# 1. Throughput: `abode ssh WS -- head -c N /dev/zero` through a server with
#    TLS (the agent's tunnel and the person's connection over wss://, a
#    private CA made here) against the same through a plain server (ws://),
#    interleaved rounds, ratio per round. Goal: wss at least 0.9x of ws.
# 2. Load: the TLS server holding TUNNELS idle agent tunnels over wss://
#    (crates/agent/examples/agent_tunnels.rs dials as the agent does, one
#    tunnel per agent token of workspaces written through the store by
#    crates/store/examples/fill_workspaces.rs), while they ping: the
#    server's RSS and CPU over a window of several ping rounds, and the time
#    of `abode ssh WS -- true` before and under that load.
#    Goals: under 300 MB RSS, under 10% of one core, a session under 100 ms.
#
# Usage: benches/tls-tunnels.sh [--size-mb N] [--rounds N] [--tunnels N]
#                               [--window SECONDS] [--runs N] [--bin PATH]
# Needs: cargo, terraform, openssl, curl, python3.
set -euo pipefail

bench=tls-tunnels.sh
size_mb=200
rounds=3
tunnels=1000
window=60
runs=20
bin="${ABODE_BIN:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --size-mb) size_mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --tunnels) tunnels="$2"; shift 2 ;;
    --window) window="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/benches/lib.sh"
bench_require terraform openssl curl python3
bin="$(bench_binary "$root" "$bin")"
target="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build --release -q -p abode-agent --example agent_tunnels \
    && cargo build --release -q -p abode-store --example fill_workspaces) >&2
generator="$target/release/examples/agent_tunnels"
fill="$target/release/examples/fill_workspaces"
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

work="$(mktemp -d)"
pids=()
cleanup() {
    bench_cleanup "$work" "${pids[@]}"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
unset ABODE_URL ABODE_TOKEN

# The private CA and the servers' certificate (localhost, 127.0.0.1).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=Abode bench CA" -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=localhost" -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -CAcreateserial -days 2 -extfile "$work/san.ext" -out "$work/server.crt" 2>/dev/null
chmod 600 "$work/server.key"
export ABODE_CA_CERT="$work/ca.pem"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Bash's own clock: a python3 per reading would add its start-up (tens of
# milliseconds) to every interval.
now() { echo "$EPOCHREALTIME"; }

# start NAME PROVISIONERS: a server with its data in WORK/NAME; "tls" serves
# https:// (its access URL) beside a plain port, "plain" plain HTTP only.
# Sets url_NAME and pid_NAME.
start() {
    local name="$1" provisioners="$2" port tls_port url flags=()
    port="$(free_port)"
    if [ "$name" = tls ]; then
        tls_port="${tls_port_fixed:-$(free_port)}"
        tls_port_fixed="$tls_port"
        url="https://localhost:$tls_port"
        flags=(--tls-address "127.0.0.1:$tls_port" --tls-cert-file "$work/server.crt"
            --tls-key-file "$work/server.key" --access-url "$url")
    else
        url="http://127.0.0.1:$port"
    fi
    "$bin" server --address "127.0.0.1:$port" --data-dir "$work/$name" \
        --provisioners "$provisioners" "${flags[@]}" >>"$work/$name.log" 2>&1 &
    pids+=($!)
    eval "pid_$name=$!; url_$name=$url"
    for _ in $(seq 1 100); do
        curl -fsS --cacert "$work/ca.pem" "$url/api/v1/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "$bench: the $name server did not start:" >&2
    tail -5 "$work/$name.log" >&2
    exit 1
}

# as NAME ARGS...: the CLI signed in to the NAME server.
as() { local name="$1"; shift; ABODE_CONFIG_DIR="$work/config-$name" "$bin" "$@"; }

for name in plain tls; do
    start "$name" 1
    url_var="url_$name"
    echo "bench-password" | as "$name" login "${!url_var}" --first-user --username bench \
        --email bench@example.com --password-stdin >/dev/null
    as "$name" templates push local --directory "$root/examples/local-workspace" >/dev/null 2>&1
    as "$name" create ws --template local >/dev/null 2>&1
    # The first connection waits for the agent.
    as "$name" ssh ws -- true
done

# 1. Throughput, interleaved.
bytes=$((size_mb * 1024 * 1024))
copy() {
    local start end got
    start="$(now)"
    got="$(as "$1" ssh ws -- head -c "$bytes" /dev/zero | wc -c)"
    end="$(now)"
    [ "$got" = "$bytes" ] || { echo "$bench: $1 copied $got of $bytes bytes" >&2; exit 1; }
    python3 -c "print(f'{$size_mb / ($end - $start):.1f}')"
}
printf '%-6s %12s %12s %7s\n' round "ws:// MB/s" "wss:// MB/s" ratio
results="$work/results"
for round in $(seq 1 "$rounds"); do
    plain="$(copy plain)"
    tls="$(copy tls)"
    ratio="$(python3 -c "print(f'{$tls / $plain:.2f}')")"
    printf '%-6s %12s %12s %7s\n' "$round" "$plain" "$tls" "$ratio"
    echo "$plain $tls $ratio" >>"$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
ratios = [r[2] for r in rows]
print(f"median: ws:// {statistics.median(r[0] for r in rows):.1f} MB/s, wss:// "
      f"{statistics.median(r[1] for r in rows):.1f} MB/s, ratio {statistics.median(ratios):.2f}x "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f}; goal >= 0.90x)")
PY


# session_ms NAME: the median time of `abode ssh ws -- true`, in ms.
session_ms() {
    local times="$work/times-$1-$RANDOM" start end
    for _ in $(seq 1 "$runs"); do
        start="$(now)"; as "$1" ssh ws -- true; end="$(now)"
        python3 -c "print(($end - $start) * 1000)" >>"$times"
    done
    python3 -c "import statistics,sys; print(f'{statistics.median(float(l) for l in open(sys.argv[1])):.0f}')" "$times"
}

# The round trip of a session through each, before any load.
plain_ms="$(session_ms plain)"
tls_ms="$(session_ms tls)"
python3 -c "print(f'abode ssh ws -- true (median of $runs): ws:// $plain_ms ms, wss:// $tls_ms ms, ratio {$tls_ms / $plain_ms:.2f}x')"

# 2. Load: the TLS server again with no provisioner (the store is written
# beside it), the tunnels, then the measurements.
kill "$pid_plain"; wait "$pid_plain" 2>/dev/null || true
kill "$pid_tls"; wait "$pid_tls" 2>/dev/null || true
start tls 0
as tls ssh ws -- true
idle_ms="$(session_ms tls)"
"$fill" "$work/tls/abode.db" bench "$tunnels" "$work/tokens" >/dev/null
"$generator" "$url_tls" "$work/tokens" >"$work/generator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 600); do
    grep -q "tunnels up" "$work/generator.log" && break
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
        echo "$bench: the load generator failed: $(tail -1 "$work/generator.log")" >&2
        exit 1
    fi
    sleep 0.5
done
grep "tunnels up" "$work/generator.log" || { echo "$bench: the tunnels never came up" >&2; exit 1; }
# ticks: the server's user+system CPU time so far, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$pid_tls/stat"; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid_tls/status"; }
hz="$(getconf CLK_TCK)"
before="$(ticks)"; start_time="$(now)"
peak=0
for _ in $(seq 1 "$window"); do
    sleep 1
    rss="$(rss_mb)"; [ "$rss" -gt "$peak" ] && peak="$rss"
done
after="$(ticks)"; end_time="$(now)"
loaded_ms="$(session_ms tls)"
dropped="$(grep -c "dropped" "$work/generator.log" || true)"
python3 - <<PY
cpu = ($after - $before) / $hz / ($end_time - $start_time) * 100
print(f"$tunnels idle wss:// tunnels for ${window}s: peak RSS $peak MB (goal < 300), "
      f"CPU {cpu:.1f}% of one core (goal < 10), tunnels dropped: $dropped")
print(f"abode ssh ws -- true: {$idle_ms} ms idle, {$loaded_ms} ms under the load "
      f"(median of $runs; ratio {$loaded_ms / $idle_ms:.2f}x; goal < 100 ms)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
