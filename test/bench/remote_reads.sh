#!/usr/bin/env bash
# remote_reads.sh — scans and key lookups of a compacted store on S3 (moto) and
# Azure (Azurite) behind the latency proxy, with and without the disk cache
# (rollout_fdw.cache_dir), against the same store on file:// in the same run.
#
#   bash test/bench/remote_reads.sh
#
# Needs a running PostgreSQL 15 with rollout_fdw installed (preloaded, the recommended
# configuration, for a warm lookup without a request: the snapshot's manifest versions
# then come from shared memory, rollout_fdw.manifest_refresh_interval), reached with psql's usual
# environment (PGHOST, PGPORT, PGUSER, PGDATABASE) as a superuser (it sets
# rollout_fdw.cache_dir with ALTER SYSTEM and resets it at the end), and the servers
# of test/servers: moto (ROLLOUT_TEST_S3_ENDPOINT, http://HOST:PORT) and, if
# ROLLOUT_TEST_AZURE_ENDPOINT is set, Azurite. The data is ROWS rows of
# test/bench/gen_rows.pl (uuid key, ~1 KB jsonb payload), loaded with COPY and merged
# into one base fragment per store.
#
# Per backend it prints the median of RUNS runs, each in a new session (so the
# backend's own footer cache is cold and only the disk cache is warm), of:
#   scan, no cache       rollout_fdw.disk_cache = off
#   scan, cold cache     the cache directory emptied before the run
#   scan, warm cache     the second identical scan
#   lookup, warm cache   one key
#   lookup, warm cache and view   one key, right after a lookup of another
#                        (preloaded: no request for the snapshot either)
# with the EXPLAIN (ANALYZE, VERBOSE) counters of the last run (remote requests,
# rounds, disk cache block hits and misses) and the ratio to the file:// figure.
#
# Environment: ROWS (default 200000), RUNS (default 3), DELAY_MS (proxy delay per
# direction; default 10, a 20 ms round trip), ROLLOUT_TEST_S3_BUCKET (rollout-test),
# ROLLOUT_TEST_AZURE_KEY / _CONTAINER (Azurite's defaults).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/proxy.sh"
S3_ENDPOINT=${ROLLOUT_TEST_S3_ENDPOINT:?set ROLLOUT_TEST_S3_ENDPOINT (test/servers/moto.sh start)}
BUCKET=${ROLLOUT_TEST_S3_BUCKET:-rollout-test}
AZ_ENDPOINT=${ROLLOUT_TEST_AZURE_ENDPOINT:-}
AZ_KEY=${ROLLOUT_TEST_AZURE_KEY:-Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==}
AZ_CONTAINER=${ROLLOUT_TEST_AZURE_CONTAINER:-rollout-test}
ROWS=${ROWS:-200000}
RUNS=${RUNS:-3}
DELAY_MS=${DELAY_MS:-10}
RUN=bench-$$-$(date +%s)
WORK=$(mktemp -d)
chmod 755 "$WORK"
CACHE="$WORK/cache"
PIDS=()

psql_q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

