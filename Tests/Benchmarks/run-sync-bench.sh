#!/usr/bin/env bash
# run-sync-bench.sh --tool PATH [--tasks N] [--pairs N] [--edits K]
#
# Sync (Docs/sync.md), whole processes of the built tool, in a throw-away keyring (Tests/Harness/with-keyring):
#   initial-sync   a new device joins a folder holding N tasks (`sync join`: verify, decrypt, merge every bundle)
#                  vs `tasks export` of the N tasks + `tasks import` into a new database (the same data moved by hand)
#   one-change     `tasks add` + `sync now` on one device, then `sync now` on the other (our own time for one change
#                  end to end; the replication engine's delay is not in it) vs `tasks add` alone
#   two-sync-processes  the two `sync now` of one change (the `tasks add` before them untimed) vs two `tasks count`
#   join-snapshot  a new device joins a folder of N tasks holding a snapshot of them (`sync snapshot`: it applies
#                  the snapshot, then no bundle) vs joining a copy of that folder without the snapshot (every bundle);
#                  with --edits K every task is first changed K times more (re-imported with new titles and synced),
#                  so that the bundles hold K+1 versions of each task and the snapshot one
# Interleaved pairs (A B A B …); prints each side's median in ms and the median of the per-pair ratios, as
#   BENCH <workload> project=<ms>ms baseline=<ms>ms ratio=<median of project/baseline>
# and the bytes on the remote per task. SYNC_SNAPSHOT_ONLY=1: the join-snapshot pair alone (with --edits, the
# five-versions line of `make bench-sync`); SYNC_CLOCK_ONLY=1: the bookkeeping pairs alone.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then exec "$root/Tests/Harness/with-keyring" "$0" "$@"; fi

tool=""; tasks=10000; pairs=5; edits=0
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool=$2; shift 2 ;;
        --tasks) tasks=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        --edits) edits=$2; shift 2 ;;
        *) echo "usage: run-sync-bench.sh --tool PATH [--tasks N] [--pairs N] [--edits K]" >&2; exit 64 ;;
    esac
done
[ -x "$tool" ] || { echo "run-sync-bench: no tool at '$tool'" >&2; exit 69; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-sync-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME="$work/data" SECURESTORE_PROMPT=never
for i in $(seq 1 "$tasks"); do printf '{"id":"00000000-0000-4000-8000-%012d","title":"task number %d","done":false,"createdAt":"2026-01-01T00:00:00.000000Z"}\n' "$i" "$i"; done >"$work/tasks.jsonl"
"$tool" --app bench-origin tasks import "$work/tasks.jsonl" >/dev/null 2>&1
code=$("$tool" --app bench-origin sync init --folder "$work/remote" 2>/dev/null)
printf '%s\n' "$code" >"$work/code"
bytes=$(du -sb "$work/remote/devices" | cut -f1)
"$tool" --app bench-peer sync join --folder "$work/remote" <"$work/code" >/dev/null 2>&1

now() { date +%s%N; }
time_ms() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )); }
run=0
join_new() { run=$((run + 1)); "$tool" --app "bench-join-$run" sync join --folder "$work/remote" <"$work/code"; }
export_import() {
    run=$((run + 1))
    "$tool" --app bench-origin tasks export --output "$work/export-$run.jsonl" &&
        "$tool" --app "bench-import-$run" tasks import "$work/export-$run.jsonl"
}
one_change() {
    "$tool" --app bench-origin tasks add "one more" && "$tool" --app bench-origin sync now &&
        "$tool" --app bench-peer sync now
}
add_only() { "$tool" --app bench-origin tasks add "one more"; }

