#!/usr/bin/env bash
# parallel_reads.sh — scan time over N generations of an S3 store behind the latency
# proxy, for several values of rollout_fdw.max_concurrent_requests.
#
#   bash test/bench/parallel_reads.sh [GENERATIONS...]      (default: 5 20 50)
#
# Needs a running PostgreSQL 15 with rollout_fdw installed, reached with psql's usual
# environment (PGHOST, PGPORT, PGUSER, PGDATABASE), and an S3 server
# (test/servers/moto.sh start) named by ROLLOUT_TEST_S3_ENDPOINT (http://HOST:PORT).
# For each N it builds a store of N generations of 500 rows (directly on the S3
# server), then times `SELECT count(*), sum(v)` through test/servers/latency_proxy.py
# and prints, per width, the median of RUNS runs with the EXPLAIN (ANALYZE, VERBOSE)
# counters of the last one.
#
# Environment: DELAY_MS (proxy delay per direction; default 10, a 20 ms round trip),
# WIDTHS (default "1 4 16"), RUNS (default 3), ROLLOUT_TEST_S3_BUCKET (rollout-test).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENDPOINT=${ROLLOUT_TEST_S3_ENDPOINT:?set ROLLOUT_TEST_S3_ENDPOINT (test/servers/moto.sh start)}
BUCKET=${ROLLOUT_TEST_S3_BUCKET:-rollout-test}
DELAY_MS=${DELAY_MS:-10}
WIDTHS=${WIDTHS:-"1 4 16"}
RUNS=${RUNS:-3}
GENERATIONS=("$@")
[ ${#GENERATIONS[@]} -gt 0 ] || GENERATIONS=(5 20 50)
TARGET=${ENDPOINT#http://}
TARGET=${TARGET%/}
RUN=bench-$$-$(date +%s)
WORK=$(mktemp -d)

psql_q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

. "$HERE/proxy.sh"
latency_proxy_start "$TARGET" "$DELAY_MS" "$WORK/ports" "$WORK/proxy.log"
PROXY=$LATENCY_PROXY_PID
trap 'kill $PROXY 2>/dev/null; rm -rf "$WORK"' EXIT
PROXY_PORT=$(latency_proxy_ports "$WORK/ports" | cut -d' ' -f1)

psql_q <<EOF
CREATE EXTENSION IF NOT EXISTS rollout_fdw;
CREATE SERVER bench_s3_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$BUCKET/$RUN', endpoint '$ENDPOINT');
CREATE SERVER bench_s3_slow_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$BUCKET/$RUN', endpoint 'http://127.0.0.1:$PROXY_PORT');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_s3_$$ OPTIONS (access_key_id 'k', secret_access_key 's');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench_s3_slow_$$ OPTIONS (access_key_id 'k', secret_access_key 's');
EOF
trap 'kill $PROXY 2>/dev/null; rm -rf "$WORK"; psql_q -c "DROP SERVER bench_s3_$$ CASCADE; DROP SERVER bench_s3_slow_$$ CASCADE" >/dev/null 2>&1 || true' EXIT

echo "| generations | width | median ms | requests | rounds |"
echo "|---|---|---|---|---|"
for n in "${GENERATIONS[@]}"; do
	psql_q <<EOF
CREATE FOREIGN TABLE bench_fast_${n}_$$ (id text, v int, payload text)
  SERVER bench_s3_$$ OPTIONS (store 'g$n', key 'id');
CREATE FOREIGN TABLE bench_slow_${n}_$$ (id text, v int, payload text)
  SERVER bench_s3_slow_$$ OPTIONS (store 'g$n', key 'id');
EOF
	for g in $(seq 1 "$n"); do
		psql_q -c "INSERT INTO bench_fast_${n}_$$ SELECT 'k' || lpad(((i * 7 + $g * 13) % 5000)::text, 5, '0'), $g * 1000 + i, repeat('x', 50) FROM generate_series(1, 500) i" \
			-c "SELECT rollout_flush('bench_fast_${n}_$$')" >/dev/null
	done
	for w in $WIDTHS; do
		times=()
		for _ in $(seq 1 "$RUNS"); do
			out=$(psql_q -c "SET rollout_fdw.max_concurrent_requests = $w" \
				-c "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) SELECT count(*), sum(v) FROM bench_slow_${n}_$$")
			times+=("$(echo "$out" | perl -MJSON::PP -0e '$p = decode_json(<STDIN>)->[0]; printf "%.0f", $p->{"Execution Time"}')")
		done
		counters=$(echo "$out" | perl -MJSON::PP -0e '$p = decode_json(<STDIN>)->[0]{Plan}; $p = $p->{Plans}[0] while $p->{"Node Type"} ne "Foreign Scan"; print "$p->{\"Remote Requests\"} | $p->{\"Remote Request Rounds\"}"')
		median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((RUNS + 1) / 2))p")
		echo "| $n | $w | $median | $counters |"
	done
done
