import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// Merging with the real engine: three devices on a folder, their bundles applied in every order on fresh
/// devices (issue 26: deterministic, idempotent, no silent loss).
@Suite(.serialized) struct SyncMergeTests {
    /// Concurrent edits on three devices (renames, done marks, deletes, edit against delete, new tasks) give the
    /// same rows on fresh devices whatever order the devices' bundles arrive in, and the same rows on the three
    /// devices once they have all synced.
    @Test func everyArrivalOrderGivesTheSameRows() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path + "/remote")
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let t1 = try a.tasks.create(title: "one").id, t2 = try a.tasks.create(title: "two").id
        let t3 = try a.tasks.create(title: "three").id, t4 = try a.tasks.create(title: "four").id
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try c.join(remote, code)
        try b.sync()
        try c.sync()
        #expect(try b.rows() == a.rows())
        // Concurrent: nobody syncs until all have edited.
        _ = try a.tasks.rename(id: t1, to: "one by A")
        _ = try a.tasks.setDone(true, id: t2)
        _ = try a.tasks.delete(id: t3)
        _ = try a.tasks.create(title: "new on A")
        _ = try b.tasks.rename(id: t1, to: "one by B")
        _ = try b.tasks.delete(id: t2)
        _ = try b.tasks.rename(id: t4, to: "four by B")
        _ = try c.tasks.rename(id: t3, to: "three by C")
        _ = try c.tasks.setDone(true, id: t4)
        _ = try c.tasks.rename(id: t1, to: "one by C")
        _ = try c.tasks.create(title: "new on C")
        for device in [a, b, c] { try device.sync() }
        for device in [a, b, c] { try device.sync() }
        let final = try a.rows()
        #expect(try b.rows() == final)
        #expect(try c.rows() == final)
        // t4: B's title and C's done mark are both kept (different columns).
        #expect(final.contains { $0.contains("four by B 1") })

        var seen: Set<[String]> = []
        for order in permutations([a, b, c]) {
            let fresh = try SyncDevice_()
            let partial = try TemporaryDirectory()
            for file in ["securestore-sync", "key-check"] {
                try FileManager.default.copyItem(atPath: folder.path + "/remote/" + file, toPath: partial.path + "/" + file)
            }
            try fresh.join(.folder(partial.path), code)
            for device in order {
                try copyTree(folder.path + "/remote/devices/" + device.engine.device, to: partial.path + "/devices/" + device.engine.device)
                // Its statement on the roster travels with its bundles (a device not on the roster is not believed).
                try copyTree(folder.path + "/remote/roster/" + device.engine.device, to: partial.path + "/roster/" + device.engine.device)
                try fresh.sync()
            }
            seen.insert(try fresh.rows())
        }
        #expect(seen == [final], "\(seen.count) different results")
    }

    /// A bundle applied a second time (its record lost) changes nothing: same rows, same file, no new conflicts.
    @Test func aBundleAppliedTwiceChangesNothing() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        let id = try a.tasks.create(title: "shared").id
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        _ = try a.tasks.rename(id: id, to: "by A")
        // B's edit is the later one: A's value loses on B, and applying A's bundle again must not log it twice.
        Thread.sleep(forTimeInterval: 0.005)
        _ = try b.tasks.rename(id: id, to: "by B")
        try a.sync()
        try b.sync()
        try a.sync()
        let rows = try b.rows()
        let conflicts = try b.engine.conflicts().count
        #expect(conflicts == 1)
        // Forget what was applied from A: the next sync applies all of A's bundles again.
        try b.database.write { db in try db.execute("DELETE FROM sync_devices") }
        let report = try b.sync()
        #expect(report.appliedBundles == 2)
        #expect(report.changedRows == 0)
        #expect(report.newConflicts == 0)
        #expect(try b.rows() == rows)
        #expect(try b.engine.conflicts().count == conflicts)
    }

    /// Title on one device, done on the other: both kept. The same field on both: the later one wins and the other
    /// is in the conflict log on both devices, and can be restored.
    @Test func concurrentEditsKeepBothColumnsAndLogTheLoser() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        let id = try a.tasks.create(title: "Buy milk").id
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        _ = try a.tasks.rename(id: id, to: "Buy oat milk")
        _ = try b.tasks.setDone(true, id: id)
        try a.sync(); try b.sync(); try a.sync()
        for device in [a, b] {
            let task = try #require(try device.tasks.task(id: id))
            #expect(task.title == "Buy oat milk" && task.done)
            #expect(try device.engine.conflicts().isEmpty)
        }
        _ = try a.tasks.rename(id: id, to: "title from A")
        Thread.sleep(forTimeInterval: 0.01)
        _ = try b.tasks.rename(id: id, to: "title from B")
        try a.sync(); try b.sync(); try a.sync()
        for device in [a, b] {
            #expect(try device.tasks.task(id: id)?.title == "title from B")
            let log = try device.engine.conflicts()
            #expect(log.count == 1)
            #expect(log.first?.lostValue == .text("title from A"))
            #expect(log.first?.lostDevice == a.engine.device && log.first?.wonDevice == b.engine.device)
        }
        try a.engine.restoreConflict(try #require(try a.engine.conflicts().first).id)
        try a.sync(); try b.sync()
        #expect(try b.tasks.task(id: id)?.title == "title from A")
    }

    /// Edit against delete: a delete wins over the edits it is newer than; an edit made after it (by a device that
    /// had not seen it) brings the row back with that edit, on every device alike.
    @Test func editAgainstDelete() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        let older = try a.tasks.create(title: "edited then deleted").id
        let newer = try a.tasks.create(title: "deleted then edited").id
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        // A few milliseconds apart: the hybrid clocks order what happened in that order.
        _ = try b.tasks.rename(id: older, to: "edit before the delete")
        Thread.sleep(forTimeInterval: 0.005)
        _ = try a.tasks.delete(id: older)
        _ = try a.tasks.delete(id: newer)
        Thread.sleep(forTimeInterval: 0.005)
        _ = try b.tasks.rename(id: newer, to: "edit after the delete")
        try a.sync(); try b.sync(); try a.sync()
        for device in [a, b] {
            #expect(try device.tasks.task(id: older) == nil)
            #expect(try device.tasks.task(id: newer)?.title == "edit after the delete")
        }
        #expect(try a.rows() == b.rows())
        // B's unsent edit removed by A's delete is in B's log, not lost.
        #expect(try b.engine.conflicts().contains { $0.lostValue == .text("edit before the delete") })
    }

    /// A table keyed by SQLite's rowid cannot sync: a clear error, and nothing is stored or changed.
    @Test func aRowidTableIsRefused() throws {
        let folder = try TemporaryDirectory()
        let a = try SyncDevice_()
        try a.database.write { db in try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)") }
        let before = try a.fileDigest()
        #expect {
            _ = try SyncEngine.initialize(database: a.database, remote: .folder(folder.path), tables: ["tasks", "notes"])
        } throws: { error in
            (error as? SyncError)?.code == .invalidArgument && "\(error)".contains("rowid")
        }
        #expect(try a.fileDigest() == before)
        #expect(try a.keychain.accounts(service: "\(a.app).sync-key").isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    /// An application's own table with a UUID key syncs beside the task list.
    @Test func anAppTableWithAUUIDKeySyncs() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        for device in [a, b] {
            try device.database.write { db in
                try db.execute("CREATE TABLE notes (id BLOB PRIMARY KEY, body TEXT NOT NULL, stars INTEGER) WITHOUT ROWID")
            }
        }
        try a.database.write { db in try db.execute("INSERT INTO notes VALUES (?, ?, ?)", [Data(repeating: 7, count: 16), "hello", 3]) }
        let (engine, code) = try SyncEngine.initialize(database: a.database, remote: remote, tables: ["tasks", "notes"])
        a.engine = engine
        try a.sync()
        b.engine = try SyncEngine.join(database: b.database, remote: remote, tables: ["tasks", "notes"], pairingCode: code)
        try a.sync()
        try b.sync()
        let body = try b.database.read { db in try db.scalar("SELECT body || stars FROM notes", as: String.self) }
        #expect(body == "hello3")
    }

    /// A table of a key alone (a set of tags, say) syncs its inserts and deletes: its clock entry has no cells.
    @Test func aTableOfAKeyAloneSyncs() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        for device in [a, b] {
            try device.database.write { db in try db.execute("CREATE TABLE tags (name TEXT PRIMARY KEY) WITHOUT ROWID") }
        }
        try a.database.write { db in try db.execute("INSERT INTO tags VALUES ('home'), ('work')") }
        let (engine, code) = try SyncEngine.initialize(database: a.database, remote: remote, tables: ["tasks", "tags"])
        a.engine = engine
        try a.sync()
        b.engine = try SyncEngine.join(database: b.database, remote: remote, tables: ["tasks", "tags"], pairingCode: code)
        try b.database.write { db in try db.execute("INSERT INTO tags VALUES ('garden')") }
        try b.sync()
        try a.database.write { db in try db.execute("DELETE FROM tags WHERE name = 'work'") }
        try a.sync()
        try b.sync()
        for device in [a, b] {
            let tags = try device.database.read { db in try db.fetch("SELECT name FROM tags ORDER BY name") { try $0.string(at: 0) } }
            #expect(tags == ["garden", "home"])
        }
    }
}

