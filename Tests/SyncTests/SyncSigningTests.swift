import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// Issue 32, part 2: every device signs what it writes with its own Ed25519 key, on a signed roster. Someone who holds
/// the sync key but not a device's signing key cannot write as that device; a removed device's later bundles are
/// not applied; a planted key check stops nobody.
@Suite(.serialized) struct SyncSigningTests {
    @Test func ed25519SignsAndVerifiesAndTheKeyIsInTheKeyStoreOnly() throws {
        let key = try #require(SyncSigningKey.random())
        let message = Array("a message".utf8)
        let signature = try #require(key.sign(message))
        #expect(SyncSigningKey.verify(signature, of: message, publicKey: key.publicKey))
        #expect(!SyncSigningKey.verify(signature, of: Array("another".utf8), publicKey: key.publicKey))
        let other = try #require(SyncSigningKey.random())
        #expect(!SyncSigningKey.verify(signature, of: message, publicKey: other.publicKey))

        let folder = try TemporaryDirectory()
        let a = try SyncDevice_()
        _ = try a.initialize(.folder(folder.path + "/remote"))
        let stored = try #require(try a.keychain.secret(service: "\(a.app).sync-signing-key", account: a.engine.device))
        #expect(stored.withUnsafeBytes { $0.count } == 64)
        // The same key again from the store, and its seed nowhere in the database.
        let again = try SyncEngine(database: a.database)
        #expect(again.signingKey.publicKey == a.engine.signingKey.publicKey)
        let seedHex = stored.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        try a.database.writeWithoutTransaction { db in try db.checkpoint() }
        let file = try Data(contentsOf: a.database.url)
        #expect(file.range(of: Data(seedHex.utf8)) == nil)
        // Its public key is on the roster, in the database and on the remote.
        let pinned = try a.database.read { db in
            try db.fetchOne("SELECT public_key FROM sync_roster WHERE device = ?", [a.engine.device]) { [UInt8](try $0.data(at: 0)) }
        }
        #expect(pinned == a.engine.signingKey.publicKey)
        #expect(!SyncRosterFiles.numbers(root: folder.path + "/remote", device: a.engine.device).isEmpty)
    }

