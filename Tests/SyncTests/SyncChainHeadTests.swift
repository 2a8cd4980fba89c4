import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// How far every chain reached, through the library and a folder (issue 32, part 1): a chain that a folder shows
/// short of what a verified seen vector counts may be a late delivery (a replication engine delivers in its own
/// order), so it is listed and waited for — nothing of it applied, on a new device nothing at all — and becomes
/// `SyncError.Code.rolledBack` once the folder has shown it short for `SyncEngine.lateDelivery`.
@Suite(.serialized) struct SyncChainHeadTests {
    /// Moves the folder remote's file `path` out of it (a file not delivered yet) and returns where it went.
    private func withhold(_ path: String, in scratch: TemporaryDirectory) throws -> String {
        let aside = scratch.path + "/" + namePart(path)
        try FileManager.default.moveItem(atPath: path, toPath: aside)
        return aside
    }

    private func namePart(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }

    /// Makes `device` believe it first saw its short chains more than `lateDelivery` ago.
    private func age(_ device: SyncDevice_) throws {
        try device.database.write { db in
            try db.execute("UPDATE sync_heads SET short_since = short_since - ? WHERE short_since IS NOT NULL", [SyncEngine.lateDelivery + 1])
        }
    }

    /// A's newest bundle withheld from the folder after B applied it and said so in its seen vector: C, new, applies
    /// nothing (not even A's older bundles: that state is stale), lists A's bundle and succeeds; an hour later it is
    /// `rolledBack` naming A's bundle; once the bundle is there C holds every task, with no error.
    @Test func aSuffixAFolderWithholdsIsWaitedForThenReported() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let remote = SyncRemote.folder(root)
        let a = try SyncDevice_(), b = try SyncDevice_(), c = try SyncDevice_()
        let code = try a.initialize(remote)
        try b.join(remote, code)
        try b.sync()
        for title in ["on A one", "on A two"] {
            _ = try a.tasks.create(title: title)
            try a.sync()
        }
        try b.sync()  // applies A's bundles and publishes its seen vector
        let deviceA = a.engine.device
        let newest = try #require(SyncLayout.bundles(root: root, device: deviceA).last)
        let aside = try withhold(newest.path, in: scratch)

        try c.join(remote, code)
        let waiting = try c.sync()
        #expect(waiting.missingBundles == ["devices/\(deviceA)/\(SealedBundle.paddedSequence(newest.sequence))-…"], "\(waiting)")
        #expect(waiting.appliedBundles == 0)
        #expect(try c.rows().isEmpty, "a new device applies nothing of a state it knows is stale")

        try age(c)
        #expect {
            try c.sync()
        } throws: { error in
            guard let error = error as? SyncError, error.code == SyncError.Code.rolledBack else { return false }
            return error.message.contains("device \(deviceA.prefix(8))'s bundle \(newest.sequence)")
                && error.message.contains("a verified seen vector says its chain reached \(newest.sequence)")
                && error.report?.missingBundles.count == 1
        }
        #expect(try c.rows().isEmpty)

        try FileManager.default.moveItem(atPath: aside, toPath: newest.path)
        let whole = try c.sync()
        #expect(whole.missingBundles.isEmpty)
        #expect(try c.rows() == (try a.rows()))
        #expect(try c.rows().count == 2)
        // The next sync does not remember the old shortfall either.
        try age(c)
        try c.sync()
    }

    /// A bundle missing from the middle of A's chain in a folder (2 gone while 3 is there): listed and waited for
    /// (Syncthing may deliver 3 before 2), reported an hour later, and A's own next sync sends it again from its copy.
    @Test func aHoleInAFolderIsWaitedForThenReportedAndItsWriterSendsItAgain() throws {
        let folder = try TemporaryDirectory(), scratch = try TemporaryDirectory()
        let root = folder.path + "/remote"
        let remote = SyncRemote.folder(root)
        let a = try SyncDevice_(), c = try SyncDevice_()
        let code = try a.initialize(remote)
        for title in ["on A one", "on A two"] {
            _ = try a.tasks.create(title: title)
            try a.sync()
        }
        let deviceA = a.engine.device
        let second = try #require(SyncLayout.bundles(root: root, device: deviceA).first { $0.sequence == 2 })
        _ = try withhold(second.path, in: scratch)

        try c.join(remote, code)
        let waiting = try c.sync()
        #expect(waiting.missingBundles == ["devices/\(deviceA)/0000000002-…"], "\(waiting)")
        #expect(try c.rows().isEmpty)
        try age(c)
        #expect {
            try c.sync()
        } throws: { error in
            (error as? SyncError)?.code == SyncError.Code.rolledBack
        }

        // A's own chain has a hole: it is certain at once for A, which sends the bundle again from its copy.
        #expect {
            try a.sync()
        } throws: { error in
            (error as? SyncError)?.code == SyncError.Code.rolledBack && (error as? SyncError)?.report?.resentBundles == 1
        }
        #expect(FileManager.default.fileExists(atPath: second.path))
        try c.sync()
        #expect(try c.rows() == (try a.rows()))
        try a.sync()
    }
}