/// Bundles this device cannot read yet are kept, not applied and not lost.
@Suite(.serialized) struct SyncPendingTests {
    /// A bundle that carries a table this device does not sync yet waits (with the device's later bundles) and is
    /// applied once the device syncs that table too; a bundle of a newer format waits likewise.
    @Test func aBundleFromANewerSchemaIsKeptPendingUntilThisDeviceHasMigrated() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        for device in [a, b] {
            try device.database.write { db in
                try db.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID")
            }
        }
        let (engine, code) = try SyncEngine.initialize(database: a.database, remote: remote, tables: ["tasks", "notes"])
        a.engine = engine
        try a.sync()
        try b.join(remote, code)  // B's version syncs only the task list
        try b.sync()
        try a.database.write { db in try db.execute("INSERT INTO notes VALUES ('n1', 'from a newer app')") }
        _ = try a.tasks.create(title: "same bundle")
        try a.sync()
        _ = try a.tasks.create(title: "a later bundle")
        try a.sync()
        let before = try b.rows()
        let report = try b.sync()
        #expect(report.pendingBundles.count == 1)
        #expect(report.appliedBundles == 0)
        #expect(try b.rows() == before)
        // B is upgraded: it syncs notes too. Both waiting bundles apply, in order.
        try b.engine.addTables(["notes"])
        let upgraded = try b.sync()
        #expect(upgraded.pendingBundles.isEmpty)
        #expect(upgraded.appliedBundles == 2)
        #expect(try b.rows() == a.rows())
        #expect(try b.database.read { db in try db.scalar("SELECT body FROM notes", as: String.self) } == "from a newer app")

