# test/bench/proxy.sh — sourced by the benchmarks that put
# test/servers/latency_proxy.py between PostgreSQL and an object store.
#
#   latency_proxy_start TARGET DELAY_MS PORT_FILE LOG_FILE [PROXY OPTION...]
#       starts a proxy to TARGET (HOST:PORT) in the background that delays
#       each direction by DELAY_MS, with any further options of the proxy
#       (--control 127.0.0.1:0); sets LATENCY_PROXY_PID.  A function, not a
#       command substitution: the pid must be set in the caller's shell.
#   latency_proxy_ports PORT_FILE
#       waits (at most 10 s) until that proxy listens and prints its
#       "LISTEN_PORT CONTROL_PORT".

latency_proxy_start() {
	local target=$1 delay_ms=$2 port_file=$3 log_file=$4
	shift 4
	rm -f "$port_file"
	python3 "$(dirname "${BASH_SOURCE[0]}")/../servers/latency_proxy.py" \
		--listen 127.0.0.1:0 --target "$target" --delay-ms "$delay_ms" \
		--port-file "$port_file" "$@" >"$log_file" 2>&1 &
	LATENCY_PROXY_PID=$!
}

latency_proxy_ports() {
	local port_file=$1
	for _ in $(seq 1 100); do [ -s "$port_file" ] && break; sleep 0.1; done
	cat "$port_file"
}
