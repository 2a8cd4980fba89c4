#!/usr/bin/env bash
# run-soak.sh [KILLS] — the crash-safety soak behind `make soak`. Run it inside Tests/Harness/with-keyring,
# after `swift build`. Repeats, KILLS times (default 400): start a `securestore-stress soak` writer — task
# batches, done flags and checkpoints through the keyed database (4 in 12), key rotations in a loop (2 in 12),
# preference saves (2 in 12), restores of one backup in a loop (1 in 12), 0.1 databases made and upgraded on their
# first open in a loop (1 in 12), or attachments attached (1 byte–12 MB, one in five kept inline) and detached (2 in 12) — kill -9 it after a
# random 10–400 ms, then run the matching checker, which opens
# what the writer left with the stored key and compares it with the writer's log of acknowledged commits (or,
# for restores and upgrades, with what every version of the database must hold; for attachments: no partial
# attachment visible, every visible one reads back byte for byte with its digest, leftover chunks collected).
# Every 40 kills the database starts afresh, so checks stay fast. Every 10th round, another database's -wal is
# planted in place of the database's own and must be refused with nothing changed. Then several `securestore` processes add
# tasks and set preferences at once. Ends with exactly one line:
#     SOAK kills=<n> lost=<n> damaged=<n>
# kills: writers killed while running; lost: committed writes missing afterwards (and concurrent CLI writes
# missing); damaged: files that did not open or failed integrity_check, uncommitted rows present, batches
# present in part, or a concurrent CLI write that reported an error. Exit 0 only when lost = damaged = 0.
set -uo pipefail

kills_wanted=${1:-400}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${SECURESTORE_BIN:-$here/.build/debug}
stress=${SECURESTORE_STRESS:-$here/Tests/Stress/.build/debug/securestore-stress}
cli=$bin/securestore
[ -x "$stress" ] && [ -x "$cli" ] || { echo "run-soak: build first (swift build; swift build --package-path Tests/Stress): $stress" >&2; exit 69; }
[ -n "${SECURESTORE_HARNESS_ROOT:-}" ] || { echo "run-soak: run inside Tests/Harness/with-keyring" >&2; exit 64; }

work=$(mktemp -d "${TMPDIR:-/tmp}/securestore-soak.XXXXXX")
trap 'rm -rf "$work"' EXIT
kills=0 lost=0 damaged=0 round=0 start=$SECONDS
declare -A count=([tasks]=0 [rotate]=0 [prefs]=0 [restore]=0 [upgrade]=0 [attach]=0)

field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$2"; }
hashes() { (cd "$1" && sha256sum tasks.db tasks.db-* 2>/dev/null | sort); }

# A -wal of another database (another key, the same format), holding committed transactions, copied while
# its writer (the reference sqlcipher tool) is still open — as a sync tool or a careless cp leaves one.
# Every 10th task round it is planted beside the soak's database in place of the database's own log: the checker
# must be refused (foreignSideFile) with no byte of any file changed; then the database's own log goes back and
# the normal check must find every committed task.
foreign_wal=$work/foreign.wal foreign=0
mkdir -p "$work/foreign"
sqlcipher "$work/foreign/other.db" >/dev/null 2>&1 <<SQL
PRAGMA key = "x'$(printf '5a%.0s' $(seq 32))'";
PRAGMA cipher_compatibility = 3;
PRAGMA cipher_page_size = 4096;
PRAGMA journal_mode = WAL;
CREATE TABLE other (x);
INSERT INTO other VALUES (randomblob(3000));
INSERT INTO other SELECT randomblob(3000) FROM other;
INSERT INTO other SELECT randomblob(3000) FROM other;
.shell cp "$work/foreign/other.db-wal" "$foreign_wal"
SQL
[ -s "$foreign_wal" ] || echo "run-soak: no foreign -wal could be made; that case is skipped" >&2

