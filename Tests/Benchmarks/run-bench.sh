#!/usr/bin/env bash
# run-bench.sh [--bin DIR] [--baseline-bin DIR] [--scale N] [--runs N] [--only w1,w2] [--keep]
#
# The driver of `make bench` (Docs/performance.md): runs securestore-bench (the project) and
# securestore-bench-baseline (plain SQLite, libsecret's C API, UserDefaults) on the same data in a
# temporary directory, then prints a readable table and one machine-readable line per workload:
#
#   BENCH <workload> project=<value><unit> baseline=<value><unit> ratio=<project/baseline> [rss=<MB>MB]
#
# Values are medians of several runs; the table shows the spread (min–max). --bin picks the executables
# (default Tests/Benchmarks/.build/release); --baseline-bin picks the baseline's directory when it differs (`make bench`
# builds the project side as `make install` does, with the Swift runtime linked statically, and the
# baseline with the default dynamic runtime, because static Foundation's UserDefaults crashes); --scale N divides every data size by N (the smoke test uses 1000); --runs N
# sets the repetitions (default 5). Runs inside Tests/Harness/with-keyring (a private bus and a
# throw-away keyring) unless it is already inside one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then
    exec "$root/Tests/Harness/with-keyring" "$0" "$@"
fi

bin="$here/.build/release"
baseline_bin=""
pass=()
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --baseline-bin) baseline_bin=$2; shift 2 ;;
        --scale|--runs|--only) pass+=("$1" "$2"); shift 2 ;;
        --keep) keep=1; shift ;;
        *) echo "usage: run-bench.sh [--bin DIR] [--baseline-bin DIR] [--scale N] [--runs N] [--only w1,w2] [--keep]" >&2; exit 64 ;;
    esac
done
[ -n "$baseline_bin" ] || baseline_bin=$bin
[ -x "$bin/securestore-bench" ] || { echo "run-bench: $bin/securestore-bench is missing; swift build --package-path Tests/Benchmarks -c release --product securestore-bench" >&2; exit 69; }
[ -x "$baseline_bin/securestore-bench-baseline" ] || { echo "run-bench: $baseline_bin/securestore-bench-baseline is missing; swift build --package-path Tests/Benchmarks -c release --product securestore-bench-baseline" >&2; exit 69; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-bench.XXXXXX")
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
results="$work/results.txt"

echo "# securestore bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# project:  $bin/securestore-bench run ${pass[*]:-}"
"$bin/securestore-bench" run "$work/project" "${pass[@]}" | tee -a "$results" | sed 's/^/  /'
# The baseline runs the product's own task schema, printed by the project side.
"$bin/securestore-bench" schema >"$work/task-schema.sql"
export BENCH_TASK_SCHEMA="$work/task-schema.sql"
echo "# baseline: $baseline_bin/securestore-bench-baseline run ${pass[*]:-}"
"$baseline_bin/securestore-bench-baseline" run "$work/baseline" "${pass[@]}" | tee -a "$results" | sed 's/^/  /'
echo

awk '
function shown(v) { return v >= 100 ? sprintf("%.0f", v) : v >= 10 ? sprintf("%.1f", v) : v >= 1 ? sprintf("%.2f", v) : sprintf("%.3f", v) }
function compact(v) { return v >= 100 ? sprintf("%.1f", v) : v >= 1 ? sprintf("%.3f", v) : sprintf("%.4f", v) }
$1 == "RESULT" {
    w = $2; s = $3
    if (!(w in seen)) { seen[w] = 1; order[++n] = w }
    med[w, s] = $4; lo[w, s] = $5; hi[w, s] = $6; runs[w, s] = $7; unit[w, s] = $8
    if (NF >= 9) rss[w, s] = $9
}
$1 == "INFO" { infos[++m] = $0 }
END {
    printf "| workload | project (median, min–max) | baseline (median, min–max) | ratio | peak RSS project / baseline |\n"
    printf "| --- | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; i++) {
        w = order[i]
        p = med[w, "project"]; b = med[w, "baseline"]
        ratio[w] = (b > 0) ? p / b : 0
        r = ((w, "project") in rss) ? sprintf("%s / %s MiB", rss[w, "project"], rss[w, "baseline"]) : ""
        printf "| %s | %s ms (%s–%s, n=%d) | %s ms (%s–%s, n=%d) | %.3f | %s |\n", w, \
            shown(p), shown(lo[w, "project"]), shown(hi[w, "project"]), runs[w, "project"], \
            shown(b), shown(lo[w, "baseline"]), shown(hi[w, "baseline"]), runs[w, "baseline"], ratio[w], r
    }
    print ""
    for (i = 1; i <= m; i++) {
        split(infos[i], f, " "); text = infos[i]
        sub(/^INFO [^ ]+ [^ ]+ [^ ]+ /, "", text)
        printf "- %s: %s %s (%s)\n", f[2], shown(f[3]), f[4], text
    }
    print ""
    for (i = 1; i <= n; i++) {
        w = order[i]
        line = sprintf("BENCH %s project=%s%s baseline=%s%s ratio=%.4f", w, compact(med[w, "project"]), unit[w, "project"], \
            compact(med[w, "baseline"]), unit[w, "baseline"], ratio[w])
        if ((w, "project") in rss) line = line sprintf(" rss=%.1fMB", rss[w, "project"] * 1.048576)
        print line
    }
}' "$results"

