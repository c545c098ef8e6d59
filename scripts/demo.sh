#!/usr/bin/env bash
# demo.sh — see rollout_fdw work on a fresh Debian 12 machine. Run as root.
#
#   scripts/demo.sh [--no-deps] [--plain]      install, build, start a demo cluster, run the demo
#   scripts/demo.sh --stop                     stop the demo cluster and remove its directory
#
# What it does:
#   1. installs the Debian packages (scripts/install-deps.sh) unless --no-deps;
#   2. builds (make -j2) and installs (make install) the extension from this tree;
#   3. stops a previous demo cluster and removes its directory, then creates a
#      throw-away PostgreSQL 15 cluster as the postgres user: data in
#      $DIR/data, unix socket in $DIR, log in $DIR/postgresql.log, port $PORT,
#      trust authentication, no TCP listener;
#   4. runs scripts/demo.sql with psql (-e: every statement is shown): creates the
#      extension, a server with the default (embedded) store location and the
#      rollout_steps foreign table, writes 5000 agent-rollout steps in three
#      transactions (one of them a COPY FROM STDIN), rolls one back, upserts 20
#      existing ids, queries, flushes and merges, and shows the planner at work
#      (estimates from metadata, ANALYZE, ORDER BY key without a Sort) and the
#      store's counters;
#   5. shows the store's files on disk and how to connect and stop. The cluster
#      keeps running so that you can look around.
#
# Environment: ROLLOUT_DEMO_DIR (default /tmp/rollout_demo), ROLLOUT_DEMO_PORT
# (default 5499), ROLLOUT_DEMO_PRELOAD (shared_preload_libraries; default
# rollout_fdw, the recommended configuration: the shared-memory writer with
# group commit, the memtable and the sweeper; --plain sets it empty),
# MAKE_JOBS (default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BIN/pg_config
DIR=${ROLLOUT_DEMO_DIR:-/tmp/rollout_demo}
PORT=${ROLLOUT_DEMO_PORT:-5499}
PRELOAD=${ROLLOUT_DEMO_PRELOAD-rollout_fdw}
DEMO_SQL=$ROOT/scripts/demo.sql
DATA=$DIR/data
LOG=$DIR/postgresql.log
MARKER=$DIR/.rollout_demo

run_deps=1
stop_only=0
for arg in "$@"; do
	case $arg in
	--no-deps) run_deps=0 ;;
	--preload) PRELOAD=rollout_fdw ;; # the default; kept for old command lines
	--plain) PRELOAD= ;;
	--stop) stop_only=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "demo.sh: unknown argument: $arg (try --help)" >&2
		exit 2
		;;
	esac
done

