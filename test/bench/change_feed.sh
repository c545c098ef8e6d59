#!/usr/bin/env bash
# change_feed.sh — what a change feed poll costs (rollout_changes) against the scans
# that would find the same rows, on a store of ROWS rows. Run as root.
#
#   bash test/bench/change_feed.sh [--no-build]
#
# It builds and installs the extension (unless --no-build), makes a throw-away
# PostgreSQL 15 cluster as the postgres user (rollout_fdw preloaded, the recommended
# configuration), loads ROWS rows of test/bench/gen_rows.pl (uuid keys, ~1 KB jsonb
# payloads) into a rollout table and a heap table, merges and compacts the store
# into its base, takes a consumer position there, then commits NEW new rows (100 per
# transaction, created_at after every older row) to both tables and measures, as the
# median of RUNS runs of EXPLAIN ANALYZE's execution time:
#   - the poll of those rows (each made jsonb, as the feed returns them), with the
#     rows unflushed (in the WAL and memtable) and again after a flush (a generation);
#   - the scans that find the same rows, each row made jsonb the same way: the heap's
#     sequential scan `WHERE created_at > x`, the rollout table's scan with zone maps
#     (they skip the base's row groups, all older than x) and without them (the full
#     scan);
#   - a poll that finds nothing, and the files it opens (strace on the backend):
#     manifests and listings only, no data object.
#   - the floor: the same rows read from a heap table that holds nothing else, each
#     made jsonb the same way (what any read of them costs, with no search at all).
# Prints a table with ratios against the poll; the issue's bar is ≥ 50× against the
# full scan.
#
#   - a consumer far behind (CATCHUP new rows) draining them with a small max_rows.
# Environment: ROWS (1000000), NEW (10000), RUNS (5), CATCHUP (20000), CATCH_MAX
# (CATCHUP / 20: the max_rows of its polls), BENCH_DIR
# (/tmp/rollout_bench_feed; wiped at start), BENCH_PORT (5496).
set -euo pipefail

