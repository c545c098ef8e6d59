#!/usr/bin/env bash
# durable_create.sh — what a durable create of a small new file costs on the
# file system of a file:// store, next to what the heap's commit pays for its
# WAL flush (a write into a preallocated file + fdatasync); once on an idle
# machine and once with every core busy, as they are when many clients
# commit. A program that prints figures, never a test; it fails only when a
# system call does.
#
#   bash test/bench/durable_create.sh [--dir DIR] [--count N] [--size BYTES] [--hogs N]
#
#   --dir DIR      directory on the file system to measure (default: a new
#                  directory under /var/tmp, removed afterwards)
#   --count N      objects per pattern (default 500)
#   --size BYTES   bytes per object (default 8192: a group-commit WAL entry of
#                  a few 1 kB rows)
#   --hogs N       busy loops of the loaded run (default: 4 per core)
#   -h, --help     this text
#
# The patterns (test/bench/durable_create.c): heap_flush, rollout_create (the
# file:// store's create-if-absent), and two unsafe variants that show where
# the time goes. docs/PERFORMANCE.md, "What a durable create costs", reads
# the figures.
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
dir=""
count=500
size=8192
hogs=$(($(nproc) * 4))
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) dir=$2; shift 2 ;;
	--count) count=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--hogs) hogs=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "durable_create.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d /var/tmp/rollout_durable_create.XXXXXX)
hog_pids=()
cleanup() {
	for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
[ -n "$dir" ] || dir=$work/data
mkdir -p "$dir"

cc -O2 -Wall -o "$work/durable_create" "$BENCH/durable_create.c"

run() { # label
	local target
	target=$(mktemp -d "$dir/run.XXXXXX")
	"$work/durable_create" "$target" "$count" "$size" | while read -r pattern ms ratio; do
		printf '| %s | %s | %s | %s |\n' "$1" "$pattern" "$ms" "$ratio"
	done
	rm -rf "$target"
}

echo "| machine | pattern | ms per object | vs heap_flush |"
echo "|---|---|--:|--:|"
run idle
for _ in $(seq 1 "$hogs"); do
	(while :; do :; done) &
	hog_pids+=($!)
done
sleep 0.5
run "$hogs busy loops"
echo
echo "Setup: $(df -T "$dir" | awk 'NR == 2 {print $2}') at $dir, $count objects of $size bytes per pattern, $(nproc) CPUs."