pair() {  # pair NAME A-FUNCTION B-FUNCTION [PREPARE-FUNCTION, run untimed before each A]
    local name=$1 a=$2 b=$3 prepare=${4:-true} i t0 t1
    : >"$work/$name.a"; : >"$work/$name.b"
    for i in $(seq 1 "$pairs"); do
        $prepare >/dev/null 2>&1
        t0=$(now); $a >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )) >>"$work/$name.a"
        t0=$(now); $b >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )) >>"$work/$name.b"
    done
    paste "$work/$name.a" "$work/$name.b" | awk -v name="$name" '
        { a[NR] = $1; b[NR] = $2; r[NR] = $1 / $2 }
        function median(x, n,   i, j, t, s) { for (i = 1; i <= n; i++) s[i] = x[i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
            return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
        END { printf "BENCH %s project=%.1fms baseline=%.1fms ratio=%.2f\n", name, median(a, NR) / 1000, median(b, NR) / 1000, median(r, NR) }'
}

echo "# sync bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $tasks tasks, $pairs pairs"
echo "BENCH remote-bytes tasks=$tasks bytes=$bytes per-task=$((bytes / tasks))"
[ -n "${SYNC_CLOCK_ONLY:-}${SYNC_SNAPSHOT_ONLY:-}" ] || pair "initial-sync-$tasks" join_new export_import
[ -n "${SYNC_CLOCK_ONLY:-}${SYNC_SNAPSHOT_ONLY:-}" ] || pair one-change one_change add_only
# The two `sync now` processes that carry one change (the change made before, untimed) against two `tasks count`
# processes (issue 35: within 2x; Docs/performance.md, "Where a sync now's time goes").
two_syncs() { "$tool" --app bench-origin sync now && "$tool" --app bench-peer sync now; }
two_counts() { "$tool" --app bench-origin tasks count && "$tool" --app bench-peer tasks count; }
[ -n "${SYNC_CLOCK_ONLY:-}${SYNC_SNAPSHOT_ONLY:-}" ] || pair two-sync-processes two_syncs two_counts add_only

# Snapshots: the same remote with and without the origin's snapshot (each join adds its own files to its copy).
for e in $(seq 1 "$edits"); do
    sed "s/task number/edit $e of task/" "$work/tasks.jsonl" >"$work/edit.jsonl"
    "$tool" --app bench-origin tasks import --on-duplicate replace "$work/edit.jsonl" >/dev/null 2>&1
    "$tool" --app bench-origin sync now >/dev/null 2>&1
done
"$tool" --app bench-origin sync snapshot >/dev/null 2>&1
cp -a "$work/remote" "$work/remote-plain"
rm -rf "$work/remote-plain/snapshots"
join_snapshot() { run=$((run + 1)); "$tool" --app "bench-join-$run" sync join --folder "$work/remote" <"$work/code"; }
join_plain() { run=$((run + 1)); "$tool" --app "bench-join-$run" sync join --folder "$work/remote-plain" <"$work/code"; }
echo "BENCH snapshot-bytes tasks=$tasks edits=$edits bytes=$(du -sb "$work/remote/snapshots" | cut -f1) bundles-bytes=$(du -sb "$work/remote/devices" | cut -f1)"
pair "join-snapshot-$tasks-edits-$edits" join_snapshot join_plain
[ -z "${SYNC_SNAPSHOT_ONLY:-}" ] || exit 0

# The sync bookkeeping (issue 35 part 1), each pair on fresh databases, A then B:
#   synced-size    the database files (tasks.db and its -wal) after `tasks import` of N tasks and `sync init` (every row
#                  sent) vs after the same import alone; bytes, not time (the ratio is of sizes)
#   import-synced  `tasks import` of N tasks into an empty list on which sync is set up vs into one that does not sync
#   sync-init      `sync init` of a list of N tasks (capture, seal, send) vs `tasks import` of the N tasks
db_bytes() { cat "$XDG_DATA_HOME/$1"/tasks.db "$XDG_DATA_HOME/$1"/tasks.db-wal 2>/dev/null | wc -c || true; }
ratio_line() {  # ratio_line NAME UNIT FILE-A FILE-B
    paste "$3" "$4" | awk -v name="$1" -v unit="$2" '
        { a[NR] = $1; b[NR] = $2; r[NR] = $1 / $2 }
        function median(x, n,   i, j, t, s) { for (i = 1; i <= n; i++) s[i] = x[i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
            return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
        END { if (unit == "ms") printf "BENCH %s project=%.1fms baseline=%.1fms ratio=%.2f\n", name, median(a, NR) / 1000, median(b, NR) / 1000, median(r, NR)
              else printf "BENCH %s project=%dbytes baseline=%dbytes ratio=%.2f\n", name, median(a, NR), median(b, NR), median(r, NR) }'
}
: >"$work/size.a"; : >"$work/size.b"; : >"$work/import.a"; : >"$work/import.b"; : >"$work/init.a"; : >"$work/init.b"
for i in $(seq 1 "$pairs"); do
    # import-synced: A into a synced empty list, B into a plain one.
    "$tool" --app "bench-is-$i" sync init --folder "$work/remote-is-$i" >/dev/null 2>&1
    t=$(time_ms "$tool" --app "bench-is-$i" tasks import "$work/tasks.jsonl"); echo "$t" >>"$work/import.a"
    t=$(time_ms "$tool" --app "bench-ip-$i" tasks import "$work/tasks.jsonl"); echo "$t" >>"$work/import.b"
    # sync-init: A `sync init` of the plain list just imported, B a fresh import.
    t=$(time_ms "$tool" --app "bench-ip-$i" sync init --folder "$work/remote-si-$i"); echo "$t" >>"$work/init.a"
    t=$(time_ms "$tool" --app "bench-ib-$i" tasks import "$work/tasks.jsonl"); echo "$t" >>"$work/init.b"
    # synced-size: the list imported then synced (bench-ip) against the same import alone (bench-ib).
    db_bytes "bench-ip-$i" >>"$work/size.a"; db_bytes "bench-ib-$i" >>"$work/size.b"
    rm -rf "$XDG_DATA_HOME/bench-is-$i" "$XDG_DATA_HOME/bench-ip-$i" "$XDG_DATA_HOME/bench-ib-$i" "$work"/remote-is-$i "$work"/remote-si-$i
done
ratio_line "synced-size-$tasks" bytes "$work/size.a" "$work/size.b"
ratio_line "import-synced-$tasks" ms "$work/import.a" "$work/import.b"
ratio_line "sync-init-$tasks" ms "$work/init.a" "$work/init.b"
