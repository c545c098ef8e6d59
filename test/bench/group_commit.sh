#!/usr/bin/env bash
# group_commit.sh — throughput and commit latency of single-row INSERT
# transactions through the shared-memory writer (group commit, memtable),
# without and with a merge running throughout. A program, not a test: it
# prints figures and fails only when a workload fails, never because
# something is slow. Run as root (or as postgres).
#
#   bash test/bench/group_commit.sh [--quick] [--duration S] [--clients "1 8 32"]
#                                   [--no-build] [--keep] [--out FILE]
#
#   --quick       3 s per run instead of 15 s
#   --duration S  seconds per pgbench run (default 15)
#   --clients L   client counts, space-separated (default "1 8 32")
#   --no-build    do not run make / make install (the extension must be installed)
#   --keep        keep the cluster's directory (logs, store) after the run
#   --out FILE    also write the markdown table to FILE
#   -h, --help    this text
#
# Environment: BENCH_DIR (work directory; default a new /tmp/rollout_gc_bench.XXXXXX),
# BENCH_PORT (default 5498), MAKE_JOBS (2).
#
# What it does:
#   1. make && make install (unless --no-build);
#   2. a throw-away PostgreSQL 15 cluster, as the postgres user, with
#      shared_preload_libraries = 'rollout_fdw', fsync and synchronous_commit on,
#      rollout_fdw.flush_interval = 1 (the sweeper flushes every second),
#      merge_after_generations = 0 and gc_interval = 0 (no background merge or gc:
#      the only merges are the ones this program runs);
#   3. a rollout foreign table on a local file:// store (the file backend fsyncs
#      every object it creates);
#   4. for each client count, a pgbench run of single-row INSERT transactions
#      (test/bench/group_commit/insert.sql), -T duration, with --log: tps from
#      pgbench, p50/p99 commit latency from the per-transaction log, WAL PUTs per
#      transaction from the deltas of rollout_stat_stores (wal_puts,
#      transactions_committed);
#   5. right after each run, the same again while another session calls
#      rollout_merge() in a loop (flush first, then fold the generations into the
#      base) for the whole run;
#   6. prints a markdown table and, per client count, p99(with merge) / p99(without).
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/../.." && pwd)
PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BIN/pg_config
export PATH="$PG_BIN:$PATH"

