#!/usr/bin/env bash
# run-sync-attachment-bench.sh --tool PATH [--mib N] [--pairs N]
#
# Attachments in sync (Docs/sync.md, "Attachments"), whole processes of the built tool, in a throw-away keyring
# (Tests/Harness/with-keyring), one folder remote, an attachment of N MiB (random bytes, 10 by default):
#   send     `tasks attach` + `sync now` on the device that adds it (chunks sealed and written, the bundle sent)
#            vs `tasks attach` alone (in a database that does not sync)
#   join     a new device's `sync join` (eager: fetches the bytes) vs the same join with `--attachments lazy`
#   lazy-read  on a new lazy device (joined untimed), `tasks attachment get --output` of the first attachment: its
#            chunks read from the folder, authenticated, checked against the digest, stored, then written out
#            vs `cp` of the file, and vs the same `tasks attachment get` on the device that holds the bytes
# Interleaved pairs (A B A B …); prints each side's median in ms and the median of the per-pair ratios, as
#   BENCH <workload> project=<ms>ms baseline=<ms>ms ratio=<median of project/baseline>
# and the bytes the remote holds per MiB attached (chunks and manifest; the bundle with the description apart).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then exec "$root/Tests/Harness/with-keyring" "$0" "$@"; fi

tool=""; mib=10; pairs=3
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool=$2; shift 2 ;;
        --mib) mib=$2; shift 2 ;;
        --pairs) pairs=$2; shift 2 ;;
        *) echo "usage: run-sync-attachment-bench.sh --tool PATH [--mib N] [--pairs N]" >&2; exit 64 ;;
    esac
done
[ -x "$tool" ] || { echo "run-sync-attachment-bench: no tool at '$tool'" >&2; exit 69; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-sync-attachment-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME="$work/data" SECURESTORE_PROMPT=never
head -c $((mib << 20)) /dev/urandom >"$work/file.bin"
task=$("$tool" --json --app bench-origin tasks add "with an attachment" | sed 's/.*"id":"\([^"]*\)".*/\1/')
code=$("$tool" --app bench-origin sync init --folder "$work/remote" 2>/dev/null)
printf '%s\n' "$code" >"$work/code"
"$tool" --app bench-origin tasks attach "$task" "$work/file.bin" >/dev/null 2>&1
"$tool" --app bench-origin sync now >/dev/null 2>&1
filebytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
bytes=$(filebytes "$work/remote/attachments")
files=$(find "$work/remote/attachments" -type f | wc -l)
bundles=$(filebytes "$work/remote/devices")

now() { date +%s%N; }
run=0
# Each send attaches new random bytes (the same bytes again would send nothing: they are on the remote).
send() {
    run=$((run + 1))
    head -c $((mib << 20)) /dev/urandom >"$work/send-$run.bin"
    "$tool" --app bench-origin tasks attach "$task" "$work/send-$run.bin" && "$tool" --app bench-origin sync now
}
attach_only() {
    run=$((run + 1))
    head -c $((mib << 20)) /dev/urandom >"$work/attach-$run.bin"
    "$tool" --app bench-plain tasks attach "$plain" "$work/attach-$run.bin"
}
# The baseline attaches in a database that does not sync (an attach in the synced one would be sent by the next
# `send`, and counted there).
plain=$("$tool" --json --app bench-plain tasks add "with an attachment" | sed 's/.*"id":"\([^"]*\)".*/\1/')
# A new lazy device for each read: its join (untimed) fetched no bytes, so the timed read fetches them.
fetch() {
    run=$((run + 1))
    "$tool" --app "bench-fetch-$run" sync join --folder "$work/remote" --attachments lazy <"$work/code" >/dev/null 2>&1
    local t0 t1
    t0=$(now)
    "$tool" --app "bench-fetch-$run" tasks attachment get "$(cat "$work/attachment-id")" --output "$work/fetched-$run.bin"
    t1=$(now)
    echo $(( (t1 - t0) / 1000 )) >>"$work/fetch.times"
    cmp -s "$work/fetched-$run.bin" "$work/file.bin" || { echo "run-sync-attachment-bench: the fetched bytes differ" >&2; exit 1; }
}
copy() { cp "$work/file.bin" "$work/copy-$run.bin"; }
# A new device joining while the remote holds the one attachment: eager fetches its bytes, lazy does not.
join_eager() { run=$((run + 1)); "$tool" --app "bench-eager-$run" sync join --folder "$work/remote" <"$work/code"; }
join_lazy() { run=$((run + 1)); "$tool" --app "bench-lazy-$run" sync join --folder "$work/remote" --attachments lazy <"$work/code"; }

pair() {  # pair NAME A-FUNCTION B-FUNCTION
    local name=$1 a=$2 b=$3 i t0 t1
    : >"$work/$name.a"; : >"$work/$name.b"
    for i in $(seq 1 "$pairs"); do
        t0=$(now); $a >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )) >>"$work/$name.a"
        t0=$(now); $b >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )) >>"$work/$name.b"
    done
    report "$name" "$work/$name.a" "$work/$name.b"
}
report() {
    paste "$2" "$3" | awk -v name="$1" '
        { a[NR] = $1; b[NR] = $2; r[NR] = $1 / $2 }
        function median(x, n,   i, j, t, s) { for (i = 1; i <= n; i++) s[i] = x[i]
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
            return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
        END { printf "BENCH %s project=%.1fms baseline=%.1fms ratio=%.2f\n", name, median(a, NR) / 1000, median(b, NR) / 1000, median(r, NR) }'
}

"$tool" --json --app bench-origin tasks attachments "$task" | python3 -c "import json,sys; print(json.load(sys.stdin)[0][\"id\"])" >"$work/attachment-id"
echo "# sync attachment bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $mib MiB, $pairs pairs"
echo "BENCH remote-bytes-per-mib attachment=$((mib << 20)) remote=$bytes files=$files per-mib=$((bytes / mib)) overhead=$((bytes - (mib << 20))) bundles=$bundles"
pair "join-eager-vs-lazy-$mib-mib" join_eager join_lazy
pair "send-$mib-mib" send attach_only
: >"$work/fetch.times"; : >"$work/copy.times"; : >"$work/get.times"
for i in $(seq 1 "$pairs"); do
    fetch >/dev/null
    t0=$(now); copy; t1=$(now); echo $(( (t1 - t0) / 1000 )) >>"$work/copy.times"
    # The same read where the bytes are already held (the device that added them).
    t0=$(now); "$tool" --app bench-origin tasks attachment get "$(cat "$work/attachment-id")" --output "$work/local-$run.bin"; t1=$(now)
    echo $(( (t1 - t0) / 1000 )) >>"$work/get.times"
done
report "lazy-read-$mib-mib-vs-cp" "$work/fetch.times" "$work/copy.times"
report "lazy-read-$mib-mib-vs-local-get" "$work/fetch.times" "$work/get.times"
