#!/usr/bin/env bash
# test.sh — build, install and test rollout_fdw on Debian 12. Run as root.
#
#   scripts/test.sh [--no-deps] [--preload | --no-preload] [--backend=NAME] [--keep]
#
#   --no-deps   skip scripts/install-deps.sh (no apt)
#   (no mode)   run the whole matrix (ROLLOUT_TEST_MATRIX): the suite on the
#               file:// store without and with rollout_fdw in
#               shared_preload_libraries (the shared-memory writer), then the
#               behaviour suite on every remote backend
#   --preload   one run, preloaded: rollout_fdw in shared_preload_libraries
#               of the pg_regress cluster and of every TAP node
#               (same as ROLLOUT_TEST_PRELOAD=rollout_fdw)
#   --no-preload one run, nothing preloaded
#   --backend=NAME  the object store of that run (default file):
#               file   the embedded file:// store
#               s3     S3 on moto (semantics; no signature checks)
#               rgw    S3 on Ceph RGW (strict SigV4)
#               azure  Azure Blob on Azurite (Shared Key checked)
#               With a remote backend, pg_regress creates its servers there
#               (sql/include/create_server.psql) and the TAP tests marked
#               "# Backends: all" (they get their store from
#               RolloutStore->for_test, test/perl) run against it; the other
#               TAP tests are about one backend or one mode and run in the
#               file:// runs.  In the whole matrix, a plain run leaves the
#               TAP tests marked "# Modes: preload" (their nodes preload the
#               writer whatever the mode: RolloutTest::writer_node) to the
#               same backend's preloaded run, when the matrix has one, and
#               a remote backend's preloaded run leaves those marked
#               "# Remote modes: plain" (reads through the store, which the
#               writer's mode does not change) to its plain run.
#   --keep      keep the temporary test tree (results/, tmp_check/) for inspection
#   --checks-only  only the source checks (see below), nothing built
#
# What it does:
#   0. with the whole matrix (or --checks-only), checks the sources first,
#      each check counting as one test: the include rules of
#      docs/ARCHITECTURE.md (scripts/check_layers.pl), the TAP tests'
#      "# Modes: preload" and "# Remote modes: plain" marks
#      (scripts/check_test_modes.pl) and
#      PostgreSQL's code layout (scripts/indent.pl, pg_bsd_indent);
#   1. installs the Debian packages (scripts/install-deps.sh) unless --no-deps;
#   2. copies the source tree (without .git and build outputs) into a fresh
#      postgres-owned directory /tmp/rollout_fdw_test.XXXXXX;
#   3. builds there as the postgres user (make -j2) and installs as root (make install);
#   4. as postgres, inside `pg_virtualenv -v 15` (a throw-away cluster), runs
#        make installcheck TAP_TESTS=     the pg_regress suite (sql/, expected/)
#        make installcheck REGRESS=       the TAP suite (test/t/*.pl, own clusters)
#      as two steps so that a pg_regress failure does not hide the TAP results;
#   5. on failure prints regression.diffs and the tail of the failing TAP scripts'
#      logs in tmp_check/log/ (all of them when the failing scripts are unknown);
#   The whole matrix builds and installs once, then runs its items in
#   ROLLOUT_TEST_LANES lanes side by side (see the comment at the matrix).
#   6. stops any server still running from the test tree, removes the tree, and
#      prints a last line "N passed, N failed" (pg_regress tests + TAP subtests).
#      A stage that fails without reporting a failed test counts as one failure.
#
# Environment:
#   ROLLOUT_TEST_MATRIX   the runs of the full matrix, space-separated
#                         backend:mode items (mode plain or preload); default
#                         "file:plain file:preload s3:preload rgw:plain
#                          azure:plain azure:preload", and s3:plain and
#                          rgw:preload too with ROLLOUT_TEST_LONG=1
#   ROLLOUT_TEST_PRELOAD  value for shared_preload_libraries in the pg_regress
#                         cluster (default: empty, nothing preloaded)
#   ROLLOUT_TEST_PGOPTS   more postgresql.conf settings for that cluster,
#                         space-separated guc=value items
#   ROLLOUT_TEST_LANES    how many runs of the matrix go side by side (default 3)
#   ROLLOUT_TEST_LONG=1   longer randomized and stress loops (RolloutTest::loop_size)
#   ROLLOUT_TEST_KEEP=1   same as --keep
#   MAKE_JOBS             parallel build jobs (default 2)
#   PROVE_TESTS, PROVE_FLAGS, PG_TEST_EXTRA, COPT, PROFILE and every ROLLOUT_*
#                         variable are passed through to the build and the tests.
# Exit status: 0 when every test passed, 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_VERSION=15
PG_BIN=/usr/lib/postgresql/$PG_VERSION/bin
PG_CONFIG=$PG_BIN/pg_config

