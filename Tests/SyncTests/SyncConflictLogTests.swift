import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// Issue 32, part 3: an edit lost to a concurrent delete is in the conflict log of every device, whatever the order
/// in which the devices sync (before, it was logged on the editing device only when the delete reached it before its
/// edit went out, and nowhere otherwise); so is an edit lost to a concurrent edit before it was ever sent (before,
/// only in its writer's log).
@Suite(.serialized) struct SyncConflictLogTests {
    /// One run of the same offline edits by A, B and C (renames, done marks, deletes, some of them concurrent), then
    /// the devices sync in `order`, twice round; returns each device's log, devices named by letter.
    private func run(order: [Int]) throws -> (logs: [Set<String>], rows: [[String]]) {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path + "/remote")
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let ids = try (1...7).map { try a.tasks.create(title: "t\($0)").id }
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try c.join(remote, code)
        try b.sync()
        try c.sync()
        try a.sync()
        // Offline, a few milliseconds apart so that the clocks order them as written:
        _ = try a.tasks.rename(id: ids[0], to: "t1 renamed by A")       // t1: A renames, B deletes later
        _ = try c.tasks.setDone(true, id: ids[0])                        //     and C marks it done
        _ = try a.tasks.rename(id: ids[1], to: "t2 renamed by A")       // t2: A renames twice; C deletes between
        Thread.sleep(forTimeInterval: 0.005)
        _ = try c.tasks.delete(id: ids[1])
        Thread.sleep(forTimeInterval: 0.005)
        _ = try a.tasks.rename(id: ids[1], to: "t2 renamed again by A")
        _ = try b.tasks.rename(id: ids[2], to: "t3 renamed by B")       // t3: B renames, C marks it done, A deletes later
        _ = try c.tasks.setDone(true, id: ids[2])
        _ = try b.tasks.setDone(true, id: ids[3])                        // t4: B done, C renames: both kept
        _ = try c.tasks.rename(id: ids[3], to: "t4 renamed by C")
        _ = try a.tasks.delete(id: ids[4])                               // t5: A deletes, nobody edits: nothing lost
        _ = try c.tasks.rename(id: ids[5], to: "t6 renamed by C")       // t6: C renames, B deletes later
        _ = try a.tasks.rename(id: ids[6], to: "t7 renamed by A")       // t7: A renames, B renames later: B's wins, and
        Thread.sleep(forTimeInterval: 0.005)                             //     A's is logged everywhere even when B's
        _ = try b.tasks.rename(id: ids[6], to: "t7 renamed by B")       //     reaches A before A's rename went out
        _ = try b.tasks.delete(id: ids[0])
        _ = try a.tasks.delete(id: ids[2])
        _ = try b.tasks.delete(id: ids[5])
        let devices = [a, b, c]
        for _ in 0..<2 {
            for index in order { try devices[index].sync() }
        }
        let names = [a.engine.device: "A", b.engine.device: "B", c.engine.device: "C"]
        let titles = Dictionary(uniqueKeysWithValues: ids.enumerated().map { (offset, id) in
            (withUnsafeBytes(of: id.uuid) { Data($0) }, "t\(offset + 1)")
        })
        func described(_ conflict: SyncConflict) -> String {
            let row: String
            if case .blob(let key) = conflict.key { row = titles[key] ?? "?" } else { row = "?" }
            let value: String
            switch conflict.lostValue {
            case .text(let text): value = text
            case .integer(let number): value = String(number)
            default: value = "\(conflict.lostValue)"
            }
            return "\(row) \(conflict.column) '\(value)' by \(names[conflict.lostDevice] ?? "?") lost to \(names[conflict.wonDevice] ?? "?")"
        }
        let logs = try devices.map { device in Set(try device.engine.conflicts().map(described)) }
        let rows = try devices.map { device in
            try device.database.read { db in try db.fetch("SELECT title, done FROM tasks ORDER BY title") { "\(try $0.string(at: 0)) \(try $0.int(at: 1))" } }
        }
        return (logs, rows)
    }

    @Test func theConflictLogIsTheSameOnEveryDeviceWhateverTheOrder() throws {
        var results: [[Int]: Set<String>] = [:]
        for order in permutations([0, 1, 2]) {
            let (logs, rows) = try run(order: order)
            #expect(rows[0] == rows[1] && rows[1] == rows[2], "order \(order): rows differ \(rows)")
            #expect(logs[0] == logs[1], "order \(order): A \(logs[0].sorted()) B \(logs[1].sorted())")
            #expect(logs[1] == logs[2], "order \(order): B \(logs[1].sorted()) C \(logs[2].sorted())")
            results[order] = logs[0]
        }
        let distinct = Set(results.values)
        #expect(distinct.count == 1, "\(results.mapValues { $0.sorted() })")
        let log = try #require(results.values.first)
        // What a person expects to find: the edits the deletes had not seen, and the concurrent renames' losers.
        #expect(log.contains("t1 title 't1 renamed by A' by A lost to B"), "\(log.sorted())")
        #expect(log.contains("t1 done '1' by C lost to B"), "\(log.sorted())")
        #expect(log.contains("t2 title 't2 renamed again by A' by A lost to C") == false, "an edit after the delete brings t2 back")
        #expect(log.contains("t6 title 't6 renamed by C' by C lost to B"), "\(log.sorted())")
        #expect(log.contains("t3 title 't3 renamed by B' by B lost to A"), "\(log.sorted())")
        #expect(log.contains("t3 done '1' by C lost to A"), "\(log.sorted())")
        #expect(log.contains("t7 title 't7 renamed by A' by A lost to B"), "\(log.sorted())")
        #expect(log.count == 6, "\(log.sorted())")
    }
    /// A lost edit travels with its writer's bundle, and a device speaks only for its own values: B, a member with its
    /// own signing key, sends a bundle saying that a value of A's and one of its own lost (the latter to an older
    /// version, which cannot be). A logs neither; it logs B's real lost value (a value B lost before sending it).
    @Test func aDeviceLogsOnlyTheLostValuesItsWriterCouldHaveLost() throws {
        let (folder, a, b, key, now) = try twoDevicesSharingATask()
        let root = folder.path + "/remote"
        let them = SyncVersion(hlc: now, device: a.engine.device), me = SyncVersion(hlc: now + 1, device: b.engine.device)
        let edits = [
            SyncLostEdit(table: "tasks", key: key, column: "title", value: .text("in A's name"), version: them, won: me),
            SyncLostEdit(table: "tasks", key: key, column: "title", value: .text("lost to an older one"), version: me, won: them),
            SyncLostEdit(
                table: "tasks", key: key, column: "title", value: .text("B's own lost value"), version: SyncVersion(hlc: now + 2, device: b.engine.device),
                won: SyncVersion(hlc: now + 3, device: a.engine.device)),
        ]
        try publishOwnBundle(of: b, lost: edits, root: root)
        let report = try a.sync()
        #expect(report.appliedBundles == 1)
        let logged = try a.engine.conflicts().map { conflict -> String in
            if case .text(let text) = conflict.lostValue { return text }
            return "\(conflict.lostValue)"
        }
        #expect(logged == ["B's own lost value"], "\(logged)")
    }
    /// A member's bundle carrying more lost edits than a bundle may (one more than its rows' limit) is refused by name
    /// and nothing of it is logged (it would flood every device's conflict log).
    @Test func aBundleFloodingTheLogIsRefused() throws {
        let (folder, a, b, key, now) = try twoDevicesSharingATask()
        let root = folder.path + "/remote"
        let edits = (0...SyncEngine.rowsPerBundle).map { index in
            SyncLostEdit(
                table: "tasks", key: key, column: "title", value: .text("flood \(index)"),
                version: SyncVersion(hlc: now + Int64(index), device: b.engine.device), won: SyncVersion(hlc: now + 10_000, device: a.engine.device))
        }
        try publishOwnBundle(of: b, lost: edits, root: root)
        let refused = #expect(throws: SyncError.self) { try a.sync() }
        #expect(refused?.code == SyncError.Code.refusedBundle, "\(String(describing: refused))")
        #expect(refused?.message.contains("lost edits, more than a bundle may") == true, "\(String(describing: refused))")
        #expect(try a.engine.conflicts().isEmpty)
    }

    /// A device restored from a backup that held an unsent edit, which it then replaced by a later edit of its own and
    /// sent: replaying its own bundle, the later edit beats the older one, which is no conflict another device should
    /// see — nothing of it is sent as a lost edit.
    @Test func aRestoredDeviceSendsNoConflictBetweenItsOwnEdits() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_()
        let id = try a.tasks.create(title: "first").id
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        try b.sync()
        try a.sync()
        _ = try a.tasks.rename(id: id, to: "x")
        let backup = URL(fileURLWithPath: scratch.path + "/a.db")
        _ = try a.database.backup(to: backup)
        Thread.sleep(forTimeInterval: 0.005)
        _ = try a.tasks.rename(id: id, to: "y")
        try a.sync()
        try a.database.restore(from: backup)
        a.engine = try SyncEngine(database: a.database)
        try a.sync()
        try a.sync()
        try b.sync()
        #expect(try b.rows() == a.rows())
        let lostByA = try b.engine.conflicts().filter { $0.lostDevice == a.engine.device }
        #expect(lostByA.isEmpty, "\(lostByA)")
        #expect(try a.database.read { db in try db.scalar("SELECT count(*) FROM sync_lost_unsent", as: Int.self) } == 0)
    }
    /// Seals and signs, as `device`'s next bundle, a payload with no rows and `lost` — what a member with its own keys
    /// (not this version's sending code) can write — and puts it on the remote at `root`.
    /// A and B in one group through `folder`/remote, both synced, sharing one task: its key, and now as a clock.
    private func twoDevicesSharingATask() throws -> (TemporaryDirectory, SyncDevice_, SyncDevice_, SyncValue, Int64) {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_()
        let id = try a.tasks.create(title: "shared").id
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        try b.sync()
        try a.sync()
        return (folder, a, b, SyncValue.blob(withUnsafeBytes(of: id.uuid) { Data($0) }), Int64(Date().timeIntervalSince1970 * 1_000_000))
    }

    private func publishOwnBundle(of device: SyncDevice_, lost: [SyncLostEdit], root: String) throws {
        let columns = try device.database.read { db in try SyncSchema.tables(db) }.reduce(into: [String: [String]]()) { $0[$1.name] = $1.columns }
        let plaintext = try SyncPayload(deviceName: "member", tables: columns, rows: [], lost: lost).encoded()
        let (sequence, hash) = try device.database.read { db in
            try db.fetchOne("SELECT sequence, last_hash FROM sync_state") { (try $0.int64(at: 0), [UInt8](try $0.data(at: 1))) }!
        }
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: UInt64(sequence + 1), previousHash: hash)
        let sealed = try #require(SealedBundle.seal(plaintext, header: header, device: device.engine.device, key: device.engine.key))
        let signed = try #require(SyncSignedFile.wrap(sealed, device: device.engine.device, key: device.engine.signingKey, generation: 1))
        try SyncLayout.writeAtomically(
            signed, root: root, relative: "devices/\(device.engine.device)/\(SealedBundle.name(sequence: UInt64(sequence + 1), file: signed))")
    }
}
