import Foundation
import TestSupport
import Testing

private func object(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

/// `securestore sync snapshot` and pruning end to end: the built tool and a real bare git repository.
@Suite(.serialized) struct SyncSnapshotCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// A writes a snapshot; a device that joins later starts from it (said on stderr and in `--json`) and holds the
    /// same tasks as the others; a snapshot tampered with in the repository (a commit pushed by someone with access)
    /// is refused by name and the next device joins from the bundles with the same tasks. Deleted tasks' tombstones
    /// are dropped once all four devices have synced. Nothing readable is in the repository.
    @Test func aDeviceJoinsFromASnapshotThroughGit() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let c = SyncCLIDevice("c", under: work.path), d = SyncCLIDevice("d", under: work.path)
        var ids: [String] = []
        for title in ["Water the plants", "Pay the rent", "Book the dentist", "Renew the passport"] {
            ids.append(try #require(object(try a.ok(["--json", "tasks", "add", title]).stdout)["id"] as? String))
        }
        let code = try #require(object(try a.ok(["--json", "sync", "init", "--git", remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        try b.ok(["tasks", "delete", ids[1]])
        try b.ok(["tasks", "rename", ids[0], "Water the orchids"])
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        let written = object(try a.ok(["--json", "sync", "snapshot"]).stdout)
        let path = try #require(written["snapshot"] as? String)
        #expect(path.hasPrefix("snapshots/"))
        #expect(written["rows"] as? Int == 4)  // three tasks and a deleted one (its tombstone still kept)
        try a.ok(["tasks", "add", "Call the plumber"])
        try a.ok(["sync", "now"])

        let joined = try c.ok(["--json", "sync", "join", "--git", remote], input: code + "\n")
        #expect(object(joined.stdout)["snapshot"] as? String == path)
        #expect(joined.stderr.contains("started from the snapshot '\(path)'"), "\(joined.stderr)")
        #expect(object(joined.stdout)["appliedBundles"] as? Int == 1, "only A's bundle after the snapshot: \(joined.stdout)")
        let expected = try a.tasks()
        #expect(expected.count == 4)
        #expect(try c.tasks() == expected)

        // Tampered with in the repository: one byte of the snapshot's first part, committed and pushed.
        let clone = work.path + "/attacker"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, clone]).status == 0)
        let part = clone + "/" + path + "/part-0000000001"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: part))
        bytes[bytes.count - 30] ^= 0x04
        try bytes.write(to: URL(fileURLWithPath: part))
        #expect(try git(["-C", clone, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-am", "x"]).status == 0)
        #expect(try git(["-C", clone, "push", "--quiet", "origin", "HEAD:main"]).status == 0)
        let refused = try d.ok(["--json", "sync", "join", "--git", remote], input: code + "\n")
        #expect(refused.stderr.contains("refused the snapshot '\(path)': its part 1"), "\(refused.stderr)")
        #expect(refused.stderr.contains("started from the bundles instead"))
        #expect(object(refused.stdout)["snapshot"] is NSNull)
        #expect((object(refused.stdout)["refusedSnapshots"] as? [String])?.count == 1)
        #expect(try d.tasks() == expected)

        // Pruning: the deleted task's tombstone goes once every device has seen the others' vectors.
        var pruned = 0
        for _ in 0..<3 {
            for device in [a, b, c, d] {
                pruned += object(try device.ok(["--json", "sync", "now"]).stdout)["prunedTombstones"] as? Int ?? 0
            }
        }
        #expect(pruned == 4, "one tombstone dropped on each of the four devices")
        for device in [a, b, c, d] { #expect(try device.tasks() == expected) }

        // Nothing readable in the repository, its objects or its history.
        let inspect = work.path + "/inspect"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, inspect]).status == 0)
        var everything = Data()
        for file in filesUnder(remote) + filesUnder(inspect) { everything += file.data }
        everything += Data(try git(["-C", inspect, "log", "-p", "--all"]).stdout.utf8)
        everything += Data(try run(["bash", "-c", "git -C \"$0\" cat-file --batch-all-objects --batch", remote]).stdout.utf8)
        for needle in ["Water the", "orchids", "Pay the rent", "dentist", "passport", "plumber", code] + ids {
            #expect(everything.range(of: Data(needle.utf8)) == nil, "'\(needle.prefix(12))' is readable in the remote")
        }
    }
}
