#!/usr/bin/env bash
# A Citus cluster on this machine for `npm run test:citus` (docs/scaling-out.md, "On Citus"): a coordinator and
# two workers of Debian's PostgreSQL 15 on localhost, in throwaway folders, fsync off. Prints the coordinator's
# URL (for TEST_DATABASE_URL) on stdout; `scripts/citus-cluster.sh stop` stops it.
#
# Citus itself is built and installed first when PostgreSQL 15 does not have it, from CITUS_SOURCE (a release
# tarball, e.g. citus-13.2.2.tar.gz) with CITUS_PATCH applied when set (Debian and root: apt-get, make install);
# a machine that keeps it skips the build. Environment: CITUS_DIR (folders, default /tmp/lgpg-citus),
# CITUS_PORT (the coordinator's; the workers take the next two; default 9700).
#
# Parts, for CI (.ci/run): `deps` installs only the build's Debian packages (they move postgresql-15 to its
# minor release, so before any server starts), `install` builds and installs Citus too (it can run in the
# background while other tests run), then a plain run starts the cluster.
set -euo pipefail

PG_BIN=/usr/lib/postgresql/15/bin
DIR="${CITUS_DIR:-/tmp/lgpg-citus}"
PORT="${CITUS_PORT:-9700}"
PORTS=("$PORT" "$((PORT + 1))" "$((PORT + 2))")
log() { printf '[citus] %s\n' "$*" >&2; }
# The servers run as the postgres OS user when this runs as root (Postgres refuses root).
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi; }

stop() {
  for p in "${PORTS[@]}"; do
    [ -f "$DIR/$p/postmaster.pid" ] && as_pg "$PG_BIN/pg_ctl -D $DIR/$p -m immediate stop >/dev/null" || true
  done
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi

installed() { [ -f /usr/lib/postgresql/15/lib/citus.so ]; }
# The build's packages are there (a `deps` run before): the background build needs no apt-get of its own.
have_deps() {
  local f c
  for f in /usr/lib/postgresql/15/lib/pgxs/src/makefiles/pgxs.mk /usr/include/lz4.h /usr/include/zstd.h /usr/include/krb5.h; do [ -f "$f" ] || return 1; done
  for c in flex bison make gcc patch; do command -v "$c" >/dev/null || return 1; done
}
deps() {
  installed && return 0
  have_deps && return 0
  [ -n "${CITUS_SOURCE:-}" ] || { log "Citus is not installed for PostgreSQL 15: install it, or set CITUS_SOURCE to a release tarball to build"; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  # postgresql-server-dev-15 moves postgresql-15 to its own minor release: restart servers started before.
  { apt-get update -qq && apt-get install -y -qq postgresql-15 postgresql-server-dev-15 libkrb5-dev liblz4-dev libzstd-dev flex bison make gcc patch; } >/dev/null
}
install() {
  installed && return 0
  deps
  local started=$SECONDS build buildlog
  log "building Citus from $CITUS_SOURCE"
  build="$(mktemp -d)"
  tar xzf "$CITUS_SOURCE" -C "$build" --strip-components=1
  if [ -n "${CITUS_PATCH:-}" ]; then (cd "$build" && patch -s -p1 < "$CITUS_PATCH"); fi
  buildlog="$(mktemp)"
  (cd "$build" && ./configure --without-libcurl PG_CONFIG="$PG_BIN/pg_config" && make -j"$(nproc)" && make install) > "$buildlog" 2>&1 ||
    { tail -n 40 "$buildlog" >&2; log "the Citus build failed (the log's end above)"; exit 1; }
  rm -rf "$build" "$buildlog"
  log "Citus installed ($((SECONDS - started)) s)"
}
case "${1:-}" in
  deps) deps; exit 0 ;;
  install) install; exit 0 ;;
  "") install ;;
  *) log "usage: $0 [deps|install|stop]"; exit 2 ;;
esac

stop
rm -rf "$DIR"
mkdir -p "$DIR"
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
for p in "${PORTS[@]}"; do
  as_pg "$PG_BIN/initdb -D $DIR/$p -U postgres --auth=trust -E UTF8 >/dev/null"
  cat >> "$DIR/$p/postgresql.conf" <<CONF
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR'
shared_preload_libraries = 'citus'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
citus.enable_unsafe_triggers = on
CONF
  as_pg "$PG_BIN/pg_ctl -D $DIR/$p -l $DIR/$p.log -w start >/dev/null"
  "$PG_BIN/psql" -qX -h 127.0.0.1 -p "$p" -U postgres -c "CREATE EXTENSION citus" >/dev/null
done
"$PG_BIN/psql" -qX -h 127.0.0.1 -p "$PORT" -U postgres -c "SELECT citus_set_coordinator_host('127.0.0.1', $PORT)" \
  -c "SELECT citus_add_node('127.0.0.1', ${PORTS[1]})" -c "SELECT citus_add_node('127.0.0.1', ${PORTS[2]})" >/dev/null
log "coordinator 127.0.0.1:$PORT, workers ${PORTS[1]} and ${PORTS[2]}"
echo "postgres://postgres@127.0.0.1:$PORT/postgres"
