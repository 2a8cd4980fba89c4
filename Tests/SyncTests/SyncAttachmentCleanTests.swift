import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import SecureStoreCore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// `sync clean` and attachment chunks (issue 35 part 4, Docs/sync.md "Attachment chunks"): a device removes its own
/// chunks and manifests no attachment needs, after a grace period and once every device has synced since; a device
/// that holds bytes writes again what is missing; the watcher cleans on a schedule.
@Suite(.serialized) struct SyncAttachmentCleanTests {
    /// The attachment files (name → size) in `device`'s folder of the remote.
    static func files(_ root: String, _ device: String) -> [String: Int] {
        let folder = root + "/attachments/" + device
        var files: [String: Int] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where !name.hasPrefix(".") {
            files[name] = (try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.size] as? Int) ?? -1
        }
        return files
    }

    static func bytes(_ count: Int, seed: UInt8) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) ^ seed })
    }

    /// A deletes its attachment (1.5 MiB: two chunks and a manifest). Its cleanup keeps the files while B has not
    /// synced since (`attachmentsWaitingFor` names B), and within the grace period; once B has synced and the grace
    /// is over, the three files go, counted with their bytes; B's own (none) and the bundles' rules are untouched.
    @Test func anUnneededChunkGoesOnlyOnceEveryDeviceHasSyncedAndTheGraceIsOver() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        let task = try a.tasks.create(title: "Scan")
        let added = try a.tasks.attachments().add([.data(Self.bytes(1_500_000, seed: 1), name: "scan.bin")], to: task.id)[0]
        try a.sync()
        try b.sync()
        let deviceA = a.engine.device, deviceB = b.engine.device
        let before = Self.files(root, deviceA)
        #expect(before.count == 3, "\(before)")
        // Nothing is unneeded yet.
        var cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 0 && cleaned.unreferencedAttachmentFiles == 0, "\(cleaned)")

        _ = try a.tasks.attachments().delete(id: added.id)
        try a.sync()
        cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 0, "B has not synced since: \(cleaned)")
        #expect(cleaned.unreferencedAttachmentFiles == 3)
        #expect(cleaned.attachmentsWaitingFor == [deviceB])
        #expect(Self.files(root, deviceA) == before)

        try b.sync()
        #expect(try b.tasks.attachments().list(of: task.id).isEmpty)
        cleaned = try a.engine.clean(attachmentGrace: .seconds(3600))
        #expect(cleaned.removedAttachmentFiles == 0, "within the grace period: \(cleaned)")
        #expect(cleaned.unreferencedAttachmentFiles == 3 && cleaned.attachmentsWaitingFor.isEmpty)
        #expect(Self.files(root, deviceA) == before)

        cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 3, "\(cleaned)")
        #expect(cleaned.removedAttachmentBytes == Int64(before.values.reduce(0, +)))
        #expect(cleaned.removedBytes >= cleaned.removedAttachmentBytes)
        #expect(cleaned.unreferencedAttachmentFiles == 0)
        #expect(Self.files(root, deviceA).isEmpty)
        #expect(try a.database.read { db in try db.scalar("SELECT count(*) FROM sync_unreferenced_chunks", as: Int.self) } == 0)
        // Both go on syncing; nothing is missing anywhere.
        #expect(try a.sync().missingAttachments == 0)
        #expect(try b.sync().missingAttachments == 0)
    }

    /// A and B attach the same bytes: B writes no file (A's are there). While A knows B's description, A's cleanup
    /// keeps A's files even after A deleted its own attachment. When B's description has not reached A yet (B's
    /// bundle not delivered), A's cleanup removes them; B's next sync writes them again into its own folder, and a
    /// device that joins afterwards reads B's attachment byte for byte.
    @Test func bytesAnotherDeviceStillHoldsAreWrittenAgainAfterACleanup() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        let bytes = Self.bytes(1_300_000, seed: 2)
        let deviceA = a.engine.device, deviceB = b.engine.device

        // While A knows B's description of the same bytes, A's files stay.
        let first = try a.tasks.create(title: "first on A")
        let firstOnA = try a.tasks.attachments().add([.data(bytes, name: "a.bin")], to: first.id)[0]
        try a.sync()
        try b.sync()
        let firstB = try b.tasks.create(title: "first on B")
        _ = try b.tasks.attachments().add([.data(bytes, name: "b.bin")], to: firstB.id)
        #expect(try b.sync().sentAttachmentChunks == 0)
        #expect(Self.files(root, deviceB).isEmpty, "B wrote nothing: A's chunks and manifest are there")
        try a.sync()
        _ = try a.tasks.attachments().delete(id: firstOnA.id)
        try a.sync()
        try b.sync()
        var cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 0 && cleaned.unreferencedAttachmentFiles == 0, "\(cleaned)")
        #expect(Self.files(root, deviceA).count == 3)
        _ = try a.tasks.delete(id: firstB.id)  // B's attachment goes with its task, everywhere
        try a.sync()
        try b.sync()
        cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 3, "\(cleaned)")

        // A attaches the bytes again, B too (no file: A's are there); A deletes its attachment and cleans before
        // B's bundle with the description reaches it.
        let second = try a.tasks.create(title: "second on A")
        let secondOnA = try a.tasks.attachments().add([.data(bytes, name: "a2.bin")], to: second.id)[0]
        try a.sync()
        try b.sync()
        _ = try a.tasks.attachments().delete(id: secondOnA.id)
        try a.sync()
        try b.sync()
        let onB = try b.tasks.create(title: "on B")
        let addedOnB = try b.tasks.attachments().add([.data(bytes, name: "b2.bin")], to: onB.id)[0]
        #expect(try b.sync().sentAttachmentChunks == 0)
        #expect(Self.files(root, deviceB).isEmpty)
        let late = try #require(SyncLayout.bundles(root: root, device: deviceB).last)
        let aside = folder.path + "/late"
        try FileManager.default.moveItem(atPath: late.path, toPath: aside)
        cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 3, "\(cleaned)")
        #expect(Self.files(root, deviceA).isEmpty)

        try FileManager.default.moveItem(atPath: aside, toPath: late.path)
        let resent = try b.sync()
        #expect(resent.sentAttachments == 1 && resent.sentAttachmentChunks == 2, "\(resent)")
        #expect(Self.files(root, deviceB).count == 3)
        try c.join(.folder(root), code)
        #expect(try c.sync().missingAttachments == 0)
        let read = try c.tasks.attachments().store.data(id: addedOnB.id)
        #expect(SealedBundle.sha256([UInt8](read)) == SealedBundle.sha256([UInt8](bytes)))
        // A, which had removed its copy, reads it too.
        try a.sync()
        #expect(try a.tasks.attachments().store.data(id: addedOnB.id) == bytes)
    }

    /// Two attachments that share a chunk: A's cleanup removes what only its deleted attachment needed and keeps the
    /// chunk B's manifest names. When that chunk is gone anyway (a cleanup that ran before B's manifest reached it,
    /// removed here by hand), B, which holds the bytes, writes it again at its next sync although its manifest is
    /// there; a new device reads the bytes intact.
    @Test func aManifestPresentWithAChunkMissingIsWrittenAgainByTheHolder() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        // X = P1 P2 on A; Y = P1 P3 on B: B writes P3 and its manifest, and uses A's P1.
        let p1 = Self.bytes(1 << 20, seed: 3), p2 = Self.bytes(1 << 20, seed: 4), p3 = Self.bytes(1 << 20, seed: 5)
        let onA = try a.tasks.create(title: "X")
        let x = try a.tasks.attachments().add([.data(p1 + p2, name: "x.bin")], to: onA.id)[0]
        try a.sync()
        try b.sync()
        let onB = try b.tasks.create(title: "Y")
        let y = try b.tasks.attachments().add([.data(p1 + p3, name: "y.bin")], to: onB.id)[0]
        #expect(try b.sync().sentAttachmentChunks == 1)
        try a.sync()
        let deviceA = a.engine.device, deviceB = b.engine.device
        #expect(Self.files(root, deviceA).count == 3 && Self.files(root, deviceB).count == 2)

        // A deletes X; everyone syncs; A's cleanup removes X's manifest and P2, and keeps P1, which Y's manifest names.
        _ = try a.tasks.attachments().delete(id: x.id)
        try a.sync()
        try b.sync()
        let cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 2, "\(cleaned)")
        let left = Self.files(root, deviceA)
        #expect(left.count == 1, "\(left)")

        // A cleanup that raced B's upload (B's manifest not delivered to A yet) would have removed P1 too.
        for name in left.keys { try FileManager.default.removeItem(atPath: root + "/attachments/" + deviceA + "/" + name) }
        let healed = try b.sync()
        #expect(healed.sentAttachmentChunks == 1, "B writes P1 again: \(healed)")
        #expect(Self.files(root, deviceB).count == 3)
        try c.join(.folder(root), code)
        let joined = try c.sync()
        #expect(joined.missingAttachments == 0 && joined.fetchedAttachments == 1, "\(joined)")
        #expect(try c.tasks.attachments().store.data(id: y.id) == p1 + p3)
    }

    /// A description in a bundle this device has not applied (B's bundle missing from the remote while a later one is
    /// there, and B's newest seen vector not delivered either, so B's vector does not hold A back) holds every
    /// attachment file back: A does not clean while it is not caught up. When the bundle is back,
    /// A applies it, the bytes are needed again and nothing is unneeded.
    @Test func nothingGoesWhileABundleIsNotApplied() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        let bytes = Self.bytes(700_000, seed: 6)
        let onA = try a.tasks.create(title: "on A")
        let x = try a.tasks.attachments().add([.data(bytes, name: "x.bin")], to: onA.id)[0]
        try a.sync()
        try b.sync()
        _ = try a.tasks.attachments().delete(id: x.id)
        try a.sync()
        try b.sync()
        // B attaches the same bytes (no file written: A's are there), then adds a task in a later bundle.
        let onB = try b.tasks.create(title: "on B")
        let y = try b.tasks.attachments().add([.data(bytes, name: "y.bin")], to: onB.id)[0]
        try b.sync()
        let deviceA = a.engine.device, deviceB = b.engine.device
        // What a replication engine has delivered of B's next sync: its later bundle, but neither the bundle with
        // the description nor B's newer seen vector (B's older one stays where A sees it).
        let seen = root + "/seen/" + deviceB
        let olderSeen = try FileManager.default.contentsOfDirectory(atPath: seen)
        let saved = try olderSeen.map { ($0, try Data(contentsOf: URL(fileURLWithPath: seen + "/" + $0))) }
        _ = try b.tasks.create(title: "later on B")
        try b.sync()
        for name in try FileManager.default.contentsOfDirectory(atPath: seen) { try FileManager.default.removeItem(atPath: seen + "/" + name) }
        for (name, data) in saved { try data.write(to: URL(fileURLWithPath: seen + "/" + name)) }
        let withheld = try #require(SyncLayout.bundles(root: root, device: deviceB).dropLast().last)
        let aside = folder.path + "-withheld"
        try FileManager.default.moveItem(atPath: withheld.path, toPath: aside)
        defer { try? FileManager.default.removeItem(atPath: aside) }
        let before = Self.files(root, deviceA)
        #expect(before.count == 2, "\(before)")
        _ = try? a.engine.clean(attachmentGrace: .zero)
        #expect(Self.files(root, deviceA) == before, "not caught up: nothing of the attachments was removed")

        try FileManager.default.moveItem(atPath: aside, toPath: withheld.path)
        let cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 0 && cleaned.unreferencedAttachmentFiles == 0, "\(cleaned)")
        #expect(Self.files(root, deviceA) == before)
        #expect(try a.tasks.attachments().store.data(id: y.id) == bytes)
    }

    /// Only this device's own folder, only regular files: a file named like a chunk in another device's folder, and
    /// a symbolic link in this device's folder to a file elsewhere, stay (and so does that file); a regular file
    /// planted in this device's folder that nothing needs goes like any other.
    @Test func neverAnotherDevicesFileNorThroughASymbolicLink() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        let onA = try a.tasks.create(title: "on A")
        _ = try a.tasks.attachments().add([.data(Self.bytes(10_000, seed: 7), name: "kept.bin")], to: onA.id)
        try a.sync()
        try b.sync()
        let deviceA = a.engine.device, deviceB = b.engine.device
        let name = String(repeating: "ab", count: 32), other = String(repeating: "cd", count: 32), link = String(repeating: "ef", count: 32)
        let othersFolder = root + "/attachments/" + deviceB
        try FileManager.default.createDirectory(atPath: othersFolder, withIntermediateDirectories: true)
        try Data("planted".utf8).write(to: URL(fileURLWithPath: othersFolder + "/" + name))
        let outside = folder.path + "/outside"
        try Data("not the remote's".utf8).write(to: URL(fileURLWithPath: outside))
        let mine = root + "/attachments/" + deviceA
        try FileManager.default.createSymbolicLink(atPath: mine + "/" + link, withDestinationPath: outside)
        try Data("junk".utf8).write(to: URL(fileURLWithPath: mine + "/" + other))
        try b.sync()
        let cleaned = try a.engine.clean(attachmentGrace: .zero)
        #expect(cleaned.removedAttachmentFiles == 1, "the junk only: \(cleaned)")
        #expect(!FileManager.default.fileExists(atPath: mine + "/" + other))
        #expect(FileManager.default.fileExists(atPath: othersFolder + "/" + name))
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: mine + "/" + link)) == outside)
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == Data("not the remote's".utf8))
        #expect(Self.files(root, deviceA).count == 3, "the attachment's two files and the link")
    }

    /// The watcher cleans by itself: with a short clean interval, an unneeded chunk goes without a command.
    @Test func theWatcherCleansOnItsSchedule() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        try b.join(.folder(root), code)
        let onA = try a.tasks.create(title: "on A")
        let x = try a.tasks.attachments().add([.data(Self.bytes(5_000, seed: 8), name: "x.bin")], to: onA.id)[0]
        try a.sync()
        try b.sync()
        _ = try a.tasks.attachments().delete(id: x.id)
        try a.sync()
        try b.sync()
        let deviceA = a.engine.device
        #expect(Self.files(root, deviceA).count == 2)

        var options = SyncWatchOptions()
        options.cleanInterval = .milliseconds(100)
        options.attachmentGrace = .zero
        let watcher = try SyncWatcher(engine: a.engine, options: options)
        let guardThread = Thread { Thread.sleep(forTimeInterval: 30); watcher.stop() }
        guardThread.start()
        var cleanedReports: [SyncCleanReport] = []
        try watcher.run { event in
            if case .cleaned(let report) = event {
                cleanedReports.append(report)
                if report.removedAttachmentFiles > 0 { watcher.stop() }
            }
        }
        #expect(cleanedReports.last?.removedAttachmentFiles == 2, "\(cleanedReports)")
        #expect(Self.files(root, deviceA).isEmpty)
    }

    /// `snapshotInterval`: the watcher writes a snapshot by itself once something was synced, and none again while
    /// nothing is (three more due times pass with no second snapshot); a device that joins starts from it.
    @Test func theWatcherSnapshotsOnItsScheduleOnlyWhenSomethingWasSynced() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(root))
        for index in 0..<3 { _ = try a.tasks.create(title: "task \(index)") }
        var options = SyncWatchOptions()
        options.snapshotInterval = .milliseconds(100)
        let watcher = try SyncWatcher(engine: a.engine, options: options)
        let guardThread = Thread { Thread.sleep(forTimeInterval: 30); watcher.stop() }
        guardThread.start()
        var snapshots: [SyncSnapshotInfo] = []
        try watcher.run { event in
            if case .snapshotted(let info) = event {
                snapshots.append(info)
                if snapshots.count == 1 { Thread { Thread.sleep(forTimeInterval: 0.4); watcher.stop() }.start() }
            }
        }
        #expect(snapshots.count == 1, "\(snapshots)")
        #expect(snapshots.first?.rows == 3)
        #expect(FileManager.default.fileExists(atPath: root + "/" + (snapshots.first?.path ?? "?") + "/manifest"))
        try b.join(.folder(root), code)
        #expect(try b.sync().snapshot == snapshots.first?.path)
        #expect(try b.rows() == (try a.rows()))
    }
}
