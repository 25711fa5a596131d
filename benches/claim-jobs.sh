#!/usr/bin/env bash
# The job claim under load (issue 15): 200 claims by a tagged provisioner
# while 100 or more builds wait (half of them of a tagged version), on SQLite
# and on PostgreSQL, each side by side with point reads of a build by id
# (crates/store/examples/claim_jobs.rs). Release build.
#
# Usage: benches/claim-jobs.sh [--pending N] [--rounds N]
#   PostgreSQL: ABODE_TEST_POSTGRES_URL (scripts/postgres.sh starts one); the
#   bench creates and drops its own database in it.
set -euo pipefail
pending=100
rounds=200
while [ $# -gt 0 ]; do
    case "$1" in
    --pending) pending="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "claim-jobs.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
    esac
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
(cd "$root" && cargo build --release -q -p abode-store --example claim_jobs)
bin="${CARGO_TARGET_DIR:-$root/target}/release/examples/claim_jobs"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo -n "sqlite:     "
"$bin" "$work/claim.db" "$pending" "$rounds"
if [ -n "${ABODE_TEST_POSTGRES_URL:-}" ]; then
    db="abode_claim_$$"
    psql "$ABODE_TEST_POSTGRES_URL" -qc "CREATE DATABASE $db" >/dev/null
    url="$(python3 -c 'import sys,urllib.parse as u; p=u.urlparse(sys.argv[1]); print(p._replace(path="/"+sys.argv[2]).geturl())' "$ABODE_TEST_POSTGRES_URL" "$db")"
    echo -n "postgresql: "
    "$bin" "$url" "$pending" "$rounds" || true
    psql "$ABODE_TEST_POSTGRES_URL" -qc "DROP DATABASE $db" >/dev/null
else
    echo "postgresql: skipped (ABODE_TEST_POSTGRES_URL is not set; scripts/postgres.sh starts one)"
fi