run_deps=1
keep=${ROLLOUT_TEST_KEEP:-0}
preload=${ROLLOUT_TEST_PRELOAD:-}
mode=both
backend=${ROLLOUT_TEST_BACKEND:-file}
no_install=0
install_only=0
[ -n "$preload" ] && mode=one
for arg in "$@"; do
	case $arg in
	--no-deps) run_deps=0 ;;
	--backend=*) backend=${arg#--backend=} mode=one ;;
	--no-install) no_install=1 ;;	# internal: the matrix installed it already
	--install-only) install_only=1 mode=one ;;	# internal: the matrix's build step
	--preload) preload=rollout_fdw mode=one ;;
	--no-preload) preload='' mode=one ;;
	--keep) keep=1 ;;
	--checks-only) mode=checks ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "test.sh: unknown argument: $arg (try --help)" >&2
		exit 2
		;;
	esac
done

case $backend in
file | s3 | rgw | azure) ;;
*)
	echo "test.sh: unknown backend: $backend (file, s3, rgw or azure)" >&2
	exit 2
	;;
esac

say() { printf '\n=== %s\n' "$*"; }
# The summary line is printed last, by the exit trap, after the clean-up; an
# early or interrupted exit reports one failure.
SUMMARY="0 passed, 1 failed"
die() {
	echo "test.sh: $*" >&2
	exit 1
}

if [ "$(id -u)" != 0 ]; then
	echo "test.sh: must run as root (it installs packages and the extension, and runs the tests as postgres)" >&2
	echo "$SUMMARY"
	exit 1
fi

# ---------------------------------------------------------------------------
# Object-store servers of the backend tests, on loopback (test/servers/).
# They hand their endpoints to the tests through ROLLOUT_TEST_* variables.
# Started by the outermost test.sh only; the runs of a matrix find them
# running (ROLLOUT_TEST_SERVERS_RUNNING=1) and read their settings.
SERVERS_DIR=${SERVERS_DIR:-}
servers_started=0
start_servers() {
	local log=${SERVERS_DIR:-/tmp}/servers.start.log
	say "starting Azurite (Azure Blob Storage emulator)"
	"$ROOT/test/servers/azurite.sh" start >"$log" 2>&1 || { cat "$log" >&2; echo "test.sh: could not start Azurite" >&2; return 1; }
	servers_started=1
	say "starting moto (S3)"
	bash "$ROOT/test/servers/moto.sh" start >/dev/null 2>"$log" || { cat "$log" >&2; echo "test.sh: could not start moto" >&2; return 1; }
	say "starting Ceph RGW (S3 that verifies SigV4 signatures)"
	bash "$ROOT/test/servers/rgw.sh" start >/dev/null 2>"$log" || { cat "$log" >&2; echo "test.sh: could not start RGW" >&2; return 1; }
	load_server_env
}
load_server_env() {
	eval "$("$ROOT/test/servers/azurite.sh" env)"
	eval "$(bash "$ROOT/test/servers/moto.sh" env)"
	eval "$(bash "$ROOT/test/servers/rgw.sh" env)"
	export ROLLOUT_TEST_S3_ENDPOINT ROLLOUT_TEST_S3_REGION ROLLOUT_TEST_S3_BUCKET \
		ROLLOUT_TEST_S3_ACCESS_KEY_ID ROLLOUT_TEST_S3_SECRET_ACCESS_KEY \
		ROLLOUT_TEST_RGW_ENDPOINT ROLLOUT_TEST_RGW_REGION ROLLOUT_TEST_RGW_BUCKET \
		ROLLOUT_TEST_RGW_ACCESS_KEY_ID ROLLOUT_TEST_RGW_SECRET_ACCESS_KEY ROLLOUT_TEST_RGW_LOG \
		ROLLOUT_TEST_RGW_TENANT_ACCESS_KEY_ID ROLLOUT_TEST_RGW_TENANT_SECRET_ACCESS_KEY \
		ROLLOUT_TEST_RGW_SECOND_ACCESS_KEY_ID ROLLOUT_TEST_RGW_SECOND_SECRET_ACCESS_KEY
}
stop_servers() {
	[ "$servers_started" = 1 ] || return 0
	"$ROOT/test/servers/azurite.sh" stop >/dev/null 2>&1 || true
	bash "$ROOT/test/servers/moto.sh" stop >/dev/null 2>&1 || true
	bash "$ROOT/test/servers/rgw.sh" stop >/dev/null 2>&1 || true
	servers_started=0
}

