#!/usr/bin/env bash
# objstore_commit.sh — single-row INSERT transactions against remote object
# stores behind a delaying proxy (issue 5's benchmark).  A program, not a
# test: it prints figures and fails only when a workload fails, never
# because something is slow.  Run as root.
#
#   bash test/bench/objstore_commit.sh [--quick] [--duration S] [--clients "1 8 32"]
#        [--delay-ms MS] [--backends "s3 azure rgw"] [--depths "1 4"] [--no-build] [--keep]
#        [--out FILE]
#
#   --quick       5 s per run instead of 15 s
#   --duration S  seconds per pgbench run (default 15)
#   --clients L   client counts (default "1 8 32")
#   --delay-ms MS proxy delay per direction (default 10, i.e. a 20 ms round trip)
#   --backends L  which stores (default "s3 azure", plus rgw when its server runs):
#                 s3 = moto, azure = Azurite, rgw = Ceph RGW (test/servers/*.sh)
#   --depths L    rollout_fdw.wal_pipeline_depth values to run each remote store
#                 with, one after another in the same cluster (default "1 4": one
#                 WAL PUT in flight per shard against the pipeline); its rows are
#                 labelled store_dN
#   --no-build    do not run make / make install
#   --keep        keep the work directory (logs)
#   --out FILE    also write the markdown table to FILE
#
# What it does, per backend: a throw-away cluster with rollout_fdw preloaded
# (group commit; the sweeper flushes every second; no background merge or gc),
# a rollout table on a fresh prefix of the store reached through
# test/servers/latency_proxy.py, then for each client count a pgbench run of
# test/bench/group_commit/insert.sql.  Reported: transactions/s, p50/p99
# commit latency (pgbench --log), p99 in round trips of the proxy, WAL PUTs
# per transaction (rollout_stat_stores) and HTTP requests per transaction
# (the proxy's counter: WAL PUTs, flushes, everything) and the mean time of
# a WAL PUT (rollout_stat_stores), which separates the store's own latency
# from time spent queueing for a group, and the share of WAL PUTs begun while
# an earlier one was in flight (wal_puts_pipelined).  The same workload on
# the local file:// store, in the same cluster, is the baseline.
#
# The bar of issue 5, printed as met or missed: at 32 clients and a 20 ms
# round trip, at least 400 transactions/s, under 0.2 WAL PUTs per
# transaction, p99 under 3 round trips.
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/../.." && pwd)
. "$BENCH/proxy.sh"
PG_BIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PG_BIN/pg_config
export PATH="$PG_BIN:$PATH"

duration=15
clients="1 8 32"
delay=10
backends=
depths="1 4"
build=1
keep=0
out=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) duration=5 ;;
	--duration) duration=$2; shift ;;
	--clients) clients=$2; shift ;;
	--delay-ms) delay=$2; shift ;;
	--backends) backends=$2; shift ;;
	--depths) depths=$2; shift ;;
	--no-build) build=0 ;;
	--keep) keep=1 ;;
	--out) out=$2; shift ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "objstore_commit.sh: unknown argument: $1 (try --help)" >&2
		exit 2
		;;
	esac
	shift
done
[[ $duration =~ ^[0-9]+$ ]] && [ "$duration" -gt 0 ] || { echo "objstore_commit.sh: bad duration" >&2; exit 2; }
[[ $delay =~ ^[0-9]+$ ]] || { echo "objstore_commit.sh: bad delay" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "objstore_commit.sh: run as root (it starts the servers)" >&2; exit 2; }
as_pg() { runuser -u postgres -- "$@"; }

if [ "$build" = 1 ]; then
	echo "== building and installing rollout_fdw" >&2
	(cd "$ROOT" && make -j"${MAKE_JOBS:-2}" PG_CONFIG="$PG_CONFIG" >/dev/null && make install PG_CONFIG="$PG_CONFIG" >/dev/null)
fi

WORK=$(mktemp -d /tmp/rollout_os_bench.XXXXXX)
PORT=${BENCH_PORT:-5497}
DATA=$WORK/data
LOGS=$WORK/logs
mkdir -p "$LOGS" "$WORK/store"
chmod 755 "$WORK"
chown -R postgres:postgres "$WORK"

