#!/usr/bin/env bash
# run.sh — rollout_fdw performance suite: a rollout foreign table against a heap
# table with the same schema, in the same run, on the same cluster. Run as root.
#
#   bash test/bench/run.sh [--smoke] [--no-build] [--out FILE] [--keep]
#
#   --smoke       tiny scale (a few thousand rows, transaction-count-bounded pgbench
#                 runs); about 30 s. Exits non-zero if any workload fails; never
#                 because something is slow.
#   --no-build    do not run make / make install (the extension must be installed)
#   --out FILE    the results table (markdown); default /tmp/rollout_bench/results.md.
#                 Next to it: FILE minus .md plus .csv (medians and ratios) and
#                 -raw.csv (every run).
#   --keep        keep the cluster running and its files after the run
#   -h, --help    this text
#
# Environment (all optional): BENCH_DIR (work directory, default
# /tmp/rollout_bench/work; wiped at start), BENCH_PORT (default 5497), BENCH_ROWS
# (rows of the COPY and scan data set; 1000000, smoke 3000), BENCH_DURATION
# (seconds per pgbench throughput/latency run; 8), BENCH_RUNS (runs per figure; 3),
# BENCH_PRELOAD (shared_preload_libraries of the cluster; default rollout_fdw, the
# recommended configuration with group commit and memtable; set it empty to measure
# the plain extension), MAKE_JOBS (2).
#
# What it does (docs/PERFORMANCE.md explains every workload):
#   1. make && make install (unless --no-build);
#   2. a throw-away PostgreSQL 15 cluster as the postgres user in $BENCH_DIR with
#      production-like settings: fsync and synchronous_commit on, shared_buffers
#      512MB, max_connections 100, max_wal_size 8GB;
#   3. generates the rows (test/bench/gen_rows.pl: uuid key, rollout_id, step, role,
#      reward, created_at, ~1 KB jsonb payload);
#   4. runs every workload against a heap table (uuid primary key) and a rollout
#      foreign table on a local file:// store, records every run, and prints one
#      markdown table of medians with the ratio rollout/heap.
# Storage targets: only the local file:// store exists today. Every rollout table is
# created through make_rollout_table(), which uses the server "bench_store"; adding a
# backend (s3://, az://, behind a latency proxy) means adding a server with that
# location and a loop over servers — see docs/PERFORMANCE.md.
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/../.." && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BIN/pg_config

smoke=0
build=1
keep=0
OUT=/tmp/rollout_bench/results.md
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) smoke=1 ;;
	--no-build) build=0 ;;
	--keep) keep=1 ;;
	--out)
		[ $# -ge 2 ] || { echo "run.sh: --out needs a file" >&2; exit 2; }
		OUT=$2
		shift
		;;
	--out=*) OUT=${1#--out=} ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "run.sh: unknown argument: $1 (try --help)" >&2
		exit 2
		;;
	esac
	shift
done

DIR=${BENCH_DIR:-/tmp/rollout_bench/work}
PORT=${BENCH_PORT:-5497}
RUNS=${BENCH_RUNS:-3}
if [ "$smoke" = 1 ]; then
	ROWS=${BENCH_ROWS:-3000}
	POOL=500
	LAT_SEED=2000
	# smoke runs are bounded by transactions per client, not by time
	TXNS_1ROW=15
	TXNS_100ROW=3
	LAT_DURATION=${BENCH_DURATION:-1}
	LOOKUPS=10
else
	ROWS=${BENCH_ROWS:-1000000}
	POOL=20000
	LAT_SEED=200000
	DURATION=${BENCH_DURATION:-8}
	LAT_DURATION=$DURATION
	LOOKUPS=100
fi
CHUNKS=10

case $DIR in /tmp/?*) ;; *) echo "run.sh: BENCH_DIR must be under /tmp" >&2; exit 2 ;; esac
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
[[ $PORT =~ ^[0-9]+$ ]] || { echo "run.sh: BENCH_PORT must be a number" >&2; exit 2; }
if ! [[ $ROWS =~ ^[0-9]+$ ]] || [ "$ROWS" -lt $((CHUNKS * 100)) ]; then
	echo "run.sh: BENCH_ROWS must be a number >= $((CHUNKS * 100))" >&2
	exit 2
fi
if ! [[ $RUNS =~ ^[0-9]+$ ]] || [ "$RUNS" -lt 1 ]; then
	echo "run.sh: BENCH_RUNS must be a number >= 1" >&2
	exit 2
fi

DATA=$DIR/pgdata
SOCK=$DIR/sock
STORE=$DIR/store
GEN=$DIR/rows
LOGS=$DIR/logs
SCRIPTS=$DIR/scripts
MARKER=$DIR/.rollout_bench
CSV_RAW=${OUT%.md}-raw.csv
CSV_SUM=${OUT%.md}.csv
WORKLOADS=$DIR/workloads.tsv
PGBENCH=$PG_BIN/pgbench
T0=$(date +%s)

