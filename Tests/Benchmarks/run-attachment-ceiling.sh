#!/usr/bin/env bash
# run-attachment-ceiling.sh [--bin DIR] [--pairs N] [--sizes "1000000 …"] [--total BYTES]
#
# The most a cold-read optimisation of the attachment store could reach (Docs/attachments.md, "Targets"): per size,
# N interleaved pairs of rounds of securestore-bench-attachments, the store read *warm* (its objects in the page
# cache: no I/O at all, only SQLCipher's decrypt + HMAC, the SHA-256 and the copies) beside a plain file read *cold*
# (BENCH_COLD=1: flushed and dropped from the page cache). Prints, per size, the median MB/s of each and the median
# of the per-pair ratios store-warm / file-cold: a cold read of the store, however well its I/O is overlapped, cannot
# exceed that ratio of a cold plain-file read. Each round moves about --total bytes (64 MB; 3 to 200 objects), as in
# run-attachment-bench.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin="$here/.build-static/release"; pairs=5; sizes="1000000 8000000 53000000"; total=64000000
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --total) total=$2; shift 2 ;;
        *) echo "usage: run-attachment-ceiling.sh [--bin DIR] [--pairs N] [--sizes LIST] [--total BYTES]" >&2; exit 64 ;;
    esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-attachment-ceiling.XXXXXX")
trap 'rm -rf "$work"' EXIT
for size in $sizes; do
    count=$(( total / size )); [ $count -lt 3 ] && count=3; [ $count -gt 200 ] && count=200
    for round in $(seq 1 "$pairs"); do
        for side in securestore file; do
            rm -rf "$work/$side"; mkdir -p "$work/$side"
            [ -f "$work/source-$size" ] && cp "$work/source-$size" "$work/$side/source-$size"
            cold=0; [ "$side" = file ] && cold=1
            BENCH_COLD=$cold "$bin/securestore-bench-attachments" "$side" "$work/$side" "$size" "$count" | sed "s/^/$round /"
            [ -f "$work/source-$size" ] || cp "$work/$side/source-$size" "$work/source-$size"
        done
    done
done | awk '
$2 == "RESULT" && $3 == "read" { v[$4, $5, $1] = $7; if (!($4 in seen)) { seen[$4] = 1; sizes[++n] = $4 } }
function median(a, c,    i, j, t) {
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
END {
    printf "| size | securestore warm MB/s | plain file cold MB/s | warm store / cold file (median of pairs) |\n| ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
        size = sizes[i]; c = 0; split("", s); split("", f); split("", r)
        for (round = 1; round <= 1000; round++) {
            if (!((size, "securestore", round) in v) || !((size, "file", round) in v)) continue
            c++; s[c] = v[size, "securestore", round]; f[c] = v[size, "file", round]; r[c] = s[c] / f[c]
        }
        printf "| %d | %.0f | %.0f | %.2f |\n", size, median(s, c), median(f, c), median(r, c)
    }
}'