        // A bundle of a newer format (sealed with the group's key, so authentic): kept pending and named.
        let files = SyncLayout.bundles(root: folder.path, device: a.engine.device)
        let last = try #require(files.last)
        let header = SealedBundle.Header(
            format: SealedBundle.newestFormat + 1, sequence: last.sequence + 1,
            previousHash: SealedBundle.sha256(try SyncLayout.read(last.path)))
        let inner = try #require(SealedBundle.seal(Array("{\"future\":true}".utf8), header: header, device: a.engine.device, key: a.engine.key))
        let sealed = try #require(SyncSignedFile.wrap(inner, device: a.engine.device, key: a.engine.signingKey, generation: 1))
        try SyncLayout.writeAtomically(
            sealed, root: folder.path,
            relative: "devices/\(a.engine.device)/\(SealedBundle.name(sequence: last.sequence + 1, file: sealed))")
        let future = try b.sync()
        #expect(future.pendingBundles.count == 1)
        #expect(future.pendingBundles.first?.hasSuffix(SealedBundle.name(sequence: last.sequence + 1, file: sealed)) == true)
        #expect(try b.rows() == a.rows())
    }
}

/// What a reader of the remote learns from sizes (issue 35 part 2).
@Suite(.serialized) struct SyncPaddingTests {
    /// Every bundle of one small change — a task with a 1-byte or a 300-byte title, a rename, done, a delete — is
    /// the same size on the remote (the smallest bucket), so a file's size tells neither a title's length nor the
    /// operation; a bundle of 2 000 tasks is padded to its Padmé bucket (at most 12 % more), and B applies all.
    @Test func smallBundlesAllHaveOneSizeAndLargeOnesTheirBucket() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(remote)
        try b.join(remote, code)
        var sizes: [Int] = []
        func sent() throws {
            try a.sync()
            let last = try #require(SyncLayout.bundles(root: folder.path, device: a.engine.device).last)
            sizes.append(try SyncLayout.read(last.path).count)
        }
        let short = try a.tasks.create(title: "x")
        try sent()
        let long = try a.tasks.create(title: String(repeating: "long title ", count: 27))
        try sent()
        _ = try a.tasks.rename(id: short.id, to: "a new and rather longer title for the short one")
        try sent()
        _ = try a.tasks.setDone(true, id: long.id)
        try sent()
        _ = try a.tasks.delete(id: short.id)
        try sent()
        #expect(Set(sizes).count == 1, "one size for every small bundle: \(sizes)")
        for index in 0..<2_000 { _ = try a.tasks.create(title: "bulk \(index) " + String(repeating: "t", count: index % 97)) }
        try a.sync()
        let bulk = try #require(SyncLayout.bundles(root: folder.path, device: a.engine.device).last)
        let file = try SyncLayout.read(bulk.path)
        let plaintext = try #require(SealedBundle.open(file, device: a.engine.device, key: a.engine.key))
        let overhead = sizes[0] - SyncPadding.minimum
        #expect(file.count == overhead + SyncPadding.bucket(plaintext.count), "padded to its bucket")
        #expect(Double(file.count - overhead) <= Double(plaintext.count) * 1.12 + 1, "at most 12 % of padding")
        try b.sync()
        #expect(try b.rows() == a.rows())
    }

    /// Padmé's buckets: never smaller than what they hold, at least the minimum, only the top bits of a large one
    /// non-zero, and the padding of every length comes off exactly.
    @Test func bucketsHoldTheirPlaintextAndTheirPaddingComesOff() throws {
        for length in [0, 1, 1_022, 1_023, 1_024, 1_500, 4_095, 100_000, 1_048_576, 1_200_000, 50_000_000] {
            let bucket = SyncPadding.bucket(length)
            #expect(bucket > length && bucket >= SyncPadding.minimum, "\(length) → \(bucket)")
            if length > SyncPadding.minimum {
                let exponent = Int.bitWidth - 1 - (length + 1).leadingZeroBitCount
                let kept = Int.bitWidth - exponent.leadingZeroBitCount
                #expect(bucket.trailingZeroBitCount >= exponent - kept, "\(length) → \(bucket)")
                #expect(Double(bucket) <= Double(length + 1) * 1.12, "\(length) → \(bucket)")
            }
        }
        #expect(SyncPadding.bucket(1_200_000) == SyncPadding.bucket(1_200_100), "two attachments 100 bytes apart look alike")
        for plaintext in [[], [0x80], [0, 0, 0], Array("a payload".utf8) + [0x80, 0], [UInt8](repeating: 7, count: 3_000)] as [[UInt8]] {
            let padded = SyncPadding.pad(plaintext)
            #expect(padded.count == SyncPadding.bucket(plaintext.count))
            #expect(SyncPadding.unpad(padded) == plaintext)
        }
        #expect(SyncPadding.unpad([1, 2, 3, 0, 0]) == nil, "no marker: not padding")
        #expect(SyncPadding.unpad([0, 0, 0]) == nil)
    }

    /// A bundle as the previous version wrote it (format 1, not padded) is still applied: A's real bundle is opened,
    /// unpadded and sealed again as format 1, signed by A, in place of the padded one, before B reads it.
    @Test func anUnpaddedBundleOfTheEarlierFormatIsStillApplied() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        _ = try a.tasks.create(title: "written by the earlier version")
        try a.sync()
        let last = try #require(SyncLayout.bundles(root: folder.path, device: a.engine.device).last)
        let padded = try SyncLayout.read(last.path)
        let header = try #require(SealedBundle.parseHeader(padded))
        #expect(header.format == SealedBundle.paddedFormat)
        let plaintext = try #require(SealedBundle.open(padded, device: a.engine.device, key: a.engine.key))
        var earlier = header
        earlier.format = 1
        let inner = try #require(SealedBundle.seal(plaintext, header: earlier, device: a.engine.device, key: a.engine.key))
        #expect(inner.count < padded.count - 200, "not padded")
        let sealed = try #require(SyncSignedFile.wrap(inner, device: a.engine.device, key: a.engine.signingKey, generation: 1))
        try FileManager.default.removeItem(atPath: last.path)
        try SyncLayout.writeAtomically(
            sealed, root: folder.path,
            relative: "devices/\(a.engine.device)/\(SealedBundle.name(sequence: last.sequence, file: sealed))")
        let report = try b.sync()
        #expect(report.appliedBundles == 1 && report.pendingBundles.isEmpty, "\(report)")
        #expect(try b.rows() == a.rows())
    }
}

