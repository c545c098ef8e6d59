#!/usr/bin/env bash
# gc_deletes.sh — how fast garbage collection deletes from an S3 store behind the
# latency proxy, for several values of rollout_fdw.max_concurrent_requests.
#
#   bash test/bench/gc_deletes.sh [ENTRIES]      (default: 400)
#
# Needs a running PostgreSQL 15 with rollout_fdw installed, reached with psql's usual
# environment (PGHOST, PGPORT, PGUSER, PGDATABASE; a superuser, for
# ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0 for the run's length), and an S3 server (test/servers/moto.sh start) named
# by ROLLOUT_TEST_S3_ENDPOINT (http://HOST:PORT).  For each width it commits ENTRIES
# one-row transactions to a store of its own (ENTRIES WAL entries, directly on the S3
# server), flushes them, and times `rollout_gc(tbl, '0')` through
# test/servers/latency_proxy.py; it prints the objects deleted, the time, the rate and
# the rate against the first width (1 by default: every request after the other).
#
# Environment: DELAY_MS (proxy delay per direction; default 10, a 20 ms round trip),
# WIDTHS (default "1 4 16 64"), ROLLOUT_TEST_S3_BUCKET (rollout-test),
# ROLLOUT_TEST_S3_REGION (us-east-1), ROLLOUT_TEST_S3_ACCESS_KEY_ID and
# ROLLOUT_TEST_S3_SECRET_ACCESS_KEY (moto takes any; for Ceph RGW, test/servers/rgw.sh
# prints its own).  moto handles one request at a time (about 4 ms each here), so
# against moto the widest runs measure moto; RGW answers concurrently.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENDPOINT=${ROLLOUT_TEST_S3_ENDPOINT:?set ROLLOUT_TEST_S3_ENDPOINT (test/servers/moto.sh start)}
BUCKET=${ROLLOUT_TEST_S3_BUCKET:-rollout-test}
REGION=${ROLLOUT_TEST_S3_REGION:-us-east-1}
KEY_ID=${ROLLOUT_TEST_S3_ACCESS_KEY_ID:-k}
SECRET=${ROLLOUT_TEST_S3_SECRET_ACCESS_KEY:-s}
DELAY_MS=${DELAY_MS:-10}
WIDTHS=${WIDTHS:-"1 4 16 64"}
ENTRIES=${1:-400}
TARGET=${ENDPOINT#http://}
TARGET=${TARGET%/}
RUN=bench-gc-$$-$(date +%s)
WORK=$(mktemp -d)

psql_q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

. "$HERE/proxy.sh"
latency_proxy_start "$TARGET" "$DELAY_MS" "$WORK/ports" "$WORK/proxy.log"
PROXY=$LATENCY_PROXY_PID
trap 'kill $PROXY 2>/dev/null; rm -rf "$WORK"' EXIT
PROXY_PORT=$(latency_proxy_ports "$WORK/ports" | cut -d' ' -f1)

psql_q <<EOF
CREATE EXTENSION IF NOT EXISTS rollout_fdw;
CREATE SERVER bench_gc_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$BUCKET/$RUN', endpoint '$ENDPOINT', region '$REGION');
CREATE SERVER bench_gc_slow_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$BUCKET/$RUN', endpoint 'http://127.0.0.1:$PROXY_PORT', region '$REGION');
SET log_statement = 'none';
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_gc_$$ OPTIONS (access_key_id '$KEY_ID', secret_access_key '$SECRET');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_gc_slow_$$ OPTIONS (access_key_id '$KEY_ID', secret_access_key '$SECRET');
EOF
trap 'kill $PROXY 2>/dev/null; rm -rf "$WORK"; psql_q -c "DROP SERVER bench_gc_$$ CASCADE; DROP SERVER bench_gc_slow_$$ CASCADE" >/dev/null 2>&1 || true
	psql_q -c "ALTER SYSTEM RESET rollout_fdw.min_gc_grace" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true' EXIT
# gc at grace 0: rollout_fdw.min_gc_grace is the server's setting, lowered for
# this run (and reset when it ends)
psql_q -c "LOAD 'rollout_fdw'" -c "ALTER SYSTEM SET rollout_fdw.min_gc_grace = 0" -c "SELECT pg_reload_conf()" >/dev/null
until [ "$(psql_q -c "SHOW rollout_fdw.min_gc_grace")" = 0 ]; do sleep 0.1; done

echo "Garbage collection of $ENTRIES sealed WAL entries through a $((2 * DELAY_MS)) ms round trip"
echo
echo "| width | objects deleted | seconds | objects/s | against the first width |"
echo "|---|--:|--:|--:|--:|"
base_rate=
for w in $WIDTHS; do
	psql_q <<EOF
CREATE FOREIGN TABLE bench_gc_fast_${w}_$$ (id int, v text) SERVER bench_gc_$$ OPTIONS (store 'gc$w', key 'id');
CREATE FOREIGN TABLE bench_gc_slow_${w}_$$ (id int, v text) SERVER bench_gc_slow_$$ OPTIONS (store 'gc$w', key 'id');
EOF
	for i in $(seq 1 "$ENTRIES"); do echo "INSERT INTO bench_gc_fast_${w}_$$ VALUES ($i, 'row $i');"; done | psql_q >/dev/null
	psql_q -c "SELECT rollout_flush('bench_gc_fast_${w}_$$')" >/dev/null
	start=$(date +%s.%N)
	deleted=$(psql_q -c "SET rollout_fdw.max_concurrent_requests = $w" \
		-c "SELECT objects_deleted FROM rollout_gc('bench_gc_slow_${w}_$$', '0')")
	end=$(date +%s.%N)
	rate=$(echo "$deleted $start $end" | awk '{ printf "%.0f", $1 / ($3 - $2) }')
	[ -n "$base_rate" ] || base_rate=$rate
	echo "$deleted $start $end $rate $base_rate" |
		awk -v w="$w" '{ printf "| %s | %d | %.2f | %d | %.1fx |\n", w, $1, $3 - $2, $4, $4 / $5 }'
done
