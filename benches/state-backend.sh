#!/usr/bin/env bash
# The state backend's cost (issue 26): every build's Terraform keeps its
# state through the server (Terraform's `http` backend, its lock, the
# state written as the apply goes) instead of a file in the work dir. Two
# releases side by side in one hyperfine run, each with its own server on
# SQLite and the same template (benches/state-backend/main.tf):
#
#   1. a no-op `abode start` (init, plan, show, the guard, an apply of
#      nothing: the workspace has only its volume, which a stop keeps; each
#      run after an untimed no-op stop; goal: at most 1.10x the base);
#   2. a start that creates 200 resources (each run after an untimed stop
#      that destroys them; goal: at most 1.10x).
#
# Usage: benches/state-backend.sh --base-bin PATH [--bin PATH] [--runs N]
#   --base-bin PATH  the abode binary of the release before the backend
#                    (build it from a worktree: git worktree add ../base 5b0f675;
#                    cd ../base && cargo build --release -p abode)
#   --bin PATH       this release's abode (default: target/release/abode)
#   --runs N         hyperfine runs per command (default 10)
# Needs: cargo, terraform, hyperfine, curl, python3 (benches/lib.sh).
set -euo pipefail

runs=10
bin=""
base=""
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --base-bin) base="$2"; shift 2 ;;
    *) echo "state-backend.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench=state-backend.sh
. "$root/benches/lib.sh"
bench_install_debian hyperfine hyperfine
bench_require terraform hyperfine curl python3
[ -n "$base" ] || { echo "$bench: --base-bin is required (see the header of this script)" >&2; exit 2; }
bin="$(bench_binary "$root" "$bin")"
base="$(bench_binary "$root" "$base")"
template="$root/benches/state-backend"
work="$(mktemp -d)"
pids=()

cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# One server per release, each with a user, the template and two
# workspaces: `noop` (its volume only) and `many` (200 more while started).
for side in base new; do
    side_bin="$bin"
    [ "$side" = base ] && side_bin="$base"
    mkdir -p "$work/$side"
    bench_start_server "$side_bin" "$work/$side" 1
    pids+=("$server_pid")
    "$side_bin" templates push bench --directory "$template" >/dev/null 2>&1
    "$side_bin" create noop --template bench --parameter count=0 >/dev/null 2>&1
    "$side_bin" create many --template bench --parameter count=200 >/dev/null 2>&1
done

for what in noop many; do
    prepare=(--prepare "env ABODE_CONFIG_DIR=$work/base/config $base stop $what"
             --prepare "env ABODE_CONFIG_DIR=$work/new/config $bin stop $what")
    echo "== abode start $what"
    hyperfine --runs "$runs" --warmup 1 -N "${prepare[@]}" \
        -n base "env ABODE_CONFIG_DIR=$work/base/config $base start $what" \
        -n backend "env ABODE_CONFIG_DIR=$work/new/config $bin start $what"
done