/// Clocks that disagree.
@Suite(.serialized) struct SyncClockTests {
    /// A device whose clock is a day ahead: its edits carry tomorrow's time, but a device that has received them
    /// orders its own later edits after them (the hybrid clock never goes back), so a later edit still wins once
    /// the devices have synced; and an edit made concurrently on the slow device loses to the fast one's, kept in
    /// the conflict log.
    @Test func aDeviceWhoseClockIsADayAhead() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path)
        let fast = try SyncDevice_(), slow = try SyncDevice_()
        let id = try fast.tasks.create(title: "first").id
        let code = try fast.initialize(remote)
        try slow.join(remote, code)
        try slow.sync()
        // The fast device's clock: a day ahead (its hybrid clock is where its wall clock would put it).
        let day: Int64 = 86_400_000 * 65_536
        try fast.database.write { db in try db.execute("UPDATE sync_state SET hlc = hlc + ?", [day]) }
        _ = try fast.tasks.rename(id: id, to: "fast, concurrent")
        _ = try slow.tasks.rename(id: id, to: "slow, concurrent")
        try fast.sync(); try slow.sync(); try fast.sync()
        for device in [fast, slow] {
            #expect(try device.tasks.task(id: id)?.title == "fast, concurrent")
        }
        #expect(try slow.engine.conflicts().map(\.lostValue) == [.text("slow, concurrent")])
        // Having seen tomorrow's clock, the slow device's next edit orders after it and wins everywhere.
        _ = try slow.tasks.rename(id: id, to: "slow, later")
        try slow.sync(); try fast.sync()
        for device in [fast, slow] {
            #expect(try device.tasks.task(id: id)?.title == "slow, later")
        }
    }
}

