import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

extension SyncDevice_ {
    /// Every column of every task, by ID: the whole table as a person would compare it.
    func table() throws -> [String] {
        try database.read { db in
            try db.fetch("SELECT hex(id), title, done, created_at FROM tasks ORDER BY id") { row in
                "\(try row.string(at: 0))|\(try row.string(at: 1))|\(try row.int(at: 2))|\(try row.int64(at: 3))"
            }
        }
    }

    /// Tombstones this device still keeps.
    func tombstones() throws -> Int {
        try database.read { db in try db.scalar("SELECT count(*) FROM sync_rows WHERE tomb_hlc IS NOT NULL", as: Int.self) ?? 0 }
    }

    /// Clock entries (the row's, and its deleted values) kept for `id`.
    func clockRows(_ id: UUID) throws -> Int {
        try database.read { db in
            try db.scalar(
                "SELECT (SELECT count(*) FROM sync_rows WHERE key = ?1) + (SELECT count(*) FROM sync_values WHERE key = ?1)", [id],
                as: Int.self) ?? 0
        }
    }
}

/// Snapshots (issue 26): a new device starts from a sealed full copy and applies only the bundles after it.
@Suite(.serialized) struct SyncSnapshotTests {
    /// 4 500 tasks (three parts of 2 000 rows), renames, done marks and deletes on two devices; A writes a snapshot,
    /// more edits follow; a new device starts from the snapshot, applies only the later bundles, and holds exactly
    /// the table that a device replaying every bundle holds.
    @Test func aNewDeviceStartsFromTheSnapshotWithTheSameRowsAsReplaying() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path + "/remote")
        let a = try SyncDevice_(), b = try SyncDevice_()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let items = (0..<4_500).map { TaskItem(title: "task \($0)", createdAt: start.addingTimeInterval(Double($0))) }
        try a.tasks.insert(items)
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        for index in stride(from: 0, to: 300, by: 3) {
            _ = try a.tasks.rename(id: items[index].id, to: "renamed \(index)")
            _ = try b.tasks.setDone(true, id: items[index + 1].id)
            _ = try b.tasks.delete(id: items[index + 2].id)
        }
        _ = try b.tasks.create(title: "made on B")
        try a.sync(); try b.sync(); try a.sync()
        let info = try a.engine.writeSnapshot()
        // 4 401 live rows, and the 100 deleted ones while their tombstones are kept.
        #expect(info.rows == 4_501 || info.rows == 4_401, "\(info.rows) rows")
        #expect(info.files == 4)
        // After the snapshot: more bundles from both.
        _ = try a.tasks.rename(id: items[4_000].id, to: "after the snapshot, on A")
        _ = try b.tasks.delete(id: items[4_001].id)
        try a.sync(); try b.sync(); try a.sync()

        let fresh = try SyncDevice_()
        try fresh.join(remote, code)
        let report = try fresh.sync()
        #expect(report.snapshot == info.path)
        #expect(report.refusedSnapshots.isEmpty)
        #expect(report.appliedBundles >= 1 && report.appliedBundles <= 3, "\(report.appliedBundles) bundles after the snapshot")
        let replayed = try SyncDevice_()
        try replayed.join(remote, code)
        // A device that replays everything: the snapshot's folder hidden from it.
        let hidden = folder.path + "/hidden"
        try FileManager.default.moveItem(atPath: folder.path + "/remote/" + info.path, toPath: hidden)
        let replay = try replayed.sync()
        try FileManager.default.moveItem(atPath: hidden, toPath: folder.path + "/remote/" + info.path)
        #expect(replay.snapshot == nil)
        #expect(replay.appliedBundles > report.appliedBundles)
        let expected = try a.table()
        #expect(expected.count == 4_500 + 1 - 100 - 1)
        #expect(try b.table() == expected)
        #expect(try replayed.table() == expected)
        #expect(try fresh.table() == expected)
        // Word search finds on the new device what it finds on A (the snapshot's rows went through the deferred
        // full-text indexing), and SQLite's own check of the index passes.
        for word in ["renamed", "task", "snapshot"] {
            let found = try fresh.tasks.list(TaskList.Filter(titleMatches: word), limit: 10_000).map(\.id)
            #expect(Set(found) == Set(try a.tasks.list(TaskList.Filter(titleMatches: word), limit: 10_000).map(\.id)), "\(word)")
        }
        #expect(try fresh.tasks.list(TaskList.Filter(titleMatches: "renamed"), limit: 10_000).count == 100)
        try fresh.database.write { db in try db.execute("INSERT INTO tasks_search (tasks_search) VALUES ('integrity-check')") }
        // It goes on like any device: its edit reaches the others.
        _ = try fresh.tasks.rename(id: items[0].id, to: "from the new device")
        try fresh.sync(); try a.sync()
        #expect(try a.tasks.task(id: items[0].id)?.title == "from the new device")
    }

    /// A snapshot merges by clock: tasks the joining device already had are kept and sent.
    @Test func aSnapshotDoesNotOverwriteWhatTheJoiningDeviceHas() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        _ = try a.tasks.create(title: "from A")
        let code = try a.initialize(remote)
        try a.engine.writeSnapshot()
        let mine = try b.tasks.create(title: "already on B").id
        try b.join(remote, code)
        let report = try b.sync()
        #expect(report.snapshot != nil)
        #expect(try b.tasks.task(id: mine)?.title == "already on B")
        try a.sync()
        #expect(try a.table() == b.table())
        #expect(try a.table().count == 2)
    }

    /// A tampered, truncated, replayed or moved snapshot is refused by name, nothing of it is applied, and the
    /// device starts from the bundles with the same rows.
    @Test func aBadSnapshotIsRefusedAndTheBundlesAreUsed() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_()
        for index in 0..<20 { _ = try a.tasks.create(title: "task \(index)") }
        let code = try a.initialize(remote)
        let first = try a.engine.writeSnapshot()
        let firstManifest = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/" + first.path + "/manifest"))
        _ = try a.tasks.create(title: "one more")
        let info = try a.engine.writeSnapshot()
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/" + first.path))  // the older one is gone
        let expected = try a.table()
        let part = folder.path + "/" + info.path + "/part-0000000001"
        let manifest = folder.path + "/" + info.path + "/manifest"
        let original = try Data(contentsOf: URL(fileURLWithPath: part))
        let originalManifest = try Data(contentsOf: URL(fileURLWithPath: manifest))
        var flipped = original
        flipped[flipped.count - 20] ^= 0x01
        let damages: [(String, () throws -> Void, String)] = [
            ("tampered", { try flipped.write(to: URL(fileURLWithPath: part)) }, "part 1"),
            ("truncated", { try original.prefix(original.count - 7).write(to: URL(fileURLWithPath: part)) }, "part 1"),
            ("replayed", { try firstManifest.write(to: URL(fileURLWithPath: manifest)) }, "manifest"),
            ("manifest tampered", {
                // Its sealed contents (past the signed envelope: a changed signature is a snapshot not signed by its
                // device, skipped and listed — SyncSigningTests).
                var bytes = originalManifest
                bytes[bytes.count - 20] ^= 0x80
                try bytes.write(to: URL(fileURLWithPath: manifest))
            }, "manifest"),
        ]
        for (what, damage, named) in damages {
            try original.write(to: URL(fileURLWithPath: part))
            try originalManifest.write(to: URL(fileURLWithPath: manifest))
            try damage()
            let fresh = try SyncDevice_()
            try fresh.join(remote, code)
            let report = try fresh.sync()
            #expect(report.snapshot == nil, "\(what)")
            #expect(report.refusedSnapshots.count == 1, "\(what)")
            let message = report.refusedSnapshots.first ?? ""
            #expect(message.contains("refused the snapshot '\(info.path)'") && message.contains(named), "\(what): \(message)")
            #expect(message.contains("nothing of it was applied"))
            #expect(report.appliedBundles >= 1)
            #expect(try fresh.table() == expected, "\(what)")
        }
        // Moved to another device's folder: it does not open there.
        try original.write(to: URL(fileURLWithPath: part))
        try originalManifest.write(to: URL(fileURLWithPath: manifest))
        let b = try SyncDevice_()
        try b.join(remote, code)
        try b.sync()
        try FileManager.default.createDirectory(atPath: folder.path + "/snapshots/" + b.engine.device, withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            atPath: folder.path + "/" + info.path,
            toPath: folder.path + "/snapshots/" + b.engine.device + "/" + (info.path.split(separator: "/").last.map(String.init) ?? ""))
        let fresh = try SyncDevice_()
        try fresh.join(remote, code)
        let report = try fresh.sync()
        #expect(report.snapshot == nil)
        #expect(report.refusedSnapshots.first?.contains("snapshots/\(b.engine.device)/") == true)
        #expect(try fresh.table() == expected)
    }
}

