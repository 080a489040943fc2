#!/usr/bin/env bash
# Test-only: compile scripts/stream-bandwidth.c (gcc -O2 -fopenmp, for this CPU) and run it,
# then run `boyd probe` with the same buffer size, so the two bandwidths can be compared
# (the acceptance bound is 20 %). Usage: scripts/stream-bandwidth.sh [MiB] [runs] [boyd binary]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mib="${1:-512}"
runs="${2:-8}"
boyd="${3:-$here/../target/release/boyd}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
gcc -O2 -march=native -fopenmp -o "$out/stream-bandwidth" "$here/stream-bandwidth.c"
echo "== stream-bandwidth.c (OMP_NUM_THREADS=${OMP_NUM_THREADS:-all}) =="
"$out/stream-bandwidth" "$mib" "$runs"
if [ -x "$boyd" ]; then
    echo "== boyd probe =="
    "$boyd" probe --bw-mib "$mib" --runs "$runs" | grep -E '^(cpu|cores|bandwidth)'
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