    /// Someone with the sync key (the pairing code) but not B's signing key seals a bundle as B's next one, unsigned
    /// and signed with another key: A skips and lists both, applies neither, and still applies B's real next bundle.
    @Test func aBundleForgedByAHolderOfTheSyncKeyIsSkippedAndListed() throws {
        let folder = try TemporaryDirectory(), copy = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), x = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        _ = try b.tasks.create(title: "real by B")
        try b.sync()
        try a.sync()
        // X holds the pairing code; it writes a task into a copy of the remote, then re-seals it as B's next bundle.
        try copyTree(root, to: copy.path + "/remote")
        try x.join(.folder(copy.path + "/remote"), code)
        _ = try x.tasks.create(title: "forged as B")
        try x.sync()
        let xBundle = try #require(SyncLayout.bundles(root: copy.path + "/remote", device: x.engine.device).last)
        let plaintext = try #require(SealedBundle.open(try SyncLayout.read(xBundle.path), device: x.engine.device, key: x.engine.key))
        let (bSequence, bHash) = try b.database.read { db in
            try db.fetchOne("SELECT sequence, last_hash FROM sync_state") { (try $0.int64(at: 0), [UInt8](try $0.data(at: 1))) }!
        }
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: UInt64(bSequence + 1), previousHash: bHash)
        let unsigned = try #require(SealedBundle.seal(plaintext, header: header, device: b.engine.device, key: b.engine.key))
        let signedByX = try #require(SyncSignedFile.wrap(unsigned, device: b.engine.device, key: x.engine.signingKey, generation: 1))
        var forged: [String] = []
        for file in [unsigned, signedByX] {
            let relative = "devices/\(b.engine.device)/\(SealedBundle.name(sequence: UInt64(bSequence + 1), file: file))"
            try SyncLayout.writeAtomically(file, root: root, relative: relative)
            forged.append(relative)
        }
        let before = try a.rows()
        var caught: SyncError?
        #expect {
            try a.sync()
        } throws: { error in
            caught = error as? SyncError
            return caught?.code == SyncError.Code.refusedBundle && caught!.message.contains("is not signed by the key of device")
        }
        let report = try #require(caught?.report)
        #expect(Set(forged).isSubset(of: Set(report.skippedFiles)), "\(report.skippedFiles)")
        #expect(report.appliedBundles == 0)
        #expect(try a.rows() == before)
        #expect(!(try a.rows()).contains { $0.contains("forged") })
        // B's real next bundle, numbered like the forged ones, is applied; the forged ones stay skipped.
        _ = try b.tasks.create(title: "second by B")
        try b.sync()
        let after = try a.sync()
        #expect(after.appliedBundles == 1)
        #expect(Set(forged).isSubset(of: Set(after.skippedFiles)))
        #expect(try a.rows() == b.rows())
        #expect(try a.rows().contains { $0.contains("second by B") })
        #expect(!(try a.rows()).contains { $0.contains("forged") })
        // A device that joins now is not misled either.
        let d = try SyncDevice_()
        try d.join(.folder(root), code)
        try d.sync()
        try d.sync()
        #expect(try d.rows() == a.rows())
    }

    /// X (a holder of the sync key) writes a roster statement in B's name with its own key: refused and listed; B's
    /// bundles are still believed under B's key, X's re-signed ones are not.
    @Test func aForgedRosterChangeIsRefused() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), x = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        try b.sync()
        try a.sync()
        let attacker = try #require(SyncSigningKey.random())
        let entry = SyncRosterEntry(publicKey: attacker.publicKey, firstSigned: 1, removals: [
            SyncRosterEntry.Removal(device: a.engine.device, lastSequence: 0, lastHash: [UInt8](repeating: 0, count: 32), generation: 1)
        ])
        let number = (SyncRosterFiles.numbers(root: root, device: b.engine.device).first ?? 0) + 1
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: number, previousHash: [UInt8](repeating: 0, count: 32))
        let inner = try #require(SealedBundle.seal(entry.encoded(generation: 1), header: header, device: SyncRosterFiles.aadDevice(b.engine.device), key: a.engine.key))
        let forged = try #require(SyncSignedFile.wrap(inner, device: b.engine.device, key: attacker, generation: 1))
        let relative = SyncRosterFiles.relative(device: b.engine.device, number: number)
        try SyncLayout.writeAtomically(forged, root: root, relative: relative)
        _ = x  // the attacker needs no device of its own

        let report = try a.sync()
        #expect(report.skippedFiles.contains(relative), "\(report.skippedFiles)")
        let pinned = try a.database.read { db in
            try db.fetchOne("SELECT public_key FROM sync_roster WHERE device = ?", [b.engine.device]) { [UInt8](try $0.data(at: 0)) }
        }
        #expect(pinned == b.engine.signingKey.publicKey)
        #expect(try a.database.read { db in try db.scalar("SELECT count(*) FROM sync_removed", as: Int.self) } == 0)
        _ = try b.tasks.create(title: "B after the forgery")
        try b.sync()
        try a.sync()
        #expect(try a.rows() == b.rows())
        #expect(try a.rows().contains { $0.contains("B after the forgery") })
    }

    /// A planted `generation-N/key-check` (no key needed) and a replaced key check of the current generation: no 77,
    /// listed, and the group keeps syncing.
    @Test func aPlantedGenerationOrKeyCheckStopsNobody() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        try b.sync()
        // Planted: a key check sealed under a random key, unsigned, and one signed by a key not on the roster.
        let stranger = try #require(SyncSigningKey.random())
        let planted = try #require(SealedBundle.keyCheck(key: SyncKey.random()))
        try SyncLayout.writeAtomically(planted, root: root, relative: "generation-3/key-check")
        let signed = try #require(SyncSignedFile.wrap(planted, device: a.engine.device, key: stranger, generation: 2))
        try SyncLayout.writeAtomically(signed, root: root, relative: "generation-2/key-check")
        for device in [a, b] {
            let report = try device.sync()
            #expect(report.skippedFiles.contains("generation-3/key-check"), "\(report.skippedFiles)")
            #expect(report.skippedFiles.contains("generation-2/key-check"))
        }
        // The current generation's key check replaced by garbage: listed, not 77.
        try SyncLayout.writeAtomically(Array("garbage".utf8), root: root, relative: "key-check.tmp")
        try FileManager.default.removeItem(atPath: root + "/key-check")
        try FileManager.default.moveItem(atPath: root + "/key-check.tmp", toPath: root + "/key-check")
        _ = try a.tasks.create(title: "after the planting")
        let report = try a.sync()
        #expect(report.skippedFiles.contains("key-check"))
        try b.sync()
        #expect(try b.rows() == a.rows())
        #expect(try b.rows().contains { $0.contains("after the planting") })
    }

    /// D is offline while A removes C; C, which still holds the generation-1 key and can write the remote, sends a
    /// bundle in generation 1 before D sees generation 2. D skips it (the signed removal names C's last accepted
    /// bundle), then re-keys: nobody ever holds C's post-removal task.
    @Test func aRemovedDevicesLaterBundlesAreNotAppliedByAnOfflineDeviceNorCarriedByRekey() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        try d.join(.folder(root), code)
        _ = try c.tasks.create(title: "C before removal")
        try c.sync()
        try d.sync()
        try a.sync()
        try d.sync()
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        // C writes on: generation 2 hidden from it (and, later, from D: it has not arrived yet).
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        _ = try c.tasks.create(title: "C after removal")
        #expect(throws: Never.self) { try c.sync() }
        let cLast = try #require(SyncLayout.bundles(root: root, device: c.engine.device).last)
        let report = try #require(try? d.sync())
        let shown = "devices/\(c.engine.device)/\(SealedBundle.paddedSequence(cLast.sequence))-\(cLast.hash)"
        #expect(report.skippedFiles.contains(shown), "\(report.skippedFiles)")
        #expect(!(try d.rows()).contains { $0.contains("C after removal") })
        #expect(try d.rows().contains { $0.contains("C before removal") })
        // Generation 2 arrives: D is told to re-key (signed by A, on the roster), re-keys and converges with A.
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        #expect(throws: SyncError.self) { try d.sync() }
        try SyncEngine.rekey(database: d.database, pairingCode: newCode)
        d.engine = try SyncEngine(database: d.database)
        try a.sync()
        try d.sync()
        #expect(try a.rows() == d.rows())
        #expect(!(try a.rows()).contains { $0.contains("C after removal") })
        #expect(try a.rows().contains { $0.contains("C before removal") })
        _ = try d.tasks.create(title: "D after rekey")
        try d.sync()
        try a.sync()
        #expect(try a.rows() == d.rows())
    }

    /// A replication engine delivers C's post-removal bundle to an offline device D before the signed removal (in
    /// generation 1's roster), and — `removalFirst` false — the new generation before that removal too: D applies the
    /// bundle (it cannot know yet), then, once either the removal or the new generation's roster (which carries it)
    /// arrives, undoes what it brought — C's new task gone, C's rename of A's task undone, D's own later edit of that
    /// task kept — and neither D nor A ever holds C's post-removal data in generation 2.
    @Test(arguments: [true, false]) func aRemovedDevicesBundleDeliveredBeforeTheRemovalIsUndoneAndNeverCarried(removalFirst: Bool) throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        try d.join(.folder(root), code)
        let shared = try a.tasks.create(title: "A task").id
        try a.sync()
        try c.sync()
        try d.sync()
        try a.sync()
        try c.sync()
        try d.sync()
        let before = try d.rows()
        let rosterBefore = Set(SyncRosterFiles.numbers(root: root, device: a.engine.device))
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        // Not delivered yet to D: generation 2, and A's signed removal in generation 1's roster.
        let removalNumber = try #require(SyncRosterFiles.numbers(root: root, device: a.engine.device).first { !rosterBefore.contains($0) })
        let removalFile = SyncRosterFiles.relative(device: a.engine.device, number: removalNumber)
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        try FileManager.default.moveItem(atPath: root + "/" + removalFile, toPath: scratch.path + "/removal")
        // C, removed but still able to write the folder, writes on in generation 1.
        _ = try c.tasks.create(title: "C after removal")
        _ = try c.tasks.rename(id: shared, to: "renamed by C after removal")
        #expect(throws: Never.self) { try c.sync() }
        // D applies it: nothing it has read says C was removed.
        try d.sync()
        #expect(try d.rows().contains { $0.contains("C after removal") })
        #expect(try d.rows().contains { $0.contains("renamed by C after removal") })
        _ = try d.tasks.setDone(true, id: shared)
        _ = try d.tasks.create(title: "D while offline")
        if removalFirst {
            try FileManager.default.moveItem(atPath: scratch.path + "/removal", toPath: root + "/" + removalFile)
            #expect(throws: Never.self) { try d.sync() }
            let rows = try d.rows()
            #expect(!rows.contains { $0.contains("C after removal") || $0.contains("renamed by C") }, "\(rows)")
            #expect(rows.contains { $0.contains("A task 1") }, "D's own done mark stays: \(rows)")
            #expect(rows.count == before.count + 1, "\(rows)")
            #expect(try d.engine.devices().first { $0.id == c.engine.device }?.sequence ?? 0 < SyncLayout.bundles(root: root, device: c.engine.device).count)
        }
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        let rotated = #expect(throws: SyncError.self) { try d.sync() }
        #expect(rotated?.code == SyncError.Code.keyRotated)
        try SyncEngine.rekey(database: d.database, pairingCode: newCode)
        d.engine = try SyncEngine(database: d.database)
        try a.sync()
        try d.sync()
        for device in [a, d] {
            let rows = try device.rows()
            #expect(!rows.contains { $0.contains("C after removal") || $0.contains("renamed by C") }, "\(rows)")
            #expect(rows.contains { $0.contains("A task 1") }, "\(rows)")
            #expect(rows.contains { $0.contains("D while offline") }, "\(rows)")
        }
        #expect(try a.rows() == d.rows())
        #expect(try d.engine.conflicts().allSatisfy { $0.lostDevice != c.engine.device && $0.wonDevice != c.engine.device })
        // And the removal, late, changes nothing more.
        if !removalFirst {
            try FileManager.default.moveItem(atPath: scratch.path + "/removal", toPath: root + "/" + removalFile)
            try a.sync()
            try d.sync()
            #expect(try a.rows() == d.rows())
        }
    }

    /// A new device that joins through a snapshot marks what it brought with one entry (not one a row: a join of
    /// 100 000 tasks through a snapshot cost 1.7x a join through every bundle that way). When the snapshot's writer is
    /// later removed at a bundle before the snapshot, what the snapshot brought is undone — C's edit that no accepted
    /// bundle holds goes — and nothing another device wrote is lost: the positions it gave go with it, and the same
    /// sync takes A's and B's tasks again from their bundles; a row the new device edited stays (its done mark), and
    /// C's task does not come back with the bundle C sent past the removal (B applied it, then undoes it).
    @Test func aSnapshotJoinIsUndoneWhenItsWriterIsRemovedAndNothingOthersWroteIsLost() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        try c.join(.folder(root), code)
        let shared = try a.tasks.create(title: "A's task").id
        _ = try b.tasks.create(title: "B's task")
        _ = try c.tasks.create(title: "C's accepted task")
        for _ in 0..<2 { for device in [a, b, c] { try device.sync() } }
        // C's edit after its last bundle, in its snapshot only (for now).
        _ = try c.tasks.create(title: "C's task past the removal")
        try c.engine.writeSnapshot()
        try d.join(.folder(root), code)
        let joined = try d.sync()
        #expect(joined.snapshot != nil)
        #expect(try d.rows().contains { $0.contains("C's task past the removal") })
        let marks = try d.database.read { db in
            (try db.scalar("SELECT count(*) FROM sync_snapshot_source", as: Int.self) ?? -1,
             try db.scalar("SELECT count(*) FROM sync_row_sources", as: Int.self) ?? -1)
        }
        #expect(marks == (1, 0), "one mark for the snapshot, none a row: \(marks)")
        _ = try d.tasks.setDone(true, id: shared)
        _ = try d.tasks.create(title: "D's own task")
        // C sends that task; B applies it and writes a snapshot holding it.
        try c.sync()
        try b.sync()
        try b.engine.writeSnapshot()
        // A removes C, never having seen that bundle (hidden from it meanwhile); generation 2 is not delivered yet.
        let chain = root + "/devices/" + c.engine.device
        let late = try #require(try FileManager.default.contentsOfDirectory(atPath: chain).sorted().last)
        try FileManager.default.moveItem(atPath: chain + "/" + late, toPath: scratch.path + "/late")
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        try FileManager.default.moveItem(atPath: scratch.path + "/late", toPath: chain + "/" + late)
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        try d.sync()
        let rows = try d.rows()
        #expect(!rows.contains { $0.contains("C's task past the removal") }, "\(rows)")
        for title in ["A's task", "B's task", "C's accepted task", "D's own task"] {
            #expect(rows.contains { $0.contains(title) }, "\(title) is kept or taken again: \(rows)")
        }
        #expect(rows.contains { $0.contains("A's task 1") }, "D's own done mark stays: \(rows)")
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        for device in [b, d] {
            try SyncEngine.rekey(database: device.database, pairingCode: newCode)
            device.engine = try SyncEngine(database: device.database)
        }
        for _ in 0..<2 { for device in [a, b, d] { try device.sync() } }
        #expect(try a.rows() == d.rows())
        #expect(try b.rows() == d.rows())
        #expect(!(try a.rows()).contains { $0.contains("C's task past the removal") })
        #expect(try a.rows().contains { $0.contains("A's task 1") })
        #expect(try d.database.read { db in try db.scalar("SELECT count(*) FROM sync_snapshot_source", as: Int.self) } == 0)
    }

    /// C, removed by A but still holding the old key and its signing key, signs a removal of A in the old generation
    /// before A's removal of C reaches D. D first believes C (nothing yet says otherwise); once A's removal arrives
    /// the two removals are mutual and neither is believed: A's new generation is believed again (77: re-key), and the
    /// code the person enters settles it — C's later task is undone, A's new tasks arrive, nothing of C's reaches A.
    /// (Before: whichever statement was read first won; with C's, D never heard of the new generation, undid A's
    /// bundles, and after a re-key carried C's later task into it and rejected every bundle of A.)
    @Test func aRemovedDeviceThatRemovesItsRemoverIsNotBelieved() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        try d.join(.folder(root), code)
        _ = try a.tasks.create(title: "A before")
        _ = try c.tasks.create(title: "C before")
        for _ in 0..<2 { for device in [a, c, d] { try device.sync() } }
        let rosterBefore = Set(SyncRosterFiles.numbers(root: root, device: a.engine.device))
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        let removalNumber = try #require(SyncRosterFiles.numbers(root: root, device: a.engine.device).first { !rosterBefore.contains($0) })
        let removalFile = SyncRosterFiles.relative(device: a.engine.device, number: removalNumber)
        try FileManager.default.moveItem(atPath: root + "/" + removalFile, toPath: scratch.path + "/removal")
        // C "removes" A in generation 1, with its own signing key, and writes on.
        try c.engine.publishRosterEntry(
            adding: SyncRosterEntry.Removal(device: a.engine.device, lastSequence: 0, lastHash: [UInt8](repeating: 0, count: 32), generation: 1))
        _ = try c.tasks.create(title: "C after removal")
        try c.sync()
        _ = try? d.sync()
        // A's removal arrives: mutual removals, neither believed; A's generation 2 is believed and D is told to re-key.
        try FileManager.default.moveItem(atPath: scratch.path + "/removal", toPath: root + "/" + removalFile)
        let rotated = #expect(throws: SyncError.self) { try d.sync() }
        #expect(rotated?.code == SyncError.Code.keyRotated, "\(String(describing: rotated))")
        try SyncEngine.rekey(database: d.database, pairingCode: newCode)
        d.engine = try SyncEngine(database: d.database)
        let rekeyed = try d.rows()
        #expect(!rekeyed.contains { $0.contains("C after removal") }, "\(rekeyed)")
        _ = try a.tasks.create(title: "A in generation 2")
        for _ in 0..<2 { try a.sync(); try d.sync() }
        #expect(try d.rows().contains { $0.contains("A in generation 2") })
        #expect(!(try a.rows()).contains { $0.contains("C after removal") })
        #expect(try a.rows() == d.rows())
        let rows = try d.rows()
        #expect(rows.contains { $0.contains("C before") } && rows.contains { $0.contains("A before") }, "\(rows)")
    }

    /// C, removed by A, writes a statement removing A *and* D, after B already believed A's removal of C: C's
    /// statements stay unread on B (a removal believed stands), so D is removed nowhere; B and D re-key, and D's task of
    /// the new generation reaches A and B. (With an earlier rule of this session, disbelieving B's stored removal gave C
    /// back its power to remove, and D was shut out of the new generation for good — an attacker's review.)
    @Test func aRemovedDeviceCannotRemoveAThirdMemberByRemovingItsRemover() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        for device in [b, c, d] { try device.join(.folder(root), code) }
        for _ in 0..<2 { for device in [a, b, c, d] { try device.sync() } }
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        #expect(throws: SyncError.self) { try b.sync() }  // B reads A's removal of C (77)
        let zero = [UInt8](repeating: 0, count: 32)
        try c.engine.publishRosterEntry(adding: SyncRosterEntry.Removal(device: a.engine.device, lastSequence: 0, lastHash: zero, generation: 1))
        try c.engine.publishRosterEntry(adding: SyncRosterEntry.Removal(device: d.engine.device, lastSequence: 0, lastHash: zero, generation: 1))
        _ = try? b.sync()
        _ = try? d.sync()
        for device in [b, d] {
            try SyncEngine.rekey(database: device.database, pairingCode: newCode)
            device.engine = try SyncEngine(database: device.database)
        }
        _ = try d.tasks.create(title: "D in generation 2")
        for _ in 0..<3 { for device in [a, b, d] { try device.sync() } }
        #expect(try a.rows().contains { $0.contains("D in generation 2") })
        #expect(try b.rows() == d.rows())
        #expect(try a.rows() == d.rows())
        for device in [a, b] {
            #expect(try device.database.read { db in
                try db.scalar("SELECT count(*) FROM sync_removed WHERE device = ?", [d.engine.device], as: Int.self)
            } == 0)
        }
    }

    /// C, removed by A, hides A's statement naming the removal, signs a removal of A, and re-signs A's key check of
    /// generation 2 in its own name (it can: the check's sealed bytes name no writer). D believes C's removal of A and
    /// gets 77 for generation 2; the person enters A's code: A's own statement in generation 2 (which only a holder of
    /// the new key can write) proves A was not removed, its removal of C is believed there, C's later task is undone,
    /// and A's new task reaches D. (With the session's earlier rule — `rekey` trusting the key check's signer — the
    /// re-signed check made D trust C and keep A removed, rejecting all of A's bundles: an attacker's review.)
    @Test func aReSignedKeyCheckDoesNotKeepTheRemoverOut() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        try d.join(.folder(root), code)
        _ = try a.tasks.create(title: "A before")
        for _ in 0..<2 { for device in [a, c, d] { try device.sync() } }
        let rosterBefore = Set(SyncRosterFiles.numbers(root: root, device: a.engine.device))
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        let removalNumber = try #require(SyncRosterFiles.numbers(root: root, device: a.engine.device).first { !rosterBefore.contains($0) })
        try FileManager.default.moveItem(
            atPath: root + "/" + SyncRosterFiles.relative(device: a.engine.device, number: removalNumber), toPath: scratch.path + "/removal")
        try c.engine.publishRosterEntry(
            adding: SyncRosterEntry.Removal(device: a.engine.device, lastSequence: 0, lastHash: [UInt8](repeating: 0, count: 32), generation: 1))
        let checkPath = root + "/generation-2/" + SyncLayout.keyCheck
        let inner = Array(SyncSignedFile.inner(try SyncLayout.read(checkPath)))
        let forged = try #require(SyncSignedFile.wrap(inner, device: c.engine.device, key: c.engine.signingKey, generation: 2))
        try SyncLayout.writeAtomically(forged, root: root, relative: "generation-2/" + SyncLayout.keyCheck)
        _ = try c.tasks.create(title: "C after removal")
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        try c.sync()
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        let rotated = #expect(throws: SyncError.self) { try d.sync() }
        #expect(rotated?.code == SyncError.Code.keyRotated, "\(String(describing: rotated))")
        try SyncEngine.rekey(database: d.database, pairingCode: newCode)
        d.engine = try SyncEngine(database: d.database)
        _ = try a.tasks.create(title: "A in generation 2")
        for _ in 0..<2 { try a.sync(); try d.sync() }
        let rows = try d.rows()
        #expect(rows.contains { $0.contains("A in generation 2") }, "\(rows)")
        #expect(!rows.contains { $0.contains("C after removal") }, "\(rows)")
        #expect(try a.rows() == rows)
        #expect(try d.database.read { db in
            try db.scalar("SELECT count(*) FROM sync_removed WHERE device = ?", [a.engine.device], as: Int.self)
        } == 0)
    }

    /// C, removed by A, removes A back and brings in a device of its own (X, joined with the old code while the new
    /// generation is hidden from it). D reads both removals at once: neither is believed, but the generation stays
    /// closed — X is refused and listed, its task applied nowhere, and after the re-key it reaches no one.
    @Test func aDeviceBroughtInDuringAContestedRemovalIsRefused() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_(), x = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        try d.join(.folder(root), code)
        for _ in 0..<2 { for device in [a, c, d] { try device.sync() } }
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        try c.engine.publishRosterEntry(
            adding: SyncRosterEntry.Removal(device: a.engine.device, lastSequence: 0, lastHash: [UInt8](repeating: 0, count: 32), generation: 1))
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        try x.join(.folder(root), code)
        _ = try x.tasks.create(title: "X's task")
        try x.sync()
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        let rotated = #expect(throws: SyncError.self) { try d.sync() }
        #expect(rotated?.code == SyncError.Code.keyRotated)
        let roster = try d.engine.readRoster()
        #expect(roster.members[x.engine.device] == nil)
        #expect(roster.refused.contains("roster/\(x.engine.device)"), "\(roster.refused)")
        #expect(!(try d.rows()).contains { $0.contains("X's task") })
        try SyncEngine.rekey(database: d.database, pairingCode: newCode)
        d.engine = try SyncEngine(database: d.database)
        for _ in 0..<2 { try a.sync(); try d.sync() }
        #expect(!(try d.rows()).contains { $0.contains("X's task") })
        #expect(!(try a.rows()).contains { $0.contains("X's task") })
        #expect(try a.rows() == d.rows())
    }

    /// C, removed by A, deletes A's whole roster folder of the old generation (it can still write the remote) before
    /// D has read the removal, and writes on. A stays a member on D by the key D pinned it with: A's new generation is
    /// believed (77), and C's later bundle, applied meanwhile, is undone when D re-keys — it reaches nobody.
    @Test func aDeletedRosterFolderDoesNotTakeAMemberOffTheRoster() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        try d.join(.folder(root), code)
        _ = try a.tasks.create(title: "A before")
        _ = try c.tasks.create(title: "C before")
        for _ in 0..<2 { for device in [a, c, d] { try device.sync() } }
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        try FileManager.default.moveItem(atPath: root + "/roster/" + a.engine.device, toPath: scratch.path + "/rosterA")
        // C's own tool would stop at the new generation; C hides it while it writes.
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        _ = try c.tasks.create(title: "C after removal")
        try c.sync()
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        let rotated = #expect(throws: SyncError.self) { try d.sync() }
        #expect(rotated?.code == SyncError.Code.keyRotated, "\(String(describing: rotated))")
        try SyncEngine.rekey(database: d.database, pairingCode: newCode)
        d.engine = try SyncEngine(database: d.database)
        let rekeyed = try d.rows()
        #expect(!rekeyed.contains { $0.contains("C after removal") }, "\(rekeyed)")
        for _ in 0..<2 { try a.sync(); try d.sync() }
        #expect(!(try a.rows()).contains { $0.contains("C after removal") })
        #expect(try a.rows() == d.rows())
    }

    /// A snapshot written by a device still on the roster, before it read a removal, holds the removed device's
    /// bundle past the last one the removal accepted. A device that joins the old generation takes it (the removal is
    /// signed by a device it does not know yet: a new device believes removals from devices it has pinned) — and once
    /// it believes the removal, at its next sync, what the snapshot brought is undone and taken again from the
    /// bundles: the removed device's later task gone, everything else there, its own edit kept; nothing of it is carried
    /// into the new generation (before, it was, and reached the device that removed C).
    @Test func aSnapshotHoldingARemovedDevicesBundlePastTheRemovalIsUndoneWhenTheRemovalIsRead() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_(), e = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        try c.join(.folder(root), code)
        let shared = try a.tasks.create(title: "A's task").id
        _ = try b.tasks.create(title: "B's task")
        _ = try c.tasks.create(title: "C's accepted task")
        for _ in 0..<2 { for device in [a, b, c] { try device.sync() } }
        // C's next bundle reaches B, which writes a snapshot holding it; A never sees it before removing C.
        _ = try c.tasks.create(title: "C's task past the removal")
        try c.sync()
        try b.sync()
        try b.engine.writeSnapshot()
        let chain = root + "/devices/" + c.engine.device
        let late = try #require(try FileManager.default.contentsOfDirectory(atPath: chain).sorted().last)
        try FileManager.default.moveItem(atPath: chain + "/" + late, toPath: scratch.path + "/late")
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        try FileManager.default.moveItem(atPath: scratch.path + "/late", toPath: chain + "/" + late)
        // D joins the first generation (the new one is not delivered to it yet) with the code it was given.
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        try d.join(.folder(root), code)
        let joined = try d.sync()
        #expect(joined.snapshot?.hasPrefix("snapshots/\(b.engine.device)") == true, "\(joined)")
        _ = try d.tasks.setDone(true, id: shared)
        _ = try d.tasks.create(title: "D's own task")
        try d.sync()
        var rows = try d.rows()
        #expect(!rows.contains { $0.contains("C's task past the removal") }, "\(rows)")
        for title in ["A's task 1", "B's task", "C's accepted task", "D's own task"] {
            #expect(rows.contains { $0.contains(title) }, "\(title) is kept or taken again: \(rows)")
        }
        // E joins later still, through the same snapshot: the same, at its second sync.
        try b.sync()
        try e.join(.folder(root), code)
        try e.sync()
        try e.sync()
        #expect(!(try e.rows()).contains { $0.contains("C's task past the removal") })
        // The new generation arrives: nothing of C's later task is carried into it.
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        for device in [b, d, e] {
            try SyncEngine.rekey(database: device.database, pairingCode: newCode)
            device.engine = try SyncEngine(database: device.database)
        }
        for _ in 0..<2 { for device in [a, b, d, e] { try device.sync() } }
        rows = try a.rows()
        #expect(!rows.contains { $0.contains("C's task past the removal") }, "\(rows)")
        #expect(rows.contains { $0.contains("A's task 1") }, "\(rows)")
        for device in [b, d, e] { #expect(try device.rows() == rows) }
    }

    /// The same for a device restored from a backup that starts across a gap (B cleaned the bundles it needs) from
    /// B's snapshot, which holds C's bundle past C's removal, before the removal reaches it: once it does, what the
    /// snapshot brought is undone, the device waits for a snapshot that does not hold C's later bundle (it names the gap),
    /// starts from B's next one, and nothing of C's later task reaches anyone.
    @Test func aRestoredDeviceThatStartedFromSuchASnapshotUndoesItWhenTheRemovalIsRead() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_(), r = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        for device in [b, c, r] { try device.join(.folder(root), code) }
        _ = try a.tasks.create(title: "A's task")
        _ = try c.tasks.create(title: "C's accepted task")
        for _ in 0..<2 { for device in [a, b, c, r] { try device.sync() } }
        let backup = URL(fileURLWithPath: scratch.path + "/r-backup.db")
        _ = try r.database.backup(to: backup)
        for round in 0..<3 {
            _ = try b.tasks.create(title: "B's task \(round)")
            try b.sync()
        }
        // C's next bundle reaches B (and R), never A; B snapshots and cleans.
        _ = try c.tasks.create(title: "C's task past the removal")
        try c.sync()
        let chain = root + "/devices/" + c.engine.device
        let late = try #require(try FileManager.default.contentsOfDirectory(atPath: chain).sorted().last)
        try b.sync()
        try r.sync()
        try b.engine.writeSnapshot()
        try FileManager.default.moveItem(atPath: chain + "/" + late, toPath: scratch.path + "/late")
        try a.sync()
        try FileManager.default.moveItem(atPath: scratch.path + "/late", toPath: chain + "/" + late)
        try c.sync()
        try r.sync()
        let cleaned = try b.engine.clean()
        #expect(cleaned.removedBundles > 0, "\(cleaned)")
        // A removes C at C's bundle before the late one; its removal and generation 2 are held back from R for now.
        try FileManager.default.moveItem(atPath: chain + "/" + late, toPath: scratch.path + "/late")
        let rosterBefore = Set(SyncRosterFiles.numbers(root: root, device: a.engine.device))
        let (_, newCode) = try SyncEngine.removeDevice(c.engine.device, database: a.database)
        a.engine = try SyncEngine(database: a.database)
        try FileManager.default.moveItem(atPath: scratch.path + "/late", toPath: chain + "/" + late)
        let removalNumber = try #require(SyncRosterFiles.numbers(root: root, device: a.engine.device).first { !rosterBefore.contains($0) })
        let removalFile = SyncRosterFiles.relative(device: a.engine.device, number: removalNumber)
        try FileManager.default.moveItem(atPath: root + "/" + removalFile, toPath: scratch.path + "/removal")
        try FileManager.default.moveItem(atPath: root + "/generation-2", toPath: scratch.path + "/generation-2")
        // R is restored from its backup: B's bundles it needs are gone; it starts from B's snapshot.
        try r.database.restore(from: backup)
        r.engine = try SyncEngine(database: r.database)
        let started = try r.sync()
        #expect(started.snapshot?.hasPrefix("snapshots/\(b.engine.device)") == true, "\(started)")
        #expect(try r.rows().contains { $0.contains("C's task past the removal") })
        // The removal arrives: undone; the only snapshot holds C's later bundle, so R names the gap and waits.
        try FileManager.default.moveItem(atPath: scratch.path + "/removal", toPath: root + "/" + removalFile)
        _ = try? r.sync()
        var rows = try r.rows()
        #expect(!rows.contains { $0.contains("C's task past the removal") }, "\(rows)")
        // B reads the removal too, undoes C's later bundle, and writes a snapshot without it: R starts from that one.
        try b.sync()
        try b.engine.writeSnapshot()
        try r.sync()
        rows = try r.rows()
        #expect(!rows.contains { $0.contains("C's task past the removal") }, "\(rows)")
        for title in ["A's task", "B's task 2", "C's accepted task"] { #expect(rows.contains { $0.contains(title) }, "\(title): \(rows)") }
        // Generation 2: nothing of C's later task reaches it.
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: root + "/generation-2")
        for device in [b, r] {
            try SyncEngine.rekey(database: device.database, pairingCode: newCode)
            device.engine = try SyncEngine(database: device.database)
        }
        for _ in 0..<2 { for device in [a, b, r] { try device.sync() } }
        rows = try a.rows()
        #expect(!rows.contains { $0.contains("C's task past the removal") }, "\(rows)")
        #expect(try r.rows() == rows)
        #expect(try b.rows() == rows)
    }

    /// Issue 32: a snapshot is believed only when its folder's device signed it. A holder of the sync key writes a
    /// complete, well-sealed snapshot into B's folder (unsigned, or signed with a key that is not B's), claiming to hold
    /// every bundle and carrying a task nobody made: a device that joins skips it and lists it, applies nothing of it and
    /// starts from the bundles; `sync clean` does not take it as holding anyone's bundles and removes nothing.
    /// The undo bookkeeping beside the packed clock (`sync_row_sources`, `sync_preimages`: SyncUndo.swift) is kept only
    /// while a removal could still undo a bundle: in a group of two it is gone after every sync; in a group of three, a
    /// row another device's bundle set stays listed until the third device has applied that bundle too, then goes.
    @Test func theUndoBookkeepingIsKeptOnlyWhileARemovalCouldUndoIt() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        func kept(_ device: SyncDevice_) throws -> (rows: Int, preimages: Int) {
            try device.database.read { db in
                (try db.scalar("SELECT count(*) FROM sync_row_sources", as: Int.self) ?? -1,
                 try db.scalar("SELECT count(*) FROM sync_preimages", as: Int.self) ?? -1)
            }
        }
        let code = try a.initialize(.folder(root))
        try c.join(.folder(root), code)
        let first = try a.tasks.create(title: "seen by two").id
        try a.sync()
        try c.sync()
        #expect(try kept(c) == (0, 0), "two devices: nothing can remove A but C, which applied it")
        try d.join(.folder(root), code)
        try c.sync()
        try a.sync()
        _ = try a.tasks.rename(id: first, to: "renamed, seen by three")
        _ = try a.tasks.create(title: "new, seen by three")
        try a.sync()
        try d.sync()
        let unsettled = try kept(d)
        #expect(unsettled.rows == 2 && unsettled.preimages >= 1, "C has not applied A's bundle yet: \(unsettled)")
        try c.sync()
        try d.sync()
        #expect(try kept(d) == (0, 0), "C applied it and said so: nothing left to undo")
        #expect(try d.rows() == a.rows())
    }

    @Test(arguments: [false, true]) func aSnapshotWrittenInAnotherDevicesNameIsSkippedAndListed(signedByAnotherKey: Bool) throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        let shared = try a.tasks.create(title: "A task").id
        try a.sync()
        try b.join(.folder(root), code)
        try b.sync()
        _ = try b.tasks.create(title: "B task")
        try b.sync()
        try a.sync()
        // The forgery: A's row of "A task" under a new key with another title, and A's vector (it holds every bundle).
        let (vector, row, columns) = try a.database.read { db in
            let table = try #require(try SyncSchema.tables(db).first { $0.name == "tasks" })
            var key = [UInt8](repeating: 0, count: 16)
            withUnsafeBytes(of: shared.uuid) { key = Array($0) }
            var row = try SyncMerge.outgoing(db, table, key: .blob(Data(key)))
            row.key = .blob(Data((0..<16).map { UInt8($0 + 1) }))
            row.cells = row.cells.map { cell in
                var cell = cell
                if cell.column == "title" { cell.value = .text("planted by a snapshot") }
                return cell
            }
            return (try SyncVector.current(db, device: a.engine.device, name: "forged"), row, [table.name: table.columns])
        }
        let writer = b.engine.device
        let snapshot = SyncSnapshotFiles.folder(device: writer, number: 1)
        let part = try SyncSnapshotFiles.seal(
            try SyncPayload(deviceName: "forged", tables: columns, rows: [row]).encoded(), sequence: 1,
            aad: SyncSnapshotFiles.partAAD(writer, 1), key: a.engine.key)
        try SyncLayout.writeAtomically(part, root: root, relative: snapshot + "/" + SyncSnapshotFiles.part(1))
        var manifest = try SyncSnapshotFiles.seal(
            SyncSnapshotFiles.Manifest(vector: vector, parts: [(SealedBundle.sha256(part), 1)]).encoded(), sequence: 1,
            aad: SyncSnapshotFiles.manifestAAD(writer), key: a.engine.key)
        if signedByAnotherKey {
            let attacker = try #require(SyncSigningKey.random())
            manifest = try #require(SyncSignedFile.wrap(manifest, device: writer, key: attacker, generation: 1))
        }
        try SyncLayout.writeAtomically(manifest, root: root, relative: snapshot + "/" + SyncSnapshotFiles.manifest)

        try d.join(.folder(root), code)
        let report = try d.sync()
        #expect(report.skippedFiles.contains(snapshot), "\(report.skippedFiles)")
        #expect(report.snapshot == nil)
        #expect(!(try d.rows()).contains { $0.contains("planted by a snapshot") })
        #expect(try d.rows() == a.rows())
        #expect(try d.rows().count == 2)
        // sync clean: the forged snapshot holds nobody's bundles.
        let aBundles = SyncLayout.bundles(root: root, device: a.engine.device).count
        let cleaned = try a.engine.clean()
        #expect(cleaned.removedBundles == 0)
        #expect(cleaned.snapshot == nil)
        #expect(SyncLayout.bundles(root: root, device: a.engine.device).count == aBundles)
        // A genuine snapshot of B is believed.
        try b.sync()
        let info = try b.engine.writeSnapshot()
        let e = try SyncDevice_()
        try e.join(.folder(root), code)
        let joined = try e.sync()
        #expect(joined.snapshot == info.path)
        #expect(try e.rows() == a.rows())
    }
}