# The source checks: fast, before anything is built.  Each prints what it
# found; the count of those that failed is in check_failed.
check_passed=0 check_failed=0
run_source_checks() {
	local name
	for name in check_layers check_test_modes indent; do
		say "source check: $name"
		if perl "$ROOT/scripts/$name.pl"; then
			check_passed=$((check_passed + 1))
		else
			check_failed=$((check_failed + 1))
		fi
	done
}
if [ "$mode" = checks ]; then
	[ "$run_deps" = 1 ] && { bash "$ROOT/scripts/install-deps.sh" || { echo "$SUMMARY"; exit 1; }; }
	run_source_checks
	SUMMARY="$check_passed passed, $check_failed failed"
	echo "$SUMMARY"
	[ "$check_failed" = 0 ]
	exit
fi

# By default the whole matrix runs: the suite on the file:// store as a
# plain extension (each commit writes its own WAL entry) and preloaded
# (shared-memory writer, group commit, memtable, background worker) — both
# are supported configurations — then the behaviour suite on each remote
# backend: Azure in both modes, and S3 once in each mode, plain on Ceph RGW
# and preloaded on moto.  The S3 client code is one for both servers; RGW
# takes plain mode because it checks what moto does not (SigV4 signatures, a
# real server's conditional creates, which plain mode races most), and moto
# takes the preloaded writer's requests.  The file:// runs still take
# 020_s3_moto.pl, moto's own test, in both modes.  Every test of a moto
# plain run also runs in the RGW plain run, which took 17 minutes where
# moto's took 25 (CI, 6 Dec 2026); with ROLLOUT_TEST_LONG=1 both servers
# run both modes (s3:plain and rgw:preload, about 35 minutes more).
# The object-store servers start once, here, and the runs share them (each
# test uses fresh prefixes).
if [ "$mode" = both ]; then
	[ "$run_deps" = 1 ] && { bash "$ROOT/scripts/install-deps.sh" || { echo "$SUMMARY"; exit 1; }; }
	default_matrix="file:plain file:preload s3:preload rgw:plain azure:plain azure:preload"
	[ -z "${ROLLOUT_TEST_LONG:-}" ] || default_matrix+=" s3:plain rgw:preload"
	matrix=${ROLLOUT_TEST_MATRIX:-$default_matrix}
	SERVERS_DIR=$(mktemp -d /tmp/rollout_fdw_servers.XXXXXX)
	PG_TEST_PORT_DIR=$(mktemp -d /tmp/rollout_fdw_ports.XXXXXX)
	trap 'stop_servers; rm -rf "$SERVERS_DIR" "$PG_TEST_PORT_DIR"; echo "$SUMMARY"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM HUP
	run_source_checks
	start_servers || { SUMMARY="0 passed, 1 failed"; exit 1; }
	extra=()
	[ "$keep" = 1 ] && extra+=(--keep)
	# The runs share the installed extension and the servers, nothing else
	# (each has its own cluster, port and store prefixes).  So the
	# extension is built and installed once, and then $lanes lanes
	# (ROLLOUT_TEST_LANES, default 3) run the runs side by side: each lane
	# takes the next run from one queue (the order below) until the queue is
	# empty.  On the 2-core machine kind three lanes keep both cores busy
	# (vmstat: 6 % idle), so the matrix's time is its total work over the
	# lanes, plus what a bad order leaves to one lane at the end.  Two runs of one
	# emulator never go side by side: moto is one Python process, and two
	# S3 runs on it took twice as long each (27 and 21 min against 13).  A
	# lane skips a run whose server another lane's run is using, and waits
	# when only such runs are left.  Each lane has its own port for its
	# pg_regress cluster; the TAP nodes reserve theirs in one shared
	# directory.  Azurite keeps every blob of a run in memory and, that
	# full, can pause for half a minute: each Azure run starts a fresh one
	# of its lane's own (port 10010 + lane), so that no run ever sees the
	# Azurite it uses restarted; the file:// runs' Azure tests use the one
	# started above.
	chown postgres "$PG_TEST_PORT_DIR"
	export PG_TEST_PORT_DIR
	lanes=${ROLLOUT_TEST_LANES:-3}
	[[ $lanes =~ ^[1-9][0-9]*$ ]] || die "ROLLOUT_TEST_LANES must be a positive number, not \"$lanes\""
	# shellcheck disable=SC2317  # called by the EXIT trap
	stop_lane_azurites() {
		local dir
		for dir in "$SERVERS_DIR"/azurite.lane*; do
			[ -d "$dir" ] && AZURITE_STATE_DIR=$dir "$ROOT/test/servers/azurite.sh" stop >/dev/null 2>&1
		done
		return 0
	}
	trap 'stop_lane_azurites; stop_servers; rm -rf "$SERVERS_DIR" "$PG_TEST_PORT_DIR"; echo "$SUMMARY"' EXIT
	run_cell() {	# run_cell backend:mode lane log
		local b=${1%%:*} m=${1#*:} flag
		case $m in plain) flag=--no-preload ;; preload) flag=--preload ;; *) die "bad matrix item: $1" ;; esac
		local -a args=(--no-deps "$flag" "--backend=$b" --no-install "${extra[@]}")
		local -a azurite_env=()
		if [ "$b" = azure ]; then
			azurite_env=(AZURITE_PORT=$((10010 + $2)) AZURITE_STATE_DIR="$SERVERS_DIR/azurite.lane$2")
			env "${azurite_env[@]}" "$ROOT/test/servers/azurite.sh" stop >/dev/null 2>&1 || true
			env "${azurite_env[@]}" "$ROOT/test/servers/azurite.sh" start >"$3.azurite" 2>&1 || {
				cat "$3.azurite" >&2
				echo "test.sh: could not start Azurite for lane $2" >&2
			}
		fi
		# a plain run leaves the "# Modes: preload" tests to the same
		# backend's preloaded run when the matrix has one
		local preloaded_too= plain_too=
		[ "$m" = plain ] && [[ " $matrix " == *" $b:preload "* ]] && preloaded_too=1
		# and a preloaded remote run leaves the "# Remote modes: plain"
		# tests to a plain run of the same client code: moto and RGW are
		# two servers of one backend, S3
		local -a plain_cells=("$b:plain")
		case $b in s3 | rgw) plain_cells=(s3:plain rgw:plain) ;; esac
		local cell
		for cell in "${plain_cells[@]}"; do
			[ "$m" = preload ] && [ "$b" != file ] && [[ " $matrix " == *" $cell "* ]] && plain_too=1
		done
		local started=$SECONDS
		env "${azurite_env[@]}" PGPORT=$((5440 + $2)) ROLLOUT_TEST_SERVERS_RUNNING=1 \
			ROLLOUT_TEST_PRELOADED_RUN_TOO=$preloaded_too ROLLOUT_TEST_PLAIN_RUN_TOO=$plain_too \
			bash "${BASH_SOURCE[0]}" "${args[@]}" >"$3" 2>&1 || true
		# when it ran, for the order below (minutes since test.sh started)
		echo "lane $2, minutes $((started / 60))-$((SECONDS / 60)) ($(((SECONDS - started + 30) / 60)) min)" >"$3.time"
		local line
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$3" | tail -n 1)
		echo "${line:-0 passed, 1 failed}" >"$3.result"
	}
	queue=$SERVERS_DIR/queue
	busy=$SERVERS_DIR/busy	# the servers the lanes' runs use now, a line each
	: >"$busy"
	server_of() {	# the emulator a run uses alone (none: it may share)
		case $1 in s3:*) echo moto ;; rgw:*) echo rgw ;; esac
	}
	# Prints the first run of the queue whose server is free, takes it off
	# the queue and marks its server busy; prints "wait" when every run left
	# waits for a server, nothing when the queue is empty.
	next_run() {
		local item server picked=
		{
			flock 9
			while IFS= read -r item; do
				server=$(server_of "$item")
				if [ -z "$server" ] || ! grep -qx "$server" "$busy"; then
					picked=$item
					break
				fi
			done <"$queue"
			if [ -n "$picked" ]; then
				grep -vx "$picked" "$queue" >"$queue.new" || true
				mv "$queue.new" "$queue"
				server=$(server_of "$picked")
				[ -z "$server" ] || echo "$server" >>"$busy"
				printf '%s' "$picked"
			elif [ -s "$queue" ]; then
				printf wait
			fi
		} 9>"$queue.lock"
	}
	release_server() {	# release_server run: its server is free again
		local server
		server=$(server_of "$1")
		[ -n "$server" ] || return 0
		{
			flock 9
			grep -vx "$server" "$busy" >"$busy.new" || true
			mv "$busy.new" "$busy"
		} 9>"$queue.lock"
	}
	run_lane() {	# run_lane lane: runs from the queue until it is empty
		local item
		while item=$(next_run) && [ -n "$item" ]; do
			if [ "$item" = wait ]; then
				sleep 5
				continue
			fi
			run_cell "$item" "$1" "$SERVERS_DIR/run.$item.log"
			release_server "$item"
			# one run's whole log at a time, not interleaved with another's
			{
				flock 9
				say "suite backend=${item%%:*} mode=${item#*:} (lane $1)"
				cat "$SERVERS_DIR/run.$item.log"
			} 9>"$SERVERS_DIR/output.lock"
		done
	}
	# The order packs the six runs into three lanes by the minutes each
	# took in CI on 2026-12-06 (the matrix report): file:preload 27,
	# file:plain 21, azure:plain 19, rgw:plain 17, s3:preload 16,
	# azure:preload 14.  Taken in this order the lanes run file:preload +
	# azure:preload, file:plain + s3:preload and azure:plain + rgw:plain,
	# 35 to 41 minutes each; the longest run sets the floor, and the other
	# two lanes end before it.  ROLLOUT_TEST_LONG's extra runs come last.
	rank() {
		case $1 in
		file:preload) echo 1 ;; file:plain) echo 2 ;; azure:plain) echo 3 ;;
		rgw:plain) echo 4 ;; s3:preload) echo 5 ;; azure:preload) echo 6 ;;
		s3:plain) echo 7 ;; *) echo 8 ;;
		esac
	}
	for run in $matrix; do echo "$(rank "$run") $run"; done | sort -s -k1,1n | cut -d' ' -f2 >"$queue"

	say "building and installing once for the whole matrix"
	if ROLLOUT_TEST_SERVERS_RUNNING=1 bash "${BASH_SOURCE[0]}" --no-deps --install-only \
		>"$SERVERS_DIR/install.log" 2>&1; then
		tail -n 3 "$SERVERS_DIR/install.log"
		say "running $(wc -l <"$queue") runs in $lanes lanes"
		lane_pids=()
		for lane in $(seq 1 "$lanes"); do
			run_lane "$lane" &
			lane_pids+=($!)
		done
		wait "${lane_pids[@]}" || true
	else
		cat "$SERVERS_DIR/install.log"
		echo "test.sh: the build or the installation failed; no run of the matrix can start" >&2
	fi
	total_passed=$check_passed total_failed=$check_failed status=0
	report="  source checks  $check_passed passed, $check_failed failed"$'\n'
	for run in $matrix; do
		line=$(cat "$SERVERS_DIR/run.$run.log.result" 2>/dev/null || echo "0 passed, 1 failed")
		report+="  $run  $line; $(cat "$SERVERS_DIR/run.$run.log.time" 2>/dev/null)"$'\n'
		total_passed=$((total_passed + ${line%% passed*}))
		f=${line#*passed, }
		total_failed=$((total_failed + ${f%% failed*}))
	done
	[ "$total_failed" = 0 ] || status=1
	say "matrix results"
	printf '%s' "$report"
	say "all runs: $total_passed passed, $total_failed failed"
	SUMMARY="$total_passed passed, $total_failed failed"
	exit "$status"
fi
export ROLLOUT_TEST_PRELOAD="$preload"

# ---------------------------------------------------------------------------
# Temporary, postgres-owned copy of the tree; removed (and any server left in
# it stopped) on every exit path.
WORK=$(mktemp -d /tmp/rollout_fdw_test.XXXXXX)
SRC=$WORK/src
mkdir -p "$SRC" "$WORK/tmp"

stop_leftover_servers() {
	local pidfile dir pid
	while IFS= read -r pidfile; do
		dir=$(dirname "$pidfile")
		pid=$(head -n 1 "$pidfile" 2>/dev/null || true)
		echo "test.sh: stopping leftover server in $dir" >&2
		runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			kill -9 "$pid" 2>/dev/null || true
		fi
	done < <(find "$WORK" -name postmaster.pid -type f 2>/dev/null)
}

child=
cleanup() {
	local rc=$?
	set +e
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		echo "test.sh: interrupted, ending the running test processes" >&2
		kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null
		for _ in $(seq 1 20); do
			kill -0 -- "-$child" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL -- "-$child" 2>/dev/null
	fi
	stop_leftover_servers
	stop_servers
	if [ "$keep" = 1 ]; then
		echo "test.sh: kept the test tree in $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	echo "$SUMMARY"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

if [ "$run_deps" = 1 ]; then
	say "installing dependencies"
	bash "$ROOT/scripts/install-deps.sh" || die "dependency installation failed"
fi
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found; run without --no-deps"

say "copying the tree to $SRC"
tar -C "$ROOT" \
	--exclude=./.git --exclude=./results --exclude=./tmp_check --exclude=./log \
	--exclude=./regression.diffs --exclude=./regression.out \
	--exclude='*.o' --exclude='*.so' --exclude='*.bc' --exclude='*.a' \
	--exclude=./test/servers/node_modules \
	-cf - . | tar -C "$SRC" -xf -
chown -R postgres:postgres "$WORK"
chmod 755 "$WORK"

if [ "${ROLLOUT_TEST_SERVERS_RUNNING:-0}" = 1 ]; then
	load_server_env
else
	SERVERS_DIR=$WORK
	start_servers || die "could not start the object-store servers"
fi
export ROLLOUT_TEST_BACKEND=$backend

# The server options pg_regress's servers get (sql/include/create_server.psql)
# for a remote backend: a fresh prefix per run, the endpoint, and the
# credentials for the user mapping.
run_id=$(basename "$WORK")
case $backend in
s3 | rgw)
	v=S3
	[ "$backend" = rgw ] && v=RGW
	ep=ROLLOUT_TEST_${v}_ENDPOINT bu=ROLLOUT_TEST_${v}_BUCKET re=ROLLOUT_TEST_${v}_REGION
	ak=ROLLOUT_TEST_${v}_ACCESS_KEY_ID sk=ROLLOUT_TEST_${v}_SECRET_ACCESS_KEY
	[ -n "${!ep:-}" ] || die "$ep is not set: the $backend server did not start"
	export ROLLOUT_TEST_REGRESS_SERVER_OPTIONS="location 's3://${!bu}/regress/$run_id', endpoint '${!ep}', region '${!re:-us-east-1}'"
	export ROLLOUT_TEST_REGRESS_MAPPING_OPTIONS="access_key_id '${!ak}', secret_access_key '${!sk}'"
	;;
azure)
	account=${ROLLOUT_TEST_AZURE_ENDPOINT##*/}
	export ROLLOUT_TEST_REGRESS_SERVER_OPTIONS="location 'az://$account/$ROLLOUT_TEST_AZURE_CONTAINER/regress/$run_id', endpoint '$ROLLOUT_TEST_AZURE_ENDPOINT'"
	export ROLLOUT_TEST_REGRESS_MAPPING_OPTIONS="account_key '$ROLLOUT_TEST_AZURE_KEY'"
	;;
*) unset ROLLOUT_TEST_REGRESS_SERVER_OPTIONS ROLLOUT_TEST_REGRESS_MAPPING_OPTIONS ;;
esac

