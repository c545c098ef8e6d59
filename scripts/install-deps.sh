#!/usr/bin/env bash
# install-deps.sh — install everything rollout_fdw needs to build, test and run
# its demo on Debian 12 (bookworm): PostgreSQL 15 server and PGXS, pg_cron, the C
# libraries the extension links against, and the Perl module the TAP tests use.
#
# Run as root. Idempotent: when every package is already installed it does not
# touch apt at all; otherwise it runs `apt-get update` once and installs what is
# missing. Quiet on success; on failure it prints apt's output and exits non-zero.
set -euo pipefail

PACKAGES=(
	postgresql-15            # server (postgres, initdb, pg_ctl)
	postgresql-client-15     # psql; pg_regress and the TAP modules for PGXS
	postgresql-common        # pg_virtualenv, pg_createcluster, pg_ctlcluster
	postgresql-server-dev-15 # PGXS headers and makefiles (pulls clang-14/llvm-14)
	postgresql-15-cron       # pg_cron, for scheduled maintenance tests
	postgresql-contrib
	libcurl4-openssl-dev     # HTTP for the S3 / Azure object-store backends
	curl                     # the test servers and tests (curl --aws-sigv4)
	libssl-dev               # hashes and HMAC
	libxml2-dev              # object-store listing responses (XML)
	libzstd-dev              # column chunk compression
	zstd                     # the erasure test looks into compressed chunks
	libipc-run-perl          # required by PostgreSQL::Test::Cluster (TAP tests)
	ceph-mon                 # a throw-away single-node Ceph with the RADOS Gateway:
	ceph-osd                 #   an S3 server that verifies SigV4 signatures, for
	radosgw                  #   the tests (test/servers/rgw.sh; about 400 MB)
	perl                     # prove
	pg-bsd-indent            # the layout check (scripts/indent.pl)
	make
	gcc
	pkg-config
)

die() { echo "install-deps.sh: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs Debian packages)"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script supports Debian 12 only"

if [ -r /etc/os-release ]; then
	# shellcheck disable=SC1091
	. /etc/os-release
	if [ "${ID:-}" != debian ] || [ "${VERSION_ID:-}" != 12 ]; then
		echo "install-deps.sh: warning: written for Debian 12, this is ${PRETTY_NAME:-unknown}" >&2
	fi
fi

# Which packages are not fully installed yet?
missing=()
for pkg in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
	[ "$status" = installed ] || missing+=("$pkg")
done

if [ "${#missing[@]}" -gt 0 ]; then
	echo "install-deps.sh: installing ${missing[*]}"
	log=$(mktemp -t rollout_install_deps.XXXXXX)
	trap 'rm -f "$log"' EXIT
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get update -q >"$log" 2>&1; then
		cat "$log" >&2
		die "apt-get update failed"
	fi
	if ! apt-get install -y -q --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}" >"$log" 2>&1; then
		tail -n 100 "$log" >&2
		die "apt-get install failed (last 100 lines of its output above)"
	fi
fi

# Node.js and npm run Azurite, the Azure Blob emulator of the tests.  Machines
# of this kind come with Node.js 20 and npm; Debian's npm (with its own
# nodejs) is the fallback on a machine without them.
if ! command -v npm >/dev/null 2>&1; then
	log=$(mktemp)
	if ! { apt-get update -q && apt-get install -y -q --no-install-recommends npm; } >"$log" 2>&1; then
		tail -n 100 "$log" >&2
		die "installing npm failed"
	fi
	rm -f "$log"
fi

# Verify the tools the build and the tests call, so that a broken installation
# fails here with a clear message rather than later with a confusing one.
PG_BIN=/usr/lib/postgresql/15/bin
for tool in "$PG_BIN/pg_config" "$PG_BIN/initdb" "$PG_BIN/pg_ctl" "$PG_BIN/postgres" \
	/usr/bin/psql /usr/bin/pg_virtualenv /usr/bin/prove \
	/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
	/usr/bin/ceph-mon /usr/bin/ceph-osd /usr/bin/radosgw /usr/bin/radosgw-admin \
	/usr/bin/monmaptool /usr/bin/ceph-authtool /usr/bin/ceph /usr/bin/curl; do
	[ -x "$tool" ] || die "$tool is missing after installation"
done
[ -f /usr/lib/postgresql/15/lib/pgxs/src/makefiles/pgxs.mk ] || die "PGXS (pgxs.mk) is missing"
perl -MIPC::Run -e 1 2>/dev/null || die "perl module IPC::Run is not usable"
id postgres >/dev/null 2>&1 || die "the postgres system user does not exist"
command -v runuser >/dev/null 2>&1 || die "runuser (util-linux) not found"
exit 0
