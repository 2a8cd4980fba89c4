#!/usr/bin/env bash
# run-inline-cost.sh [SECURESTORE] — what small attachments kept inside the record database cost it
# (Docs/attachments.md, "The measured break-even"). Run inside the test keyring:
#   Tests/Harness/with-keyring Tests/Benchmarks/run-inline-cost.sh .build/debug/securestore
# Attaches 1000 files of 64 KiB (10 calls of 100; all inline at the default limit) to a task of database `tasks`,
# keeps a database `empty` with the same tasks and none, then times `db rotate-key` of each (3 runs, interleaved)
# and 31 interleaved pairs of `tasks list` (a launch), printing the median of the per-pair ratios.
set -euo pipefail
ss=$(realpath "${1:-.build/debug/securestore}")
work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-inline-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT
data=$work/data
mkdir -p "$work/files"
for i in $(seq 1 1000); do head -c 65536 /dev/urandom >"$work/files/f$i.bin"; done
"$ss" --data-dir "$data" tasks add "plain" >/dev/null
"$ss" --data-dir "$data" tasks add "plain" --name empty >/dev/null
task=$("$ss" --data-dir "$data" tasks add "with files" | cut -c1-8)
for batch in $(seq 0 9); do
    files=()
    for i in $(seq $((batch * 100 + 1)) $((batch * 100 + 100))); do files+=("$work/files/f$i.bin"); done
    "$ss" --data-dir "$data" tasks attach "$task" "${files[@]}" >/dev/null
done
"$ss" --data-dir "$data" db info | grep '^attachments'
echo "record database: $(stat -c %s "$data/tasks.db") bytes with the attachments, $(stat -c %s "$data/empty.db") without"
seconds() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo "scale=3; ($e - $s) / 1000000000" | bc; }
for run in 1 2 3; do
    echo "rotate-key: without $(seconds "$ss" --data-dir "$data" db rotate-key --name empty) s," \
        "with $(seconds "$ss" --data-dir "$data" db rotate-key) s"
done
for i in $(seq 1 31); do
    echo "$(seconds "$ss" --data-dir "$data" tasks list --name empty) $(seconds "$ss" --data-dir "$data" tasks list)"
done | python3 -c "
import sys, statistics as st
pairs = [tuple(map(float, line.split())) for line in sys.stdin]
print('launch (tasks list): without %.1f ms, with %.1f ms, median of 31 per-pair ratios %.2f' % (
    1000 * st.median(a for a, _ in pairs), 1000 * st.median(b for _, b in pairs), st.median(b / a for a, b in pairs)))"