/// Pruning (issue 26): tombstones are dropped only once every known device has seen them.
@Suite(.serialized) struct SyncPruningTests {
    /// Three devices, C offline: A's delete is not pruned anywhere. C comes back with an older, unsent edit of the
    /// deleted task: it stays deleted (the edit goes to C's conflict log), and once C has synced and every device
    /// has seen the others' vectors the tombstone and its cells are dropped on all three. A device that joins then
    /// and replays every bundle (C's old edit included) does not get the task back either.
    @Test func aTombstoneIsDroppedOnlyAfterEveryDeviceSawIt() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let doomed = try a.tasks.create(title: "doomed").id
        let kept = try a.tasks.create(title: "kept").id
        let code = try a.initialize(remote)
        for device in [b, c] { try device.join(remote, code) }
        for device in [b, c, a, b, c, a] { try device.sync() }
        #expect(try c.tasks.task(id: doomed) != nil)
        // C, offline, edits the task; A deletes it later.
        _ = try c.tasks.rename(id: doomed, to: "edited offline on C")
        Thread.sleep(forTimeInterval: 0.01)
        _ = try a.tasks.delete(id: doomed)
        for _ in 0..<3 { for device in [a, b] { try device.sync() } }
        #expect(try a.tombstones() == 1)
        #expect(try b.tombstones() == 1)
        #expect(try b.tasks.task(id: doomed) == nil)
        // C comes back.
        for _ in 0..<3 { for device in [c, a, b] { try device.sync() } }
        for device in [a, b, c] {
            #expect(try device.tasks.task(id: doomed) == nil)
            #expect(try device.tombstones() == 0)
            #expect(try device.clockRows(doomed) == 0)
            #expect(try device.tasks.task(id: kept)?.title == "kept")
        }
        #expect(try c.engine.conflicts().first?.lostValue == .text("edited offline on C"))
        let late = try SyncDevice_()
        try late.join(remote, code)
        try late.sync()
        #expect(try late.tasks.task(id: doomed) == nil)
        #expect(try late.table() == a.table())
    }

    /// A device whose seen vector is missing (an older version publishes none) or does not open (tampered with, or
    /// moved from another device's folder) holds pruning back; once its genuine vector is there, the tombstone goes.
    @Test func aMissingOrTamperedVectorHoldsPruningBack() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        let doomed = try a.tasks.create(title: "doomed").id
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        _ = try a.tasks.delete(id: doomed)
        let seenOfB = folder.path + "/seen/" + b.engine.device
        func syncBoth(_ damage: () throws -> Void) throws {
            for _ in 0..<3 {
                try a.sync()
                try b.sync()
                try damage()
            }
            try a.sync()
        }
        // Missing: B's vectors are removed as soon as B writes them.
        try syncBoth { try? FileManager.default.removeItem(atPath: seenOfB) }
        #expect(try a.tombstones() == 1)
        // Tampered with: one byte of each of B's vectors flipped; and A's own vector copied into B's folder.
        try syncBoth {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: seenOfB)) ?? [] {
                var bytes = try Data(contentsOf: URL(fileURLWithPath: seenOfB + "/" + name))
                bytes[bytes.count - 17] ^= 0x01
                try bytes.write(to: URL(fileURLWithPath: seenOfB + "/" + name))
            }
        }
        #expect(try a.tombstones() == 1)
        try FileManager.default.removeItem(atPath: seenOfB)
        try FileManager.default.copyItem(atPath: folder.path + "/seen/" + a.engine.device, toPath: seenOfB)
        try a.sync()
        #expect(try a.tombstones() == 1)
        #expect(try a.tasks.task(id: doomed) == nil)
        // Genuine again: pruned on both.
        try FileManager.default.removeItem(atPath: seenOfB)
        try syncBoth {}
        try b.sync()
        #expect(try a.tombstones() == 0)
        #expect(try b.tombstones() == 0)
    }

    /// A device that never syncs again holds back pruning until it is removed: after `removeDevice` and the others'
    /// `rekey`, the tombstone is dropped.
    @Test func removingAnOfflineDeviceLetsPruningGoOn() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let doomed = try a.tasks.create(title: "doomed").id
        let code = try a.initialize(remote)
        for device in [b, c] { try device.join(remote, code) }
        for device in [b, c, a] { try device.sync() }
        _ = try a.tasks.delete(id: doomed)
        for _ in 0..<3 { for device in [a, b] { try device.sync() } }
        #expect(try a.tombstones() == 1)
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        try SyncEngine.rekey(database: b.database, pairingCode: newCode)
        a.engine = try SyncEngine(database: a.database)
        b.engine = try SyncEngine(database: b.database)
        for _ in 0..<3 { for device in [a, b] { try device.sync() } }
        #expect(try a.tombstones() == 0)
        #expect(try b.tombstones() == 0)
        #expect(try a.table() == b.table())
    }

    /// The permutation property still holds with pruning and snapshots: a new device that starts from a snapshot
    /// written after pruning ends with the rows of a device that replayed everything.
    @Test func aSnapshotAfterPruningGivesTheSameRows() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        var ids: [UUID] = []
        for index in 0..<10 { ids.append(try a.tasks.create(title: "task \(index)").id) }
        let code = try a.initialize(remote)
        try b.join(remote, code)
        for device in [b, a] { try device.sync() }
        for id in ids.prefix(4) { _ = try b.tasks.delete(id: id) }
        for _ in 0..<3 { for device in [a, b] { try device.sync() } }
        #expect(try a.tombstones() == 0)
        let info = try a.engine.writeSnapshot()
        #expect(info.rows == 6)
        _ = try b.tasks.rename(id: ids[9], to: "after")
        try b.sync()
        let fresh = try SyncDevice_()
        try fresh.join(remote, code)
        #expect(try fresh.sync().snapshot == info.path)
        #expect(try fresh.table() == b.table())
        #expect(try fresh.table().count == 6)
    }
}
