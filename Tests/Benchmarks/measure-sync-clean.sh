#!/usr/bin/env bash
# measure-sync-clean.sh --tool PATH [--tasks N] [--edits K]
#
# Bytes on a folder remote before and after `sync clean` (Docs/sync.md, "Cleaning the remote"): a device imports N
# tasks and syncs them to a second device, then changes every task K times (re-imported with new titles, synced,
# applied by the peer each time); the origin writes a snapshot, the peer syncs, both clean. A third device then joins
# from what is left and must hold the origin's tasks. Prints
#   BENCH clean-bytes tasks=N edits=K before=<bytes> after=<bytes> files-before=<n> files-after=<n>
# Whole processes of the built tool in a throw-away keyring (Tests/Harness/with-keyring). Not timed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${SECURESTORE_HARNESS_ROOT:-}" ]; then exec "$root/Tests/Harness/with-keyring" "$0" "$@"; fi

tool=""; tasks=10000; edits=5
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool=$2; shift 2 ;;
        --tasks) tasks=$2; shift 2 ;;
        --edits) edits=$2; shift 2 ;;
        *) echo "usage: measure-sync-clean.sh --tool PATH [--tasks N] [--edits K]" >&2; exit 64 ;;
    esac
done
[ -x "$tool" ] || { echo "measure-sync-clean: no tool at '$tool'" >&2; exit 69; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-sync-clean.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME="$work/data" SECURESTORE_PROMPT=never
for i in $(seq 1 "$tasks"); do printf '{"id":"00000000-0000-4000-8000-%012d","title":"task number %d","done":false,"createdAt":"2026-01-01T00:00:00.000000Z"}\n' "$i" "$i"; done >"$work/tasks.jsonl"
"$tool" --app clean-origin tasks import "$work/tasks.jsonl" >/dev/null 2>&1
"$tool" --app clean-origin sync init --folder "$work/remote" 2>/dev/null >"$work/code"
"$tool" --app clean-peer sync join --folder "$work/remote" <"$work/code" >/dev/null 2>&1
for e in $(seq 1 "$edits"); do
    sed "s/task number/edit $e of task/" "$work/tasks.jsonl" >"$work/edit.jsonl"
    "$tool" --app clean-origin tasks import --on-duplicate replace "$work/edit.jsonl" >/dev/null 2>&1
    "$tool" --app clean-origin sync now >/dev/null 2>&1
    "$tool" --app clean-peer sync now >/dev/null 2>&1
done
"$tool" --app clean-origin sync now >/dev/null 2>&1
before=$(du -sb "$work/remote" | cut -f1); files_before=$(find "$work/remote" -type f | wc -l)
"$tool" --app clean-origin sync snapshot >/dev/null 2>&1
with_snapshot=$(du -sb "$work/remote" | cut -f1)
"$tool" --app clean-peer sync now >/dev/null 2>&1
"$tool" --app clean-origin --json sync clean >"$work/origin-clean.json" 2>/dev/null
"$tool" --app clean-peer --json sync clean >"$work/peer-clean.json" 2>/dev/null
after=$(du -sb "$work/remote" | cut -f1); files_after=$(find "$work/remote" -type f | wc -l)
"$tool" --app clean-joiner sync join --folder "$work/remote" <"$work/code" >/dev/null 2>&1
origin=$("$tool" --app clean-origin tasks export | sha256sum); joiner=$("$tool" --app clean-joiner tasks export | sha256sum)
[ "$origin" = "$joiner" ] || { echo "measure-sync-clean: the device that joined after the cleanup differs" >&2; exit 1; }
echo "# sync clean: $(date -u +%Y-%m-%dT%H:%MZ), $tasks tasks, $edits edits of each"
echo "BENCH clean-bytes tasks=$tasks edits=$edits before=$before with-snapshot=$with_snapshot after=$after files-before=$files_before files-after=$files_after"
echo "origin: $(cat "$work/origin-clean.json")"
echo "peer:   $(cat "$work/peer-clean.json")"
