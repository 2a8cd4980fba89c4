// Restoring into an open handle: a read running when the restore is asked for finishes on the database as it was, the
// handle then reads and writes the restored database (new id, new key), its observation fetches again, a queue kept
// from before says why it is closed, and a refusal leaves the handle working on the unchanged database.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

/// The fixture's database with the `kdFill` rows, a backup of them outside the folder, then one row more.
private func kdlBackedUp(_ fixture: KDFixture) throws -> (KeyedDatabase, URL) {
    let database = try fixture.open()
    try kdFill(database)
    let backup = fixture.directory.deletingLastPathComponent()
        .appendingPathComponent(fixture.app + "-backups", isDirectory: true).appendingPathComponent("tasks.db")
    _ = try database.backup(to: backup)
    try database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "after the backup"]) }
    return (database, backup)
}

private func kdlCount(_ database: KeyedDatabase) throws -> Int {
    try database.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } ?? -1
}

/// A flag one thread raises and another waits for.
private final class KDLSignal: @unchecked Sendable {
    private let condition = NSCondition()
    private var raised = false

    func raise() {
        condition.lock()
        raised = true
        condition.broadcast()
        condition.unlock()
    }

    func wait() {
        condition.lock()
        while !raised { condition.wait() }
        condition.unlock()
    }
}

@Suite(.serialized) struct KeyedDatabaseLiveRestoreTests {
    @Test func aRestoreIntoAnOpenHandleWaitsForTheRunningReadThenTheHandleUsesTheRestoredDatabase() async throws {
        let fixture = try KDFixture()
        let (database, backup) = try kdlBackedUp(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let oldID = database.databaseID
        let oldQueue = database.queue
        // Polled once an hour: a value after the first comes from the handle's own notification.
        let counts = database.observe(tables: ["item"], interval: .seconds(3600)) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        var iterator = counts.makeAsyncIterator()
        #expect(try await iterator.next() == kdRowCount + 1)

        // A long read: it has counted the rows and waits; the restore is asked for meanwhile, on another thread.
        let inRead = KDLSignal()
        let finishRead = KDLSignal()
        let readResult = KDBox<(Int, Int)>()
        let readDone = KDLSignal()
        Thread.detachNewThread {
            let counted = try? database.read { db -> (Int, Int) in
                let first = try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? -1
                inRead.raise()
                finishRead.wait()
                return (first, try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? -1)
            }
            readResult.value = counted
            readDone.raise()
        }
        inRead.wait()
        let restoreResult = KDBox<Result<KeyedDatabaseRestoreReport, any Error>>()
        let restoreDone = KDLSignal()
        Thread.detachNewThread {
            restoreResult.value = Result { try database.restore(from: backup) }
            restoreDone.raise()
        }
        // Whether or not the restore has started, it cannot have installed anything while the read runs.
        #expect(try fixture.files() == ["tasks.db", "tasks.db-shm", "tasks.db-wal"])
        finishRead.raise()
        readDone.wait()
        #expect(readResult.value.map { [$0.0, $0.1] } == [kdRowCount + 1, kdRowCount + 1], "the read saw the database as it was, twice")
        restoreDone.wait()
        let report = try #require(try restoreResult.value?.get())

        #expect(database.databaseID == report.databaseID && report.databaseID != oldID)
        #expect(try kdlCount(database) == kdRowCount, "the handle reads the restored database")
        #expect(try await iterator.next() == kdRowCount, "the observation fetched again")
        try await database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "restored, then written"]) }
        #expect(try await iterator.next() == kdRowCount + 1)
        let message = try #require(expectError(DatabaseError.Code.misuse) { try oldQueue.read { _ in 1 } }?.message)
        #expect(message.contains("a restore into its KeyedDatabase replaced this queue"), "\(message)")

        // What is on disk: the restored database (with the write) under its own key, the old one kept aside.
        try database.close()
        let reopened = try fixture.open()
        #expect(reopened.databaseID == report.databaseID)
        #expect(try kdlCount(reopened) == kdRowCount + 1)
        try reopened.close()
        let aside = try #require(report.asidePath)
        let kept = try KeyedDatabase(
            paths: fixture.paths, name: ((aside as NSString).lastPathComponent as NSString).deletingPathExtension,
            keychain: fixture.keychain, createIfMissing: false)
        #expect(kept.databaseID == oldID)
        #expect(try kdlCount(kept) == kdRowCount + 1)
        try kept.close()
    }

    /// Refusals change nothing: another handle has the database open; the backup is damaged. The handle keeps working.
    @Test func aRefusedRestoreLeavesTheHandleWorkingOnTheUnchangedDatabase() throws {
        let fixture = try KDFixture()
        let (database, backup) = try kdlBackedUp(fixture)
        defer { try? FileManager.default.removeItem(at: backup.deletingLastPathComponent()) }
        let id = database.databaseID
        let accounts = try fixture.accounts()

        let second = try fixture.open()
        let message = try #require(expectError(SecureStoreError.Code.inUse) { try database.restore(from: backup) }?.message)
        #expect(message.contains("is open in another process (or another handle)"), "\(message)")
        #expect(try fixture.accounts() == accounts)
        #expect(try kdlCount(second) == kdRowCount + 1)
        try second.close()

        var bytes = try #require(kdBytes(backup.path))
        bytes[bytes.count - 100] ^= 0x5a
        try bytes.write(to: backup)
        expectError(SecureStoreError.Code.verificationFailed) { try database.restore(from: backup) }
        #expect(try fixture.accounts() == accounts)
        #expect(try fixture.files().filter { $0.contains("before-restore") }.isEmpty)
        #expect(database.databaseID == id)
        try database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount + 1, "still here"]) }
        #expect(try kdlCount(database) == kdRowCount + 2)
        try database.close()
    }
}