cleanup()
{
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	psql_q -c "ALTER SYSTEM RESET rollout_fdw.cache_dir" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
	for s in file s3 s3_slow az az_slow; do
		psql_q -c "DROP SERVER IF EXISTS rr_${s}_$$ CASCADE" >/dev/null 2>&1 || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

# A latency proxy in front of HOST:PORT; prints its port.
# Starts a proxy to $1 and records its pid for cleanup; proxy_port $2 then
# prints its port.  (Not one function printing the port: called in $(...),
# the pid would be recorded in a subshell, and the proxy outlive the script.)
start_proxy()
{
	local target=$1 name=$2
	latency_proxy_start "$target" "$DELAY_MS" "$WORK/$name.ports" "$WORK/$name.log"
	PIDS+=("$LATENCY_PROXY_PID")
}
proxy_port()
{
	local name=$1
	latency_proxy_ports "$WORK/$name.ports" | cut -d' ' -f1
}

hostport() { local u=${1#http://}; u=${u%%/*}; echo "$u"; }

COLS="id uuid NOT NULL, rollout_id uuid NOT NULL, step int NOT NULL, role text NOT NULL, reward float8 NOT NULL, created_at timestamptz NOT NULL, payload jsonb NOT NULL"
SCAN="SELECT count(*), sum(reward), sum(octet_length(payload::text)) FROM"
KEY=$(psql_q -c "SELECT md5('row-' || ($ROWS / 3))::uuid")
OTHER_KEY=$(psql_q -c "SELECT md5('row-' || ($ROWS / 2))::uuid")

echo "generating $ROWS rows" >&2
perl "$HERE/gen_rows.pl" 1 "$ROWS" 42 >"$WORK/rows.copy"
chmod 644 "$WORK/rows.copy"
# the server creates files in both (run as root, the script hands them to the
# postgres user; run as the cluster's owner, they are its own already)
mkdir -p "$WORK/store" "$CACHE"
chown postgres "$WORK/store" "$CACHE" 2>/dev/null || true

psql_q <<EOF
CREATE EXTENSION IF NOT EXISTS rollout_fdw;
LOAD 'rollout_fdw';
ALTER SYSTEM SET rollout_fdw.cache_dir = '$CACHE';
SELECT pg_reload_conf();
CREATE SERVER rr_file_$$ FOREIGN DATA WRAPPER rollout_fdw OPTIONS (location 'file://$WORK/store');
CREATE FOREIGN TABLE rr_file_t_$$ ($COLS) SERVER rr_file_$$ OPTIONS (store 'rows', key 'id');
EOF

backends=(file)
start_proxy "$(hostport "$S3_ENDPOINT")" s3
S3_PROXY=$(proxy_port s3)
psql_q <<EOF
CREATE SERVER rr_s3_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$BUCKET/$RUN', endpoint '$S3_ENDPOINT');
CREATE SERVER rr_s3_slow_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 's3://$BUCKET/$RUN', endpoint 'http://127.0.0.1:$S3_PROXY', request_timeout '600');
CREATE USER MAPPING FOR CURRENT_USER SERVER rr_s3_$$ OPTIONS (access_key_id 'k', secret_access_key 's');
CREATE USER MAPPING FOR CURRENT_USER SERVER rr_s3_slow_$$ OPTIONS (access_key_id 'k', secret_access_key 's');
CREATE FOREIGN TABLE rr_s3_t_$$ ($COLS) SERVER rr_s3_$$ OPTIONS (store 'rows', key 'id');
CREATE FOREIGN TABLE rr_s3_slow_t_$$ ($COLS) SERVER rr_s3_slow_$$ OPTIONS (store 'rows', key 'id');
EOF
backends+=(s3)
if [ -n "$AZ_ENDPOINT" ]; then
	AZ_ACCOUNT=${AZ_ENDPOINT%/}
	AZ_ACCOUNT=${AZ_ACCOUNT##*/}
	start_proxy "$(hostport "$AZ_ENDPOINT")" az
	AZ_PROXY=$(proxy_port az)
	psql_q <<EOF
CREATE SERVER rr_az_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$AZ_ACCOUNT/$AZ_CONTAINER/$RUN', endpoint '$AZ_ENDPOINT');
CREATE SERVER rr_az_slow_$$ FOREIGN DATA WRAPPER rollout_fdw
  OPTIONS (location 'az://$AZ_ACCOUNT/$AZ_CONTAINER/$RUN', endpoint 'http://127.0.0.1:$AZ_PROXY/$AZ_ACCOUNT', request_timeout '600');
CREATE USER MAPPING FOR CURRENT_USER SERVER rr_az_$$ OPTIONS (account_key '$AZ_KEY');
CREATE USER MAPPING FOR CURRENT_USER SERVER rr_az_slow_$$ OPTIONS (account_key '$AZ_KEY');
CREATE FOREIGN TABLE rr_az_t_$$ ($COLS) SERVER rr_az_$$ OPTIONS (store 'rows', key 'id');
CREATE FOREIGN TABLE rr_az_slow_t_$$ ($COLS) SERVER rr_az_slow_$$ OPTIONS (store 'rows', key 'id');
EOF
	backends+=(az)
fi

# Loaded through the table that is read (for S3 and Azure, the one behind the
# proxy), so that, preloaded, this cluster's writer of that store holds the
# shard: its reads take this cluster's unflushed rows from the memtable and
# list no WAL (a server with another endpoint is another store to it).  The
# slow servers allow a request 10 minutes: the load PUTs a segment of about
# 100 MB, which the Python proxy and the emulator take minutes to pass on.
for b in "${backends[@]}"; do
	echo "loading $ROWS rows into $b" >&2
	t=rr_${b}_t_$$
	[ "$b" = file ] || t=rr_${b}_slow_t_$$
	psql_q -c "\\copy $t FROM '$WORK/rows.copy'" -c "SELECT rollout_merge('$t')" >/dev/null
done

# "ms|requests|rounds|hits|misses" of EXPLAIN (ANALYZE, VERBOSE) of $2 in a new
# session, after the settings $1
measure()
{
	psql_q -c "$1" -c "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) $2" |
		perl -MJSON::PP -0e '$d = decode_json(<STDIN>)->[0]; $p = $d->{Plan};
			$p = $p->{Plans}[0] while $p->{"Node Type"} ne "Foreign Scan";
			printf "%.1f|%d|%d|%d|%d\n", $d->{"Execution Time"}, $p->{"Remote Requests"} // 0,
				$p->{"Remote Request Rounds"} // 0, $p->{"Disk Cache Hits"} // 0, $p->{"Disk Cache Misses"} // 0'
}

# the median run's figures of RUNS runs of measure; $3 runs before each (a command)
median_of()
{
	local settings=$1 query=$2 before=${3:-true} out=()
	for _ in $(seq 1 "$RUNS"); do
		$before
		out+=("$(measure "$settings" "$query")")
	done
	printf '%s\n' "${out[@]}" | sort -t'|' -k1,1n | sed -n "$(((RUNS + 1) / 2))p"
}

empty_cache() { rm -rf "${CACHE:?}"/* 2>/dev/null || true; }

row()
{
	local backend=$1 what=$2 figures=$3 base=$4
	IFS='|' read -r ms req rounds hits misses <<<"$figures"
	ratio=$(awk -v a="$ms" -v b="$base" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
	echo "| $backend | $what | $ms | ${ratio}× | $req | $rounds | $hits | $misses |"
}

echo
echo "ROWS=$ROWS, RUNS=$RUNS, round trip $((2 * DELAY_MS)) ms through the proxy; ms = median EXPLAIN ANALYZE execution time"
echo
echo "| store | read | ms | × file:// | requests | rounds | cache hits | cache misses |"
echo "|---|---|--:|--:|--:|--:|--:|--:|"
file_scan=$(median_of "SET rollout_fdw.disk_cache = on" "$SCAN rr_file_t_$$")
file_scan_ms=${file_scan%%|*}
row file:// "scan" "$file_scan" "$file_scan_ms"
file_lookup=$(median_of "SET rollout_fdw.disk_cache = on" "SELECT * FROM rr_file_t_$$ WHERE id = '$KEY'")
file_lookup_ms=${file_lookup%%|*}
row file:// "lookup" "$file_lookup" "$file_lookup_ms"
for b in "${backends[@]}"; do
	[ "$b" = file ] && continue
	t=rr_${b}_slow_t_$$
	row "$b + ${DELAY_MS}ms×2" "scan, no cache" "$(median_of "SET rollout_fdw.disk_cache = off" "$SCAN $t")" "$file_scan_ms"
	row "$b + ${DELAY_MS}ms×2" "scan, cold cache" "$(median_of "SET rollout_fdw.disk_cache = on" "$SCAN $t" empty_cache)" "$file_scan_ms"
	row "$b + ${DELAY_MS}ms×2" "scan, warm cache" "$(median_of "SET rollout_fdw.disk_cache = on" "$SCAN $t")" "$file_scan_ms"
	row "$b + ${DELAY_MS}ms×2" "lookup, no cache" "$(median_of "SET rollout_fdw.disk_cache = off" "SELECT * FROM $t WHERE id = '$KEY'")" "$file_lookup_ms"
	row "$b + ${DELAY_MS}ms×2" "lookup, warm cache" "$(median_of "SET rollout_fdw.disk_cache = on" "SELECT * FROM $t WHERE id = '$KEY'")" "$file_lookup_ms"
	# another read of the store just before (as lookups at more than one a
	# second have): the snapshot's manifest versions come from shared memory
	row "$b + ${DELAY_MS}ms×2" "lookup, warm cache and view" "$(median_of "SET rollout_fdw.disk_cache = on; DO \$\$BEGIN PERFORM FROM $t WHERE id = '$OTHER_KEY'; END\$\$" "SELECT * FROM $t WHERE id = '$KEY'")" "$file_lookup_ms"
done
