#!/usr/bin/env bash
# rgw.sh — a throw-away single-node Ceph with the RADOS Gateway (S3) on
# 127.0.0.1, for the tests that need a server verifying SigV4 signatures.
#
#   test/servers/rgw.sh start    start it unless it is running; print its settings
#   test/servers/rgw.sh stop     stop it and remove its state (no error when not running)
#   test/servers/rgw.sh status   exit 0 when it answers, 1 otherwise
#   test/servers/rgw.sh env      print the settings of the running server
#
# "start" and "env" print shell assignments, so a caller can
#   eval "$(bash test/servers/rgw.sh start)"; export ROLLOUT_TEST_RGW_ENDPOINT ...
# They name the endpoint, the region, a bucket that exists (created at start),
# the fixed credentials of the test user, and radosgw's log (world-readable;
# its "beast:" lines are an access log with full query strings and statuses).
#
# Unlike moto, RGW checks every request's SigV4 signature and payload hash:
# it catches signing bugs (query strings, headers, bodies past 1 MiB).  It
# accepts any region in the credential scope (it has one zonegroup,
# "default"); the tests use us-east-1.
#
# The cluster, no systemd, everything as root, everything on loopback:
#   one monitor (mon.a), one OSD (osd.0, objectstore memstore: objects live in
#   the OSD's memory), cephx off (auth ... required = none), pools of size 1,
#   no manager (nothing here needs one), then radosgw (client.rgw.a) with the
#   beast frontend (tcp_nodelay: without it every GET waits 40 ms for a
#   delayed ACK), then a user with fixed keys and the test bucket.
# STS is on: the user may call GetSessionToken (an IAM user policy allows it),
# so tests can use real temporary credentials with a session token.
# Packages: ceph-mon ceph-osd radosgw (scripts/install-deps.sh installs them).
# Start takes about 2 s (monitor commits are made immediate: radosgw's start-up
# is a dozen pool commands, each 1 s with Ceph's default paxos interval); the
# three daemons use about 150 MB of memory plus the objects stored.  Stop
# takes about half a second.
#
# Environment:
#   ROLLOUT_RGW_PORT      the S3 port (default 7480)
#   ROLLOUT_RGW_MON_PORT  the monitor's port (messenger v2, default 3300); the
#                         OSD takes free ports from 6800 up (Ceph's default)
#   ROLLOUT_RGW_DIR       state: configuration, monitor and OSD data, pid
#                         files, logs (default /tmp/rollout_rgw; removed by stop)
#   ROLLOUT_RGW_TIMEOUT   seconds to wait for each daemon (default 90)
set -euo pipefail
# the tests (as postgres) read the radosgw log
umask 022

PORT=${ROLLOUT_RGW_PORT:-7480}
MON_PORT=${ROLLOUT_RGW_MON_PORT:-3300}
DIR=${ROLLOUT_RGW_DIR:-/tmp/rollout_rgw}
TIMEOUT=${ROLLOUT_RGW_TIMEOUT:-90}
ENDPOINT=http://127.0.0.1:$PORT
REGION=us-east-1
BUCKET=rollout-test
# Fixed test credentials (the server is on loopback and lives for one run).
ACCESS_KEY=ROLLOUTRGWTESTKEY001
SECRET_KEY=rollout-rgw-test-secret-key-0001
STS_KEY=rolloutstskey001
# A user of another tenant, whose bucket of the same name is another bucket
# (test 064: credentials that reach another store by the same location).
TENANT=rollout_tenant
TENANT_ACCESS_KEY=ROLLOUTRGWTENANTKEY2
TENANT_SECRET_KEY=rollout-rgw-tenant-secret-key-02
# A second key of the first user: other credentials, the same bucket.
SECOND_ACCESS_KEY=ROLLOUTRGWTESTKEY003
SECOND_SECRET_KEY=rollout-rgw-test-secret-key-0003
CONF=$DIR/ceph.conf
DAEMONS="rgw osd mon" # stop order