say() { printf '[%s +%4ss] %s\n' "$(date +%T)" "$(($(date +%s) - T0))" "$*" >&2; }
die() {
	echo "run.sh: $*" >&2
	exit 1
}
as_postgres() { runuser -u postgres -- "$@"; }
psql_q() { PGOPTIONS="-c client_min_messages=warning" "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres -d bench "$@"; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs the extension and runs the cluster as postgres)"
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found: install postgresql-15 and postgresql-server-dev-15 (scripts/install-deps.sh)"
command -v perl >/dev/null || die "perl not found"

CURRENT="setup"
BG_PID=
stop_cluster() {
	if [ -f "$DATA/postmaster.pid" ]; then
		as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
	fi
}
stop_background() {
	if [ -n "$BG_PID" ]; then
		touch "$DIR/bg.stop" 2>/dev/null || true
		wait "$BG_PID" 2>/dev/null || true
		BG_PID=
	fi
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_background
	if [ "$rc" != 0 ]; then
		echo "run.sh: FAILED in workload '$CURRENT' (exit $rc); logs in $LOGS, server log $DIR/postgresql.log" >&2
		if [ -f "$DIR/postgresql.log" ]; then
			echo "--- last lines of the server log:" >&2
			tail -n 20 "$DIR/postgresql.log" >&2 || true
		fi
	fi
	if [ "$keep" = 1 ] && [ "$rc" = 0 ]; then
		echo "run.sh: cluster kept: psql -h $SOCK -p $PORT -U postgres bench; stop with: runuser -u postgres -- $PG_BIN/pg_ctl -D $DATA stop" >&2
	else
		stop_cluster
		if [ -f "$MARKER" ]; then
			# keep the logs (small) for post-mortems, drop the bulky data
			rm -rf "$DATA" "$STORE" "$GEN"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- build, cluster
if [ "$build" = 1 ]; then
	CURRENT="build"
	say "building and installing rollout_fdw from $ROOT"
	buildlog=$(mktemp -t rollout_bench_build.XXXXXX)
	if ! (make -C "$ROOT" -j"${MAKE_JOBS:-2}" PG_CONFIG="$PG_CONFIG" && make -C "$ROOT" install PG_CONFIG="$PG_CONFIG") >"$buildlog" 2>&1; then
		tail -n 40 "$buildlog" >&2
		rm -f "$buildlog"
		die "build or installation failed"
	fi
	rm -f "$buildlog"
fi
[ -f "$("$PG_CONFIG" --sharedir)/extension/rollout_fdw.control" ] || die "rollout_fdw is not installed (run without --no-build)"

SO=$("$PG_CONFIG" --pkglibdir)/rollout_fdw.so
so_sum() { sha256sum "$SO" | cut -c1-12; }
SO_SUM=$(so_sum)

CURRENT="cluster"
if [ -e "$DIR" ]; then
	[ -f "$MARKER" ] || die "$DIR exists and was not made by run.sh; remove it or set BENCH_DIR"
	stop_cluster
	rm -rf "$DIR"
fi
mkdir -p "$DIR" "$DATA" "$SOCK" "$STORE" "$GEN" "$LOGS" "$SCRIPTS" "$(dirname "$OUT")"
touch "$MARKER"
chmod 755 "$DIR" "$GEN" "$LOGS" "$SCRIPTS"
chmod 700 "$DATA"
chown postgres: "$DATA" "$SOCK" "$STORE"
# every directory on the way to the store must be reachable by postgres
d=$DIR
while [ "$d" != / ]; do
	[ -x "$d" ] || die "$d is not searchable"
	d=$(dirname "$d")
done

say "creating the cluster in $DATA (port $PORT)"
as_postgres "$PG_BIN/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >"$LOGS/initdb.log" 2>&1 ||
	{ cat "$LOGS/initdb.log" >&2; die "initdb failed"; }
cat >>"$DATA/postgresql.conf" <<EOF
# rollout_fdw benchmark: production-like durability and memory on a 24 GB, 2-core machine
listen_addresses = ''
port = $PORT
unix_socket_directories = '$SOCK'
max_connections = 100
shared_buffers = 512MB
effective_cache_size = 16GB
work_mem = 32MB
maintenance_work_mem = 512MB
fsync = on
synchronous_commit = on
full_page_writes = on
wal_level = replica
wal_buffers = 16MB
max_wal_size = 8GB
min_wal_size = 1GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
autovacuum = on
jit = off
logging_collector = off
log_min_messages = warning
log_checkpoints = on
shared_preload_libraries = '${BENCH_PRELOAD-rollout_fdw}'
# the sweeper flushes and merges the stores of this database, as autovacuum
# serves the heap's; without it (the default serves "postgres" only) a full
# memtable makes the committing backends flush it themselves
rollout_fdw.worker_databases = 'bench'
EOF
touch "$DIR/postgresql.log"
chown postgres: "$DIR/postgresql.log"
as_postgres "$PG_BIN/pg_ctl" -D "$DATA" -l "$DIR/postgresql.log" -w -t 60 start >/dev/null ||
	{ tail -n 30 "$DIR/postgresql.log" >&2; die "the server did not start"; }
"$PG_BIN/createdb" -h "$SOCK" -p "$PORT" -U postgres bench

psql_q <<EOF
CREATE EXTENSION rollout_fdw;
CREATE SERVER bench_store FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$STORE');
CREATE TABLE payload_pool (i int PRIMARY KEY, rollout_id uuid, step int, role text, payload jsonb);
EOF

# ---------------------------------------------------------------- helpers
COLS="id uuid NOT NULL, rollout_id uuid NOT NULL, step int NOT NULL, role text NOT NULL, reward float8 NOT NULL, created_at timestamptz NOT NULL, payload jsonb NOT NULL"

make_heap_table() { # name
	psql_q -c "DROP TABLE IF EXISTS $1" -c "CREATE TABLE $1 ($COLS, PRIMARY KEY (id))"
}
make_rollout_table() { # name [more table options] — a fresh store named like the table, on the bench server
	psql_q -c "DROP FOREIGN TABLE IF EXISTS $1"
	rm -rf "${STORE:?}/$1"
	psql_q -c "CREATE FOREIGN TABLE $1 ($COLS) SERVER bench_store OPTIONS (store '$1', key 'id'${2:+, $2})"
}
make_table() { # kind name
	if [ "$1" = heap ]; then make_heap_table "$2"; else make_rollout_table "$2"; fi
}

: >"$WORKLOADS"
echo "workload,table,run,value" >"$CSV_RAW"
workload() { # id section label unit better — declares a row of the results table
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$WORKLOADS"
}
record() { # id table run value
	printf '%s,%s,%s,%s\n' "$1" "$2" "$3" "$4" >>"$CSV_RAW"
}

# pgbench, failing the workload when any client aborts or any transaction fails
pgb() { # logname pgbench-args...
	local name=$1
	shift
	if ! "$PGBENCH" -n -h "$SOCK" -p "$PORT" -U postgres "$@" bench >"$LOGS/$name.out" 2>&1; then
		tail -n 20 "$LOGS/$name.out" >&2
		die "pgbench failed: $name"
	fi
	if grep -Eq 'number of failed transactions: [1-9]|aborted' "$LOGS/$name.out"; then
		grep -E 'failed|aborted|ERROR' "$LOGS/$name.out" | head -n 5 >&2
		tail -n 20 "$LOGS/$name.out" >&2
		die "pgbench reported failed transactions: $name"
	fi
}
tps_of() { sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$LOGS/$1.out"; }
# transactions pgbench had to retry (SQLSTATE 40001: the rollout WAL append gives up
# after rollout_fdw.max_wal_append_attempts positions taken by concurrent commits)
retries_of() { sed -n 's/^number of transactions retried: \([0-9]*\) .*/\1/p' "$LOGS/$1.out" | grep . || echo 0; }
# INSERT runs retry serialization failures, as a client should (the error's hint says so)
RETRY=(--max-tries=10)

# Run SCRIPT with one client COUNT+1 times; drop the first transaction (warm-up:
# connection caches, hint bits) and record, as RUNS runs, the median latency (ms)
# of each consecutive group of COUNT/RUNS transactions.
latency_runs() { # id table script count
	local id=$1 table=$2 script=$3 count=$4 name
	name=$id.$table
	rm -f "$LOGS/$name".log*
	pgb "$name" -c 1 -j 1 -t $((count + 1)) -f "$script" -l --log-prefix="$LOGS/$name.log"
	cat "$LOGS/$name".log.* | awk '{print $2, $3}' | sort -n | tail -n +2 | awk '{print $2 / 1000.0}' |
		perl -e '
			my ($runs) = @ARGV; my @v = map { chomp; $_ } <STDIN>;
			my $per = int(@v / $runs) || 1; my $r = 0;
			while (@v && $r < $runs) {
				my @g = sort { $a <=> $b } splice(@v, 0, $per);
				$r++; printf "%d %.4f\n", $r, $g[int($#g / 2)];
			}' "$RUNS" |
		while read -r run value; do record "$id" "$table" "$run" "$value"; done
}

# p50/p99 (ms) of all transactions in the per-transaction logs of a pgbench run
percentile() { # pct files...
	local pct=$1
	shift
	cat "$@" | awk '{print $3 / 1000.0}' | sort -g | awk -v p="$pct" '{v[NR] = $1} END {
		if (NR == 0) { print "nan"; exit } i = int(NR * p / 100.0 + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; printf "%.4f\n", v[i] }'
}

sql_ms() { # sql — wall time (ms) of one statement in its own psql session
	local t1 t2
	t1=$(date +%s%N)
	psql_q -c "$1" >/dev/null
	t2=$(date +%s%N)
	echo $(((t2 - t1) / 1000000))
}

gc_now() { # table — collect everything no manifest names (nothing else runs now)
	# gc keeps manifest versions current within the grace: let the last ones age
	sleep 2
	# rollout_fdw.min_gc_grace is the server's setting: lowered for this run only
	psql_q -c "LOAD 'rollout_fdw'" -c "ALTER SYSTEM SET rollout_fdw.min_gc_grace = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
	until [ "$(psql_q -c "SHOW rollout_fdw.min_gc_grace")" = 1s ]; do sleep 0.1; done
	psql_q -c "SELECT * FROM rollout_gc('$1', '1s')" >/dev/null
	psql_q -c "ALTER SYSTEM RESET rollout_fdw.min_gc_grace" -c "SELECT pg_reload_conf()" >/dev/null
}

# ---------------------------------------------------------------- data
CURRENT="generate rows"
say "generating $ROWS rows in $CHUNKS files and a pool of $POOL payloads"
per=$((ROWS / CHUNKS))
{
	for c in $(seq 1 "$CHUNKS"); do
		first=$(((c - 1) * per + 1))
		last=$((c * per))
		[ "$c" = "$CHUNKS" ] && last=$ROWS
		printf '%s %s %s\n' "$first" "$last" "$(printf '%s/chunk_%02d.copy' "$GEN" "$c")"
	done
	printf '%s %s %s\n' $((ROWS + 1)) $((ROWS + POOL)) "$GEN/pool.copy"
} | xargs -P 2 -n 3 "$BENCH/gen_chunk.sh"
chmod 644 "$GEN"/*.copy
ALL_CHUNKS="cat $GEN/chunk_*.copy"
psql_q <<EOF
CREATE TEMP TABLE pool_load ($COLS);
COPY pool_load FROM '$GEN/pool.copy';
INSERT INTO payload_pool SELECT row_number() OVER (), rollout_id, step, role, payload FROM pool_load;
ANALYZE payload_pool;
EOF

# pgbench scripts (per table kind)
for kind in heap rollout; do
	cat >"$SCRIPTS/ins1_$kind.sql" <<EOF
\set i random(1, $POOL)
INSERT INTO ins_$kind SELECT gen_random_uuid(), rollout_id, step, role, random(), now(), payload FROM payload_pool WHERE i = :i;
EOF
	cat >"$SCRIPTS/ins100_$kind.sql" <<EOF
\set i random(1, $((POOL - 99)))
INSERT INTO ins_$kind SELECT gen_random_uuid(), rollout_id, step, role, random(), now(), payload FROM payload_pool WHERE i BETWEEN :i AND :i + 99;
EOF
	cat >"$SCRIPTS/lat_$kind.sql" <<EOF
\set i random(1, $POOL)
INSERT INTO lat_$kind SELECT gen_random_uuid(), rollout_id, step, role, random(), now(), payload FROM payload_pool WHERE i = :i;
EOF
done
chmod 644 "$SCRIPTS"/*.sql

# ---------------------------------------------------------------- INSERT throughput
CURRENT="insert throughput"
for spec in "1 1" "1 8" "1 32" "100 1" "100 8"; do
	read -r rows_per clients <<<"$spec"
	id="insert_${rows_per}row_c${clients}"
	if [ "$rows_per" = 1 ]; then
		workload "$id" "INSERT throughput (one transaction per statement)" "INSERT 1 row/txn, $clients client(s)" "txn/s" higher
	else
		workload "$id" "INSERT throughput (one transaction per statement)" "INSERT 100 rows/txn, $clients client(s)" "rows/s" higher
	fi
	workload "retried_$id" "INSERT throughput (one transaction per statement)" "… transactions retried after SQLSTATE 40001" "count" lower
	jobs=$((clients < 2 ? clients : 2))
	for run in $(seq 1 "$RUNS"); do
		for kind in heap rollout; do
			say "$id run $run: $kind"
			make_table "$kind" "ins_$kind"
			if [ "$smoke" = 1 ]; then
				if [ "$rows_per" = 1 ]; then lim=(-t "$TXNS_1ROW"); else lim=(-t "$TXNS_100ROW"); fi
			else
				lim=(-T "$DURATION")
			fi
			pgb "$id.$kind.$run" -c "$clients" -j "$jobs" "${lim[@]}" "${RETRY[@]}" -f "$SCRIPTS/ins${rows_per}_$kind.sql"
			record "retried_$id" "$kind" "$run" "$(retries_of "$id.$kind.$run")"
			tps=$(tps_of "$id.$kind.$run")
			[ -n "$tps" ] || die "no tps in $LOGS/$id.$kind.$run.out"
			record "$id" "$kind" "$run" "$(awk -v t="$tps" -v r="$rows_per" 'BEGIN {printf "%.2f", t * r}')"
		done
	done
done

# The last 1-row/32-client tables: reading many small unflushed WAL entries
CURRENT="read after inserts"
n_wal=$(psql_q -c "SELECT wal_entries FROM rollout_observe('ins_rollout')")
workload read_unflushed "Reading right after many small commits" "count(*) over the last 100-row/8-client table, $n_wal WAL entries unflushed" "ms" lower
cat >"$SCRIPTS/count_ins_heap.sql" <<<"SELECT count(*) FROM ins_heap;"
cat >"$SCRIPTS/count_ins_rollout.sql" <<<"SELECT count(*) FROM ins_rollout;"
latency_runs read_unflushed heap "$SCRIPTS/count_ins_heap.sql" "$RUNS"
latency_runs read_unflushed rollout "$SCRIPTS/count_ins_rollout.sql" "$RUNS"
workload flush_small "Reading right after many small commits" "rollout_flush of those WAL entries (heap: VACUUM)" "ms" lower
record flush_small heap 1 "$(sql_ms "VACUUM ins_heap")"
record flush_small rollout 1 "$(sql_ms "SELECT * FROM rollout_flush('ins_rollout')")"
workload read_flushed "Reading right after many small commits" "count(*) over that table after the flush" "ms" lower
latency_runs read_flushed heap "$SCRIPTS/count_ins_heap.sql" "$RUNS"
latency_runs read_flushed rollout "$SCRIPTS/count_ins_rollout.sql" "$RUNS"
psql_q -c "DROP TABLE ins_heap" -c "DROP FOREIGN TABLE ins_rollout"
rm -rf "${STORE:?}/ins_rollout"

# ---------------------------------------------------------------- INSERT p99 latency under maintenance
CURRENT="insert latency"
say "seeding the latency tables with $LAT_SEED rows"
for kind in heap rollout; do
	make_table "$kind" "lat_$kind"
	psql_q -c "INSERT INTO lat_$kind SELECT gen_random_uuid(), p.rollout_id, p.step, p.role, random(), now(), p.payload
		FROM generate_series(1, $LAT_SEED) g JOIN payload_pool p ON p.i = 1 + g % $POOL"
done
psql_q -c "VACUUM ANALYZE lat_heap" -c "SELECT * FROM rollout_merge('lat_rollout')" >/dev/null

# background maintenance: rollout: merge (flushes first) + compaction in a loop;
# heap: VACUUM in a loop. Counts iterations; any error fails the workload.
# Mode throttled runs them with the cost-based delay of background maintenance
# (rollout_fdw.maintenance_cost_delay, vacuum_cost_delay: 2 ms, the defaults of
# the sweeper and of autovacuum), mode maint without, as called from SQL.
bg_loop() { # kind mode
	local kind=$1 delay=0 n=0
	[ "$2" = throttled ] && delay=2
	rm -f "$DIR/bg.stop"
	while [ ! -f "$DIR/bg.stop" ]; do
		if [ "$kind" = rollout ]; then
			psql_q -c "SET rollout_fdw.maintenance_cost_delay = $delay" \
				-c "SELECT * FROM rollout_merge('lat_rollout')" \
				-c "SELECT * FROM rollout_compact('lat_rollout', 2, 1048576)" >>"$LOGS/bg_$kind.out" 2>&1 || {
				echo "FAILED" >"$DIR/bg.failed"
				return 1
			}
		else
			psql_q -c "SET vacuum_cost_delay = $delay" -c "VACUUM lat_heap" >>"$LOGS/bg_$kind.out" 2>&1 || {
				echo "FAILED" >"$DIR/bg.failed"
				return 1
			}
		fi
		n=$((n + 1))
		echo "$n" >"$DIR/bg.count"
	done
}

workload p99_idle "INSERT latency (1 row/txn, 8 clients)" "p99 latency, no maintenance running" "ms" lower
workload p99_maint "INSERT latency (1 row/txn, 8 clients)" "p99 latency, maintenance loop running (rollout: merge+compact; heap: VACUUM)" "ms" lower
workload p99_throttled "INSERT latency (1 row/txn, 8 clients)" "p99 latency, the same loop with a 2 ms cost delay (rollout_fdw.maintenance_cost_delay; heap: vacuum_cost_delay)" "ms" lower
workload p50_idle "INSERT latency (1 row/txn, 8 clients)" "p50 latency, no maintenance running" "ms" lower
workload p50_maint "INSERT latency (1 row/txn, 8 clients)" "p50 latency, maintenance loop running" "ms" lower
workload p50_throttled "INSERT latency (1 row/txn, 8 clients)" "p50 latency, maintenance loop with a 2 ms cost delay" "ms" lower
workload retried_lat_idle "INSERT latency (1 row/txn, 8 clients)" "transactions retried after SQLSTATE 40001, no maintenance" "count" lower
workload retried_lat_maint "INSERT latency (1 row/txn, 8 clients)" "transactions retried after SQLSTATE 40001, maintenance running" "count" lower
workload retried_lat_throttled "INSERT latency (1 row/txn, 8 clients)" "transactions retried after SQLSTATE 40001, throttled maintenance running" "count" lower
workload bg_iters "INSERT latency (1 row/txn, 8 clients)" "maintenance loop iterations per run" "count" none
workload bg_iters_throttled "INSERT latency (1 row/txn, 8 clients)" "throttled maintenance loop iterations per run" "count" none
for run in $(seq 1 "$RUNS"); do
	for mode in idle maint throttled; do
		for kind in heap rollout; do
			name="lat_$mode.$kind.$run"
			say "insert latency run $run: $kind, $mode"
			rm -f "$LOGS/$name".log* "$DIR/bg.failed" "$DIR/bg.count"
			if [ "$mode" != idle ]; then
				bg_loop "$kind" "$mode" &
				BG_PID=$!
				sleep 0.5
			fi
			pgb "$name" -c 8 -j 2 -T "$LAT_DURATION" "${RETRY[@]}" -f "$SCRIPTS/lat_$kind.sql" -l --log-prefix="$LOGS/$name.log"
			if [ "$mode" != idle ]; then
				stop_background
				[ ! -f "$DIR/bg.failed" ] || { tail -n 20 "$LOGS/bg_$kind.out" >&2; die "background maintenance failed"; }
				iters=bg_iters
				[ "$mode" = throttled ] && iters=bg_iters_throttled
				record "$iters" "$kind" "$run" "$(cat "$DIR/bg.count" 2>/dev/null || echo 0)"
			fi
			record "p99_$mode" "$kind" "$run" "$(percentile 99 "$LOGS/$name".log.*)"
			record "p50_$mode" "$kind" "$run" "$(percentile 50 "$LOGS/$name".log.*)"
			record "retried_lat_$mode" "$kind" "$run" "$(retries_of "$name")"
		done
	done
done
psql_q -c "DROP TABLE lat_heap" -c "DROP FOREIGN TABLE lat_rollout"
rm -rf "${STORE:?}/lat_rollout"

# ---------------------------------------------------------------- COPY
CURRENT="copy"
workload copy "Bulk load" "COPY $ROWS rows in one transaction" "rows/s" higher
for run in $(seq 1 "$RUNS"); do
	for kind in heap rollout; do
		say "COPY $ROWS rows, run $run: $kind"
		make_table "$kind" "copy_$kind"
		ms=$(sql_ms "COPY copy_$kind FROM PROGRAM '$ALL_CHUNKS'")
		record copy "$kind" "$run" "$(awk -v n="$ROWS" -v ms="$ms" 'BEGIN {printf "%.1f", n / (ms / 1000.0)}')"
	done
	if [ "$run" -lt "$RUNS" ]; then
		psql_q -c "DROP FOREIGN TABLE copy_rollout"
		rm -rf "${STORE:?}/copy_rollout"
	fi
done
# the last heap COPY is the heap side of the read workloads
psql_q -c "ALTER TABLE copy_heap RENAME TO scan_heap"
workload flush_copy "Bulk load" "rollout_flush of the COPY (one WAL entry of $ROWS rows)" "ms" lower
record flush_copy rollout 1 "$(sql_ms "SELECT * FROM rollout_flush('copy_rollout')")"
copied=$(psql_q -c "SELECT row_count FROM rollout_observe('copy_rollout')")
[ "$copied" = "$ROWS" ] || die "after COPY and flush the store counts $copied rows, not $ROWS"
psql_q -c "DROP FOREIGN TABLE copy_rollout"
rm -rf "${STORE:?}/copy_rollout"

# the rollout side of the read workloads: the same rows in $CHUNKS COPY transactions,
# flushed after each (the state of a store that is flushed but not yet merged)
say "loading the rollout scan table in $CHUNKS COPYs, each flushed"
make_rollout_table scan_rollout
flush_ms=0
for f in "$GEN"/chunk_*.copy; do
	psql_q -c "COPY scan_rollout FROM '$f'"
	flush_ms=$((flush_ms + $(sql_ms "SELECT * FROM rollout_flush('scan_rollout')")))
done
gc_now scan_rollout
workload flush_chunks "Bulk load" "rollout_flush after each of $CHUNKS COPYs, total" "ms" lower
record flush_chunks rollout 1 "$flush_ms"

# ---------------------------------------------------------------- reads
W=$((ROWS / 1000))
[ "$W" -ge 2 ] || W=2
STEP=$((4294967296 / W))
RANGE_HI=$((W - 2))
NROLL=$(((ROWS - 1) / 32))
# 1,000 keys of the data set (a few absent ones when ROWS is smaller), for the key join
psql_q -c "DROP TABLE IF EXISTS join_ids" \
	-c "CREATE TABLE join_ids AS SELECT md5('row-' || (i * 7919 % $ROWS + 1))::uuid AS id FROM generate_series(1, 1000) i" \
	-c "ANALYZE join_ids"
for kind in heap rollout; do
	T=scan_$kind
	echo "SELECT count(*) FROM $T;" >"$SCRIPTS/count_$kind.sql"
	echo "COPY (SELECT * FROM $T) TO '/dev/null';" >"$SCRIPTS/full_$kind.sql"
	echo "SELECT sum(reward) FROM $T;" >"$SCRIPTS/onecol_$kind.sql"
	printf '%s\n' "SET max_parallel_workers_per_gather = 0;" "SELECT sum(reward) FROM $T;" >"$SCRIPTS/onecol_serial_$kind.sql"
	echo "SELECT * FROM $T ORDER BY id LIMIT 10;" >"$SCRIPTS/orderlimit_$kind.sql"
	echo "SELECT count(*), sum(t.reward) FROM join_ids i JOIN $T t ON t.id = i.id;" >"$SCRIPTS/keyjoin_$kind.sql"
	cat >"$SCRIPTS/lookup_$kind.sql" <<EOF
\set n random(1, $ROWS)
SELECT * FROM $T WHERE id = md5('row-' || :n)::uuid;
EOF
	cat >"$SCRIPTS/absent_$kind.sql" <<EOF
\set n random(1, $ROWS)
SELECT * FROM $T WHERE id = md5('absent-' || :n)::uuid;
EOF
	# 1/W of the uuid space, about 1,000 rows: bounds on the first 32 bits
	cat >"$SCRIPTS/range_$kind.sql" <<EOF
\set p random(0, $RANGE_HI)
\set lo :p * $STEP
\set hi (:p + 1) * $STEP
SELECT * FROM $T WHERE id >= (lpad(to_hex(:lo::bigint), 8, '0') || '-0000-0000-0000-000000000000')::uuid AND id < (lpad(to_hex(:hi::bigint), 8, '0') || '-0000-0000-0000-000000000000')::uuid;
EOF
	cat >"$SCRIPTS/filter_$kind.sql" <<EOF
\set r random(0, $NROLL)
SELECT * FROM $T WHERE rollout_id = md5('rollout-' || :r)::uuid;
EOF
	# 1 % of the rows by created_at (gen_rows.pl: 2025-01-01 + n * 50 ms),
	# a column that follows insert order
	cat >"$SCRIPTS/ctime_$kind.sql" <<EOF
\set p random(0, 98)
SELECT * FROM $T WHERE created_at >= timestamptz '2025-01-01 00:00+00' + (:p * $((ROWS / 100 * 50))) * interval '1 ms' AND created_at < timestamptz '2025-01-01 00:00+00' + ((:p + 1) * $((ROWS / 100 * 50))) * interval '1 ms';
EOF
	echo "SELECT exact_row_count FROM rollout_observe('scan_rollout', exact => true);" >"$SCRIPTS/exact_rollout.sql"
	echo "SELECT row_count FROM rollout_observe('scan_rollout');" >"$SCRIPTS/cheap_rollout.sql"
	echo "SELECT reltuples FROM pg_class WHERE oid = 'scan_heap'::regclass;" >"$SCRIPTS/cheap_heap.sql"
	cp "$SCRIPTS/count_heap.sql" "$SCRIPTS/exact_heap.sql"
done
chmod 644 "$SCRIPTS"/*.sql

# sanity: both tables hold the same rows (a wrong result is a failure, not a figure)
check_same() {
	local h r
	h=$(psql_q -c "SELECT count(*), sum(reward)::numeric(20,4), count(DISTINCT rollout_id) FROM scan_heap")
	r=$(psql_q -c "SELECT count(*), sum(reward)::numeric(20,4), count(DISTINCT rollout_id) FROM scan_rollout")
	[ "$h" = "$r" ] || die "heap and rollout differ: heap $h, rollout $r"
	[ "${h%%|*}" = "$ROWS" ] || die "expected $ROWS rows, found ${h%%|*}"
}

# the planner's row estimate for SELECT * from table, divided by the true count
estimate_ratio() { # table
	psql_q -c "EXPLAIN (FORMAT JSON) SELECT * FROM $1" |
		ROWS=$ROWS perl -MJSON::PP -0777 -e 'printf "%.3f\n", decode_json(<STDIN>)->[0]{Plan}{"Plan Rows"} / $ENV{ROWS}'
}

read_workloads() { # phase label
	local phase=$1 label=$2 sec="Reads, $2"
	workload "count_$phase" "$sec" "SELECT count(*)" ms lower
	workload "full_$phase" "$sec" "full scan, every column (COPY (SELECT *) TO /dev/null)" ms lower
	workload "onecol_$phase" "$sec" "scan projecting one small column (sum(reward)), parallel workers as the planner chooses" ms lower
	workload "onecol_serial_$phase" "$sec" "the same without parallel workers (max_parallel_workers_per_gather = 0)" ms lower
	workload "lookup_$phase" "$sec" "key lookup (id = uuid), median of $LOOKUPS per run" ms lower
	workload "absent_$phase" "$sec" "lookup of an absent key, median of $LOOKUPS per run" ms lower
	workload "range_$phase" "$sec" "key range, ~1,000 rows of $ROWS (uuid bounds)" ms lower
	workload "filter_$phase" "$sec" "filter on a non-key column (rollout_id = x, 32 rows)" ms lower
	workload "ctime_$phase" "$sec" "filter on created_at, 1 % of rows (follows insert order)" ms lower
	workload "cheap_$phase" "$sec" "cheap count (rollout_observe; heap: pg_class.reltuples)" ms lower
	workload "exact_$phase" "$sec" "exact count (rollout_observe exact; heap: count(*))" ms lower
	workload "orderlimit_$phase" "$sec" "ORDER BY id LIMIT 10 (heap: its primary key index)" ms lower
	workload "estimate_$phase" "$sec" "planner row estimate of SELECT * / true row count" ratio none
	workload "keyjoin_$phase" "$sec" "join of 1,000 keys from a heap table (the planner's choice of plan)" ms lower
	for kind in heap rollout; do
		CURRENT="reads $label: $kind"
		say "reads $label: $kind"
		latency_runs "count_$phase" "$kind" "$SCRIPTS/count_$kind.sql" "$RUNS"
		latency_runs "full_$phase" "$kind" "$SCRIPTS/full_$kind.sql" "$RUNS"
		latency_runs "onecol_$phase" "$kind" "$SCRIPTS/onecol_$kind.sql" "$RUNS"
		latency_runs "onecol_serial_$phase" "$kind" "$SCRIPTS/onecol_serial_$kind.sql" "$RUNS"
		latency_runs "lookup_$phase" "$kind" "$SCRIPTS/lookup_$kind.sql" $((LOOKUPS * RUNS))
		latency_runs "absent_$phase" "$kind" "$SCRIPTS/absent_$kind.sql" $((LOOKUPS * RUNS))
		latency_runs "range_$phase" "$kind" "$SCRIPTS/range_$kind.sql" $((LOOKUPS * RUNS / 5))
		latency_runs "filter_$phase" "$kind" "$SCRIPTS/filter_$kind.sql" "$RUNS"
		latency_runs "ctime_$phase" "$kind" "$SCRIPTS/ctime_$kind.sql" "$RUNS"
		latency_runs "cheap_$phase" "$kind" "$SCRIPTS/cheap_$kind.sql" $((LOOKUPS * RUNS))
		latency_runs "exact_$phase" "$kind" "$SCRIPTS/exact_$kind.sql" "$RUNS"
		latency_runs "orderlimit_$phase" "$kind" "$SCRIPTS/orderlimit_$kind.sql" $((LOOKUPS * RUNS / 5))
		record "estimate_$phase" "$kind" 1 "$(estimate_ratio "scan_$kind")"
		latency_runs "keyjoin_$phase" "$kind" "$SCRIPTS/keyjoin_$kind.sql" "$RUNS"
	done
}

sizes() { # phase label
	workload "size_$1" "On-disk size" "$2" MiB lower
	record "size_$1" heap 1 "$(psql_q -c "SELECT round(pg_total_relation_size('scan_heap') / 1048576.0, 1)")"
	record "size_$1" rollout 1 "$(du -sb "$STORE/scan_rollout" | awk '{printf "%.1f", $1 / 1048576}')"
}

CURRENT="check"
check_same
sizes before "before (heap as loaded; store: $CHUNKS generations after gc)"
read_workloads before "before merge/compaction (heap: before VACUUM ANALYZE; store: $CHUNKS generations)"

CURRENT="merge and compaction"
say "merge + full compaction (heap: VACUUM ANALYZE)"
workload maint "Maintenance" "$CHUNKS merges (one generation each) + full compaction + gc (heap: VACUUM ANALYZE)" ms lower
t1=$(date +%s%N)
psql_q -c "VACUUM ANALYZE scan_heap"
t2=$(date +%s%N)
record maint heap 1 $(((t2 - t1) / 1000000))
t1=$(date +%s%N)
# one merge per generation (as a scheduled merge after each flush would have done),
# then a full compaction of the resulting fragments into fragments of <= 1Mi rows
for _ in $(seq 1 $((CHUNKS + 5))); do
	merged=$(psql_q -c "SELECT generations_merged FROM rollout_merge('scan_rollout', max_generations => 1)")
	[ "$merged" != 0 ] || break
done
psql_q -c "SELECT * FROM rollout_compact('scan_rollout', 2, 1048576)" >"$LOGS/compact.out"
gc_now scan_rollout
t2=$(date +%s%N)
record maint rollout 1 $(((t2 - t1) / 1000000))
psql_q -c "SELECT * FROM rollout_observe('scan_rollout')" >"$LOGS/observe_after.out"
check_same
sizes after "after merge + compaction + gc (heap: after VACUUM ANALYZE)"
read_workloads after "after merge + full compaction (heap: after VACUUM ANALYZE)"

# ---------------------------------------------------------------- time-ordered keys
# The same rows under keys that follow insert order (a uuid whose first 48 bits
# are created_at in milliseconds, as uuid v7's are): a compacted store is sorted
# by key, so only then does a created_at range cover few row groups, which its
# zone maps skip. The heap's sequential scan does not depend on the key. Both
# are analyzed, as the planner needs pg_stats.correlation to cost zone maps.
CURRENT="time-ordered keys"
say "the same rows under time-ordered keys"
KEY7="(lpad(to_hex((extract(epoch FROM created_at) * 1000)::bigint), 12, '0') || substr(replace(id::text, '-', ''), 13))::uuid"
psql_q -c "DROP TABLE IF EXISTS scan7_heap" \
	-c "CREATE TABLE scan7_heap AS SELECT $KEY7 AS id, rollout_id, step, role, reward, created_at, payload FROM scan_heap" \
	-c "ALTER TABLE scan7_heap ADD PRIMARY KEY (id)" -c "VACUUM ANALYZE scan7_heap"
make_rollout_table scan7_rollout
psql_q -c "INSERT INTO scan7_rollout SELECT $KEY7, rollout_id, step, role, reward, created_at, payload FROM scan_heap" \
	-c "SELECT * FROM rollout_flush('scan7_rollout')" -c "SELECT * FROM rollout_merge('scan7_rollout')" \
	-c "SELECT * FROM rollout_compact('scan7_rollout', 2, 1048576)" \
	-c "ANALYZE scan7_rollout" >/dev/null
gc_now scan7_rollout
for kind in heap rollout; do
	sed "s/scan_$kind/scan7_$kind/" "$SCRIPTS/ctime_$kind.sql" >"$SCRIPTS/ctime7_$kind.sql"
done
chmod 644 "$SCRIPTS"/*.sql
sec7="Reads with time-ordered keys (uuid v7-like), after merge + full compaction"
workload ctime7 "$sec7" "filter on created_at, 1 % of rows" ms lower
for kind in heap rollout; do
	say "reads with time-ordered keys: $kind"
	latency_runs ctime7 "$kind" "$SCRIPTS/ctime7_$kind.sql" "$RUNS"
done
psql_q -c "DROP TABLE scan7_heap" -c "DROP FOREIGN TABLE scan7_rollout"
rm -rf "${STORE:?}/scan7_rollout"

# ---------------------------------------------------------------- clustered compaction
# The same rows and random uuid keys, in a table with cluster_by 'created_at':
# its compaction writes one set of key-sorted fragments per range of
# created_at (lsm/cluster_ranges.c), so a created_at window reads one or two
# of them. What that costs the reads that use the key is measured with it:
# a full scan merges the sets' fragments, a lookup asks each one's key filter.
CURRENT="clustered compaction"
say "the same rows, compacted with cluster_by created_at"
make_rollout_table scanc_rollout "cluster_by 'created_at'"
t1=$(date +%s%N)
# in two halves, each merged into a fragment: a compaction needs two
for half in "step < 16" "step >= 16"; do
	psql_q -c "INSERT INTO scanc_rollout SELECT * FROM scan_heap WHERE $half" \
		-c "SELECT * FROM rollout_flush('scanc_rollout')" -c "SELECT * FROM rollout_merge('scanc_rollout')" >/dev/null
done
t2=$(date +%s%N)
psql_q -c "SELECT * FROM rollout_compact('scanc_rollout', 2, 1048576)" >"$LOGS/compact_clustered.out"
t3=$(date +%s%N)
psql_q -c "ANALYZE scanc_rollout" >/dev/null
gc_now scanc_rollout
h=$(psql_q -c "SELECT count(*), sum(reward)::numeric(20,4) FROM scan_heap")
r=$(psql_q -c "SELECT count(*), sum(reward)::numeric(20,4) FROM scanc_rollout")
[ "$h" = "$r" ] || die "heap and the clustered store differ: heap $h, rollout $r"
say "clustered compaction: $(cat "$LOGS/compact_clustered.out") in $(((t3 - t2) / 1000000)) ms (load: $(((t2 - t1) / 1000000)) ms)"
for w in ctime full lookup; do
	cp "$SCRIPTS/${w}_heap.sql" "$SCRIPTS/${w}c_heap.sql"
	sed "s/scan_rollout/scanc_rollout/" "$SCRIPTS/${w}_rollout.sql" >"$SCRIPTS/${w}c_rollout.sql"
done
chmod 644 "$SCRIPTS"/*.sql
secc="Reads with random uuid keys, compacted with cluster_by 'created_at'"
workload ctimec "$secc" "filter on created_at, 1 % of rows" ms lower
workload fullc "$secc" "full scan, every column" ms lower
workload lookupc "$secc" "key lookup, median of $LOOKUPS per run" ms lower
for kind in heap rollout; do
	say "reads compacted with cluster_by: $kind"
	latency_runs ctimec "$kind" "$SCRIPTS/ctimec_$kind.sql" "$RUNS"
	latency_runs fullc "$kind" "$SCRIPTS/fullc_$kind.sql" "$RUNS"
	latency_runs lookupc "$kind" "$SCRIPTS/lookupc_$kind.sql" $((LOOKUPS * RUNS))
done
psql_q -c "DROP FOREIGN TABLE scanc_rollout"
rm -rf "${STORE:?}/scanc_rollout"

CURRENT="analyze"
say "ANALYZE"
workload analyze "Maintenance" "ANALYZE (a sample of the live rows; compare the full scan above)" ms lower
for kind in heap rollout; do
	record analyze "$kind" 1 "$(sql_ms "ANALYZE scan_$kind")"
done

# ---------------------------------------------------------------- report
CURRENT="report"
table=$(perl "$BENCH/summarize.pl" "$WORKLOADS" "$CSV_RAW" "$CSV_SUM")
mode=full
[ "$smoke" = 1 ] && mode=smoke
{
	echo "# rollout_fdw benchmark ($mode mode)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo) RAM," \
		"PostgreSQL $("$PG_CONFIG" --version | awk '{print $2}'), rollout_fdw $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (modified)')," \
		"installed rollout_fdw.so sha256 $SO_SUM$([ "$(so_sum)" = "$SO_SUM" ] || echo ' (CHANGED during the run: someone reinstalled the extension; figures mix builds)')," \
		"shared_preload_libraries '${BENCH_PRELOAD-rollout_fdw}'," \
		"$ROWS rows, $RUNS runs per figure (median), pgbench runs of $([ "$smoke" = 1 ] && echo "a few transactions per client" || echo "${DURATION}s"), total $(($(date +%s) - T0)) s."
	echo
	echo "$table"
	echo
	echo "Compaction (fragments_before|fragments_after|rows_written|versions_dropped|skipped_reason): $(cat "$LOGS/compact.out")"
	echo
	echo "Store after it (rollout_observe: row_count|exact|base_rows|fragments|generations|generation_rows|unflushed|bytes|base_version|writer_epoch|wal_entries): $(cat "$LOGS/observe_after.out")"
	echo
	echo "Raw figures: $CSV_RAW; medians: $CSV_SUM."
} >"$OUT"
cat "$OUT"
say "done in $(($(date +%s) - T0)) s; results in $OUT"