/// The bundle payload's binary form.
@Suite struct SyncPayloadTests {
    private let payload = SyncPayload(
        deviceName: "laptop", tables: ["tasks": ["created_at", "title", "done"], "notes": ["body"]],
        rows: [
            SyncRowChange(
                table: "tasks", key: .blob(Data(repeating: 9, count: 16)), tombstone: nil,
                cells: [
                    SyncCell(column: "title", value: .text("Pay rent ✓"), version: SyncVersion(hlc: 1 << 60, device: "a"), base: .zero),
                    SyncCell(column: "done", value: .integer(-1), version: SyncVersion(hlc: 7, device: "b"), base: SyncVersion(hlc: 5, device: "a")),
                    SyncCell(column: "created_at", value: .real(-0.5), version: SyncVersion(hlc: 7, device: "b"), base: .zero),
                ]),
            SyncRowChange(table: "notes", key: .text("n1"), tombstone: SyncVersion(hlc: 9, device: "c"), cells: [
                SyncCell(column: "body", value: .null, version: SyncVersion(hlc: 3, device: "c"), base: .zero),
            ]),
        ])

    /// Every value, version, tombstone and name comes back as it was written.
    @Test func aPayloadReadsBackAsWritten() throws {
        let decoded = try #require(SyncPayload.decode(try payload.encoded()))
        #expect(decoded.rows == payload.rows)
        #expect(decoded.tables == payload.tables)
        #expect(decoded.deviceName == "laptop")
    }