# DatabasePool against DatabaseQueue (issue 14), both in the project binary on one file, in interleaved pairs;
# `ratio` is the median of the per-pair ratios pool/queue (Docs/database.md).
echo
echo "# pool vs queue: $bin/securestore-bench pool ${pass[*]:-} (load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
"$bin/securestore-bench" pool "$work/pool" "${pass[@]}" | { grep '^POOL ' || true; }

# KeyedDatabase with reading connections (readerCount: 4) against without (issue 25), interleaved pairs on one file
# and the harness keyring; `ratio` is the median of the per-pair ratios readers/none (Docs/performance.md).
echo
echo "# keyed database readers: $bin/securestore-bench keyed-pool ${pass[*]:-} (load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
"$bin/securestore-bench" keyed-pool "$work/keyed-pool" "${pass[@]}" | { grep '^KEYEDPOOL ' || true; }

# KeyedDatabase.backup(to:) of 100 000 notes while a thread writes a note per transaction, against GRDB 7.10's
# DatabasePool.backup (securestore-bench-grdb, plain SQLite) and against the same writes without a backup, interleaved
# pairs; `ratio` is the median of the per-pair ratios (Docs/performance.md, "Online backup"; issue 34).
echo
echo "# backup: $bin/securestore-bench backup ${pass[*]:-} (load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
"$bin/securestore-bench" backup "$work/backup" "${pass[@]}" | { grep '^BACKUP ' || true; }

# The task list's word search (full-text index) against the LIKE scan it replaced, interleaved pairs on 1M tasks;
# `ratio` is the median of the per-pair ratios fts/like (Docs/performance.md, "Search").
echo
echo "# search: $bin/securestore-bench search ${pass[*]:-} (load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
"$bin/securestore-bench" search "$work/search" "${pass[@]}" | { grep -E '^(SEARCH|INFO) ' || true; }

# Every database workload against C on the same SQLCipher, format, schema and SQL (Tests/Benchmarks/CBaseline,
# compiled by `make bench`), interleaved pairs of fresh processes; `ratio` is the median of the per-pair ratios
# project/C (Docs/performance.md, "Against C on SQLCipher").
echo
echo "# against C: $bin/securestore-bench c-baseline ${pass[*]:-} (load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
# The C program beside the project's executable (`make bench` compiles it); compiled here when missing.
if [ ! -x "$bin/securestore-bench-c" ]; then
    cc -O2 -o "$bin/securestore-bench-c" "$here/CBaseline/securestore-bench-c.c" $(pkg-config --cflags --libs sqlcipher)
fi
"$bin/securestore-bench" c-baseline "$work/c-baseline" "${pass[@]}" | { grep -E '^BENCH ' || true; }