started=()
proxy_pid=
cleanup() {
	local rc=$?
	set +e
	[ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
	[ -f "$DATA/postmaster.pid" ] && as_pg pg_ctl -D "$DATA" -m fast -w stop >/dev/null 2>&1
	for s in "${started[@]}"; do bash "$ROOT/test/servers/$s.sh" stop >/dev/null 2>&1; done
	if [ "$keep" = 1 ]; then echo "objstore_commit.sh: kept $WORK" >&2; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# --- servers ------------------------------------------------------------------
server_up() {	# name: start it unless it answers; load its settings
	local name=$1
	if ! bash "$ROOT/test/servers/$name.sh" status >/dev/null 2>&1; then
		echo "== starting $name" >&2
		bash "$ROOT/test/servers/$name.sh" start >"$LOGS/$name.start" 2>&1 || { cat "$LOGS/$name.start" >&2; return 1; }
		started+=("$name")
	fi
	eval "$(bash "$ROOT/test/servers/$name.sh" env | sed 's/^export //')"
}
if [ -z "$backends" ]; then
	backends="s3 azure"
	[ -f "$ROOT/test/servers/rgw.sh" ] && bash "$ROOT/test/servers/rgw.sh" status >/dev/null 2>&1 && backends+=" rgw"
fi

# --- cluster ------------------------------------------------------------------
as_pg initdb -D "$DATA" -A trust -U postgres >/dev/null
cat >>"$DATA/postgresql.conf" <<EOF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$WORK'
max_connections = 200
shared_buffers = 256MB
shared_preload_libraries = 'rollout_fdw'
rollout_fdw.worker_databases = 'postgres'
rollout_fdw.flush_interval = ${BENCH_FLUSH_INTERVAL:-1}
rollout_fdw.merge_after_generations = 0
rollout_fdw.gc_interval = 0
${BENCH_COMMIT_DELAY_US:+rollout_fdw.commit_delay = $BENCH_COMMIT_DELAY_US}
EOF
as_pg pg_ctl -D "$DATA" -l "$WORK/server.log" -w start >/dev/null
psql_q() { as_pg psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -d postgres "$@"; }
psql_q -c "CREATE EXTENSION rollout_fdw"

percentile() {
	sort -n | awk -v p="$1" '{ a[NR] = $1 } END { if (NR == 0) { print "nan"; exit } i = int((p / 100) * NR + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; print a[i] }'
}

# A proxy in front of HOST:PORT with the delay; sets proxy_port, control_port.
start_proxy() {
	kill_proxy
	latency_proxy_start "$1" "$delay" "$WORK/ports" "$LOGS/proxy.log" --control 127.0.0.1:0
	proxy_pid=$LATENCY_PROXY_PID
	read -r proxy_port control_port < <(latency_proxy_ports "$WORK/ports")
}
kill_proxy() {
	if [ -n "$proxy_pid" ]; then
		kill "$proxy_pid" 2>/dev/null || true
		wait "$proxy_pid" 2>/dev/null || true
	fi
	proxy_pid=
}
proxy_requests() {
	if [ -n "$proxy_pid" ]; then
		python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"status\n"); print(s.makefile().readline().split("requests=")[1].split()[0])' "$control_port"
	else
		echo 0
	fi
}

declare -A TPS P50 P99 PPT RPT XACTS PUTMS PIPED
run_one() {	# table label clients
	local t=$1 label=$2 c=$3
	local prefix=$LOGS/$label-$c jobs=$c
	[ "$jobs" -gt 4 ] && jobs=4
	local s0 s1 r0 r1
	s0=$(psql_q -c "SELECT wal_puts || ' ' || transactions_committed || ' ' || put_latency_mean_ms || ' ' || wal_puts_pipelined FROM rollout_stat_stores WHERE store = '$t'")
	r0=$(proxy_requests)
	sed "s/INTO t /INTO $t /" "$BENCH/group_commit/insert.sql" >"$WORK/insert_$t.sql"
	as_pg pgbench -n -h "$WORK" -p "$PORT" -c "$c" -j "$jobs" -T "$duration" \
		-f "$WORK/insert_$t.sql" --log --log-prefix="$prefix" postgres >"$prefix.out" 2>&1 || {
		echo "objstore_commit.sh: pgbench failed ($label, $c clients):" >&2
		cat "$prefix.out" >&2
		exit 1
	}
	r1=$(proxy_requests)
	s1=$(psql_q -c "SELECT wal_puts || ' ' || transactions_committed || ' ' || put_latency_mean_ms || ' ' || wal_puts_pipelined FROM rollout_stat_stores WHERE store = '$t'")
	read -r p0 x0 m0 q0 <<<"$s0"
	read -r p1 x1 m1 q1 <<<"$s1"
	local k=$label-$c x=$((x1 - x0))
	TPS[$k]=$(sed -nE 's/^tps = ([0-9.]+) \(without initial connection time\)/\1/p' "$prefix.out")
	P50[$k]=$(cat "$prefix".[0-9]* | awk '{ print $3 / 1000 }' | percentile 50)
	P99[$k]=$(cat "$prefix".[0-9]* | awk '{ print $3 / 1000 }' | percentile 99)
	XACTS[$k]=$x
	PPT[$k]=$(awk -v p=$((p1 - p0)) -v x="$x" 'BEGIN { if (x > 0) printf "%.3f", p / x; else print "nan" }')
	RPT[$k]=$(awk -v p=$((r1 - r0)) -v x="$x" 'BEGIN { if (x > 0) printf "%.3f", p / x; else print "nan" }')
	# the mean time of this run's WAL PUTs, from the view's running mean
	# the share of this run's WAL PUTs begun while an earlier one was in flight
	PIPED[$k]=$(awk -v p=$((p1 - p0)) -v q=$((q1 - q0)) 'BEGIN { if (p > 0) printf "%.2f", q / p; else print "nan" }')
	PUTMS[$k]=$(awk -v p0="$p0" -v p1="$p1" -v m0="$m0" -v m1="$m1" 'BEGIN { if (p1 > p0) printf "%.2f", (m1 * p1 - m0 * p0) / (p1 - p0); else print "nan" }')
	printf '   %-8s %3s clients: %8.1f tps, p50 %7.2f ms, p99 %7.2f ms, %.3f WAL PUTs/xact, %s requests/xact, WAL PUT %s ms, %s pipelined\n' \
		"$label" "$c" "${TPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${PPT[$k]}" "${RPT[$k]}" "${PUTMS[$k]}" "${PIPED[$k]}" >&2
}

run_id=$(basename "$WORK")
labels=(file)
# baseline: the local file:// store, no proxy
psql_q -c "CREATE SERVER b_file FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$WORK/store')" \
	-c "CREATE FOREIGN TABLE t_file (id text, v bigint, payload jsonb) SERVER b_file OPTIONS (store 't_file', key 'id')" \
	-c "INSERT INTO t_file VALUES ('warm-up', 0, '{}')"
echo "== file:// baseline (no proxy), ${duration}s per run" >&2
for c in $clients; do run_one t_file file "$c"; done

for b in $backends; do
	case $b in
	s3) server_up moto || exit 1; ep=$ROLLOUT_TEST_S3_ENDPOINT ;;
	rgw) server_up rgw || exit 1; ep=$ROLLOUT_TEST_RGW_ENDPOINT ;;
	azure) server_up azurite || exit 1; ep=$ROLLOUT_TEST_AZURE_ENDPOINT ;;
	*) echo "objstore_commit.sh: unknown backend $b" >&2; exit 2 ;;
	esac
	hostport=$(sed -E 's|^http://([^/]+).*|\1|' <<<"$ep")
	path=$(sed -E 's|^http://[^/]+||' <<<"$ep")
	start_proxy "$hostport"
	case $b in
	s3 | rgw)
		v=S3; [ "$b" = rgw ] && v=RGW
		bu=ROLLOUT_TEST_${v}_BUCKET ak=ROLLOUT_TEST_${v}_ACCESS_KEY_ID sk=ROLLOUT_TEST_${v}_SECRET_ACCESS_KEY
		psql_q -c "CREATE SERVER b_$b FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 's3://${!bu}/bench/$run_id', endpoint 'http://127.0.0.1:$proxy_port', region 'us-east-1')" \
			-c "CREATE USER MAPPING FOR PUBLIC SERVER b_$b OPTIONS (access_key_id '${!ak}', secret_access_key '${!sk}')"
		;;
	azure)
		account=${ep##*/}
		psql_q -c "CREATE SERVER b_$b FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'az://$account/$ROLLOUT_TEST_AZURE_CONTAINER/bench/$run_id', endpoint 'http://127.0.0.1:$proxy_port$path')" \
			-c "CREATE USER MAPPING FOR PUBLIC SERVER b_$b OPTIONS (account_key '$ROLLOUT_TEST_AZURE_KEY')"
		;;
	esac
	psql_q -c "CREATE FOREIGN TABLE t_$b (id text, v bigint, payload jsonb) SERVER b_$b OPTIONS (store 't_$b', key 'id')" \
		-c "INSERT INTO t_$b VALUES ('warm-up', 0, '{}')"
	for d in $depths; do
		psql_q -c "ALTER SYSTEM SET rollout_fdw.wal_pipeline_depth = $d" -c "SELECT pg_reload_conf()" >/dev/null
		sleep 0.5
		echo "== $b through the proxy ($delay ms each way), wal_pipeline_depth $d, ${duration}s per run" >&2
		for c in $clients; do run_one "t_$b" "${b}_d$d" "$c"; done
		labels+=("${b}_d$d")
	done
	psql_q -c "ALTER SYSTEM RESET rollout_fdw.wal_pipeline_depth" -c "SELECT pg_reload_conf()" >/dev/null
	# exactness: every row once
	read -r n d <<<"$(psql_q -c "SELECT count(*) || ' ' || count(DISTINCT id) FROM t_$b")"
	[ "$n" = "$d" ] || { echo "objstore_commit.sh: $b has duplicate rows ($n rows, $d keys)" >&2; exit 1; }
	kill_proxy
done

rtt=$((2 * delay))
table=$(
	echo "| store | clients | tps | vs file:// | p50 ms | p99 ms | p99 in round trips | WAL PUTs / xact | requests / xact | mean WAL PUT ms | PUTs pipelined | transactions |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for l in "${labels[@]}"; do
		for c in $clients; do
			k=$l-$c
			awk -v l="$l" -v c="$c" -v t="${TPS[$k]}" -v tb="${TPS[file-$c]}" -v p50="${P50[$k]}" -v p99="${P99[$k]}" \
				-v rtt="$rtt" -v ppt="${PPT[$k]}" -v rpt="${RPT[$k]}" -v x="${XACTS[$k]}" -v pm="${PUTMS[$k]}" -v pp="${PIPED[$k]}" 'BEGIN {
				rt = (l == "file") ? "-" : sprintf("%.1f", p99 / rtt);
				printf "| %s | %s | %.0f | %.2fx | %.2f | %.2f | %s | %s | %s | %s | %s | %s |\n", l, c, t, t / tb, p50, p99, rt, ppt, (l == "file") ? "-" : rpt, pm, pp, x }'
		done
	done
	echo
	last=${clients##* }
	for l in "${labels[@]}"; do
		[ "$l" = file ] && continue
		k=$l-$last
		awk -v l="$l" -v c="$last" -v t="${TPS[$k]}" -v ppt="${PPT[$k]}" -v p99="${P99[$k]}" -v rtt="$rtt" 'BEGIN {
			ok1 = (t >= 400); ok2 = (ppt < 0.2); ok3 = (p99 < 3 * rtt);
			printf "Bar at %s clients, %s: %.0f tps (>= 400: %s), %.3f WAL PUTs/xact (< 0.2: %s), p99 %.1f ms = %.1f round trips (< 3: %s)\n",
				c, l, t, ok1 ? "met" : "missed", ppt, ok2 ? "met" : "missed", p99, p99 / rtt, ok3 ? "met" : "missed" }'
		# issue 15: >= 2,500 tps at 32 clients, >= 6,000 and <= 0.05 WAL PUTs/xact at 128
		for c in 32 128; do
			k=$l-$c
			[ -n "${TPS[$k]:-}" ] || continue
			awk -v l="$l" -v c="$c" -v t="${TPS[$k]}" -v ppt="${PPT[$k]}" -v p99="${P99[$k]}" -v rtt="$rtt" 'BEGIN {
				want = (c == 32) ? 2500 : 6000;
				printf "Issue 15 at %s clients, %s: %.0f tps (>= %d: %s), p99 %.1f round trips (< 3: %s)%s\n",
					c, l, t, want, (t >= want) ? "met" : "missed", p99 / rtt, (p99 < 3 * rtt) ? "met" : "missed",
					(c == 128) ? sprintf(", %.3f WAL PUTs/xact (<= 0.05: %s)", ppt, (ppt <= 0.05) ? "met" : "missed") : "" }'
		done
	done
	echo
	echo "Setup: PostgreSQL 15, rollout_fdw preloaded (group commit), sweeper flush every 1 s, proxy delay $delay ms each way (round trip $rtt ms), ${duration} s per run, $(nproc) CPUs; servers on loopback (moto, Azurite$( [[ " ${labels[*]} " == *" rgw_"* ]] && echo ", Ceph RGW"))."
)
echo
echo "$table"
[ -n "$out" ] && echo "$table" >"$out"
exit 0
