#!/usr/bin/env bash
# Lists that scale (issue 10, item 8): `GET /api/v1/workspaces?all=true&limit=50`
# on a database of 10,000 workspaces (each with a succeeded start build and a
# ready agent), side by side in one run with `GET /api/v1/health` as the
# floor, 32 connections for 10 s each, with wrk. A page is one query, so the
# goal is at least 1/30 of /health's rate with p99 under 50 ms, on SQLite and
# on PostgreSQL. `GET /api/v1/users/me` is measured too: an authenticated
# request that lists nothing, so that what authentication costs every request
# is told apart from what the list costs.
#
# The workspaces are written through the store directly
# (crates/store/examples/fill_workspaces.rs) while the server runs with
# --provisioners 0: no Terraform build runs.
#
# Usage: benches/list-workspaces.sh [--backend sqlite|postgres|both]
#          [--workspaces N] [--duration 10s] [--profile release|dev]
#   PostgreSQL: ABODE_TEST_POSTGRES_URL (scripts/postgres.sh starts one); the
#   bench creates and drops its own database in it.
# Needs: cargo, wrk (Debian: apt-get install -y wrk), curl, jq, psql for postgres.
set -euo pipefail

backend=both
workspaces=10000
duration=10s
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --workspaces) workspaces="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    *) echo "list-workspaces.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
for tool in wrk curl jq; do
    command -v "$tool" >/dev/null 2>&1 || { echo "list-workspaces.sh: $tool is not on PATH" >&2; exit 1; }
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo_profile=(--release)
[ "$profile" = dev ] && cargo_profile=()
(cd "$root" && cargo build "${cargo_profile[@]}" -p abode && cargo build "${cargo_profile[@]}" -p abode-store --example fill_workspaces)
dir="$target/$([ "$profile" = dev ] && echo debug || echo release)"
bin="$dir/abode"
fill="$dir/examples/fill_workspaces"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"

# One wrk run: "<req/s> <p99 ms>".
measure() {
    local out
    out="$(wrk -t2 -c32 -d"$duration" --latency -H "Authorization: Bearer $token" "$1")"
    echo "$out" >>"$work/wrk.log"
    local rps p99
    rps=$(echo "$out" | awk '/^Requests\/sec:/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
    if echo "$out" | grep -q "Non-2xx"; then
        echo "list-workspaces.sh: $1 answered errors:" >&2
        echo "$out" >&2
        exit 1
    fi
    echo "$rps $p99"
}

# Converts wrk's latency (e.g. 1.23ms, 512.00us, 1.02s) to milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); print v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); print v + 0 }
        else if (v ~ /s$/) { sub(/s$/, "", v); print v * 1000 }
        else print v }'
}

run_backend() {
    local name="$1" database_args=() fill_target
    if [ "$name" = postgres ]; then
        : "${ABODE_TEST_POSTGRES_URL:?list-workspaces.sh: set ABODE_TEST_POSTGRES_URL (scripts/postgres.sh)}"
        local db="abode_bench_$$"
        psql -q "$ABODE_TEST_POSTGRES_URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
        fill_target="${ABODE_TEST_POSTGRES_URL%/*}/$db"
        database_args=(--database-url "$fill_target")
    else
        fill_target="$work/$name/abode.db"
    fi
    mkdir -p "$work/$name"
    start_server() {
        "$bin" server --address "127.0.0.1:$port" --data-dir "$work/$name" --provisioners 0 \
            "${database_args[@]}" >>"$work/$name/server.log" 2>&1 &
        server_pid=$!
        for _ in $(seq 1 100); do
            curl -sf "$url/api/v1/health" >/dev/null && return
            sleep 0.1
        done
        echo "list-workspaces.sh: the server did not start, see:" >&2
        cat "$work/$name/server.log" >&2
        exit 1
    }
    stop_server() {
        kill "$server_pid"
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    }
    start_server
    token=$(curl -sf -X POST "$url/api/v1/users/first" -H 'content-type: application/json' \
        -d '{"username":"owner","email":"owner@example.com","password":"bench-password"}' | jq -r .token)
    # The store is filled while the server is down: no server loop competes
    # with the filler for the rows it writes.
    stop_server
    echo "== $name: filling $workspaces workspaces"
    local start=$SECONDS
    "$fill" "$fill_target" owner "$workspaces" | tail -1
    echo "   filled in $((SECONDS - start)) s"
    if [ "$name" = postgres ]; then
        # The fill inserted and then updated every build and agent: measure
        # the database at rest, as autovacuum keeps it, not while autovacuum
        # works through those rows (and with the statistics it gathers).
        psql -q "$fill_target" -c "VACUUM ANALYZE"
    fi
    start_server
    local page="$url/api/v1/workspaces?all=true&limit=50"
    local count
    count=$(curl -sf -H "Authorization: Bearer $token" "$page" | jq '.workspaces | length')
    [ "$count" = 50 ] || { echo "list-workspaces.sh: a page held $count workspaces, not 50" >&2; exit 1; }
    read -r health_rps health_p99 < <(measure "$url/api/v1/health")
    # An authenticated request that lists nothing: what authentication alone
    # costs (token lookup, use recorded, user), the ceiling of any list.
    read -r me_rps me_p99 < <(measure "$url/api/v1/users/me")
    read -r list_rps list_p99 < <(measure "$page")
    local list_p99_ms
    list_p99_ms=$(to_ms "$list_p99")
    awk -v b="$name" -v h="$health_rps" -v hp="$health_p99" -v m="$me_rps" -v mp="$me_p99" \
        -v l="$list_rps" -v lp="$list_p99" -v lpm="$list_p99_ms" 'BEGIN {
        printf "%-9s /health %8.0f req/s (p99 %s) | /users/me %7.0f req/s (p99 %s) | workspaces page of 50: %6.0f req/s (p99 %s) | ratio 1/%.1f | goal: >= 1/30 and p99 < 50 ms: %s\n",
            b, h, hp, m, mp, l, lp, h / l, ((h / l) <= 30 && lpm < 50) ? "met" : "NOT met" }'
    stop_server
    if [ "$name" = postgres ]; then
        psql -q "$ABODE_TEST_POSTGRES_URL" -c "DROP DATABASE IF EXISTS abode_bench_$$" || true
    fi
}

case "$backend" in
sqlite | postgres) run_backend "$backend" ;;
both) run_backend sqlite; run_backend postgres ;;
*) echo "list-workspaces.sh: --backend is sqlite, postgres or both" >&2; exit 2 ;;
esac
