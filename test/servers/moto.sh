#!/usr/bin/env bash
# moto.sh — a local S3 server (moto) on 127.0.0.1 for the S3 backend tests.
#
#   test/servers/moto.sh start    start it unless it is running; print its settings
#   test/servers/moto.sh stop     stop it (no error when it is not running)
#   test/servers/moto.sh status   exit 0 when it answers, 1 otherwise
#   test/servers/moto.sh env      print the settings of the running server
#
# "start" and "env" print shell assignments, so a caller can
#   eval "$(bash test/servers/moto.sh start)"; export ROLLOUT_TEST_S3_ENDPOINT ...
# They name the endpoint, the region, a bucket that exists (created at start)
# and credentials.  moto accepts any credentials and verifies no signature:
# it tests S3 semantics (conditional PUT, ranges, listings), not signing; use
# rgw.sh for that.
#
# moto 5.2.1 is preinstalled on the CI machines (pyenv, `moto_server`); it
# cannot be installed here (no PyPI).  It runs through moto_atomic.py, which
# makes moto's conditional writes atomic as S3's are (see that file: without
# it two racing If-None-Match creates of one key can both succeed).  It runs as the user calling this script
# (root in CI: the pyenv under /root is not reachable by other users) and is
# reached by the tests (running as postgres) over TCP only.
#
# Environment: ROLLOUT_MOTO_PORT (default 5000), ROLLOUT_MOTO_DIR (state: pid
# file and log; default /tmp/rollout_moto), MOTO_PYTHON (a Python that can
# import moto; default: python3 on PATH or in /root/.pyenv/shims).
set -euo pipefail

PORT=${ROLLOUT_MOTO_PORT:-5000}
DIR=${ROLLOUT_MOTO_DIR:-/tmp/rollout_moto}
BUCKET=rollout-test
ENDPOINT=http://127.0.0.1:$PORT

die() { echo "moto.sh: $*" >&2; exit 1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# A Python interpreter with moto installed.
find_moto_python() {
	local c
	for c in "${MOTO_PYTHON:-}" "$(command -v python3 || true)" \
		"${PYENV_ROOT:-/root/.pyenv}/shims/python3" /usr/local/bin/python3; do
		[ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import moto.server' 2>/dev/null && { echo "$c"; return; }
	done
	die "no python3 that can import moto (moto is preinstalled on the CI machines; set MOTO_PYTHON)"
}

answers() { curl -s -o /dev/null -m 2 "$ENDPOINT/moto-api/" 2>/dev/null; }

print_env() {
	cat <<EOT
ROLLOUT_TEST_S3_ENDPOINT=$ENDPOINT
ROLLOUT_TEST_S3_REGION=us-east-1
ROLLOUT_TEST_S3_BUCKET=$BUCKET
ROLLOUT_TEST_S3_ACCESS_KEY_ID=moto-access-key
ROLLOUT_TEST_S3_SECRET_ACCESS_KEY=moto-secret-key
EOT
}

running_pid() {
	local pid
	pid=$(cat "$DIR/moto.pid" 2>/dev/null || true)
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
	return 0
}

start() {
	mkdir -p "$DIR"
	if [ -z "$(running_pid)" ] || ! answers; then
		[ -z "$(running_pid)" ] || stop
		local python
		python=$(find_moto_python)
		# its own session, so that stop can end the whole process group
		setsid "$python" "$HERE/moto_atomic.py" -H 127.0.0.1 -p "$PORT" >"$DIR/moto.log" 2>&1 </dev/null &
		echo $! >"$DIR/moto.pid"
		for _ in $(seq 1 100); do
			answers && break
			kill -0 "$(cat "$DIR/moto.pid")" 2>/dev/null || { tail -n 20 "$DIR/moto.log" >&2; die "moto exited"; }
			sleep 0.1
		done
		answers || die "moto did not answer on $ENDPOINT within 10 s (log: $DIR/moto.log)"
	fi
	# the test bucket (creating an existing one of ours is a no-op)
	curl -s -o /dev/null -m 5 -X PUT "$ENDPOINT/$BUCKET" || die "could not create bucket $BUCKET"
	print_env
}

stop() {
	local pid
	pid=$(running_pid)
	if [ -n "$pid" ]; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL -- "-$pid" 2>/dev/null || true
	fi
	rm -f "$DIR/moto.pid"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) [ -n "$(running_pid)" ] && answers ;;
env) answers || die "not running"; print_env ;;
*) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