[ "${NEW:-10000}" -ge 100 ] && [ "${CATCHUP:-20000}" -ge 100 ] ||
	{ echo "change_feed.sh: NEW and CATCHUP must be at least 100 (one transaction of new rows)" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/test/bench
PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BIN/pg_config
ROWS=${ROWS:-1000000}
NEW=${NEW:-10000}
RUNS=${RUNS:-5}
CATCHUP=${CATCHUP:-20000}
DIR=${BENCH_DIR:-/tmp/rollout_bench_feed}
PORT=${BENCH_PORT:-5496}
DATA=$DIR/data
SOCK=$DIR/sock
STORE=$DIR/store
build=1
[ "${1:-}" = --no-build ] && build=0

say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
as_postgres() { runuser -u postgres -- "$@"; }
psql_q() { as_postgres psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -d bench "$@"; }
stop_cluster() { [ -f "$DATA/postmaster.pid" ] && as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true; }
trap stop_cluster EXIT

if [ "$build" = 1 ]; then
	say "building and installing rollout_fdw"
	make -C "$ROOT" -j2 PG_CONFIG="$PG_CONFIG" >/dev/null && make -C "$ROOT" install PG_CONFIG="$PG_CONFIG" >/dev/null
fi

stop_cluster
rm -rf "$DIR"
mkdir -p "$DATA" "$SOCK" "$STORE"
chmod 755 "$DIR"
chown postgres: "$DATA" "$SOCK" "$STORE"
chmod 700 "$DATA"
touch "$DIR/postgresql.log"
chown postgres: "$DIR/postgresql.log"
as_postgres "$PG_BIN/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$DATA/postgresql.conf" <<EOF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$SOCK'
shared_buffers = 512MB
work_mem = 32MB
max_wal_size = 8GB
jit = off
shared_preload_libraries = 'rollout_fdw'
rollout_fdw.flush_interval = 0
rollout_fdw.merge_after_generations = 0
EOF
as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$DIR/postgresql.log" -w start >/dev/null
as_postgres "$PG_BIN/createdb" -h "$SOCK" -p "$PORT" bench

COLS="id uuid NOT NULL, rollout_id uuid NOT NULL, step int NOT NULL, role text NOT NULL, reward float8 NOT NULL, created_at timestamptz NOT NULL, payload jsonb NOT NULL"
psql_q <<EOF
CREATE EXTENSION rollout_fdw;
CREATE SERVER bench_store FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$STORE');
CREATE FOREIGN TABLE steps ($COLS) SERVER bench_store OPTIONS (store 'steps', key 'id');
CREATE TABLE steps_heap ($COLS, PRIMARY KEY (id));
EOF

say "generating and loading $ROWS rows"
as_postgres perl "$HERE/gen_rows.pl" 1 "$((ROWS + NEW))" 42 >"$DIR/rows.copy"
head -n "$ROWS" "$DIR/rows.copy" >"$DIR/old.copy"
tail -n "$NEW" "$DIR/rows.copy" >"$DIR/new.copy"
chown postgres: "$DIR"/*.copy
psql_q -c "COPY steps FROM '$DIR/old.copy'" -c "COPY steps_heap FROM '$DIR/old.copy'" \
	-c "VACUUM ANALYZE steps_heap" -c "SELECT rollout_flush('steps')" -c "SELECT rollout_merge('steps')" \
	-c "SELECT rollout_compact('steps', min_fragments => 1)" >/dev/null
POS=$(psql_q -c "SELECT next_since FROM rollout_changes('steps', rollout_snapshot('steps'))")
CUT=$(psql_q -c "SELECT max(created_at) FROM steps_heap")

say "committing $NEW new rows, 100 per transaction"
psql_q -c "CREATE TABLE new_rows (LIKE steps_heap)" -c "COPY new_rows FROM '$DIR/new.copy'" \
	-c "CREATE TABLE new_only (LIKE steps_heap)" -c "COPY new_only FROM '$DIR/new.copy'" \
	-c "VACUUM ANALYZE new_only" -c "ALTER TABLE new_rows ADD COLUMN n serial"
for first in $(seq 1 100 "$NEW"); do
	echo "INSERT INTO steps SELECT id, rollout_id, step, role, reward, created_at, payload FROM new_rows WHERE n BETWEEN $first AND $((first + 99));"
	echo "INSERT INTO steps_heap SELECT id, rollout_id, step, role, reward, created_at, payload FROM new_rows WHERE n BETWEEN $first AND $((first + 99));"
done | psql_q >/dev/null

# median execution time (ms) of RUNS runs of EXPLAIN ANALYZE of $2 after the settings
# $1: each run in a new session (cold: the backend's caches and memory are new), or,
# with $3 = warm, all in one session after a first run (a consumer's long-lived
# connection)
median_ms() {
	local times=()
	if [ "${3:-}" = warm ]; then
		mapfile -t times < <(
			{
				echo "$1;"
				for _ in $(seq 0 "$RUNS"); do echo "EXPLAIN (ANALYZE, FORMAT JSON) $2;"; echo '\echo ==='; done
			} | psql_q | perl -MJSON::PP -e 'local $/; for (grep { /\S/ } split /^===\n/m, <STDIN>) { s/^[^\[]*//s; printf "%.2f\n", decode_json($_)->[0]{"Execution Time"} }' | tail -n +2)
	else
		for _ in $(seq 1 "$RUNS"); do
			times+=("$(psql_q -c "$1" -c "EXPLAIN (ANALYZE, FORMAT JSON) $2" |
				perl -MJSON::PP -0e '$_ = <STDIN>; s/^[^\[]*//s; printf "%.2f", decode_json($_)->[0]{"Execution Time"}')")
		done
	fi
	printf '%s\n' "${times[@]}" | sort -g | sed -n "$(((RUNS + 1) / 2))p"
}
rows_of() { psql_q -c "$1" -c "SELECT count(*) FROM ($2) q"; }

