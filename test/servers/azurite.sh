#!/usr/bin/env bash
# azurite.sh — install, start and stop Azurite (the Azure Blob Storage
# emulator) for the rollout_fdw tests.
#
#   test/servers/azurite.sh install   npm install azurite@3.35.0 into test/servers/node_modules
#   test/servers/azurite.sh start     install if needed, start on 127.0.0.1:$AZURITE_PORT,
#                                     create the test container, print the endpoint
#   test/servers/azurite.sh stop      stop the server this script started
#   test/servers/azurite.sh status    exit 0 if it is running
#   test/servers/azurite.sh env       print the variables the tests read (eval-able)
#
# Every command is idempotent: start when running only prints the endpoint,
# stop when stopped does nothing.  The server listens on loopback only, keeps
# everything in memory (--inMemoryPersistence), never phones home
# (--disableTelemetry), accepts any x-ms-version (--skipApiVersionCheck) and
# logs nothing (--silent).  It verifies Shared Key signatures.
#
# Run it as root or as the postgres user: the server process runs as whoever
# starts it, which does not matter to the tests (they talk HTTP).  State
# (pid file, log) lives in $AZURITE_STATE_DIR, default /tmp/rollout_azurite.
#
# Environment:
#   AZURITE_PORT        blob service port (default 10000)
#   AZURITE_STATE_DIR   pid file and log (default /tmp/rollout_azurite)
#   AZURITE_CONTAINER   container created at start (default rollout-test)
#
# The tests read ROLLOUT_TEST_AZURE_ENDPOINT (the blob service URL of the dev
# account devstoreaccount1), ROLLOUT_TEST_AZURE_KEY and
# ROLLOUT_TEST_AZURE_CONTAINER; `azurite.sh env` prints them.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERSION=3.35.0
PORT=${AZURITE_PORT:-10000}
STATE=${AZURITE_STATE_DIR:-/tmp/rollout_azurite}
CONTAINER=${AZURITE_CONTAINER:-rollout-test}
ACCOUNT=devstoreaccount1
# The emulator's published development key (not a secret).
KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
ENDPOINT="http://127.0.0.1:$PORT/$ACCOUNT"
BIN=$HERE/node_modules/.bin/azurite-blob

die() { echo "azurite.sh: $*" >&2; exit 1; }

installed() {
	[ -x "$BIN" ] && [ "$(node -p "require('$HERE/node_modules/azurite/package.json').version" 2>/dev/null)" = "$VERSION" ]
}

do_install() {
	installed && return 0
	command -v npm >/dev/null || die "npm not found (Debian: apt-get install npm)"
	echo "azurite.sh: installing azurite@$VERSION into $HERE/node_modules" >&2
	(cd "$HERE" && npm install --no-audit --no-fund --omit=dev --loglevel=error >&2) ||
		die "npm install azurite@$VERSION failed"
	installed || die "azurite-blob not found after npm install"
}

running() {
	[ -f "$STATE/pid" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null
}

responding() {
	# any HTTP answer (400 for a bare GET) means the server is up
	curl -s -o /dev/null -m 2 -w '%{http_code}' "$ENDPOINT?comp=list" 2>/dev/null | grep -q '^[1-5]'
}

# Shared Key signed request with curl + openssl: create the test container.
create_container() {
	local date path sig decoded
	date=$(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S GMT')
	path="/$ACCOUNT/$ACCOUNT/$CONTAINER"
	local to_sign
	to_sign=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:2021-12-02\n%s\nrestype:container' "$date" "$path")
	decoded=$(printf '%s' "$KEY" | base64 -d | od -An -v -tx1 | tr -d " \n")
	sig=$(printf '%s' "$to_sign" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$decoded" -binary | base64 -w0)
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Content-Length: 0" \
		-H "x-ms-date: $date" -H "x-ms-version: 2021-12-02" \
		-H "Authorization: SharedKey $ACCOUNT:$sig" \
		"$ENDPOINT/$CONTAINER?restype=container")
	case $code in
	201 | 409) ;;
	*) die "could not create container $CONTAINER (HTTP $code)" ;;
	esac
}

do_start() {
	do_install
	mkdir -p "$STATE"
	if ! running; then
		responding && die "port $PORT is taken by another process"
		# setsid: the server outlives this script and the caller's session
		setsid "$BIN" --blobHost 127.0.0.1 --blobPort "$PORT" \
			--inMemoryPersistence --disableTelemetry --skipApiVersionCheck --silent \
			>"$STATE/log" 2>&1 </dev/null &
		echo $! >"$STATE/pid"
		for _ in $(seq 1 100); do
			responding && break
			running || die "azurite exited at start; see $STATE/log"
			sleep 0.1
		done
		responding || die "azurite did not answer on 127.0.0.1:$PORT; see $STATE/log"
	fi
	create_container
	echo "$ENDPOINT"
}

do_stop() {
	if running; then
		local pid
		pid=$(cat "$STATE/pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$STATE/pid"
}

case ${1:-} in
install) do_install ;;
start) do_start ;;
stop) do_stop ;;
status) running && responding ;;
env)
	echo "export ROLLOUT_TEST_AZURE_ENDPOINT='$ENDPOINT'"
	echo "export ROLLOUT_TEST_AZURE_KEY='$KEY'"
	echo "export ROLLOUT_TEST_AZURE_CONTAINER='$CONTAINER'"
	;;
*) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