say() { printf '\n=== %s\n' "$*"; }
die() {
	echo "demo.sh: $*" >&2
	exit 1
}
as_postgres() { runuser -u postgres -- "$@"; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and the extension, and runs the cluster as postgres)"
[[ $PORT =~ ^[0-9]+$ ]] || die "ROLLOUT_DEMO_PORT must be a number"
case $DIR in
/*) ;;
*) die "ROLLOUT_DEMO_DIR must be an absolute path" ;;
esac
[ "$DIR" != / ] || die "ROLLOUT_DEMO_DIR must not be /"

# Stop the demo cluster in $DIR (if one runs) and remove $DIR. Refuses to
# remove a directory that this script did not create.
stop_demo_cluster() {
	if [ -f "$DATA/postmaster.pid" ]; then
		echo "demo.sh: stopping the demo cluster in $DATA"
		as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
		if [ -f "$DATA/postmaster.pid" ]; then
			local pid
			pid=$(head -n 1 "$DATA/postmaster.pid")
			if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
				die "could not stop the server with pid $pid running in $DATA"
			fi
		fi
	fi
	if [ -e "$DIR" ]; then
		if [ -f "$MARKER" ] || [ -z "$(ls -A "$DIR")" ]; then
			rm -rf "$DIR"
		else
			die "$DIR exists and was not made by demo.sh; remove it or set ROLLOUT_DEMO_DIR"
		fi
	fi
}

if [ "$stop_only" = 1 ]; then
	stop_demo_cluster
	echo "demo.sh: the demo cluster is stopped and $DIR is removed"
	exit 0
fi

[ -f "$DEMO_SQL" ] || die "$DEMO_SQL not found"

if [ "$run_deps" = 1 ]; then
	say "installing dependencies"
	bash "$ROOT/scripts/install-deps.sh"
fi
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found; run without --no-deps"

say "building and installing rollout_fdw"
buildlog=$(mktemp -t rollout_demo_build.XXXXXX)
trap 'rm -f "$buildlog"' EXIT
if ! (cd "$ROOT" && make -j"${MAKE_JOBS:-2}" PG_CONFIG="$PG_CONFIG" && make install PG_CONFIG="$PG_CONFIG") >"$buildlog" 2>&1; then
	tail -n 60 "$buildlog" >&2
	die "build or installation failed (last 60 lines above)"
fi
echo "installed into $("$PG_CONFIG" --pkglibdir) and $("$PG_CONFIG" --sharedir)/extension"

say "creating a throw-away PostgreSQL 15 cluster in $DIR (port $PORT)"
stop_demo_cluster
mkdir -p "$DIR"
touch "$MARKER"
chown postgres:postgres "$DIR" "$MARKER"
chmod 755 "$DIR"
as_postgres "$PG_BIN/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C.UTF-8 \
	--no-instructions >"$DIR/initdb.log" 2>&1 || {
	cat "$DIR/initdb.log" >&2
	die "initdb failed"
}
cat >>"$DATA/postgresql.conf" <<EOF

# rollout_fdw demo (scripts/demo.sh)
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DIR'
shared_preload_libraries = '$PRELOAD'
EOF
if ! as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null; then
	tail -n 40 "$LOG" >&2 || true
	die "the demo cluster did not start (log: $LOG)"
fi

export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
unset PGSERVICE PGPASSWORD PGOPTIONS PGHOSTADDR
psql_cmd="psql -h $DIR -p $PORT -U postgres postgres"
stop_cmd="runuser -u postgres -- $PG_BIN/pg_ctl -D $DATA stop"

say "running scripts/demo.sql"
if ! (cd "$DIR" && export PAGER=cat && psql -X -v ON_ERROR_STOP=1 -e -f "$DEMO_SQL"); then
	echo
	echo "--- last lines of the server log ($LOG):"
	tail -n 30 "$LOG" || true
	echo
	echo "demo.sh: the demo SQL failed; the cluster is still running for inspection:"
	echo "  connect: $psql_cmd"
	echo "  stop:    $stop_cmd   (or: bash scripts/demo.sh --stop)"
	exit 1
fi

# Where does the store live? Default location: a folder under the data
# directory; the store is the folder named by the table's store option.
store_dirs=$(find "$DATA" -type d -name rollout_steps 2>/dev/null || true)
say "summary"
cat <<EOF
What the demo did:
  - built and installed rollout_fdw, started PostgreSQL 15 in $DATA
    (port $PORT, socket directory $DIR, log $LOG${PRELOAD:+, shared_preload_libraries=$PRELOAD})
  - CREATE EXTENSION rollout_fdw; server rollout_local (default store location);
    foreign table rollout_steps (store 'rollout_steps', key 'id')
  - wrote 250 rollouts x 20 steps = 5000 rows in three transactions (two INSERT ... SELECT,
    one COPY FROM STDIN), rolled back a fourth, and upserted the 20 steps of rollout 7
    (newest version wins, so the count stays 5000)
  - queried: count(*), average reward per role, a key lookup, one rollout's trajectory,
    EXPLAIN of a key lookup; then rollout_flush('rollout_steps') and counted again
  - merged into the base, counted with rollout_observe, ran ANALYZE, showed estimates
    and ORDER BY id LIMIT 5 without a Sort, a key join as lookups, a parallel aggregate,
    the stores at the location (rollout_stores), and the counters of rollout_stat_stores
EOF
echo
if [ -n "$store_dirs" ]; then
	echo "The store on disk:"
	while IFS= read -r store; do
		echo "  $store"
		find "$store" -type f -printf '%P\t%s bytes\n' | sort | sed 's/^/    /'
	done <<<"$store_dirs"
else
	echo "No store folder named rollout_steps was found under $DATA; files the extension wrote:"
	find "$DATA" -path '*rollout*' -printf '  %P\n' 2>/dev/null | sort | head -n 50
fi
cat <<EOF

Connect:  $psql_cmd
Stop:     $stop_cmd
          (or: bash scripts/demo.sh --stop, which also removes $DIR)
EOF