    /// Every truncation and every single flipped byte is refused or read as some payload, never a crash (an
    /// authenticated bundle is still not trusted to be well formed).
    @Test func damagedPayloadsAreRefusedWithoutACrash() throws {
        let bytes = try payload.encoded()
        for length in 0..<bytes.count { #expect(SyncPayload.decode(Array(bytes.prefix(length))) == nil) }
        for index in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = bytes
                damaged[index] ^= flip
                _ = SyncPayload.decode(damaged)
            }
        }
    }
}

/// The database's own sync settings, damaged (or written by a later version).
@Suite(.serialized) struct SyncStoredRemoteTests {
    /// A remote kind other than `git` or `folder` is an error naming the settings, never read as a folder: a git URL
    /// taken for a folder path would have the device write its bundles into a directory named like the URL. Nothing
    /// is written to the remote, the database or next to it.
    @Test func aRemoteOfAnUnknownKindIsAnErrorNeverAFolder() throws {
        let folder = try TemporaryDirectory()
        let device = try SyncDevice_()
        _ = try device.tasks.create(title: "kept")
        _ = try device.initialize(.folder(folder.path))
        // A location that, read as a folder path, is a directory this test can see being made.
        let decoy = device.directory.path + "/decoy-remote"
        try device.database.write { db in
            try db.execute("UPDATE sync_state SET remote_kind = 'gti', remote_location = ?", [decoy])
        }
        let remoteBefore = try treeDigest(folder.path)
        let rowsBefore = try device.rows()
        let fileBefore = try device.fileDigest()

        var caught: SyncError?
        do { _ = try SyncEngine(database: device.database) } catch let error as SyncError { caught = error }
        #expect(caught?.code == SyncError.Code.damagedState)
        #expect(
            caught?.message
                == "the database's sync settings name a remote of an unknown kind (3 characters, neither 'git' nor 'folder'); nothing was synced — set up by a later version, or damaged")
        #expect(!FileManager.default.fileExists(atPath: decoy), "nothing was made where the location points")
        #expect(try treeDigest(folder.path) == remoteBefore, "the remote is unchanged")
        #expect(try device.rows() == rowsBefore)
        #expect(try device.fileDigest() == fileBefore, "the database file is unchanged")
    }
}

/// Every regular file under `root` with its SHA-256, sorted: what "the remote is unchanged" means.
private func treeDigest(_ root: String) throws -> [String] {
    let manager = FileManager.default
    var lines: [String] = []
    for case let relative as String in manager.enumerator(atPath: root)?.allObjects ?? [] {
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
        let digest = SealedBundle.sha256([UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))))
        lines.append(relative + " " + digest.map { String(format: "%02x", $0) }.joined())
    }
    return lines.sorted()
}

/// What syncing leaves in the file.
@Suite(.serialized) struct SyncFreePagesTests {
    /// `sync init` marks every row unsent, then sent: the unsent rows' index fills and empties. Its pages go back
    /// to the file system (before, a 100 000-task init left 1 017 free pages — 4 MiB, a sixth of the tasks' size), and
    /// a device that joins reads every task from the smaller file.
    @Test func aLargeFirstSendLeavesNoEmptyIndexPagesInTheFile() throws {
        let folder = try TemporaryDirectory()
        let a = try SyncDevice_(), b = try SyncDevice_()
        let start = Date(timeIntervalSince1970: 1_767_225_600)
        try a.tasks.insert((0..<50_000).map { TaskItem(title: "task number \($0)", createdAt: start.addingTimeInterval(Double($0))) })
        let code = try a.initialize(.folder(folder.path))
        let (mode, free) = try a.database.read { db in
            (try db.scalar("PRAGMA auto_vacuum", as: Int.self), try db.scalar("PRAGMA freelist_count", as: Int.self) ?? -1)
        }
        #expect(mode == 2, "a new database can give pages back")
        #expect(free <= 256, "free pages left after the first send: \(free)")
        try a.database.read { try $0.integrityCheck() }
        try b.join(.folder(folder.path), code)
        try b.sync()
        #expect(try b.tasks.count() == 50_000)
        #expect(try b.rows() == a.rows())
    }
}
