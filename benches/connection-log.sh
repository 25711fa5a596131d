#!/usr/bin/env bash
# The connection log's cost (issue 49, docs/connections.md): the round trip
# of `abode ssh WS -- true` on a server that logs connections, against one
# that does not. Goal: logging adds at most 5%.
#
# Two servers run side by side, each with its own data dir and workspace;
# the second is started with ABODE_BENCH_NO_CONNECTION_LOG=1, a variable
# only this bench sets (it turns the log off; it is no setting). Each round
# runs N round trips on one, then N on the other, so both see the same
# load; the summary gives each round's ratio and their median.
#
# Usage: benches/connection-log.sh [--runs N] [--rounds N] [--bin PATH]
#   --runs N     round trips per server per round (default 20)
#   --rounds N   interleaved rounds (default 5)
#   --bin PATH   the abode binary (default: the release build, built if missing)
# Needs: terraform, curl, python3.
set -euo pipefail

bench=connection-log.sh
runs=20
rounds=5
bin="${ABODE_BIN:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "$bench: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"
bench_require terraform curl python3
bin="$(bench_binary "$root" "$bin")"
echo "binary: $bin"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
work="$(mktemp -d)"
pids=()
cleanup() {
    bench_cleanup "$work" "${pids[@]}"
}
trap cleanup EXIT
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

# start NAME [ENV=VALUE...]: a server with its data in $work/NAME, a
# workspace `ws` started on it; its config dir in $work/NAME/config.
start() {
    local name="$1"
    shift
    mkdir -p "$work/$name"
    env "$@" bash -c '. "$1/benches/lib.sh"; bench=connection-log.sh
        bench_start_server "$2" "$3" 1 && echo "$server_pid" >"$3/pid"' _ \
        "$root" "$bin" "$work/$name"
    pids+=("$(cat "$work/$name/pid")")
    ABODE_CONFIG_DIR="$work/$name/config" "$bin" templates push local \
        --directory "$root/examples/local-workspace" >/dev/null 2>&1
    ABODE_CONFIG_DIR="$work/$name/config" "$bin" create ws --template local >/dev/null 2>&1
    ABODE_CONFIG_DIR="$work/$name/config" "$bin" ssh ws -- true
}
start logged
start unlogged ABODE_BENCH_NO_CONNECTION_LOG=1

# trips NAME: seconds for $runs round trips on that server.
trips() {
    local start end
    start="$EPOCHREALTIME"
    for _ in $(seq 1 "$runs"); do
        ABODE_CONFIG_DIR="$work/$1/config" "$bin" ssh ws -- true
    done
    end="$EPOCHREALTIME"
    python3 -c "print($end - $start)"
}
ratios=()
for round in $(seq 1 "$rounds"); do
    with="$(trips logged)"
    without="$(trips unlogged)"
    ratio="$(python3 -c "print(f'{$with / $without:.3f}')")"
    ratios+=("$ratio")
    python3 -c "print(f'round $round: logged {$with / $runs * 1000:.1f} ms, unlogged {$without / $runs * 1000:.1f} ms per round trip: {$ratio}x')"
done
logged_rows="$(ABODE_CONFIG_DIR="$work/logged/config" "$bin" connections log -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')"
echo "entries logged: $logged_rows"
joined="$(IFS=,; echo "${ratios[*]}")"
python3 -c "import statistics; print(f'median ratio logged/unlogged: {statistics.median([$joined]):.3f}x')"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
