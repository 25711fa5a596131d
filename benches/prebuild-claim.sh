#!/usr/bin/env bash
# Claim latency (issue 12): how long a person waits for a workspace whose
# agent is ready, claimed from a pool of prebuilt workspaces, side by side in
# one run with a cold `abode create` of the same template, and with a no-op
# update of a running workspace to identical files (Terraform's no-op plan and
# apply: the floor a claim build cannot go under). Goal: a claim costs the no-op update and less
# than one second more.
#
# The example template (examples/local-workspace) is pushed twice: as `pool`
# with the preset of crates/abode/tests/e2e_fixtures/prebuild-pool (2
# instances), and as `cold` without it. Each round: claim one (`create
# --preset small`) and time it until `abode show` says its agent is ready;
# create one from `cold` and time the same; push `cold` again unchanged and
# time the update of that workspace (no-op); then let the pool refill. The
# reconciliation is paused while a round is timed (claims work while paused),
# so that no refill runs beside the timed builds. Times are wall clock, per round and
# as medians.
#
# Usage: benches/prebuild-claim.sh [--rounds N] [--profile release|dev]
# Needs: cargo, terraform, jq, curl.
set -euo pipefail

rounds=5
profile=release
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    *) echo "prebuild-claim.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
for tool in terraform jq curl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "prebuild-claim.sh: $tool is not on PATH" >&2; exit 1; }
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
cargo_profile=(--release)
[ "$profile" = dev ] && cargo_profile=()
(cd "$root" && cargo build "${cargo_profile[@]}" -p abode)
bin="$target/$([ "$profile" = dev ] && echo debug || echo release)/abode"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    # Workspace processes the server started (agents) end with their workspace;
    # delete what is left so that no agent outlives the bench.
    pkill -f "$work" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
export ABODE_CONFIG_DIR="$work/config"

"$bin" server --address "127.0.0.1:$port" --data-dir "$work/data" \
    --prebuilds-reconcile-interval 1 --agent-heartbeat-interval 1 \
    >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -sf "$url/api/v1/health" >/dev/null && break
    sleep 0.1
done
echo "bench-password" | "$bin" login "$url" --first-user --username owner \
    --email owner@example.com --password-stdin >/dev/null

cp -r "$root/examples/local-workspace" "$work/cold"
cp -r "$root/examples/local-workspace" "$work/pool"
cp "$root/crates/abode/tests/e2e_fixtures/prebuild-pool/presets.tf" "$work/pool/"
"$bin" templates push cold -d "$work/cold" >/dev/null 2>&1
"$bin" templates push pool -d "$work/pool" >/dev/null 2>&1

now() { date +%s.%N; }

# Waits until the pool has 2 ready prebuilds and nothing in progress.
wait_for_pool() {
    for _ in $(seq 1 600); do
        local ready
        ready=$("$bin" prebuilds status -o json | jq '[.[] | select(.preset == "small" and .ready == 2 and .in_progress == 0)] | length')
        [ "$ready" = 1 ] && return
        sleep 0.5
    done
    echo "prebuild-claim.sh: the pool never got 2 ready prebuilds; server log:" >&2
    tail -50 "$work/server.log" >&2
    exit 1
}

# Runs "$@" (a create or start that follows its build) and waits until the
# workspace's agent is ready; prints the seconds it took.
time_until_ready() {
    local workspace="$1"; shift
    local start
    start=$(now)
    "$@" >/dev/null 2>&1
    for _ in $(seq 1 1200); do
        [ "$("$bin" show "$workspace" -o json | jq -r '.agent.status')" = ready ] && break
        sleep 0.05
    done
    echo "$(now) - $start" | bc -l
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

printf "%-6s %12s %12s %12s\n" round "claim (s)" "cold (s)" "no-op (s)"
: >"$work/claims"; : >"$work/colds"; : >"$work/noops"
for round in $(seq 1 "$rounds"); do
    wait_for_pool
    # Paused, the pool does not start refilling during the timed claim: on a
    # small machine the refill's Terraform would compete with the claim's.
    "$bin" prebuilds pause >/dev/null
    claim=$(time_until_ready "claimed-$round" "$bin" create "claimed-$round" --template pool --preset small)
    reason=$("$bin" show "claimed-$round" -o json | jq -r '.latest_build.reason')
    [ "$reason" = prebuild_claim ] || { echo "prebuild-claim.sh: round $round was not a claim ($reason)" >&2; exit 1; }
    cold=$(time_until_ready "cold-$round" "$bin" create "cold-$round" --template cold)
    # The same files again as a new active version: the update's plan and
    # apply change nothing (a running workspace refuses a plain start).
    "$bin" templates push cold -d "$work/cold" --activate >/dev/null 2>&1
    noop=$(time_until_ready "cold-$round" "$bin" update "cold-$round")
    "$bin" prebuilds resume >/dev/null
    printf "%-6s %12.2f %12.2f %12.2f\n" "$round" "$claim" "$cold" "$noop"
    echo "$claim" >>"$work/claims"; echo "$cold" >>"$work/colds"; echo "$noop" >>"$work/noops"
done
claim=$(median <"$work/claims"); cold=$(median <"$work/colds"); noop=$(median <"$work/noops")
awk -v c="$claim" -v k="$cold" -v n="$noop" 'BEGIN {
    printf "median: claim %.2f s | cold create %.2f s | no-op update %.2f s | claim/cold %.2f | claim - no-op %.2f s | goal (claim < no-op + 1 s): %s\n",
        c, k, n, c / k, c - n, (c < n + 1) ? "met" : "NOT met" }'