duration=15
clients="1 8 32"
build=1
keep=0
out=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) duration=3 ;;
	--duration)
		[ $# -ge 2 ] || { echo "group_commit.sh: --duration needs seconds" >&2; exit 2; }
		duration=$2
		shift
		;;
	--clients)
		[ $# -ge 2 ] || { echo "group_commit.sh: --clients needs a list" >&2; exit 2; }
		clients=$2
		shift
		;;
	--no-build) build=0 ;;
	--keep) keep=1 ;;
	--out)
		[ $# -ge 2 ] || { echo "group_commit.sh: --out needs a file" >&2; exit 2; }
		out=$2
		shift
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "group_commit.sh: unknown argument: $1 (try --help)" >&2
		exit 2
		;;
	esac
	shift
done
[[ $duration =~ ^[0-9]+$ ]] && [ "$duration" -gt 0 ] || { echo "group_commit.sh: bad duration: $duration" >&2; exit 2; }

# Commands run as postgres (initdb and postgres refuse root).
if [ "$(id -u)" = 0 ]; then
	as_pg() { runuser -u postgres -- "$@"; }
else
	as_pg() { "$@"; }
fi

if [ "$build" = 1 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "group_commit.sh: building and installing needs root; use --no-build" >&2
		exit 2
	fi
	echo "== building and installing rollout_fdw" >&2
	(cd "$ROOT" && make -j"${MAKE_JOBS:-2}" PG_CONFIG="$PG_CONFIG" >/dev/null && make install PG_CONFIG="$PG_CONFIG" >/dev/null)
fi

WORK=${BENCH_DIR:-$(mktemp -d /tmp/rollout_gc_bench.XXXXXX)}
PORT=${BENCH_PORT:-5498}
DATA=$WORK/data
STORE=$WORK/store
LOGS=$WORK/logs
mkdir -p "$WORK" "$STORE" "$LOGS"
chmod 755 "$WORK"
[ "$(id -u)" = 0 ] && chown -R postgres:postgres "$WORK"

merge_pid=
cleanup() {
	local rc=$?
	set +e
	[ -n "$merge_pid" ] && kill "$merge_pid" 2>/dev/null && wait "$merge_pid" 2>/dev/null
	if [ -f "$DATA/postmaster.pid" ]; then
		as_pg pg_ctl -D "$DATA" -m fast -w stop >/dev/null 2>&1
	fi
	if [ "$keep" = 1 ]; then
		echo "group_commit.sh: kept $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

echo "== cluster in $DATA (port $PORT)" >&2
as_pg initdb -D "$DATA" -A trust -U postgres >/dev/null
cat >>"$DATA/postgresql.conf" <<EOF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$WORK'
max_connections = 100
shared_buffers = 256MB
fsync = on
synchronous_commit = on
shared_preload_libraries = 'rollout_fdw'
rollout_fdw.worker_databases = 'postgres'
rollout_fdw.flush_interval = 1
rollout_fdw.merge_after_generations = 0
rollout_fdw.gc_interval = 0
EOF
as_pg pg_ctl -D "$DATA" -l "$WORK/server.log" -w start >/dev/null

psql_q() { as_pg psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -d postgres "$@"; }

psql_q -c "CREATE EXTENSION rollout_fdw" \
	-c "CREATE SERVER bench FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$STORE')" \
	-c "CREATE FOREIGN TABLE t (id text, v bigint, payload jsonb) SERVER bench OPTIONS (store 'gcbench', key 'id')"
# the first commit claims the shard; then the view has the store's row
psql_q -c "INSERT INTO t VALUES ('warm-up', 0, '{}')"

stats() {
	psql_q -c "SELECT wal_puts || ' ' || transactions_committed || ' ' || transactions_failed FROM rollout_stat_stores WHERE store = 'gcbench'"
}

# percentile P (0-100) of the numbers on stdin (nearest rank)
percentile() {
	sort -n | awk -v p="$1" '{ a[NR] = $1 } END { if (NR == 0) { print "nan"; exit } i = int((p / 100) * NR + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; print a[i] }'
}

# The merge loop: one session after another calling rollout_merge() with a short
# pause, counting what it merged, until killed.
merge_loop() {
	local n=0
	while :; do
		psql_q -c "SELECT generations_merged FROM rollout_merge('t')" >>"$LOGS/merges.out" 2>>"$LOGS/merges.err" || echo "merge failed" >>"$LOGS/merges.err"
		sleep 0.1
	done
}

declare -A TPS P50 P99 PPT XACTS
run_one() {
	local mode=$1 c=$2
	local prefix=$LOGS/$mode-$c
	local jobs=$c
	[ "$jobs" -gt 4 ] && jobs=4
	local before after
	before=$(stats)
	as_pg pgbench -n -h "$WORK" -p "$PORT" -c "$c" -j "$jobs" -T "$duration" \
		-f "$BENCH/group_commit/insert.sql" --log --log-prefix="$prefix" postgres >"$prefix.out" 2>&1 || {
		echo "group_commit.sh: pgbench failed ($mode, $c clients):" >&2
		cat "$prefix.out" >&2
		exit 1
	}
	after=$(stats)
	local failed
	failed=$(grep -E '^number of failed transactions' "$prefix.out" | awk '{ print $5 }' || true)
	if [ -n "$failed" ] && [ "$failed" != 0 ]; then
		echo "group_commit.sh: $failed transactions failed ($mode, $c clients)" >&2
		exit 1
	fi
	read -r puts0 x0 f0 <<<"$before"
	read -r puts1 x1 f1 <<<"$after"
	if [ "$f1" != "$f0" ]; then
		echo "group_commit.sh: rollout_stat_stores counts $((f1 - f0)) failed transactions ($mode, $c clients)" >&2
		exit 1
	fi
	local key=$mode-$c
	TPS[$key]=$(sed -nE 's/^tps = ([0-9.]+) \(without initial connection time\)/\1/p' "$prefix.out")
	# pgbench --log: client_id transaction_no time(us) script_no time_epoch time_us
	P50[$key]=$(cat "$prefix".[0-9]* | awk '{ print $3 / 1000 }' | percentile 50)
	P99[$key]=$(cat "$prefix".[0-9]* | awk '{ print $3 / 1000 }' | percentile 99)
	XACTS[$key]=$((x1 - x0))
	PPT[$key]=$(awk -v p=$((puts1 - puts0)) -v x=$((x1 - x0)) 'BEGIN { if (x > 0) printf "%.3f", p / x; else print "nan" }')
	printf '   %-10s %3s clients: %8.1f tps, p50 %7.2f ms, p99 %7.2f ms, %.3f WAL PUTs/transaction (%d transactions)\n' \
		"$mode" "$c" "${TPS[$key]}" "${P50[$key]}" "${P99[$key]}" "${PPT[$key]}" "${XACTS[$key]}" >&2
}

# Per client count, the run without merge and the run with merge back to back:
# the ratio compares two runs made under the same conditions.
: >"$LOGS/merges.out"
: >"$LOGS/merges.err"
[ "$(id -u)" = 0 ] && chown postgres "$LOGS/merges.out" "$LOGS/merges.err"
echo "== ${duration}s per run; 'merge' = rollout_merge() running in a loop in another session" >&2
for c in $clients; do
	run_one plain "$c"
	merge_loop &
	merge_pid=$!
	run_one merge "$c"
	kill "$merge_pid" 2>/dev/null || true
	wait "$merge_pid" 2>/dev/null || true
	merge_pid=
done
merge_calls=$(grep -c . "$LOGS/merges.out" || true)
merged_gens=$(awk '{ s += $1 } END { print s + 0 }' "$LOGS/merges.out")
merge_errors=$(grep -c . "$LOGS/merges.err" || true)

# exactness: every committed transaction's row is there once
rows=$(psql_q -c "SELECT count(*) || ' ' || count(DISTINCT id) FROM t")
committed=$(psql_q -c "SELECT transactions_committed FROM rollout_stat_stores WHERE store = 'gcbench'")

table=$(
	echo "| clients | merge | tps | p50 ms | p99 ms | WAL PUTs / xact | transactions |"
	echo "|---:|:---:|---:|---:|---:|---:|---:|"
	for mode in plain merge; do
		for c in $clients; do
			k=$mode-$c
			printf '| %s | %s | %.0f | %.2f | %.2f | %s | %s |\n' "$c" "$([ $mode = merge ] && echo yes || echo no)" \
				"${TPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${PPT[$k]}" "${XACTS[$k]}"
		done
	done
	echo
	echo "| clients | p99 with merge / p99 without | tps with merge / tps without |"
	echo "|---:|---:|---:|"
	for c in $clients; do
		awk -v c="$c" -v a="${P99[merge-$c]}" -v b="${P99[plain-$c]}" -v ta="${TPS[merge-$c]}" -v tb="${TPS[plain-$c]}" \
			'BEGIN { printf "| %s | %.2f | %.2f |\n", c, a / b, ta / tb }'
	done
	echo
	echo "Merge loop: $merge_calls rollout_merge() calls folded $merged_gens generations ($merge_errors errors)."
	echo "Rows: $rows (count, distinct) for $committed committed transactions (incl. 1 warm-up)."
	echo "Setup: PostgreSQL 15, fsync on, file:// store on local disk, flush_interval = 1 s, ${duration} s per run, $(nproc) CPUs."
)
echo
echo "$table"
[ -n "$out" ] && echo "$table" >"$out"
read -r nrows ndistinct <<<"$rows"
if [ "$nrows" != "$ndistinct" ] || [ "$nrows" -gt "$committed" ]; then
	echo "group_commit.sh: rows are not exact: $rows for $committed transactions" >&2
	exit 1
fi
if [ "$merge_errors" != 0 ]; then
	echo "group_commit.sh: the merge loop had $merge_errors errors (see $LOGS/merges.err; --keep to keep it)" >&2
	exit 1
fi
exit 0