POLL="SELECT sum(length(\"row\"::text)) FROM rollout_changes('steps', '$POS', $((NEW * 2)))"
SCAN="SELECT sum(length(to_jsonb(s)::text)) FROM steps s WHERE created_at > '$CUT'"
HEAP="SELECT sum(length(to_jsonb(s)::text)) FROM steps_heap s WHERE created_at > '$CUT'"
# the floor: a heap table of the new rows alone, each made jsonb and text, no search
FLOOR="SELECT sum(length(to_jsonb(s)::text)) FROM new_only s"
[ "$(rows_of "" "SELECT * FROM rollout_changes('steps', '$POS', $((NEW * 2))) WHERE op = 'upsert'")" = "$NEW" ] ||
	{ echo "change_feed.sh: the poll does not return the $NEW new rows" >&2; exit 1; }
[ "$(rows_of "" "SELECT * FROM steps WHERE created_at > '$CUT'")" = "$NEW" ] ||
	{ echo "change_feed.sh: the scan does not return the $NEW new rows" >&2; exit 1; }

say "measuring, $RUNS runs each, cold and warm"
declare -A ms
measure_all() { # state (wal or gen)
	for mode in cold warm; do
		ms[poll_${1}_$mode]=$(median_ms "SELECT 1" "$POLL" "$mode")
		ms[zone_${1}_$mode]=$(median_ms "SELECT 1" "$SCAN" "$mode")
		ms[full_${1}_$mode]=$(median_ms "SET rollout_fdw.use_zone_maps = off" "$SCAN" "$mode")
		ms[heap_${1}_$mode]=$(median_ms "SET max_parallel_workers_per_gather = 0" "$HEAP" "$mode")
		ms[hpar_${1}_$mode]=$(median_ms "SELECT 1" "$HEAP" "$mode")
		ms[floor_${1}_$mode]=$(median_ms "SET max_parallel_workers_per_gather = 0" "$FLOOR" "$mode")
	done
}
measure_all wal
psql_q -c "SELECT rollout_flush('steps')" >/dev/null
measure_all gen
END=$(psql_q -c "SELECT next_since FROM rollout_changes('steps', '$POS', $((NEW * 2))) LIMIT 1")
EMPTY="SELECT count(*) FROM rollout_changes('steps', '$END')"
ms[empty_cold]=$(median_ms "SELECT 1" "$EMPTY")
ms[empty_warm]=$(median_ms "SELECT 1" "$EMPTY" warm)

# the files one empty poll opens, from strace on its backend
PID_FILE=$DIR/backend.pid
TRACE=$DIR/empty_poll.strace
as_postgres psql -X -q -A -t -h "$SOCK" -p "$PORT" -d bench \
	-c "SELECT pg_backend_pid()" -c "SELECT pg_sleep(2)" -c "$EMPTY" >"$PID_FILE" &
PSQL=$!
for _ in $(seq 1 50); do [ -s "$PID_FILE" ] && break; sleep 0.1; done
BACKEND=$(head -n1 "$PID_FILE")
timeout 10 strace -f -qq -e trace=openat -p "$BACKEND" -o "$TRACE" 2>/dev/null &
STRACE=$!
wait "$PSQL" || true
sleep 0.3
kill "$STRACE" 2>/dev/null || true
wait "$STRACE" 2>/dev/null || true
opened=$(grep -o "\"$STORE/[^\"]*\"" "$TRACE" | tr -d '"' | sed "s|^$STORE/steps/||" | sort | uniq -c | sort -rn || true)
data_objects=$(echo "$opened" | grep -cE '\.(seg|wal)$' || true)

