import Foundation
import TestSupport
import Testing

/// A synced database restored from a backup older than its last sync: the restore gives it a new database id and
/// takes it back in time, while the other devices already have what it sent after the backup.
@Suite(.serialized) struct SyncRestoreCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// The restored device finds its sync key again (stored under its old id), gets back what it had sent after the
    /// backup from its own bundles, converges with the other device, and goes on syncing without a fork and without
    /// a conflict (nothing was edited twice).
    @Test(arguments: ["folder", "git"]) func aDeviceRestoredFromAnOlderBackupGetsBackWhatItHadSentAndConverges(_ kind: String) throws {
        let remote = work.path + "/remote-" + kind
        if kind == "git" { #expect(try run(["git", "init", "--quiet", "--bare", remote]).status == 0) }
        let a = SyncCLIDevice("a-" + kind, under: work.path), b = SyncCLIDevice("b-" + kind, under: work.path)
        let first = try #require(jsonObject(try a.ok(["--json", "tasks", "add", "first"]).stdout)["id"] as? String)
        let code = try #require(jsonObject(try a.ok(["--json", "sync", "init", "--" + kind, remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--" + kind, remote], input: code + "\n")
        try a.ok(["sync", "now"])

        let backup = work.path + "/backup-" + kind + ".db"
        try a.ok(["db", "backup", backup])
        // After the backup: a new task, a rename and a done mark on A, all sent; B has them.
        try a.ok(["tasks", "add", "second"])
        try a.ok(["tasks", "rename", first, "first", "renamed"])
        try a.ok(["tasks", "done", first])
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        let everything = try b.tasks()
        #expect(everything.count == 2)
        #expect(everything.contains { $0["id"] == first && $0["title"] == "first renamed" && $0["done"] == "1" })
        #expect(try a.tasks() == everything)

        try a.ok(["db", "restore", backup])
        #expect(try a.tasks().map { $0["title"] } == ["first"], "the restore took A back to the backup")
        let keyAccountsBefore = try StoreClient.accounts(service: a.app + ".sync-key", dataHome: a.data)
        #expect(keyAccountsBefore.count == 1)

        let synced = try a.ok(["--json", "sync", "now"])
        #expect(jsonObject(synced.stdout)["reappliedOwnBundles"] as? Int ?? 0 >= 1, "\(synced.stdout)")
        #expect(jsonObject(synced.stdout)["sentBundles"] as? Int == 0, "nothing new to send: what it had was already sent")
        #expect(try a.tasks() == everything, "A got back what it had sent after the backup")
        // Its sync key is stored under the restored database's new id too (the old item stays for the set-aside copy).
        #expect(try StoreClient.accounts(service: a.app + ".sync-key", dataHome: a.data).count == 2)

        // Both go on: edits on either side arrive, no bundle is refused (no fork of A's chain), no conflict logged.
        try a.ok(["tasks", "add", "third"])
        try b.ok(["tasks", "undo", first])
        for device in [a, b, a] { try device.ok(["sync", "now"]) }
        let final = try a.tasks()
        #expect(final.count == 3)
        #expect(final.contains { $0["id"] == first && $0["done"] == "0" })
        #expect(try b.tasks() == final)
        for device in [a, b] { #expect(try device.ok(["--json", "sync", "conflicts"]).stdout == "[]\n") }
        let text = try a.ok(["sync", "now"])
        #expect(!text.stderr.contains("re-applied"), "once caught up, nothing is re-applied: \(text.stderr)")
    }

    /// A restored device that had *unsent* edits after the backup lost those edits with the restore (they were in
    /// no bundle): the others keep what they have, nothing else is lost, and the two converge.
    @Test func editsMadeAfterTheRestoreWinOverTheDevicesOldOnesAndTheOldOnesAreLogged() throws {
        let remote = work.path + "/remote-edits"
        let a = SyncCLIDevice("a-edits", under: work.path), b = SyncCLIDevice("b-edits", under: work.path)
        let first = try #require(jsonObject(try a.ok(["--json", "tasks", "add", "first"]).stdout)["id"] as? String)
        let code = try #require(jsonObject(try a.ok(["--json", "sync", "init", "--folder", remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--folder", remote], input: code + "\n")
        let backup = work.path + "/backup-edits.db"
        try a.ok(["db", "backup", backup])
        try a.ok(["tasks", "rename", first, "sent", "before", "the", "restore"])
        try a.ok(["sync", "now"])
        try a.ok(["db", "restore", backup])
        // After the restore and before the next sync, A renames the task again: this later edit wins everywhere,
        // and the value it overwrote without having seen it (A's own sent rename) is kept in the conflict log.
        Thread.sleep(forTimeInterval: 0.01)
        try a.ok(["tasks", "rename", first, "after", "the", "restore"])
        for device in [a, b, a] { try device.ok(["sync", "now"]) }
        #expect(try a.tasks().map { $0["title"] } == ["after the restore"])
        #expect(try b.tasks() == a.tasks())
        let conflicts = try JSONSerialization.jsonObject(with: Data(try a.ok(["--json", "sync", "conflicts"]).stdout.utf8)) as? [[String: Any]]
        #expect(conflicts?.map { $0["lostValue"] as? String } == ["sent before the restore"])
    }

    /// A database copied (with its keys) to another machine while the original goes on: the copy becomes a new
    /// device at its first sync, so both can write; the third device refuses nothing and all three converge. Without
    /// this, both machines numbered their next bundle alike as one device and every other device refused the fork
    /// (65, "two bundles numbered 3") from then on.
    @Test(.enabled(
        if: canRunAsAnotherMachine,
        "needs root, an /etc/machine-id and a mount namespace of its own (not inside a chroot, as the Debian 13 root is)"))
    func aCopyOnAnotherMachineBecomesANewDeviceAndNothingForks() throws {
        let remote = work.path + "/remote-copy"
        let a = SyncCLIDevice("a-copy", under: work.path), b = SyncCLIDevice("b-copy", under: work.path)
        let first = try #require(jsonObject(try a.ok(["--json", "tasks", "add", "first"]).stdout)["id"] as? String)
        let code = try #require(jsonObject(try a.ok(["--json", "sync", "init", "--folder", remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--folder", remote], input: code + "\n")
        try a.ok(["sync", "now"])
        let otherMachine = work.path + "/machine-id"
        try "0123456789abcdef0123456789abcdef\n".write(toFile: otherMachine, atomically: true, encoding: .utf8)
        let copy = try SyncCLIDevice(copyOf: a, at: work.path + "/a-copy-elsewhere", machineID: otherMachine)
        let original = try a.deviceID()

        try a.ok(["tasks", "rename", first, "renamed", "on", "the", "original"])
        try a.ok(["tasks", "add", "on", "the", "original"])
        try a.ok(["sync", "now"])
        // The original's new bundle has not reached the copy's machine yet (a replication engine's delay): kept
        // out of the folder while the copy syncs, then delivered.
        let folder = remote + "/devices/" + original
        let newest = try #require(try FileManager.default.contentsOfDirectory(atPath: folder).sorted().last)
        try FileManager.default.moveItem(atPath: folder + "/" + newest, toPath: work.path + "/in-transit")
        try copy.ok(["tasks", "add", "on", "the", "copy"])
        let copied = try copy.ok(["sync", "now"])
        try FileManager.default.moveItem(atPath: work.path + "/in-transit", toPath: folder + "/" + newest)
        #expect(copied.stderr.contains("copied from another machine, where it syncs as device \(original.prefix(8))"), "\(copied.stderr)")
        #expect(try copy.deviceID() != original)
        #expect(try a.deviceID() == original, "the original keeps its id")

        for device in [b, a, copy, b] { try device.ok(["sync", "now"]) }
        let titles = try b.tasks().map { $0["title"] ?? "" }.sorted()
        #expect(titles == ["on the copy", "on the original", "renamed on the original"])
        #expect(try a.tasks() == b.tasks())
        #expect(try copy.tasks() == b.tasks())
        let devices = try JSONSerialization.jsonObject(with: Data(try b.ok(["--json", "sync", "devices"]).stdout.utf8)) as? [[String: Any]]
        #expect(devices?.count == 3)
        #expect(!(try copy.ok(["sync", "now"]).stderr.contains("copied")), "the copy is told once")
    }

    /// A backup from before sync was set up, restored, then synced through another remote: the git clone the
    /// first setup left beside the database is of the first remote. The tool refuses to use it, names it and says
    /// what to do; neither remote, the database nor the key store changes. Before, it fetched the first remote and
    /// said the second "already holds a sync group".
    @Test func aCloneOfAnotherRemoteLeftBesideTheDatabaseIsRefused() throws {
        let first = work.path + "/first.git", second = work.path + "/second.git"
        for remote in [first, second] { #expect(try run(["git", "init", "--quiet", "--bare", remote]).status == 0) }
        let a = SyncCLIDevice("a-stale", under: work.path)
        try a.ok(["tasks", "add", "before", "sync"])
        let backup = work.path + "/before-sync.db"
        try a.ok(["db", "backup", backup])
        try a.ok(["sync", "init", "--git", first])
        try a.ok(["db", "restore", backup])
        let firstBefore = filesUnder(first).map(\.data), secondBefore = filesUnder(second).map(\.data)
        let keysBefore = try StoreClient.accounts(service: a.app + ".sync-key", dataHome: a.data)
        let databaseBefore = try a.databaseDigest()

        let refused = try a.run(["sync", "init", "--git", second])
        #expect(refused.status != 0)
        let clone = a.data + "/" + a.app + "/tasks.sync"
        let firstURL = URL(fileURLWithPath: first).standardizedFileURL.path  // as `sync init` stored it
        #expect(refused.stderr.contains("the git clone '\(clone)' beside the database is of another remote ('\(firstURL)')"), "\(refused.stderr)")
        #expect(refused.stderr.contains("mv '\(clone)'"))
        #expect(filesUnder(first).map(\.data) == firstBefore && filesUnder(second).map(\.data) == secondBefore, "neither remote changed")
        #expect(try StoreClient.accounts(service: a.app + ".sync-key", dataHome: a.data) == keysBefore)
        #expect(try a.databaseDigest() == databaseBefore)
        #expect(try a.run(["sync", "status"]).status != 0, "sync is still not set up")

        // Moved away as the message says: the second remote gets the new group.
        try FileManager.default.moveItem(atPath: clone, toPath: clone + ".old")
        try a.ok(["sync", "init", "--git", second])
        #expect(filesUnder(second).map(\.data) != secondBefore, "the new group was pushed to the second remote")
        #expect(filesUnder(first).map(\.data) == firstBefore, "the first remote is untouched")
    }

    /// A restored device whose next own bundle is missing from the remote while a later one is there (the remote
    /// was damaged), and whose copy of it is gone too: it sends nothing — a new bundle under that number would fork
    /// its chain — says so with the bundle named (65), keeps its unsent change, and leaves the remote as it was. With
    /// its copy back, it sends the bundle again (65, saying so), then its change, and the next sync exits 0.
    @Test func aGapInTheDevicesOwnChainStopsSendingAndLosesNothing() throws {
        let remote = work.path + "/remote-gap"
        let a = SyncCLIDevice("a-gap", under: work.path)
        try a.ok(["tasks", "add", "first"])
        try a.ok(["sync", "init", "--folder", remote])
        let backup = work.path + "/backup-gap.db"
        try a.ok(["db", "backup", backup])
        for title in ["second", "third"] {
            try a.ok(["tasks", "add", title])
            try a.ok(["sync", "now"])
        }
        try a.ok(["db", "restore", backup])
        let folder = remote + "/devices/" + (try a.deviceID())
        let bundles = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(bundles.count == 3)
        try FileManager.default.removeItem(atPath: folder + "/" + bundles[1])
        let copies = a.data + "/" + a.app + "/tasks.sync-sent/1-" + (try a.deviceID())
        let copy = try Data(contentsOf: URL(fileURLWithPath: copies + "/" + bundles[1]))
        try FileManager.default.removeItem(atPath: copies + "/" + bundles[1])
        try a.ok(["tasks", "add", "after", "the", "restore"])
        let remoteBefore = filesUnder(remote).map(\.data)

        let refused = try a.run(["sync", "now"])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("the remote is missing this device's own bundle 2"), "\(refused.stderr)")
        #expect(refused.stderr.contains("keeps no copy of them to send again"), "\(refused.stderr)")
        #expect(refused.stderr.contains("this device's changes were not sent and are kept"), "\(refused.stderr)")
        #expect(filesUnder(remote).map(\.data) == remoteBefore, "nothing was sent")
        let status = jsonObject(try a.ok(["--json", "sync", "status"]).stdout)
        #expect(status["unsentRows"] as? Int ?? 0 >= 1, "the change is kept, unsent")
        #expect(try a.tasks().map { $0["title"] }.contains("after the restore"))

        try copy.write(to: URL(fileURLWithPath: copies + "/" + bundles[1]))
        let resent = try a.run(["--json", "sync", "now"])
        #expect(resent.status == 65, "\(resent.stderr)")
        #expect(resent.stderr.contains("had vanished from the remote"), "\(resent.stderr)")
        #expect(jsonObject(resent.stdout)["resentBundles"] as? Int == 1, "\(resent.stdout)")
        #expect(FileManager.default.fileExists(atPath: folder + "/" + bundles[1]))
        try a.ok(["sync", "now"])
        #expect(jsonObject(try a.ok(["--json", "sync", "status"]).stdout)["unsentRows"] as? Int == 0, "the change was sent")
    }

    /// `db delete` of a synced database keeps its sync key with its retired key (a restored backup syncs again with
    /// it), and `--delete-keys` deletes the sync key too: no secret of a deleted database is left behind.
    @Test func deletingASyncedDatabaseDeletesItsSyncKeyOnlyWithItsKeys() throws {
        let remote = work.path + "/remote-deleted"
        let kept = SyncCLIDevice("kept-key", under: work.path), gone = SyncCLIDevice("gone-key", under: work.path)
        for device in [kept, gone] {
            try device.ok(["tasks", "add", "something"])
            try device.ok(["sync", "init", "--folder", remote + "-" + device.app])
            #expect(try StoreClient.accounts(service: device.app + ".sync-key", dataHome: device.data).count == 1)
        }
        let retired = try kept.ok(["--json", "db", "delete", "--yes"])
        #expect(jsonObject(retired.stdout)["deletedSyncKey"] as? Bool == false)
        #expect(try StoreClient.accounts(service: kept.app + ".sync-key", dataHome: kept.data).count == 1)
        let deleted = try gone.ok(["db", "delete", "--delete-keys", "--yes"])
        #expect(deleted.stdout.contains("deleted its sync key"), "\(deleted.stdout)")
        #expect(try StoreClient.accounts(service: gone.app + ".sync-key", dataHome: gone.data).isEmpty)
    }
}

/// Whether the tool can run here under another machine id bind-mounted over /etc/machine-id.
private let canRunAsAnotherMachine = Prerequisites.isRoot && FileManager.default.fileExists(atPath: "/etc/machine-id")
    && (try? run(["unshare", "--mount", "true"]).status) == 0

private func jsonObject(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}
