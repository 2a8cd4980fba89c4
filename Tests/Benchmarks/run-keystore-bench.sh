#!/usr/bin/env bash
# run-keystore-bench.sh --tool PATH [--pairs N]
#
# Key stores (Docs/keystores.md), whole processes of the built tool, in a throw-away keyring (Tests/Harness/with-keyring):
#   token-get   `token get` from the key file with its key in the kernel keyring cache   vs the Secret Service
#   unlock      `token get` from the key file with no cache (scrypt on every run)          vs the cached run
#   tasks-list  `tasks list --limit 1` of 1000 tasks, database key in the key file (cached) vs the Secret Service
# Interleaved pairs (A B A B …); prints each side's median in ms and the median of the per-pair ratios, as
#   BENCH <workload> project=<ms>ms baseline=<ms>ms ratio=<median of project/baseline>
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then exec "$root/Tests/Harness/with-keyring" "$0" "$@"; fi

tool=""; pairs=15
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        *) echo "usage: run-keystore-bench.sh --tool PATH [--pairs N]" >&2; exit 64 ;;
    esac
done
[ -x "$tool" ] || { echo "run-keystore-bench: no tool at '$tool'" >&2; exit 69; }

# The key file's cache lives only in a login session keyring (Docs/keystores.md): run where there is one, as an SSH
# login has (an anonymous session keyring of this run's own).
if [ -z "${KEYSTORE_BENCH_SESSION:-}" ]; then
    KEYSTORE_BENCH_SESSION=1 exec keyctl session - "$0" --tool "$tool" --pairs "$pairs"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-keystore-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME="$work/data" SECURESTORE_PROMPT=never
printf 'bench passphrase\n' >"$work/pass"
file() { "$tool" --keystore file --passphrase-fd 3 "$@" 3<"$work/pass"; }
service() { "$tool" --keystore secret-service "$@"; }

printf 'ghp_benchTokenValue' | file token set bench
printf 'ghp_benchTokenValue' | service token set bench
for i in $(seq 1 1000); do printf '{"id":"00000000-0000-4000-8000-%012d","title":"task %d","done":false,"createdAt":"2026-01-01T00:00:00.000000Z"}\n' "$i" "$i"; done >"$work/tasks.jsonl"
file --data-dir "$work/file-db" tasks import "$work/tasks.jsonl" >/dev/null
service --data-dir "$work/service-db" tasks import "$work/tasks.jsonl" >/dev/null

now() { date +%s%N; }
# time_ms CMD…: the wall time of one run in ms (output discarded).
time_ms() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )); }

pair() {  # pair NAME "A command" "B command"
    local name=$1 a=$2 b=$3 i
    : >"$work/$name.a"; : >"$work/$name.b"
    eval "$a" >/dev/null 2>&1; eval "$b" >/dev/null 2>&1   # warm
    for i in $(seq 1 "$pairs"); do
        time_ms bash -c "$(declare -f file service); tool='$tool'; work='$work'; $a" >>"$work/$name.a"
        time_ms bash -c "$(declare -f file service); tool='$tool'; work='$work'; $b" >>"$work/$name.b"
    done
    paste "$work/$name.a" "$work/$name.b" | awk -v name="$name" '
        { a[NR] = $1; b[NR] = $2; r[NR] = $1 / $2 }
        function median(x, n,   i, j, t, s) { for (i = 1; i <= n; i++) s[i] = x[i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
            return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
        END { printf "BENCH %s project=%.1fms baseline=%.1fms ratio=%.2f\n", name, median(a, NR) / 1000, median(b, NR) / 1000, median(r, NR) }'
}

echo "# keystore bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $pairs pairs"
pair token-get "SECURESTORE_CACHE_TIMEOUT=600 file token get bench" "service token get bench"
# Issue 33's goal: a token read from the cached key file takes no longer than the reference tool's read of one from
# the Secret Service.
pair token-get-vs-secret-tool "SECURESTORE_CACHE_TIMEOUT=600 file token get bench" "secret-tool lookup service securestore account bench"
pair unlock "SECURESTORE_CACHE_TIMEOUT=0 file token get bench" "SECURESTORE_CACHE_TIMEOUT=600 file token get bench"
pair tasks-list "file --data-dir '$work/file-db' tasks list --limit 1" "service --data-dir '$work/service-db' tasks list --limit 1"
