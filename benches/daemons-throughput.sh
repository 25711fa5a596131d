#!/usr/bin/env bash
# External provisioner throughput (issue 15): the wall time of N workspace
# creates (default 30), asked all at once, whose apply sleeps S seconds
# (default 3; the `sleepy` e2e fixture), run by 1 and then by 3 external
# provisioner daemons (`abode provisioner start`, concurrency 1 each, one
# key, a shared volumes dir) behind an API-only server (`--provisioners 0`),
# and the ratio. Goal: 3 daemons reach at least 2.5x the throughput of 1.
#
# Each run is a fresh server and database: SQLite always, PostgreSQL too
# when ABODE_TEST_POSTGRES_URL is set (scripts/postgres.sh starts one; the
# bench creates and drops its own databases in it). Every create must
# succeed, or the run fails.
#
# Usage: benches/daemons-throughput.sh [--builds N] [--seconds S] [--bin PATH]
#   --bin PATH  the abode binary (default: target/release/abode, built if missing)
# Needs: cargo, terraform, jq, curl, python3 (benches/lib.sh), psql for PostgreSQL.
set -euo pipefail

builds=30
seconds=3
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --builds) builds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) echo "daemons-throughput.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench=daemons-throughput.sh
. "$root/benches/lib.sh"
bench_require terraform jq curl python3
bin="$(bench_binary "$root" "$bin")"
template="$root/crates/abode/tests/e2e_fixtures/sleepy"
work="$(mktemp -d)"
server_pid=""
daemon_pids=()
databases=()
# Daemons are killed: they run nothing by then, and an idle daemon asked to
# stop takes up to its acquire's long poll (20 s) to exit.
stop_all() {
    for pid in "${daemon_pids[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    daemon_pids=()
    server_pid=""
}
cleanup() {
    stop_all
    for db in "${databases[@]}"; do
        psql -q "$ABODE_TEST_POSTGRES_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
now_ms() { date +%s%3N; }

# fail DIR MESSAGE: the message and the logs' tails, then exit 1.
fail() {
    echo "$bench: $2" >&2
    for log in "$1"/*.log; do
        echo "--- $log" >&2
        tail -5 "$log" >&2
    done
    exit 1
}

# run BACKEND DAEMONS: sets wall_ms, the wall time of the creates.
run() {
    local backend="$1" daemons="$2" dir database_args=()
    dir="$work/$backend-$daemons"
    mkdir -p "$dir"
    if [ "$backend" = postgres ]; then
        local db="abode_daemons_$$_$daemons"
        psql -q "$ABODE_TEST_POSTGRES_URL" -c "CREATE DATABASE $db" >/dev/null
        databases+=("$db")
        database_args=(--database-url "$(python3 -c 'import sys,urllib.parse as u; p=u.urlparse(sys.argv[1]); print(p._replace(path="/"+sys.argv[2]).geturl())' "$ABODE_TEST_POSTGRES_URL" "$db")")
    fi
    bench_start_server "$bin" "$dir" 0 "${database_args[@]}"
    "$bin" templates push sleepy --directory "$template" >/dev/null 2>&1
    "$bin" provisioner keys create bench >"$dir/key" 2>/dev/null
    chmod 0600 "$dir/key"
    for i in $(seq 1 "$daemons"); do
        "$bin" provisioner start --url "$server_url" --key-file "$dir/key" \
            --data-dir "$dir/daemon-$i" --volumes-dir "$dir/volumes" \
            --concurrency 1 --name "d$i" >"$dir/daemon-$i.log" 2>&1 &
        daemon_pids+=($!)
    done
    local connected=0
    for _ in $(seq 1 300); do
        connected=$("$bin" provisioner list -o json | jq '[.[] | select(.kind == "external" and .status == "connected")] | length')
        [ "$connected" = "$daemons" ] && break
        sleep 0.1
    done
    [ "$connected" = "$daemons" ] || fail "$dir" "$connected of $daemons daemons connected"

    local start failed=0
    start=$(now_ms)
    # Every create follows its build to the end; all are asked at once.
    seq 1 "$builds" | xargs -P "$builds" -I{} "$bin" create "w{}" --template sleepy \
        --parameter "seconds=$seconds" >"$dir/creates.log" 2>&1 || failed=1
    wall_ms=$(( $(now_ms) - start ))
    local succeeded
    succeeded=$("$bin" list -o json | jq '[.[] | select(.latest_build.status == "succeeded")] | length')
    if [ "$failed" = 1 ] || [ "$succeeded" != "$builds" ]; then
        fail "$dir" "$backend with $daemons daemons: $succeeded of $builds builds succeeded"
    fi
    stop_all
}

# measure BACKEND: both runs and their ratio, on one line.
measure() {
    local backend="$1" one three
    echo "$bench: $backend: $builds creates (apply: sleep $seconds) with 1 daemon..." >&2
    run "$backend" 1
    one=$wall_ms
    echo "$bench: $backend: the same with 3 daemons..." >&2
    run "$backend" 3
    three=$wall_ms
    awk -v b="$backend" -v n="$builds" -v one="$one" -v three="$three" 'BEGIN {
        printf "%-10s %d builds: 1 daemon %.1f s (%.2f builds/s), 3 daemons %.1f s (%.2f builds/s): %.2fx (goal 2.5x)\n",
            b ":", n, one / 1000, n * 1000 / one, three / 1000, n * 1000 / three, one / three
    }'
}

echo "$bench: $bin" >&2
measure sqlite
if [ -n "${ABODE_TEST_POSTGRES_URL:-}" ]; then
    measure postgres
else
    echo "postgres:  skipped (ABODE_TEST_POSTGRES_URL is not set; scripts/postgres.sh starts one)"
fi
