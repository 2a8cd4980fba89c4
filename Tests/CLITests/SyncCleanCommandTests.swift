import Foundation
import TestSupport
import Testing

private func object(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

/// `securestore sync clean` end to end, with the built tool through a folder and a real bare git repository: the
/// remote shrinks, and every device — new, offline, restored from an old backup — still converges.
@Suite(.serialized) struct SyncCleanCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// The files the remote holds now, with their sizes: a folder's files, or the tree of a bare repository's `main`
    /// (its history keeps what a commit deleted, sealed).
    private func remoteFiles(_ remote: String, _ kind: String) throws -> [String: Int] {
        var files: [String: Int] = [:]
        if kind == "git" {
            for line in try git(["-C", remote, "ls-tree", "-r", "-l", "main"]).stdout.split(separator: "\n") {
                let fields = line.split(separator: "\t", maxSplits: 1)
                guard fields.count == 2, let size = Int(fields[0].split(separator: " ").last ?? "") else { continue }
                files[String(fields[1])] = size
            }
        } else {
            for file in filesUnder(remote) { files[String(file.path.dropFirst(remote.count + 1))] = file.data.count }
        }
        return files
    }

    /// A device's bundle numbers on a folder remote (or in a device's git clone).
    private func bundleNumbers(_ root: String, _ device: String) throws -> [Int] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root + "/devices/" + device)) ?? []
        return names.compactMap { $0.count == 75 ? Int($0.prefix(10)) : nil }.sorted()
    }

    private func makeRemote(_ kind: String, _ name: String) throws -> String {
        let remote = work.path + "/" + name + "-" + kind
        if kind == "git" { #expect(try git(["init", "--quiet", "--bare", remote]).status == 0) }
        return remote
    }

    /// Two devices edit in turns, one writes a snapshot, both clean: the remote holds fewer files and bytes, each
    /// device kept its newest bundle, both go on syncing, and a device that joins afterwards starts from the snapshot
    /// and holds the same tasks. In git, nothing readable is in the repository or its history.
    @Test(arguments: ["folder", "git"]) func theRemoteShrinksAndEveryDeviceConverges(_ kind: String) throws {
        let remote = try makeRemote(kind, "shrinks")
        let a = SyncCLIDevice("a-" + kind, under: work.path), b = SyncCLIDevice("b-" + kind, under: work.path)
        let c = SyncCLIDevice("c-" + kind, under: work.path)
        var ids: [String] = []
        for title in ["Water the plants", "Pay the rent", "Book the dentist"] {
            ids.append(try #require(object(try a.ok(["--json", "tasks", "add", title]).stdout)["id"] as? String))
        }
        let code = try #require(object(try a.ok(["--json", "sync", "init", "--" + kind, remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--" + kind, remote], input: code + "\n")
        for round in 0..<5 {
            try a.ok(["tasks", "rename", ids[round % 3], "Renamed \(round)"])
            try a.ok(["sync", "now"])
            try b.ok(["tasks", "add", "Call the plumber \(round)"])
            try b.ok(["sync", "now"])
        }
        try a.ok(["sync", "snapshot"])
        try b.ok(["sync", "now"])
        let before = try remoteFiles(remote, kind)

        let cleanedA = object(try a.ok(["--json", "sync", "clean"]).stdout)
        let cleanedB = object(try b.ok(["--json", "sync", "clean"]).stdout)
        #expect(cleanedA["removedBundles"] as? Int ?? 0 >= 4, "\(cleanedA)")
        #expect(cleanedB["removedBundles"] as? Int ?? 0 >= 4, "\(cleanedB)")
        #expect(cleanedA["keptBundles"] as? Int == 1, "only A's newest bundle stays: \(cleanedA)")
        #expect((cleanedA["snapshot"] as? String)?.hasPrefix("snapshots/") == true)
        #expect(cleanedA["waitingFor"] as? [String] == [])
        let after = try remoteFiles(remote, kind)
        #expect(after.count < before.count, "\(before.count) files -> \(after.count)")
        #expect(after.values.reduce(0, +) < before.values.reduce(0, +))
        for device in [try a.deviceID(), try b.deviceID()] {
            let bundles = after.keys.filter { $0.hasPrefix("devices/\(device)/") }
            #expect(bundles.count == 1, "the newest bundle of \(device.prefix(8)) stays: \(bundles)")
        }

        // Both go on; a device that joins now starts from the snapshot; all three hold the same tasks.
        try a.ok(["tasks", "done", ids[0]])
        try b.ok(["tasks", "rename", ids[1], "Pay the rent today"])
        for device in [a, b, a] { try device.ok(["sync", "now"]) }
        let joined = try c.ok(["--json", "sync", "join", "--" + kind, remote], input: code + "\n")
        #expect(object(joined.stdout)["snapshot"] is String, "\(joined.stdout) \(joined.stderr)")
        let expected = try a.tasks()
        #expect(expected.count == 8)
        #expect(expected.contains { $0["id"] == ids[0] && $0["done"] == "1" })
        #expect(expected.contains { $0["title"] == "Pay the rent today" })
        #expect(try b.tasks() == expected)
        #expect(try c.tasks() == expected)

        if kind == "git" {
            let inspect = work.path + "/inspect-" + kind
            #expect(try git(["clone", "--quiet", "--branch", "main", remote, inspect]).status == 0)
            var everything = Data()
            for file in filesUnder(remote) + filesUnder(inspect) { everything += file.data }
            everything += Data(try git(["-C", inspect, "log", "-p", "--all"]).stdout.utf8)
            everything += Data(try run(["bash", "-c", "git -C \"$0\" cat-file --batch-all-objects --batch", remote]).stdout.utf8)
            for needle in ["Water the", "Pay the rent", "dentist", "plumber", "Renamed", code] + ids {
                #expect(everything.range(of: Data(needle.utf8)) == nil, "'\(needle.prefix(12))' is readable in the remote")
            }
            let log = try git(["-C", remote, "log", "--merges", "--oneline", "main"]).stdout
            #expect(log.isEmpty, "no merge commits: \(log)")
        }
    }

    /// B does not sync while A edits, writes a snapshot and cleans: A removes only the bundles B has applied (by
    /// B's published vector), and a second cleanup removes nothing at all (every file of the remote the same bytes);
    /// B's unsent edit made offline is kept. When B comes back it applies A's bundles, its edit reaches A, and A's
    /// next cleanup removes the rest.
    @Test func aCleanupWaitsForAnOfflineDevice() throws {
        let (a, b, remote, id, _) = try syncedPair(under: work.path)
        try a.ok(["sync", "now"])
        try b.ok(["tasks", "add", "Offline edit"])  // B is offline from here
        let deviceA = try a.deviceID(), deviceB = try b.deviceID()
        for round in 0..<4 {
            try a.ok(["tasks", "add", "A \(round)"])
            try a.ok(["sync", "now"])
        }
        try a.ok(["sync", "snapshot"])
        let numbersBefore = try bundleNumbers(remote, deviceA)
        let first = object(try a.ok(["--json", "sync", "clean"]).stdout)
        #expect(first["waitingFor"] as? [String] == [deviceB], "\(first)")
        let numbersAfter = try bundleNumbers(remote, deviceA)
        #expect(numbersAfter == numbersBefore.filter { $0 > 1 }, "only the bundle B applied went: \(numbersBefore) -> \(numbersAfter)")

        let remoteBefore = try remoteDigest(remote)
        let second = try a.ok(["--json", "sync", "clean"])
        #expect(object(second.stdout)["removedBundles"] as? Int == 0, "\(second.stdout)")
        #expect(object(second.stdout)["waitingFor"] as? [String] == [deviceB])
        #expect(try remoteDigest(remote) == remoteBefore, "nothing removed, nothing written")
        let text = try a.ok(["sync", "clean"])
        #expect(text.stderr.contains("waiting for \(deviceB.prefix(8)) to sync"), "\(text.stderr)")

        // B comes back: no gap (what it needs is there), its offline edit goes out.
        let back = object(try b.ok(["--json", "sync", "now"]).stdout)
        #expect(back["snapshot"] is NSNull, "B needed no snapshot: \(back)")
        #expect(back["appliedBundles"] as? Int == 4)
        try a.ok(["sync", "now"])
        let expected = try a.tasks()
        #expect(expected.count == 6)
        #expect(expected.contains { $0["title"] == "Offline edit" })
        #expect(expected.contains { $0["id"] == id })
        #expect(try b.tasks() == expected)
        let third = object(try a.ok(["--json", "sync", "clean"]).stdout)
        #expect(third["removedBundles"] as? Int ?? 0 >= 1, "\(third)")
        #expect(try bundleNumbers(remote, deviceA).count == 1)
    }

    /// The scenario of a device restored from an old backup: A backs up, then sends several bundles, B deletes a task
    /// and sends several, the tombstone is pruned everywhere, A writes a snapshot and both clean — the bundles A's
    /// backup lacks, its own included, are gone. Returns the devices, the remote and the tasks' ids.
    private func restoredAfterCleanup(_ kind: String, _ name: String) throws -> (a: SyncCLIDevice, b: SyncCLIDevice, remote: String, ids: [String]) {
        let remote = try makeRemote(kind, name)
        let a = SyncCLIDevice(name + "-a-" + kind, under: work.path), b = SyncCLIDevice(name + "-b-" + kind, under: work.path)
        var ids: [String] = []
        for title in ["Water the plants", "Pay the rent", "Doomed task"] {
            ids.append(try #require(object(try a.ok(["--json", "tasks", "add", title]).stdout)["id"] as? String))
        }
        let code = try #require(object(try a.ok(["--json", "sync", "init", "--" + kind, remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--" + kind, remote], input: code + "\n")
        try a.ok(["sync", "now"])
        let backup = work.path + "/" + name + "-backup-" + kind + ".db"
        try a.ok(["db", "backup", backup])
        try a.ok(["tasks", "add", "Sent after the backup"])
        try a.ok(["sync", "now"])
        try a.ok(["tasks", "rename", ids[0], "Water the orchids"])
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        try b.ok(["tasks", "delete", ids[2]])
        try b.ok(["sync", "now"])
        try b.ok(["tasks", "done", ids[1]])
        try b.ok(["sync", "now"])
        try a.ok(["tasks", "add", "Also after the backup"])
        var pruned = 0
        for _ in 0..<3 {
            for device in [a, b] { pruned += object(try device.ok(["--json", "sync", "now"]).stdout)["prunedTombstones"] as? Int ?? 0 }
        }
        #expect(pruned == 2, "the deleted task's tombstone is pruned on both devices before the snapshot")
        try a.ok(["sync", "snapshot"])
        try b.ok(["sync", "now"])
        #expect(object(try a.ok(["--json", "sync", "clean"]).stdout)["removedBundles"] as? Int ?? 0 >= 2)
        #expect(object(try b.ok(["--json", "sync", "clean"]).stdout)["removedBundles"] as? Int ?? 0 >= 2)
        try a.ok(["db", "restore", backup])
        #expect(try a.tasks().count == 3, "back to the backup: the doomed task is there again")
        return (a, b, remote, ids)
    }

    /// A device restored from a backup older than the snapshot (and than the bundles the cleanup removed, its own
    /// included) starts from the snapshot: it gets back what it had sent, the task deleted (and pruned) meanwhile is
    /// deleted on it too, its edit made after the restore is kept and delivered, and it goes on numbering its chain
    /// after the snapshot's position: the other device refuses nothing (no fork) and both hold the same tasks.
    @Test(arguments: ["folder", "git"]) func aDeviceRestoredFromABackupOlderThanTheSnapshotConverges(_ kind: String) throws {
        let (a, b, remote, ids) = try restoredAfterCleanup(kind, "restored")
        try a.ok(["tasks", "add", "Made after the restore"])
        let synced = try a.ok(["--json", "sync", "now"])
        #expect((object(synced.stdout)["snapshot"] as? String)?.hasPrefix("snapshots/") == true, "\(synced.stdout) \(synced.stderr)")
        #expect(synced.stderr.contains("started from the snapshot"), "\(synced.stderr)")
        #expect(object(synced.stdout)["sentBundles"] as? Int == 1)
        for device in [b, a] { try device.ok(["sync", "now"]) }
        let expected = try b.tasks()
        #expect(expected.count == 5, "\(expected.map { $0["title"] ?? "" })")
        #expect(!expected.contains { $0["id"] == ids[2] }, "the deleted task stays deleted")
        #expect(expected.contains { $0["title"] == "Made after the restore" })
        #expect(expected.contains { $0["title"] == "Sent after the backup" })
        #expect(expected.contains { $0["title"] == "Water the orchids" })
        #expect(expected.contains { $0["id"] == ids[1] && $0["done"] == "1" })
        #expect(try a.tasks() == expected)
        // No fork: A's bundle numbers are unique and consecutive, and another round refuses nothing.
        let root = kind == "git" ? a.data + "/" + a.app + "/tasks.sync" : remote
        let numbers = try bundleNumbers(root, try a.deviceID())
        #expect(numbers == Array((numbers.first ?? 0)...(numbers.last ?? 0)), "\(numbers)")
        try a.ok(["tasks", "add", "One more"])
        for device in [a, b] { try device.ok(["sync", "now"]) }
        #expect(try b.tasks().count == 6)
        for device in [a, b] { #expect(try device.ok(["--json", "sync", "conflicts"]).stdout == "[]\n") }
    }

    /// The restored device's first sync — the start from the snapshot — killed with SIGKILL at a different moment
    /// each time, then run to the end: the edit made after the restore is kept and delivered, the deleted task is
    /// gone, the chain has no hole, the other device refuses nothing, and no bookkeeping of the interrupted start is
    /// left in the database.
    @Test func aStartFromTheSnapshotKilledAtAnyMomentLosesNothing() throws {
        let (a, b, _, ids) = try restoredAfterCleanup("folder", "killed")
        try a.ok(["tasks", "add", "Made after the restore"])
        for round in 0..<6 {
            let child = try background(a, ["sync", "now"])
            usleep(UInt32(round * 25_000))
            child.kill()
            _ = child.wait()
        }
        try a.ok(["sync", "now"])
        for device in [b, a] { try device.ok(["sync", "now"]) }
        let expected = try b.tasks()
        #expect(expected.count == 5, "\(expected.map { $0["title"] ?? "" })")
        #expect(!expected.contains { $0["id"] == ids[2] })
        #expect(expected.contains { $0["title"] == "Made after the restore" })
        #expect(try a.tasks() == expected)
        let root = try a.deviceID()
        try a.ok(["tasks", "add", "One more"])
        for device in [a, b] { try device.ok(["sync", "now"]) }
        #expect(try b.tasks().count == 6, "A's chain goes on: \(root.prefix(8))")
    }

    /// The same restored device, with the only snapshot that fills its gap tampered with (one byte of a part): the
    /// snapshot is refused by name, the sync exits 65 naming the missing bundle and what to do, nothing is applied
    /// (the tasks, applied bundles, conflict log and unsent rows are the same), nothing is sent, and the edit made after the restore is kept. Once the
    /// other device writes a new snapshot, the next sync starts from it and converges.
    @Test func aTamperedSnapshotInTheGapIsRefusedAndNothingIsApplied() throws {
        let (a, b, remote, _) = try restoredAfterCleanup("folder", "tampered")
        let snapshots = remote + "/snapshots/" + (try a.deviceID())
        let number = try #require(try FileManager.default.contentsOfDirectory(atPath: snapshots).sorted().last)
        let part = snapshots + "/" + number + "/part-0000000001"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: part))
        bytes[bytes.count - 30] ^= 0x04
        try bytes.write(to: URL(fileURLWithPath: part))
        try a.ok(["tasks", "add", "Made after the restore"])
        try a.ok(["sync", "status"])  // the restored database takes its key again first (no change to the data)
        let digest = try a.appliedState()
        let remoteBefore = try remoteDigest(remote)

        let refused = try a.run(["--json", "sync", "now"])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("refused the snapshot 'snapshots/"), "\(refused.stderr)")
        #expect(refused.stderr.contains("is not on the remote"), "\(refused.stderr)")
        #expect(refused.stderr.contains("run 'securestore sync snapshot' on a device that is up to date"), "\(refused.stderr)")
        #expect(try a.appliedState() == digest, "nothing was applied")
        #expect(try remoteDigest(remote) == remoteBefore, "nothing was sent")
        #expect(try a.tasks().contains { $0["title"] == "Made after the restore" })

        try b.ok(["sync", "snapshot"])
        let synced = try a.ok(["--json", "sync", "now"])
        #expect(object(synced.stdout)["snapshot"] is String, "\(synced.stderr)")
        for device in [b, a] { try device.ok(["sync", "now"]) }
        #expect(try a.tasks() == (try b.tasks()))
        #expect(try b.tasks().contains { $0["title"] == "Made after the restore" })
    }

    /// After `remove-device` (a new key generation), each device that stays removes its own files of the older
    /// generation with its next cleanup — bundles, seen vectors, snapshot, attachment chunks — while the marker and
    /// the key check stay. The removed device's files stay while a device that stays (B) has not re-keyed and
    /// published a seen vector in the new generation (`removedDevicesFilesWaitFor` names it), and go with the next
    /// cleanup once it has (`removedFilesOfRemovedDevices`); its roster statement stays. The devices go on, a device
    /// that joins with the new code holds the same tasks, and the removed one still reads nothing new.
    @Test func aCleanupRemovesThisDevicesFilesOfOlderKeyGenerations() throws {
        let remote = work.path + "/generations"
        let a = SyncCLIDevice("gen-a", under: work.path), b = SyncCLIDevice("gen-b", under: work.path)
        let c = SyncCLIDevice("gen-c", under: work.path), d = SyncCLIDevice("gen-d", under: work.path)
        let code = try a.ok(["sync", "init", "--folder", remote]).stdout.trimmingCharacters(in: .newlines)
        for device in [b, c] { try device.ok(["sync", "join", "--folder", remote], input: code + "\n") }
        let scan = work.path + "/scan.pdf"
        try Data("attached before the rotation".utf8).write(to: URL(fileURLWithPath: scan))
        let task = try #require(object(try a.ok(["--json", "tasks", "add", "Before the rotation"]).stdout)["id"] as? String)
        try a.ok(["tasks", "attach", task, scan])
        for device in [a, b, c, a] { try device.ok(["sync", "now"]) }
        try a.ok(["sync", "snapshot"])
        let deviceA = try a.deviceID(), deviceB = try b.deviceID(), deviceC = try c.deviceID()
        let newCode = try #require(object(try a.ok(["--json", "sync", "remove-device", String(deviceC.prefix(8))]).stdout)["pairingCode"] as? String)
        func generationOneFiles(of device: String) -> [String] {
            filesUnder(remote).map { String($0.path.dropFirst(remote.count + 1)) }
                // Roster statements stay: a device still on the old key must read the signed removal there.
                .filter { !$0.hasPrefix("generation-") && !$0.hasPrefix("roster/") && $0.contains("/" + device) }
        }
        #expect(generationOneFiles(of: deviceA).contains { $0.hasPrefix("attachments/") })
        #expect(generationOneFiles(of: deviceA).contains { $0.hasPrefix("snapshots/") })
        let removedC = generationOneFiles(of: deviceC)
        #expect(!removedC.isEmpty)

        let cleaned = object(try a.ok(["--json", "sync", "clean"]).stdout)
        #expect(cleaned["removedOldGenerationFiles"] as? Int ?? 0 >= 4, "\(cleaned)")
        #expect(cleaned["removedFilesOfRemovedDevices"] as? Int == 0)
        #expect(cleaned["removedDevicesFilesWaitFor"] as? [String] == [deviceB], "\(cleaned)")
        #expect(generationOneFiles(of: deviceC) == removedC, "B has not re-keyed: the removed device's files stay")
        try b.ok(["sync", "rekey"], input: newCode + "\n")
        try b.ok(["sync", "now"])
        #expect(object(try b.ok(["--json", "sync", "clean"]).stdout)["removedOldGenerationFiles"] as? Int ?? 0 >= 2)
        #expect(generationOneFiles(of: deviceA) == [])
        #expect(generationOneFiles(of: deviceB) == [])
        #expect(generationOneFiles(of: deviceC) == [], "every device that stays is in the new generation: C's files went")
        #expect(try FileManager.default.contentsOfDirectory(atPath: remote + "/roster").contains(deviceC), "C's roster statement stays")
        let again = object(try a.ok(["--json", "sync", "clean"]).stdout)
        #expect(again["removedFilesOfRemovedDevices"] as? Int == 0 && again["removedDevicesFilesWaitFor"] as? [String] == [], "\(again)")
        for name in ["securestore-sync", "key-check", "generation-2/key-check", "generation-2/removed"] {
            #expect(FileManager.default.fileExists(atPath: remote + "/" + name), "\(name) stays")
        }

        try a.ok(["tasks", "add", "After the rotation"])
        for device in [a, b] { try device.ok(["sync", "now"]) }
        try d.ok(["sync", "join", "--folder", remote], input: newCode + "\n")
        let expected = try a.tasks()
        #expect(expected.count == 2)
        #expect(try b.tasks() == expected)
        #expect(try d.tasks() == expected)
        let fetched = work.path + "/fetched.pdf"
        let attachments = try d.ok(["--json", "tasks", "attachments", task]).stdout
        let attachment = try #require((try JSONSerialization.jsonObject(with: Data(attachments.utf8)) as? [[String: Any]])?.first?["id"] as? String)
        try d.ok(["tasks", "attachment", "get", attachment, "--output", fetched])
        #expect(try Data(contentsOf: URL(fileURLWithPath: fetched)) == Data("attached before the rotation".utf8))
        #expect(try c.run(["sync", "now"]).status == 77)
        #expect(try c.tasks().count == 1)
    }

    /// The tool started in the background for `device` (with its key file's passphrase under with-keyfile).
    private func background(_ device: SyncCLIDevice, _ arguments: [String]) throws -> ChildProcess {
        var command = [product("securestore"), "--app", device.app] + arguments
        if Harness.isKeyFile {
            command = ["bash", "-c", "exec \"$0\" --app \(device.app) --passphrase-fd 3 \"$@\" 3<'\(device.passphrase)'", product("securestore")]
                + arguments
        }
        return try ChildProcess(command, environment: device.environment)
    }

    /// Two devices cleaning through one bare repository at the same moment: the push that loses the race fetches,
    /// puts its deleting commit on top and pushes again (a deletion in a device's own folder never meets another
    /// device's files): both exit 0, no merge commit, each removed its own old bundles, and a third device agrees.
    @Test func twoDevicesCleaningThroughGitAtOnce() throws {
        let remote = try makeRemote("git", "race")
        let a = SyncCLIDevice("race-a", under: work.path), b = SyncCLIDevice("race-b", under: work.path)
        let c = SyncCLIDevice("race-c", under: work.path)
        let code = try a.ok(["sync", "init", "--git", remote]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        for round in 0..<4 {
            try a.ok(["tasks", "add", "from a \(round)"])
            try b.ok(["tasks", "add", "from b \(round)"])
            for device in [a, b] { try device.ok(["sync", "now"]) }
        }
        try a.ok(["sync", "snapshot"])
        for device in [b, a] { try device.ok(["sync", "now"]) }
        let racers = try [a, b].map { try background($0, ["sync", "clean"]) }
        for racer in racers { #expect(racer.wait() == .exited(0)) }
        let files = try remoteFiles(remote, "git")
        for device in [try a.deviceID(), try b.deviceID()] {
            #expect(files.keys.filter { $0.hasPrefix("devices/\(device)/") }.count == 1, "\(files.keys.sorted())")
        }
        let merges = try git(["-C", remote, "log", "--merges", "--oneline", "main"]).stdout
        #expect(merges.isEmpty, "merge commits: \(merges)")
        try c.ok(["sync", "join", "--git", remote], input: code + "\n")
        let expected = try a.tasks()
        #expect(expected.count == 8)
        #expect(try c.tasks() == expected)
        try b.ok(["sync", "now"])
        #expect(try b.tasks() == expected)
    }

    /// `sync clean` killed with SIGKILL at a different moment each time, with new bundles between: A's chain on the
    /// remote is always whole from its oldest file on (a cleanup removes oldest first), nothing is lost, and the
    /// devices — and one that joins afterwards — end with the same tasks.
    @Test func aCleanupKilledAtAnyMomentLosesNothing() throws {
        let (a, b, remote, _, code) = try syncedPair(under: work.path)
        let deviceA = try a.deviceID()
        for round in 0..<24 {
            try a.ok(["tasks", "add", "a \(round)"])
            try a.ok(["sync", "now"])
        }
        try b.ok(["sync", "now"])
        try a.ok(["sync", "snapshot"])
        try b.ok(["sync", "now"])
        for round in 0..<8 {
            let child = try background(a, ["sync", "clean"])
            usleep(UInt32(round * 15_000))
            child.kill()
            _ = child.wait()
            let numbers = try bundleNumbers(remote, deviceA)
            #expect(numbers == Array((numbers.first ?? 0)...(numbers.last ?? 0)), "a hole in A's chain: \(numbers)")
            try b.ok(["tasks", "add", "b \(round)"])
            try b.ok(["sync", "now"])
        }
        for device in [a, b, a] { try device.ok(["sync", "now"]) }
        #expect(object(try a.ok(["--json", "sync", "clean"]).stdout)["keptBundles"] as? Int ?? 0 >= 1)
        let c = SyncCLIDevice("c", under: work.path)
        try c.ok(["sync", "join", "--folder", remote], input: code + "\n")
        try b.ok(["sync", "now"])
        let expected = try a.tasks()
        #expect(expected.count == 1 + 24 + 8)
        #expect(try b.tasks() == expected)
        #expect(try c.tasks() == expected)
    }
}