die() { echo "rgw.sh: $*" >&2; exit 1; }

print_env() {
	cat <<EOT
ROLLOUT_TEST_RGW_ENDPOINT=$ENDPOINT
ROLLOUT_TEST_RGW_REGION=$REGION
ROLLOUT_TEST_RGW_BUCKET=$BUCKET
ROLLOUT_TEST_RGW_ACCESS_KEY_ID=$ACCESS_KEY
ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY=$SECRET_KEY
ROLLOUT_TEST_RGW_LOG=$DIR/log/client.rgw.a.log
ROLLOUT_TEST_RGW_TENANT_ACCESS_KEY_ID=$TENANT_ACCESS_KEY
ROLLOUT_TEST_RGW_TENANT_SECRET_ACCESS_KEY=$TENANT_SECRET_KEY
ROLLOUT_TEST_RGW_SECOND_ACCESS_KEY_ID=$SECOND_ACCESS_KEY
ROLLOUT_TEST_RGW_SECOND_SECRET_ACCESS_KEY=$SECOND_SECRET_KEY
EOT
}

answers() { curl -s -o /dev/null -m 2 "$ENDPOINT/" 2>/dev/null; }

# Is the process alive?  A daemon started by an earlier call of this script
# was adopted by PID 1, which may take seconds to reap it: a zombie counts as
# gone.
alive() {
	local state
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$state" ] && [ "$state" != Z ]
}

# pid of a daemon we started, if it is still alive
running_pid() {
	local pid
	pid=$(cat "$DIR/$1.pid" 2>/dev/null || true)
	if [ -n "$pid" ] && alive "$pid"; then echo "$pid"; fi
	return 0
}

all_running() {
	local d
	for d in $DAEMONS; do
		[ -n "$(running_pid "$d")" ] || return 1
	done
}

# the ceph CLI against our monitor, bounded in time
ceph_cli() { timeout 20 ceph -c "$CONF" --connect-timeout 10 "$@"; }

# Fail with the tail of a daemon's log.
fail() {
	local name=$1
	shift
	echo "rgw.sh: $*" >&2
	local -a logs=("$DIR/$name.out")
	case $name in
	mon) logs+=("$DIR/log/mon.a.log") ;;
	osd) logs+=("$DIR/log/osd.0.log") ;;
	rgw) logs+=("$DIR/log/client.rgw.a.log") ;;
	esac
	for log in "${logs[@]}"; do
		[ -s "$log" ] || continue
		echo "--- last 30 lines of $log" >&2
		tail -n 30 "$log" >&2
	done
	stop_daemons # the state stays for inspection; the next start or stop removes it
	exit 1
}

# Run a daemon in the foreground of its own session (so that stop can end it
# and everything it forked), remembering its pid.
spawn() {
	local name=$1
	shift
	setsid "$@" >"$DIR/$name.out" 2>&1 </dev/null &
	echo $! >"$DIR/$name.pid"
}

# wait_for NAME LOGNAME WHAT COMMAND...: poll COMMAND until it succeeds
wait_for() {
	local name=$1 what=$2
	shift 2
	local deadline=$((SECONDS + TIMEOUT))
	until "$@" >/dev/null 2>&1; do
		[ -n "$(running_pid "$name")" ] || fail "$name" "$name exited while $what"
		[ "$SECONDS" -lt "$deadline" ] || fail "$name" "timed out after ${TIMEOUT}s $what"
		sleep 0.2
	done
}

osd_up() { ceph_cli osd stat -f json | grep -q '"num_up_osds":1'; }

