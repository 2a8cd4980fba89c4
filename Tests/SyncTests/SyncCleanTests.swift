import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// `SyncEngine.clean()` through the library (issue 26): what it removes, and the error a device gets when the bundles
/// it needs are gone and no snapshot holds them.
@Suite(.serialized) struct SyncCleanTests {
    /// A's bundles are cleaned after a snapshot. A device (D) that joins while the snapshot is withheld (moved out
    /// of the folder, as a replication engine that has not delivered it yet) has none of A's chain: that looks like a
    /// late delivery, so the sync succeeds, names A's bundle 1 in `missingBundles`, applies nothing of A's chain, and
    /// sends D's own task. With the snapshot back but tampered with, a device (C) that joins has it refused, and the
    /// gap is `SyncError.Code.missingBundle`, naming the snapshot, the bundle and the oldest file there; nothing of
    /// A's chain is applied. Once A writes a snapshot again (having applied C's and D's bundles, so that it covers
    /// what they have), their next syncs start from it and hold A's tasks.
    @Test func aGapNoSnapshotHoldsIsNamedAndNothingOfItIsApplied() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let remote = SyncRemote.folder(root)
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_(), d = try SyncDevice_()
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        for round in 0..<4 {
            _ = try a.tasks.create(title: "on A \(round)")
            try a.sync()
        }
        try b.sync()
        let info = try a.engine.writeSnapshot()
        try b.sync()
        let cleaned = try a.engine.clean()
        #expect(cleaned.removedBundles == 4, "\(cleaned)")
        #expect(cleaned.cleanedThrough == 4)
        #expect(cleaned.keptBundles == 1)
        #expect(cleaned.snapshot == info.path)
        #expect(cleaned.waitingFor.isEmpty)
        #expect(cleaned.removedBytes > 0)
        let deviceA = a.engine.device
        let oldest = try #require(SyncLayout.bundles(root: root, device: deviceA).first)
        #expect(SyncLayout.bundles(root: root, device: deviceA).map(\.sequence) == [5])
        // A second cleanup has nothing left to do.
        #expect(try a.engine.clean().removedBundles == 0)

        let snapshots = root + "/snapshots"
        try FileManager.default.moveItem(atPath: snapshots, toPath: folder.path + "/withheld")
        _ = try d.tasks.create(title: "on D before it joined")
        try d.join(remote, code)
        let waiting = try d.sync()
        #expect(waiting.missingBundles == ["devices/\(deviceA)/0000000001-…"], "\(waiting.missingBundles)")
        #expect(waiting.snapshot == nil)
        #expect(try d.rows().filter { $0.contains(" on A ") }.isEmpty, "nothing of A's chain was applied")
        try b.sync()
        #expect(try b.rows().contains { $0.contains("on D before it joined") }, "D's own task was sent")

        try FileManager.default.moveItem(atPath: folder.path + "/withheld", toPath: snapshots)
        let part = root + "/" + info.path + "/part-0000000001"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: part))
        bytes[bytes.count - 20] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: part))
        _ = try c.tasks.create(title: "on C before it joined")
        try c.join(remote, code)
        do {
            try c.sync()
            Issue.record("a sync across a gap whose snapshot was refused succeeded")
        } catch let error as SyncError {
            #expect(error.code == SyncError.Code.missingBundle, "\(error)")
            #expect(error.message.contains("refused the snapshot '\(info.path)'"), "\(error.message)")
            #expect(error.message.contains("device \(deviceA.prefix(8))'s bundle 1"), "\(error.message)")
            #expect(error.message.contains("run 'securestore sync snapshot' on a device that is up to date"))
            #expect(error.path == oldest.path)
        }
        #expect(try c.rows().filter { $0.contains(" on A ") }.isEmpty, "nothing of A's chain was applied")
        #expect(try c.rows().contains { $0.contains("on D before it joined") }, "D's chain applies")
        #expect(try c.engine.devices().first { $0.id == deviceA } == nil)

        try a.engine.writeSnapshot()
        for device in [c, d] {
            let report = try device.sync()
            #expect(report.snapshot != nil)
            #expect(report.missingBundles.isEmpty)
        }
        try a.sync()
        #expect(try a.rows().count == 6)
        #expect(try c.rows() == (try a.rows()))
        #expect(try d.rows() == (try a.rows()))
    }
}