# Which suites exist?
shopt -s nullglob
regress_files=("$SRC"/sql/*.sql)
tap_files=("$SRC"/test/t/*.pl)
if [ "$backend" != file ] && [ -z "${PROVE_TESTS:-}" ]; then
	# the tests that declare they run against whichever store RolloutStore
	# hands them (a header line "# Backends: all")
	mapfile -t tap_files < <(grep -l '^# Backends: all\b' "${tap_files[@]}" /dev/null | sort)
	PROVE_TESTS=$(for f in "${tap_files[@]}"; do printf '%s ' "${f#"$SRC"/}"; done)
	export PROVE_TESTS
fi
if [ -n "${PROVE_TESTS:-}" ]; then
	# shellcheck disable=SC2207,SC2086  # PROVE_TESTS: globs relative to the tree
	tap_files=($(cd "$SRC" && echo $PROVE_TESTS))
fi
# Leaves out the TAP tests with the header line $1 (tap_files are relative
# to the copy here, and may be a user's globs).
drop_marked_tests() {
	for f in "${tap_files[@]}"; do
		[ -f "$SRC/$f" ] || [ -f "$f" ] || die "no such TAP test: $f"
	done
	mapfile -t tap_files < <(cd "$SRC" && grep -L "^$1\\b" "${tap_files[@]}" /dev/null |
		grep -vx /dev/null | sort)
	PROVE_TESTS=$(for f in "${tap_files[@]}"; do printf '%s ' "${f#"$SRC"/}"; done)
	export PROVE_TESTS
}
# The matrix also has this backend's preloaded run: the tests whose nodes
# preload the writer whatever the mode ("# Modes: preload") run there only,
# not twice.
if [ -n "${ROLLOUT_TEST_PRELOADED_RUN_TOO:-}" ] && [ -z "$preload" ]; then
	drop_marked_tests '# Modes: preload'
fi
# A remote backend's preloaded run when the matrix also has its plain run:
# the tests marked "# Remote modes: plain" check reads through the store,
# which the writer's mode does not change (the file:// runs take them in
# both modes), and run in the plain run only.
if [ -n "${ROLLOUT_TEST_PLAIN_RUN_TOO:-}" ] && [ -n "$preload" ] && [ "$backend" != file ]; then
	drop_marked_tests '# Remote modes: plain'
fi
shopt -u nullglob
[ "${#regress_files[@]}" -gt 0 ] || [ "${#tap_files[@]}" -gt 0 ] ||
	die "no tests found (sql/*.sql, test/t/*.pl)"

# Run a command as postgres in the copy, with a clean, predictable environment.
as_postgres() {
	local -a envv=(
		HOME=/var/lib/postgresql USER=postgres LOGNAME=postgres
		PATH="$PG_BIN:/usr/local/bin:/usr/bin:/bin"
		LANG=C.UTF-8 LC_ALL=C.UTF-8 TMPDIR="$WORK/tmp"
		PG_CONFIG="$PG_CONFIG"
	)
	local v
	for v in TERM CI COPT PROFILE PG_TEST_EXTRA PROVE_TESTS PG_TEST_TIMEOUT_DEFAULT \
		PGPORT PG_TEST_PORT_DIR \
		$(compgen -e | grep '^ROLLOUT_' || true); do
		[ -n "${!v+x}" ] && envv+=("$v=${!v}")
	done
	# In its own session (process group), in the background: the traps below
	# then run at once on INT/TERM and can end the whole group.
	(cd "$SRC" && exec setsid -w runuser -u postgres -- env -i "${envv[@]}" "$@") &
	child=$!
	local rc=0
	wait "$child" || rc=$?
	child=
	return "$rc"
}

make_args=(PG_CONFIG="$PG_CONFIG")
# --timer: each script's wall time in the log, to see what a slow CI cell spends
make_args+=(PROVE_FLAGS="${PROVE_FLAGS:---timer}")

if [ "$no_install" = 1 ]; then
	say "using the extension installed by the first run of the matrix"
else
	say "building (make -j${MAKE_JOBS:-2})"
	as_postgres make -j"${MAKE_JOBS:-2}" "${make_args[@]}" || die "build failed"

	say "installing (make install)"
	(cd "$SRC" && make install "${make_args[@]}" >"$WORK/install.log" 2>&1) || {
		cat "$WORK/install.log" >&2
		die "make install failed"
	}
	if [ "$install_only" = 1 ]; then
		SUMMARY="0 passed, 0 failed"
		exit 0
	fi
fi

# ---------------------------------------------------------------------------
venv_opts=(-v "$PG_VERSION")
[ -n "$preload" ] && venv_opts+=(-o "shared_preload_libraries=$preload")
for opt in ${ROLLOUT_TEST_PGOPTS:-}; do
	venv_opts+=(-o "$opt")
done

# One pg_virtualenv cluster for both steps; each step's exit status is written
# to a file so that both always run and are judged separately.
# shellcheck disable=SC2016  # expanded by the inner shell
inner='
make installcheck TAP_TESTS= "$@" 2>&1 | tee regress.log; echo "${PIPESTATUS[0]}" > regress.rc
'
# shellcheck disable=SC2016
inner_tap='
make installcheck REGRESS= "$@" 2>&1 | tee tap.log; echo "${PIPESTATUS[0]}" > tap.rc
'
# A step that never ran keeps status 255 (counted as a failure); a suite
# without test files is skipped and counts as passed.
for f in regress tap; do
	: >"$SRC/$f.log"
	echo 255 >"$SRC/$f.rc"
done
script=''
if [ "${#regress_files[@]}" -gt 0 ]; then script+=$inner; else echo 0 >"$SRC/regress.rc"; fi
if [ "${#tap_files[@]}" -gt 0 ]; then script+=$inner_tap; else echo 0 >"$SRC/tap.rc"; fi
chown postgres:postgres "$SRC"/regress.{rc,log} "$SRC"/tap.{rc,log}

say "testing backend=$backend: pg_virtualenv ${venv_opts[*]} (pg_regress: ${#regress_files[@]} files, TAP: ${#tap_files[@]} files)"
venv_rc=0
as_postgres pg_virtualenv "${venv_opts[@]}" bash -c "set -o pipefail; $script" bash "${make_args[@]}" </dev/null || venv_rc=$?

# ---------------------------------------------------------------------------
# Count results.
read_rc() { local r; r=$(cat "$1" 2>/dev/null || true); [[ $r =~ ^[0-9]+$ ]] && echo "$r" || echo 255; }
regress_rc=$(read_rc "$SRC/regress.rc")
tap_rc=$(read_rc "$SRC/tap.rc")

# pg_regress (PostgreSQL 15): "test name   ... ok   12 ms", " name ... FAILED"
# (parallel groups); PostgreSQL 16+: "ok 1  - name  12 ms" / "not ok 1 - name".
regress_ok=$(grep -cE '^(test +)?[ ]*[A-Za-z0-9_./-]+ +\.\.\. ok( |$)|^ok [0-9]+ +[-+] ' "$SRC/regress.log" || true)
regress_failed=$(grep -cE '\.\.\. FAILED|^not ok [0-9]+ ' "$SRC/regress.log" || true)
if [ "$regress_rc" != 0 ] && [ "$regress_failed" = 0 ]; then
	echo "test.sh: the pg_regress step failed (status $regress_rc) without a failed test line" >&2
	regress_failed=1
fi

# prove: "Files=3, Tests=42, ..." and, on failure, a summary report with
# "t/001_x.pl (Wstat: 256 (exited 1) Tests: 10 Failed: 2)" per failing file.
tap_total=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' "$SRC/tap.log" | tail -n 1)
tap_total=${tap_total:-0}
tap_failed=0
while IFS= read -r line; do
	wstat=$(sed -nE 's/.*Wstat: ([0-9]+).*/\1/p' <<<"$line")
	failed=$(sed -nE 's/.*Tests: [0-9]+ Failed: ([0-9]+)\).*/\1/p' <<<"$line")
	failed=${failed:-0}
	# a script that died or exited non-zero without a failed subtest counts once
	if [ "$failed" = 0 ] && [ "${wstat:-0}" != 0 ]; then failed=1; fi
	tap_failed=$((tap_failed + failed))
done < <(grep -E '\(Wstat: [0-9]+' "$SRC/tap.log" || true)
# files with parse errors only ("No plan found", "Bad plan") and Wstat 0
parse_only=$(grep -cE '^ +Parse errors: ' "$SRC/tap.log" || true)
if [ "$tap_failed" = 0 ] && [ "$parse_only" != 0 ]; then tap_failed=$parse_only; fi
tap_passed=$((tap_total - tap_failed))
[ "$tap_passed" -ge 0 ] || tap_passed=0
if [ "$tap_rc" != 0 ] && [ "$tap_failed" = 0 ]; then
	echo "test.sh: the TAP step failed (status $tap_rc) without a failed test" >&2
	tap_failed=1
fi

passed=$((regress_ok + tap_passed))
failed=$((regress_failed + tap_failed))
if [ "$venv_rc" != 0 ] && [ "$failed" = 0 ]; then
	echo "test.sh: pg_virtualenv failed (status $venv_rc)" >&2
	failed=1
fi

if [ "$failed" != 0 ]; then
	if [ -s "$SRC/regression.diffs" ]; then
		say "regression.diffs"
		cat "$SRC/regression.diffs"
	fi
	if [ -d "$SRC/tmp_check/log" ]; then
		# Logs of the failing TAP scripts (regress_log_<name> and the node logs
		# <name>_<node>.log); all logs when the failing scripts are not known.
		mapfile -t failing < <(sed -nE 's/^([^ ]+\.pl) +\(Wstat: [0-9]+.*/\1/p' "$SRC/tap.log" |
			xargs -r -n 1 basename | sed 's/\.pl$//')
		logs=()
		for name in "${failing[@]}"; do
			for log in "$SRC/tmp_check/log/regress_log_$name" "$SRC/tmp_check/log/${name}"_*.log; do
				[ -f "$log" ] && logs+=("$log")
			done
		done
		[ "${#logs[@]}" -gt 0 ] || logs=("$SRC"/tmp_check/log/*)
		for log in "${logs[@]}"; do
			[ -f "$log" ] || continue
			say "tail of ${log#"$SRC"/} (last 60 lines)"
			tail -n 60 "$log"
		done
	fi
fi

say "pg_regress: $regress_ok passed, $regress_failed failed; TAP: $tap_passed passed, $tap_failed failed"
SUMMARY="$passed passed, $failed failed"
[ "$failed" = 0 ]
