#!/bin/bash
# measure-padding-cost.sh TOOL [TOOL…]: the bytes each built securestore puts on a folder remote (issue 35 part 2, padding):
# the one bundle of `sync init` of 1 000 imported tasks (15-character titles), the sizes of 20 single-change bundles
# (titles of 1…200 characters), and what an attachment of 1 200 000 bytes with its task adds. Run it with the tool
# before padding and after to compare (Docs/sync.md, "Padding"). Throw-away key file and folders, removed after.
set -e
run() {
S=$1; W=$(mktemp -d); export HOME=$W XDG_DATA_HOME=$W/d XDG_CONFIG_HOME=$W/c SECURESTORE_KEYSTORE=file SECURESTORE_CACHE=off
echo "padding cost passphrase" > $W/pass; exec 5<$W/pass; export SECURESTORE_PASSPHRASE_FD=5
unset DBUS_SESSION_BUS_ADDRESS
for i in $(seq 1 1000); do printf 'task %010d\n' $i; done > $W/titles
$S tasks import --format lines $W/titles >/dev/null 2>&1
$S sync init --folder $W/remote >/dev/null 2>$W/err || { cat $W/err; exit 1; }
first=$(find $W/remote -path '*devices*' -type f -printf '%s\n' | sort -n | tail -1)
before=$(find $W/remote -path '*devices*' -type f | wc -l)
total=0
for n in 1 5 10 20 30 40 50 60 70 80 90 100 120 140 160 180 200 15 15 15; do
  $S tasks add "$(head -c $n /dev/zero | tr '\0' 'x')" >/dev/null; $S sync now >/dev/null 2>&1
done
singles=$(find $W/remote -path '*devices*' -type f -newer $W/titles -printf '%T@ %s\n' | sort -n | tail -20 | awk '{print $2}' | sort -n | uniq -c | tr '\n' ';')
sum=$(find $W/remote -path '*devices*' -type f -printf '%s\n' | sort -n | awk '{s+=$1} END {print s}')
head -c 1200000 /dev/urandom > $W/scan.bin
id=$($S --json tasks add "with a scan" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
b=$(du -sb $W/remote | cut -f1)
$S tasks attach $id $W/scan.bin >/dev/null; $S sync now >/dev/null 2>&1
a=$(du -sb $W/remote | cut -f1)
echo "first-bundle(1000 tasks)=$first singles(count size)=$singles attachment-delta=$((a-b))"
rm -rf $W
}
for tool in "$@"; do echo "$tool:"; run "$tool"; done
