#!/usr/bin/env bash
# run-attachment-ab.sh --a "ENV=… DIR" --b "ENV=… DIR" [--pairs N] [--sizes "1000000 …"] [--side securestore] [--cold]
#
# Compares two variants of the attachment store (two builds, or one build under two environments) on the
# securestore side of securestore-bench-attachments: for each size, N pairs of rounds run interleaved A B A B…,
# each a fresh process writing then reading the same objects. Prints, per size and operation, the median MB/s of
# each variant and the median of the per-pair ratios B/A (Docs/attachments.md, "Making it faster").
# A variant is "[NAME=VALUE…] DIR": environment assignments, then the directory holding the binary.
set -euo pipefail
a=""; b=""; pairs=5; sizes="1000000 53000000"; side=securestore; cold=""
while [ $# -gt 0 ]; do
    case "$1" in
        --a) a=$2; shift 2 ;;
        --b) b=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --side) side=$2; shift 2 ;;
        --cold) cold=1; shift ;;
        *) echo "usage: run-attachment-ab.sh --a \"[ENV=…] DIR\" --b \"[ENV=…] DIR\" [--pairs N] [--sizes LIST] [--side S] [--cold]" >&2; exit 64 ;;
    esac
done
[ -n "$a" ] && [ -n "$b" ] || { echo "run-attachment-ab.sh: --a and --b are required" >&2; exit 64; }
work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-attachment-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT
run() { # variant label size count
    local words=($1) envs=() dir
    dir=${words[-1]}; unset 'words[-1]'; envs=("${words[@]}")
    rm -rf "$work/run"; mkdir -p "$work/run"
    [ -f "$work/source-$3" ] && cp "$work/source-$3" "$work/run/source-$3"
    env ${envs[@]+"${envs[@]}"} ${cold:+BENCH_COLD=1} "$dir/securestore-bench-attachments" "$side" "$work/run" "$3" "$4" | sed "s/^/$2 /"
    [ -f "$work/source-$3" ] || cp "$work/run/source-$3" "$work/source-$3"
}
for size in $sizes; do
    count=$(( 64000000 / size )); [ $count -lt 3 ] && count=3; [ $count -gt 200 ] && count=200
    for round in $(seq 1 "$pairs"); do
        run "$a" "A $round" "$size" "$count" >>"$work/results"
        run "$b" "B $round" "$size" "$count" >>"$work/results"
    done
done
awk '
$3 == "RESULT" { v[$1, $2, $4, $5] = $8; if (!(($4, $5) in seen)) { seen[$4, $5] = 1; keys[++n] = $4 " " $5 } }
$3 == "RSS" { rss[$1, $2] = $4 }
function median(a, c,    i, j, t) {
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
END {
    printf "| operation | size | A MB/s | B MB/s | B / A (median of pairs) |\n| --- | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
        split(keys[i], f, " "); split("", xa); split("", xb); split("", r); c = 0
        for (round = 1; round <= 1000; round++) {
            if (!(("A", round, f[1], f[2]) in v) || !(("B", round, f[1], f[2]) in v)) continue
            c++; xa[c] = v["A", round, f[1], f[2]]; xb[c] = v["B", round, f[1], f[2]]; r[c] = xb[c] / xa[c]
        }
        printf "| %s | %d | %.0f | %.0f | %.2f |\n", f[1], f[2], median(xa, c), median(xb, c), median(r, c)
    }
}' "$work/results"
