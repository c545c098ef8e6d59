#!/bin/sh
# gen_chunk.sh FIRST LAST FILE — rows FIRST..LAST of the benchmark data set into FILE
# (a helper of run.sh, which runs two of these at a time).
set -eu
exec perl "$(dirname "$0")/gen_rows.pl" "$1" "$2" 42 >"$3"
