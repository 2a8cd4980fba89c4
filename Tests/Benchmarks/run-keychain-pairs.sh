#!/usr/bin/env bash
# run-keychain-pairs.sh [--bin DIR] [--baseline-bin DIR] [--pairs N] [--runs N]
#
# The keychain rows of `make bench` (keychain-get, keychain-set: Keychain against libsecret's C API, Docs/performance.md)
# in interleaved pairs: each pair is one `securestore-bench run --only keychain-get,keychain-set` and one
# `securestore-bench-baseline run` of the same, in the same throw-away keyring, the order swapped every pair so that
# neither side always runs first. Each run reports its own median (of runs×20 gets, runs×10 sets); prints every pair and
#   BENCH <workload> project=<median ms> baseline=<median ms> ratio=<median of the per-pair ratios project/baseline>
# --bin and --baseline-bin as in run-bench.sh (`make bench` builds them); --pairs 9 and --runs 5 by default. Runs inside
# Tests/Harness/with-keyring unless it is already inside one.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then exec "$root/Tests/Harness/with-keyring" "$0" "$@"; fi

bin="$here/.build-static/release"
baseline_bin="$here/.build/release"
pairs=9
runs=5
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --baseline-bin) baseline_bin=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) echo "usage: run-keychain-pairs.sh [--bin DIR] [--baseline-bin DIR] [--pairs N] [--runs N]" >&2; exit 64 ;;
    esac
done
[ -x "$bin/securestore-bench" ] || { echo "run-keychain-pairs: $bin/securestore-bench is missing (make bench builds it)" >&2; exit 69; }
[ -x "$baseline_bin/securestore-bench-baseline" ] || { echo "run-keychain-pairs: $baseline_bin/securestore-bench-baseline is missing (make bench builds it)" >&2; exit 69; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-keychain-pairs.XXXXXX")
trap 'rm -rf "$work"' EXIT
only=(--only keychain-get,keychain-set --runs "$runs")
side() {  # side project|baseline PAIR: one run, its RESULT lines appended to the pair's file
    if [ "$1" = project ]; then "$bin/securestore-bench" run "$work/p$2" "${only[@]}"
    else "$baseline_bin/securestore-bench-baseline" run "$work/b$2" "${only[@]}"; fi | grep '^RESULT ' >>"$work/pair$2"
}

echo "# keychain pairs: $bin/securestore-bench vs $baseline_bin/securestore-bench-baseline, $pairs pairs, --runs $runs ($(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
for i in $(seq 1 "$pairs"); do
    if [ $((i % 2)) = 1 ]; then side project "$i"; side baseline "$i"; else side baseline "$i"; side project "$i"; fi
    awk -v pair="$i" '{ m[$2, $3] = $4 } END {
        printf "pair %d: get %.4f / %.4f = %.3f, set %.4f / %.4f = %.3f\n", pair,
            m["keychain-get", "project"], m["keychain-get", "baseline"], m["keychain-get", "project"] / m["keychain-get", "baseline"],
            m["keychain-set", "project"], m["keychain-set", "baseline"], m["keychain-set", "project"] / m["keychain-set", "baseline"] }' "$work/pair$i"
done
cat "$work"/pair* | awk '
function median(x, n,   i, j, t, s) { for (i = 1; i <= n; i++) s[i] = x[i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
    return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
{ v[$2, $3, ++n[$2, $3]] = $4 }
END {
    split("keychain-get keychain-set", ws, " ")
    for (k = 1; k <= 2; k++) {
        w = ws[k]; c = n[w, "project"]
        for (i = 1; i <= c; i++) { p[i] = v[w, "project", i]; b[i] = v[w, "baseline", i]; r[i] = p[i] / b[i] }
        printf "BENCH %s project=%.4fms baseline=%.4fms ratio=%.4f\n", w, median(p, c), median(b, c), median(r, c)
    }
}'
