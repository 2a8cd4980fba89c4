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
    /// A's bundles are cleaned after a snapshot; the snapshot is then withheld (deleted from the folder, as a
    /// replication engine that has not delivered it yet, or a remote that lost it). A device that joins now cannot
    /// start: `SyncError.Code.missingBundle` names A's bundle 1 and the oldest file there, nothing of A's chain is
    /// applied, and its own task is kept and sent. Once A writes a snapshot again, its next sync starts from it and
    /// holds A's tasks.
    @Test func aGapNoSnapshotHoldsIsNamedAndNothingOfItIsApplied() throws {
        let folder = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let remote = SyncRemote.folder(root)
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
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
        #expect(SyncLayout.bundles(root: root, device: a.engine.device).map(\.sequence) == [5])
        // A second cleanup has nothing left to do.
        #expect(try a.engine.clean().removedBundles == 0)

        try FileManager.default.removeItem(atPath: root + "/snapshots")
        _ = try c.tasks.create(title: "on C before it joined")
        try c.join(remote, code)
        do {
            try c.sync()
            Issue.record("a sync across a gap no snapshot holds succeeded")
        } catch let error as SyncError {
            #expect(error.code == SyncError.Code.missingBundle, "\(error)")
            #expect(error.message.contains("device \(a.engine.device.prefix(8))'s bundle 1"), "\(error.message)")
            #expect(error.message.contains("run 'securestore sync snapshot' on a device that is up to date"))
            #expect(error.path?.hasSuffix(SealedBundle.paddedSequence(5) + "-" + SyncLayout.bundles(root: root, device: a.engine.device)[0].hash) == true)
        }
        #expect(try c.rows().count == 1, "nothing of A's chain was applied")
        #expect(try c.engine.devices().first { $0.id == a.engine.device }?.sequence ?? 0 == 0)
        try b.sync()
        #expect(try b.rows().contains { $0.contains("on C before it joined") }, "C's own task was sent")

        try a.engine.writeSnapshot()
        let report = try c.sync()
        #expect(report.snapshot != nil)
        try a.sync()
        #expect(try c.rows() == (try a.rows()))
        #expect(try a.rows().count == 5)
    }
}