# A consumer far behind: CATCHUP new rows (100 per transaction) drained by polls of
# at most CATCH_MAX rows from a position before them, in one session; the time of
# the whole drain, and its polls. First with the rows unflushed (the memtable's
# batches), then flushed after every 1,000 rows, as a sweeper would.
CATCH_MAX=${CATCH_MAX:-$((CATCHUP / 20))}
catch_up() { # flush_every (0: never) -> "ms polls"
	local from out first
	from=$(psql_q -c "SELECT rollout_snapshot('steps')")
	for first in $(seq 1 100 "$CATCHUP"); do
		echo "INSERT INTO steps SELECT gen_random_uuid(), rollout_id, step, role, reward, created_at, payload FROM new_rows WHERE n BETWEEN $(((first - 1) % NEW + 1)) AND $(((first - 1) % NEW + 100));"
		if [ "$1" -gt 0 ] && [ $(((first + 99) % $1)) -eq 0 ]; then echo "SELECT rollout_flush('steps');"; fi
	done | psql_q >/dev/null
	out=$(psql_q -c '\timing on' -c "DO \$\$
DECLARE pos text := '$from'; nxt text; got bigint; total bigint := 0; polls int := 0;
BEGIN
	LOOP
		SELECT count(*) FILTER (WHERE op = 'upsert'), max(next_since) INTO got, nxt
		  FROM rollout_changes('steps', pos, $CATCH_MAX);
		polls := polls + 1;
		EXIT WHEN got = 0;
		total := total + got;
		pos := nxt;
	END LOOP;
	IF total <> $CATCHUP THEN RAISE EXCEPTION 'the drain brought % rows, not $CATCHUP', total; END IF;
	RAISE NOTICE 'polls %', polls;
END \$\$" 2>&1)
	local took polls
	took=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out")
	polls=$(sed -n 's/.*polls \([0-9]*\).*/\1/p' <<<"$out")
	[ -n "$took" ] && [ -n "$polls" ] || { echo "change_feed.sh: the catch-up failed: $out" >&2; return 1; }
	echo "$took $polls"
}
say "a consumer catching up on $CATCHUP rows, at most $CATCH_MAX per poll"
catch_mem=$(catch_up 0)
catch_gen=$(catch_up 1000)
read -r ms_catch_mem polls_catch_mem <<<"$catch_mem"
read -r ms_catch_gen polls_catch_gen <<<"$catch_gen"

ratio() { perl -e 'printf "%.1f×", $ARGV[0] / $ARGV[1]' "$1" "$2"; }
row() { # label key
	local cells=""
	for state in wal gen; do
		for mode in cold warm; do
			cells+=" ${ms[${2}_${state}_$mode]} | $(ratio "${ms[${2}_${state}_$mode]}" "${ms[poll_${state}_$mode]}") |"
		done
	done
	echo "| $1 |$cells"
}
echo
echo "ROWS=$ROWS (compacted into the base), NEW=$NEW new rows (100 per transaction), median of $RUNS runs, ms;"
echo "cold: each run in a new session; warm: all runs in one session after a first one; × poll: time / the poll's"
echo
echo "| read | unflushed, cold | × poll | unflushed, warm | × poll | flushed (a generation), cold | × poll | flushed, warm | × poll |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
row "rollout_changes poll of the $NEW rows" poll
row "rollout scan WHERE created_at > x (zone maps skip the base)" zone
row "rollout full scan WHERE created_at > x (zone maps off)" full
row "heap sequential scan WHERE created_at > x, serial" heap
row "heap, the planner's choice (parallel seq scan)" hpar
row "floor: a heap of only the $NEW new rows, each made jsonb (no search)" floor
echo
echo "A poll that finds nothing: ${ms[empty_cold]} ms cold, ${ms[empty_warm]} ms warm; the store's files it opened ($data_objects data objects):"
echo "$opened" | sed 's/^/    /'
echo
echo "A consumer catching up on $CATCHUP rows, at most $CATCH_MAX per poll: unflushed (the memtable) $ms_catch_mem ms in $polls_catch_mem polls; flushed every 1,000 rows $ms_catch_gen ms in $polls_catch_gen polls."

