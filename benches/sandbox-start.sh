#!/usr/bin/env bash
# What the sandbox costs (issue 29): the wall time of a no-op `abode start`
# of the example template (a stopped workspace started again: the volume
# is there, the agent's process is made) on a server whose Terraform runs
# and workspace processes are sandboxed (the default) against the same on a
# server with `--terraform-sandbox off`, in one run, rounds interleaved so
# that both see the same load. Goal: at most 1.10x.
#
# Usage: benches/sandbox-start.sh [--rounds N] [--bin PATH]
#   --rounds N  starts per server (default 10)
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, bwrap, curl, python3.
set -euo pipefail

bench=sandbox-start.sh
rounds=10
bin="${ABODE_BIN:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/benches/lib.sh"
bench_require terraform bwrap curl python3
bin="$(bench_binary "$root" "$bin")"
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

work="$(mktemp -d)"
pids=()
cleanup() {
    for name in sandboxed plain; do
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
# Bash's own clock: a python3 per reading would add its start-up (tens of
# milliseconds) to every interval.
now() { echo "$EPOCHREALTIME"; }
as() { local name="$1"; shift; ABODE_CONFIG_DIR="$work/config-$name" "$bin" "$@"; }

for name in sandboxed plain; do
    port="$(free_port)"
    flags=()
    [ "$name" = plain ] && flags=(--terraform-sandbox off)
    "$bin" server --address "127.0.0.1:$port" --data-dir "$work/$name" \
        "${flags[@]}" >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && break
        sleep 0.1
    done
    echo "bench-password" | as "$name" login "http://127.0.0.1:$port" --first-user \
        --username bench --email bench@example.com --password-stdin >/dev/null
    as "$name" templates push local --directory "$root/examples/local-workspace" >/dev/null 2>&1
    as "$name" create ws --template local >/dev/null 2>&1
done

# One timed start of NAME's stopped workspace (the stop before it untimed).
start_once() {
    local start end
    as "$1" stop ws >/dev/null 2>&1 || { echo "$bench: the stop on $1 failed" >&2; return 1; }
    start="$(now)"
    as "$1" start ws >"$work/start.log" 2>&1 \
        || { echo "$bench: the start on $1 failed: $(tail -1 "$work/start.log")" >&2; return 1; }
    end="$(now)"
    python3 -c "print(f'{$end - $start:.3f}')"
}
printf '%-6s %12s %12s %7s\n' round "sandbox s" "no sandbox s" ratio
results="$work/results"
for round in $(seq 1 "$rounds"); do
    sandboxed="$(start_once sandboxed)" || exit 1
    plain="$(start_once plain)" || exit 1
    ratio="$(python3 -c "print(f'{$sandboxed / $plain:.2f}')")"
    printf '%-6s %12s %12s %7s\n' "$round" "$sandboxed" "$plain" "$ratio"
    echo "$sandboxed $plain $ratio" >>"$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
ratios = [r[2] for r in rows]
print(f"median: sandboxed {statistics.median(r[0] for r in rows):.3f} s, without "
      f"{statistics.median(r[1] for r in rows):.3f} s, ratio {statistics.median(ratios):.2f}x "
      f"(min {min(ratios):.2f}, max {max(ratios):.2f}; goal <= 1.10x)")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
