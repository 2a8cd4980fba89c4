#!/usr/bin/env bash
# run-attachment-bench.sh [--bin DIR] [--baseline-bin DIR] [--pairs N] [--sizes "4000 64000 …"] [--total BYTES] [--cold]
#
# The attachment benchmark of `make bench` (Docs/attachments.md): for each size, N interleaved rounds of
# securestore (AttachmentStore), file (plain files, write + fsync), sqlite (plain SQLite BLOB column; its own
# executable) and inline (one BLOB in the SQLCipher record database), each round a fresh process writing and then
# reading `count` objects. Prints one line per size and operation with the median throughput of each side and the
# median of the per-round ratios securestore/file and securestore/sqlite, and the peak RSS of the securestore side:
# first one `ATTACH <operation> <size> securestore=… file=… sqlite=… inline=… vs_file=… vs_sqlite=… rss=…` line per
# size and operation (MB/s; what the smoke test checks), then the same as a table. Each round moves about --total
# bytes (64 MB; 3 to 200 objects). --cold reads cold: every side flushes each object's files and drops them from
# the page cache (posix_fadvise) before reading it, so both sides read from the device (BENCH_COLD=1).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin="$here/.build/release"; baseline_bin=""; pairs=5; total=64000000; cold=0
sizes="4000 64000 128000 1000000 8000000 53000000"
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --baseline-bin) baseline_bin=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --total) total=$2; shift 2 ;;
        --cold) cold=1; shift ;;
        *) echo "usage: run-attachment-bench.sh [--bin DIR] [--baseline-bin DIR] [--pairs N] [--sizes LIST] [--total BYTES] [--cold]" >&2; exit 64 ;;
    esac
done
[ -n "$baseline_bin" ] || baseline_bin=$bin
work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-attachment-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
results="$work/results"
for size in $sizes; do
    # About 64 MB per round, at least 3 and at most 200 objects.
    count=$(( total / size )); [ $count -lt 3 ] && count=3; [ $count -gt 200 ] && count=200
    for round in $(seq 1 "$pairs"); do
        for side in securestore file sqlite inline; do
            rm -rf "$work/$side"; mkdir -p "$work/$side"
            [ -f "$work/source-$size" ] && cp "$work/source-$size" "$work/$side/source-$size"
            if [ "$side" = sqlite ]; then
                BENCH_COLD=$cold "$baseline_bin/securestore-bench-attachments-baseline" sqlite "$work/$side" "$size" "$count"
            else
                BENCH_COLD=$cold "$bin/securestore-bench-attachments" "$side" "$work/$side" "$size" "$count"
            fi | sed "s/^/$round /" >>"$results"
            [ -f "$work/source-$size" ] || cp "$work/$side/source-$size" "$work/source-$size"
        done
    done
done
awk -v reads="$([ "$cold" = 1 ] && echo cold || echo warm)" '
$2 == "RESULT" { mbps[$3, $4, $5, $1] = $7; ms[$3, $4, $5, $1] = $6; if (!(($3, $4) in seen)) { seen[$3, $4] = 1; keys[++n] = $3 " " $4 } ; last_side = $5; last_size = $4 }
$2 == "RSS" { rss[last_size, last_side, $1] = $3 }
END {
    for (i = 1; i <= n; i++) {
        split(keys[i], f, " "); op = f[1]; size = f[2]; row(op, size)
        printf "ATTACH %s %d securestore=%.1f file=%.1f sqlite=%.1f inline=%.1f vs_file=%.3f vs_sqlite=%.3f rss=%.1f reads=%s\n", op, size, S, F, Q, I, RF, RQ, R, reads
    }
    printf "| operation | size | securestore MB/s | plain file MB/s | plain SQLite BLOB MB/s | SQLCipher inline BLOB MB/s | securestore / file (median of pairs) | securestore / SQLite | peak RSS securestore |\n"
    printf "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
        split(keys[i], f, " "); op = f[1]; size = f[2]; row(op, size)
        printf "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.0f MiB |\n", op, size, S, F, Q, I, RF, RQ, R
    }
}
function row(op, size,    round, c) {
    split("", s); split("", fl); split("", q); split("", inl); split("", rf); split("", rq); split("", r)
    c = 0
    for (round = 1; round <= 100; round++) {
        if (!((op, size, "securestore", round) in mbps)) continue
        c++
        s[c] = mbps[op, size, "securestore", round]; fl[c] = mbps[op, size, "file", round]
        q[c] = mbps[op, size, "sqlite", round]; inl[c] = mbps[op, size, "inline", round]
        rf[c] = s[c] / fl[c]; rq[c] = s[c] / q[c]; r[c] = rss[size, "securestore", round]
    }
    S = median(s, c); F = median(fl, c); Q = median(q, c); I = median(inl, c); RF = median(rf, c); RQ = median(rq, c); R = median(r, c)
}
function median(a, c,    i, j, t) {
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}' "$results"
