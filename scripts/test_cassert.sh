#!/usr/bin/env bash
# scripts/test_cassert.sh — the TAP suite and pg_regress against a PostgreSQL
# 15 built with assertions (--enable-cassert), on the file:// store, plain and
# preloaded.  Debian's server is a release build: an extension can break an
# invariant PostgreSQL only Asserts (a registered snapshot updated in place, a
# resource released twice) and pass every test there.  Not part of CI (the
# build alone takes about five minutes of two cores); run it after changes to
# the executor, snapshot or transaction-callback code.
#
# As root, from the repository root:
#   bash scripts/test_cassert.sh [PROVE_TESTS...]
# Environment:
#   CASSERT_PREFIX   where the assert build goes (default /tmp/pg15-cassert);
#                    reused when it already holds one
#   CASSERT_WORK     the scratch directory (default /tmp/rollout_cassert)
# Needs: deb.debian.org for the source package (apt-get source, through a
# temporary deb-src entry).  The object-store servers are not started: the
# remote-backend tests skip, as they say.  Exit status 0 when every test
# passed and no server log has an assertion failure (TRAP).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${CASSERT_PREFIX:-/tmp/pg15-cassert}
WORK=${CASSERT_WORK:-/tmp/rollout_cassert}
TESTS="${*:-test/t/*.pl}"

die() { echo "test_cassert.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root"

build_postgres() {
	local src=$WORK/pgsrc list=/etc/apt/sources.list.d/rollout-cassert-src.sources
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bison flex dpkg-dev \
		libreadline-dev zlib1g-dev libicu-dev liblz4-dev libzstd-dev libssl-dev \
		libxml2-dev libcurl4-openssl-dev libipc-run-perl >/dev/null
	sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$list"
	trap 'rm -f "$list"' RETURN
	apt-get update -qq
	rm -rf "$src" && mkdir -p "$src"
	# the newest version the mirror still has the files of
	local version ok=
	for version in $(apt-cache showsrc postgresql-15 | awk '/^Version:/ {print $2}' | sort -rV); do
		if (cd "$src" && apt-get source -qq --download-only "postgresql-15=$version" >/dev/null 2>&1); then
			ok=1
			break
		fi
	done
	[ -n "$ok" ] || die "could not download the postgresql-15 source package"
	tar -C "$src" -xjf "$src"/postgresql-15_*.orig.tar.bz2
	(cd "$src"/postgresql-15.* &&
		./configure --prefix="$PREFIX" --enable-cassert --enable-debug --enable-tap-tests \
			--with-openssl --with-lz4 --with-zstd --with-icu --with-libxml CFLAGS='-O1 -g' >"$WORK/configure.log" &&
		make -j"${MAKE_JOBS:-2}" -s world-bin >"$WORK/make.log" 2>&1 &&
		make -s install-world-bin >/dev/null &&
		make -s -C src/test/perl install >/dev/null &&
		make -s -C src/test/regress install >/dev/null) ||
		die "the PostgreSQL build failed (logs in $WORK)"
}

mkdir -p "$WORK"
if [ ! -x "$PREFIX/bin/postgres" ] || ! "$PREFIX/bin/pg_config" --configure | grep -q enable-cassert; then
	echo "=== building PostgreSQL 15 with assertions into $PREFIX"
	build_postgres
fi
# pg_cron, for the tests that schedule compactions with it
cp /usr/lib/postgresql/15/lib/pg_cron.so "$PREFIX/lib/postgresql/" 2>/dev/null &&
	cp /usr/share/postgresql/15/extension/pg_cron* "$PREFIX/share/postgresql/extension/" ||
	echo "test_cassert.sh: no pg_cron (bash scripts/install-deps.sh installs it); its tests fail" >&2

echo "=== building rollout_fdw against it"
SRC=$WORK/src
rm -rf "$SRC" && mkdir -p "$SRC"
(cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$SRC")
chown -R postgres: "$WORK"
runuser -u postgres -- make -C "$SRC" -j"${MAKE_JOBS:-2}" -s PG_CONFIG="$PREFIX/bin/pg_config" >/dev/null
make -C "$SRC" -s install PG_CONFIG="$PREFIX/bin/pg_config" >/dev/null

as_postgres() {
	runuser -u postgres -- env -i HOME=/var/lib/postgresql USER=postgres LOGNAME=postgres \
		PATH="$PREFIX/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 LC_ALL=C.UTF-8 \
		TMPDIR="$WORK/tmp" ROLLOUT_TEST_BACKEND=file "$@"
}
mkdir -p "$WORK/tmp" && chown postgres: "$WORK/tmp"

status=0
for mode in preload plain; do
	pre=
	[ "$mode" = preload ] && pre=rollout_fdw
	echo "=== pg_regress, $mode"
	data=$WORK/regress_$mode
	rm -rf "$data"
	as_postgres initdb -D "$data" -A trust >/dev/null
	printf "port = 5797\nunix_socket_directories = '%s'\nshared_preload_libraries = '%s'\n" \
		"$WORK/tmp" "$pre" >>"$data/postgresql.conf"
	as_postgres pg_ctl -D "$data" -l "$data/log" -w start >/dev/null
	as_postgres env PGHOST="$WORK/tmp" PGPORT=5797 \
		make -C "$SRC" -s installcheck TAP_TESTS= PG_CONFIG="$PREFIX/bin/pg_config" || status=1
	as_postgres pg_ctl -D "$data" -w stop >/dev/null
	if grep -q TRAP "$data/log"; then
		grep TRAP "$data/log" >&2
		status=1
	fi

	echo "=== TAP, $mode"
	as_postgres env ROLLOUT_TEST_PRELOAD="$pre" PG_TEST_TIMEOUT_DEFAULT=300 \
		make -C "$SRC" installcheck REGRESS= PG_CONFIG="$PREFIX/bin/pg_config" \
		PROVE_FLAGS=--timer PROVE_TESTS="$TESTS" || status=1
	if grep -l TRAP "$SRC"/tmp_check/log/*.log 2>/dev/null; then
		grep -h TRAP "$SRC"/tmp_check/log/*.log >&2
		status=1
	fi
done
[ "$status" = 0 ] && echo "test_cassert.sh: every test passed, no assertion failed"
exit "$status"
