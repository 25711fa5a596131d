#!/usr/bin/env bash
# The prebuild reconciliation's database snapshot (issue 12) and the lifecycle
# scheduler's tick snapshot (issue 13): one
# transaction over 1,000 presets and 10,000 prebuilt workspaces, timed on
# SQLite and on PostgreSQL (crates/store/examples/prebuild_snapshot.rs fills
# the database through the store and prints the median of 21 reads). The
# decision on that snapshot is timed by `cargo bench -p abode-prebuilds`.
#
# Usage: benches/prebuild-snapshot.sh [--backend sqlite|postgres|both]
#   PostgreSQL: ABODE_TEST_POSTGRES_URL (scripts/postgres.sh starts one); the
#   bench creates and drops its own database in it.
set -euo pipefail

backend=both
while [ $# -gt 0 ]; do
    case "$1" in
    --backend) backend="$2"; shift 2 ;;
    *) echo "prebuild-snapshot.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
(cd "$root" && cargo build --release -p abode-store --example prebuild_snapshot)
bench="$target/release/examples/prebuild_snapshot"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ "$backend" = sqlite ] || [ "$backend" = both ]; then
    echo "== sqlite"
    "$bench" "$work/abode.db"
fi
if [ "$backend" = postgres ] || [ "$backend" = both ]; then
    : "${ABODE_TEST_POSTGRES_URL:?prebuild-snapshot.sh: set ABODE_TEST_POSTGRES_URL (scripts/postgres.sh)}"
    db="abode_snapshot_$$"
    psql -q "$ABODE_TEST_POSTGRES_URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
    echo "== postgres"
    "$bench" "${ABODE_TEST_POSTGRES_URL%/*}/$db" || { psql -q "$ABODE_TEST_POSTGRES_URL" -c "DROP DATABASE $db"; exit 1; }
    psql -q "$ABODE_TEST_POSTGRES_URL" -c "DROP DATABASE $db"
fi