write_conf() {
	local fsid=$1
	cat >"$CONF" <<EOT
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
# radosgw, as a daemon, asks for "secure" mode on its monitor connection by
# default, which needs cephx; without cephx only crc mode exists
ms mon client mode = crc
ms mon service mode = crc
ms mon cluster mode = crc
ms client mode = crc
ms service mode = crc
ms cluster mode = crc
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
keyring = $DIR/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
# commit monitor changes at once, not after 1 s: radosgw's start-up is a
# series of pool commands, one paxos round each
paxos propose interval = 0.01
paxos min wait = 0.01
mon data avail crit = 0
osd objectstore = memstore
memstore device bytes = 2147483648
osd data = $DIR/\$name
mon data = $DIR/\$name
# quiet and small
debug ms = 0
err to stderr = false
log to stderr = false

[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$PORT tcp_nodelay=1
rgw enable usage log = false
rgw thread pool size = 64
# STS (GetSessionToken), so that the tests can use real temporary credentials
# with a session token; the key encrypts the tokens (16 bytes)
rgw s3 auth use sts = true
rgw sts key = $STS_KEY
EOT
}

start() {
	if all_running && answers; then
		ensure_user_and_bucket
		echo "rgw.sh: already running on $ENDPOINT" >&2
		print_env
		return
	fi
	# a half-started or crashed cluster: start over
	stop
	local prog
	for prog in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph-authtool ceph curl; do
		command -v "$prog" >/dev/null ||
			die "$prog not found (Debian packages ceph-mon ceph-osd radosgw curl; scripts/install-deps.sh installs them)"
	done
	[ "$(id -u)" = 0 ] || die "must run as root"
	local t0=$SECONDS fsid osd_uuid
	mkdir -p "$DIR/run" "$DIR/log" "$DIR/mon.a" "$DIR/osd.0"
	fsid=$(cat /proc/sys/kernel/random/uuid)
	osd_uuid=$(cat /proc/sys/kernel/random/uuid)
	write_conf "$fsid"

	# monitor
	ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >"$DIR/mkfs.out" 2>&1 ||
		fail mkfs "could not create the keyring"
	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >>"$DIR/mkfs.out" 2>&1 ||
		fail mkfs "monmaptool failed"
	ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring" >>"$DIR/mkfs.out" 2>&1 ||
		fail mkfs "ceph-mon --mkfs failed"
	busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
	busy "$MON_PORT" && die "port $MON_PORT (monitor) is in use by another program (set ROLLOUT_RGW_MON_PORT)"
	busy "$PORT" && die "port $PORT is in use by another program (set ROLLOUT_RGW_PORT)"
	spawn mon ceph-mon -c "$CONF" -i a -f
	wait_for mon "waiting for the monitor on 127.0.0.1:$MON_PORT" ceph_cli mon stat

	# OSD (memstore: the objects live in its memory)
	ceph_cli osd new "$osd_uuid" >>"$DIR/mkfs.out" 2>&1 || fail mon "could not register the OSD"
	ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$DIR/mkfs.out" 2>&1 ||
		fail mkfs "ceph-osd --mkfs failed"
	spawn osd ceph-osd -c "$CONF" -i 0 -f
	wait_for osd "waiting for osd.0 to come up" osd_up

	# gateway
	spawn rgw radosgw -c "$CONF" -n client.rgw.a -f
	wait_for rgw "waiting for radosgw to answer on $ENDPOINT" answers

	ensure_user_and_bucket
	echo "rgw.sh: started in $((SECONDS - t0)) s" >&2
	print_env
}

urlencode() {
	local s=$1 out='' c i
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in
		[A-Za-z0-9._~-]) out+=$c ;;
		*) out+=$(printf '%%%02X' "'$c") ;;
		esac
	done
	printf '%s' "$out"
}

# signed_post SERVICE BODY OUTFILE: a form POST to the IAM/STS API
signed_post() {
	local hash code
	hash=$(printf '%s' "$2" | sha256sum | cut -d' ' -f1)
	code=$(curl -s -o "$3" -w '%{http_code}' -m 10 --aws-sigv4 "aws:amz:$REGION:$1" \
		--user "$ACCESS_KEY:$SECRET_KEY" -H "x-amz-content-sha256: $hash" \
		-H 'Content-Type: application/x-www-form-urlencoded' --data-binary "$2" "$ENDPOINT/" || true)
	[ "$code" = 200 ]
}

