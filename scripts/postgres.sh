# Sourced by scripts/run-tests after scripts/bootstrap.sh: starts a throwaway
# PostgreSQL on loopback for the store's PostgreSQL backend tests and exports
# ABODE_TEST_POSTGRES_URL; the caller stops it with abode_stop_postgres.

abode_start_postgres() {
  local bin
  if ! command -v initdb >/dev/null 2>&1; then
    for bin in /usr/lib/postgresql/*/bin; do
      [ -x "$bin/initdb" ] && PATH="$bin:$PATH"
    done
  fi
  if ! command -v initdb >/dev/null 2>&1; then
    echo "bootstrap: installing PostgreSQL (Debian postgresql)" >&2
    # abode_need_root comes from scripts/bootstrap.sh (root, or sudo -n).
    abode_need_root apt-get update -qq && abode_need_root apt-get install -y -qq postgresql >/dev/null \
      || { echo "error: cannot install PostgreSQL (Debian postgresql); the store's PostgreSQL tests need it" >&2; return 1; }
    for bin in /usr/lib/postgresql/*/bin; do
      [ -x "$bin/initdb" ] && PATH="$bin:$PATH"
    done
  fi
  if ! command -v initdb >/dev/null 2>&1; then
    echo "error: PostgreSQL (initdb, pg_ctl) is not installed; the store's PostgreSQL tests need it" >&2
    return 1
  fi
  ABODE_PG_DIR=$(mktemp -d /tmp/abode-pg.XXXXXX)
  local as_pg=()
  if [ "$(id -u)" = 0 ]; then
    # initdb and pg_ctl refuse to run as root.
    chown postgres: "$ABODE_PG_DIR"
    as_pg=(runuser -u postgres --)
  fi
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "${as_pg[@]}" initdb -D "$ABODE_PG_DIR/data" -A trust -U abode --no-sync >"$ABODE_PG_DIR/initdb.log" 2>&1 \
    || { echo "error: initdb failed, see $ABODE_PG_DIR/initdb.log" >&2; return 1; }
  "${as_pg[@]}" pg_ctl -D "$ABODE_PG_DIR/data" -l "$ABODE_PG_DIR/server.log" -w \
    -o "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c listen_addresses=127.0.0.1 -p $port -k $ABODE_PG_DIR -c max_connections=200" \
    start >/dev/null \
    || { echo "error: PostgreSQL did not start, see $ABODE_PG_DIR/server.log" >&2; return 1; }
  export ABODE_TEST_POSTGRES_URL="postgres://abode@127.0.0.1:$port/postgres"
  ABODE_PG_AS=("${as_pg[@]}")
}

abode_stop_postgres() {
  if [ -n "${ABODE_PG_DIR:-}" ] && [ -d "$ABODE_PG_DIR/data" ]; then
    "${ABODE_PG_AS[@]}" pg_ctl -D "$ABODE_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$ABODE_PG_DIR"
  fi
}
