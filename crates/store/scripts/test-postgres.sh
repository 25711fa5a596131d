#!/usr/bin/env bash
# Runs the store's tests against a throwaway PostgreSQL cluster (the PostgreSQL
# variant of every store test runs only when ABODE_TEST_POSTGRES_URL is set).
# Needs initdb and pg_ctl on PATH; as root, the cluster runs as the `postgres`
# user (PostgreSQL refuses root). Usage: crates/store/scripts/test-postgres.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
for tool in initdb pg_ctl; do
    command -v "$tool" >/dev/null 2>&1 || { echo "test-postgres.sh: $tool is not on PATH" >&2; exit 1; }
done
dir="$(mktemp -d /tmp/abode-store-pg.XXXXXX)"
port=$(( 20000 + RANDOM % 20000 ))
as_pg=()
if [ "$(id -u)" = 0 ]; then
    chown postgres "$dir"
    as_pg=(runuser -u postgres --)
fi
cleanup() {
    "${as_pg[@]}" pg_ctl -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
"${as_pg[@]}" initdb -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
"${as_pg[@]}" pg_ctl -D "$dir/data" -w -l "$dir/server.log" \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
ABODE_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/postgres" \
    cargo test -p abode-store --test store