ensure_user_and_bucket() {
	if ! radosgw-admin -c "$CONF" user info --uid=rollout >/dev/null 2>&1; then
		radosgw-admin -c "$CONF" user create --uid=rollout --display-name="rollout_fdw tests" \
			--access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >"$DIR/user.out" 2>&1 ||
			fail user "radosgw-admin user create failed"
	fi
	# a second key of the same user (before the user policy below: a key
	# created after it loses the policy, and STS then refuses the user)
	if ! grep -q "$SECOND_ACCESS_KEY" <(radosgw-admin -c "$CONF" user info --uid=rollout 2>/dev/null); then
		radosgw-admin -c "$CONF" key create --uid=rollout --key-type=s3 \
			--access-key="$SECOND_ACCESS_KEY" --secret-key="$SECOND_SECRET_KEY" >>"$DIR/user.out" 2>&1 ||
			fail user "radosgw-admin key create failed"
	fi

	# GetSessionToken needs an IAM user policy allowing it, and setting one
	# needs the user-policy capability
	radosgw-admin -c "$CONF" caps add --uid=rollout --caps="user-policy=*" >>"$DIR/user.out" 2>&1 ||
		fail user "radosgw-admin caps add failed"
	local policy='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["sts:GetSessionToken"],"Resource":"*"}]}'
	signed_post iam "Action=PutUserPolicy&PolicyDocument=$(urlencode "$policy")&PolicyName=rollout-sts&UserName=rollout&Version=2010-05-08" \
		"$DIR/policy.out" || fail rgw "could not attach the STS user policy: $(cat "$DIR/policy.out")"

	local code
	code=$(curl -s -o "$DIR/bucket.out" -w '%{http_code}' -m 10 -X PUT \
		--aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
		-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
		"$ENDPOINT/$BUCKET" || true)
	# 200: created; 409 BucketAlreadyOwnedByYou would also be fine (RGW answers 200)
	case $code in
	200 | 409) ;;
	*) fail rgw "could not create bucket $BUCKET (HTTP $code: $(cat "$DIR/bucket.out" 2>/dev/null))" ;;
	esac

	# the other tenant's user, and its own bucket of the same name
	if ! radosgw-admin -c "$CONF" user info --tenant="$TENANT" --uid=rollout2 >/dev/null 2>&1; then
		radosgw-admin -c "$CONF" user create --tenant="$TENANT" --uid=rollout2 \
			--display-name="rollout_fdw tests, another tenant" \
			--access-key="$TENANT_ACCESS_KEY" --secret-key="$TENANT_SECRET_KEY" >>"$DIR/user.out" 2>&1 ||
			fail user "radosgw-admin user create (tenant) failed"
	fi
	code=$(curl -s -o "$DIR/bucket.out" -w '%{http_code}' -m 10 -X PUT \
		--aws-sigv4 "aws:amz:$REGION:s3" --user "$TENANT_ACCESS_KEY:$TENANT_SECRET_KEY" \
		-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
		"$ENDPOINT/$BUCKET" || true)
	case $code in
	200 | 409) ;;
	*) fail rgw "could not create the tenant's bucket $BUCKET (HTTP $code: $(cat "$DIR/bucket.out" 2>/dev/null))" ;;
	esac
}

stop_one() {
	local name=$1 pid
	pid=$(running_pid "$name")
	if [ -n "$pid" ]; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			alive "$pid" || break
			sleep 0.05
		done
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$DIR/$name.pid"
}

stop_daemons() {
	local d
	for d in $DAEMONS; do stop_one "$d"; done
}

stop() {
	stop_daemons
	# the state belongs to this script alone; never remove anything else
	case $DIR in
	/ | "") ;;
	*) if [ -f "$CONF" ] || [ -d "$DIR/mon.a" ]; then rm -rf "$DIR"; fi ;;
	esac
	return 0
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) all_running && answers ;;
env)
	if all_running && answers; then print_env; else die "not running"; fi
	;;
*) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