while [ "$kills" -lt "$kills_wanted" ]; do
    generation=$((kills / 40))
    data=$work/data-$generation app=soak-$$-$generation log=$work/tasks-$generation.log
    prefs=$work/prefs-$generation plog=$work/prefs-$generation.log
    restored=$work/restore-$generation upgraded=$work/upgrade-$generation
    attached=$work/attach-$generation alog=$work/attach-$generation.log
    pick=$((RANDOM % 12))
    if [ "$pick" -lt 4 ]; then mode=tasks; elif [ "$pick" -lt 6 ]; then mode=rotate; elif [ "$pick" -lt 8 ]; then mode=prefs
    elif [ "$pick" -lt 9 ]; then mode=restore; elif [ "$pick" -lt 10 ]; then mode=upgrade; else mode=attach; fi
    # A restore needs a database and its backup (30 rows; every restore keeps 30 rows).
    if [ "$mode" = restore ] && [ ! -e "$restored.backup.db" ]; then
        "$stress" soak make-backup "$restored" "$app-r" "$restored.backup.db" 30 >/dev/null 2>"$work/writer.err" \
            || { echo "run-soak: make-backup: $(cat "$work/writer.err")" >&2; damaged=$((damaged + 1)); }
    fi
    # The first kill of a generation must leave something for rotation to work on.
    [ ! -e "$data/tasks.db" ] && [ "$mode" = rotate ] && mode=tasks
    case $mode in
        tasks) "$stress" soak tasks "$data" "$app" "$log" >/dev/null 2>"$work/writer.err" & ;;
        rotate) "$stress" soak rotate "$data" "$app" >/dev/null 2>"$work/writer.err" & ;;
        prefs) "$stress" soak prefs "$prefs" soak "$plog" >/dev/null 2>"$work/writer.err" & ;;
        restore) "$stress" soak restore "$restored" "$app-r" "$restored.backup.db" >/dev/null 2>"$work/writer.err" & ;;
        upgrade) "$stress" soak upgrade "$upgraded" "$app-u" >/dev/null 2>"$work/writer.err" & ;;
        attach) "$stress" soak attach "$attached" "$app-a" "$alog" >/dev/null 2>"$work/writer.err" & ;;
    esac
    pid=$!
    sleep "0.$(printf '%03d' $((10 + RANDOM % 390)))"
    if kill -KILL "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null
        kills=$((kills + 1)); count[$mode]=$((count[$mode] + 1))
    else
        wait "$pid"; status=$?
        echo "run-soak: the $mode writer stopped by itself (status $status): $(cat "$work/writer.err")" >&2
        damaged=$((damaged + 1))
    fi
    round=$((round + 1))
    if [ "$mode" = tasks ] && [ $((round % 10)) = 0 ] && [ -s "$foreign_wal" ]; then
        own=""
        [ -e "$data/tasks.db-wal" ] && { mv "$data/tasks.db-wal" "$work/own.wal"; own=1; }
        cp "$foreign_wal" "$data/tasks.db-wal"
        before=$(hashes "$data")
        out=$("$stress" soak check-tasks "$data" "$app" "$log" 2>&1)
        if [[ $out != *foreignSideFile* ]] || [ "$before" != "$(hashes "$data")" ]; then
            echo "run-soak: round $round: a foreign -wal was not refused cleanly: $out" >&2
            damaged=$((damaged + 1))
        fi
        foreign=$((foreign + 1))
        rm -f "$data/tasks.db-wal"
        [ -n "$own" ] && mv "$work/own.wal" "$data/tasks.db-wal"
    fi
    if [ "$mode" = prefs ]; then
        out=$("$stress" soak check-prefs "$prefs" soak "$plog" 2>&1)
        status=$?
        lost=$((lost + $(field lost "$out")))
        [ "$(field opened "$out")" = 1 ] || damaged=$((damaged + 1))
    elif [ "$mode" = attach ]; then
        out=$("$stress" soak check-attach "$attached" "$app-a" "$alog" 2>&1)
        status=$?
        lost=$((lost + $(field lost "$out")))
        if [ "$(field opened "$out")" = 1 ]; then
            damaged=$((damaged + $(field uncommitted "$out") + $(field damaged "$out") + $(field stale "$out") + $(field leftover "$out")))
        else
            damaged=$((damaged + 1))
        fi
    elif [ "$mode" = restore ] || [ "$mode" = upgrade ]; then
        if [ "$mode" = restore ]; then
            out=$("$stress" soak check-restore "$restored" "$app-r" "$restored.backup.db" 30 2>&1)
        else
            out=$("$stress" soak check-upgrade "$upgraded" "$app-u" 2>&1)
        fi
        status=$?
        lost=$((lost + $(field lost "$out")))
        [ "$(field opened "$out")" = 1 ] || damaged=$((damaged + 1))
    else
        out=$("$stress" soak check-tasks "$data" "$app" "$log" 2>&1)
        status=$?
        lost=$((lost + $(field lost "$out")))
        if [ "$(field opened "$out")" = 1 ]; then
            damaged=$((damaged + $(field uncommitted "$out") + $(field partial "$out") + $(field stale "$out")))
        else
            damaged=$((damaged + 1))
        fi
    fi
    [ "$status" = 0 ] || echo "run-soak: round $round ($mode): $out" >&2
    [ $((round % 50)) = 0 ] && echo "run-soak: $kills kills in $((SECONDS - start)) s (lost $lost, damaged $damaged)" >&2
done

# Several processes at once: 4 adding tasks and 2 setting preferences through the CLI, on one new database.
app=soak-$$-concurrent per=25
for writer in 0 1 2 3 4 5; do
    (
        for n in $(seq 1 $per); do
            if [ "$writer" -lt 4 ]; then
                "$cli" --app "$app" tasks add "writer $writer task $n" >/dev/null 2>>"$work/concurrent.err" || echo fail >>"$work/concurrent.fail"
            else
                "$cli" --app "$app" prefs set "w$writer-$n" "$n" >/dev/null 2>>"$work/concurrent.err" || echo fail >>"$work/concurrent.fail"
            fi
        done
    ) &
done
wait
failures=$(cat "$work/concurrent.fail" 2>/dev/null | wc -l)
[ -s "$work/concurrent.err" ] && { echo "run-soak: concurrent writers said:" >&2; head -5 "$work/concurrent.err" >&2; }
tasks=$("$cli" --app "$app" tasks count)
prefs_count=$("$cli" --app "$app" prefs list | grep -c '^w[45]-')
missing=$(( (4 * per - ${tasks:-0}) + (2 * per - ${prefs_count:-0}) ))
lost=$((lost + missing))
damaged=$((damaged + failures))
"$cli" --app "$app" db verify >/dev/null 2>&1 || damaged=$((damaged + 1))

echo "run-soak: $round rounds (tasks ${count[tasks]}, rotate ${count[rotate]}, prefs ${count[prefs]}, restore ${count[restore]}, upgrade ${count[upgrade]}, attach ${count[attach]} kills), $foreign foreign -wal refusals, concurrent: $tasks tasks, $prefs_count prefs, $failures failures; $((SECONDS - start)) s" >&2
echo "SOAK kills=$kills lost=$lost damaged=$damaged"
[ "$lost" = 0 ] && [ "$damaged" = 0 ]
