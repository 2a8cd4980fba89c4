// A keyed database with reading connections (`readerCount:`): a read issued while a key rotation is under way
// answers before the rotation ends (it reads the file as it was), reads run while a write is open, the handle follows
// the rotation, a restore and a close, and nested calls are refused rather than deadlocking.
import Dispatch
import EncryptedDatabase
import Foundation
import SecureStore
import TestSupport
import Testing

private func kdrCount(_ database: KeyedDatabase) throws -> Int {
    try database.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } ?? -1
}

/// Runs `body` on another thread and waits for it; nil when it has not answered within a minute (it is waiting for
/// something that waits for the caller: a deadlock the test reports instead of hanging).
private func kdrOnAnotherThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> Result<T, any Error>? {
    let done = DispatchSemaphore(value: 0)
    let box = KDBox<Result<T, any Error>>()
    Thread.detachNewThread {
        box.value = Result { try body() }
        done.signal()
    }
    guard done.wait(timeout: .now() + 60) == .success else { return nil }
    return box.value
}

/// A value set on one thread and read on another once it has finished.
final class KDBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T?
    var value: T? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

@Suite(.serialized) struct KeyedDatabaseReadersTests {
    @Test func aReadDuringAKeyRotationAnswersBeforeTheRotationEnds() throws {
        let fixture = try KDFixture()
        let database = try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, readerCount: 2)
        #expect(database.readerCount == 2)
        try kdFill(database)
        let oldKey = try #require(try fixture.storedHex())
        var during: [KeyedDatabase.RotationStep: Result<Int, any Error>?] = [:]
        try database.rotateKey { step in
            // Called on the rotating thread, which holds the handle: a read that waited for the rotation would never
            // answer here.
            guard step == .exported || step == .verified else { return }
            during[step] = kdrOnAnotherThread { try kdrCount(database) }
        }
        #expect(try during[.exported]??.get() == kdRowCount, "a read while the copy was being checked")
        #expect(try during[.verified]??.get() == kdRowCount)
        #expect(try fixture.storedHex() != oldKey, "the rotation finished")
        // After the swap: the readers are on the new file, under the new key.
        try database.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "after"]) }
        #expect(try kdrCount(database) == kdRowCount + 1)
        try database.close()
    }

    @Test func readsRunWhileAWriteIsOpenAndSeeTheLastCommit() throws {
        let fixture = try KDFixture()
        let database = try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, readerCount: 1)
        try kdFill(database, rows: 3)
        var seen: Result<Int, any Error>??
        try database.write { db in
            try db.execute("INSERT INTO item (id, title) VALUES (3, 'uncommitted')")
            seen = kdrOnAnotherThread { try kdrCount(database) }
        }
        #expect(try seen??.get() == 3, "the read did not wait for the write, and did not see it before its commit")
        #expect(try kdrCount(database) == 4)
        try database.close()
    }

    @Test func nestedCallsInsideAReadAreRefused() throws {
        let fixture = try KDFixture()
        let database = try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, readerCount: 2)
        try kdFill(database, rows: 3)
        let write = try #require(expectError(DatabaseError.Code.misuse) {
            try database.read { _ in try database.write { db in try db.execute("DELETE FROM item") } }
        }?.message)
        #expect(write.contains("inside read, write or rotateKey of the same database"))
        let read = try #require(expectError(DatabaseError.Code.misuse) { try database.read { _ in try database.read { _ in 1 } } }?.message)
        #expect(read.contains("inside another read of the same database"))
        expectError(DatabaseError.Code.misuse) { try database.write { _ in try database.read { _ in 1 } } }
        #expect(try kdrCount(database) == 3)
        try database.close()
        let closed = try #require(expectError(DatabaseError.Code.misuse) { try kdrCount(database) }?.message)
        #expect(closed.contains("its KeyedDatabase was closed"))
    }

    @Test func theReadersFollowARestoreIntoTheHandleAndADeletion() throws {
        let fixture = try KDFixture()
        let database = try KeyedDatabase(paths: fixture.paths, name: "tasks", keychain: fixture.keychain, readerCount: 2)
        try kdFill(database)
        let backup = fixture.directory.appendingPathComponent("backups/tasks.db")
        _ = try database.backup(to: backup)
        try database.write { db in try db.execute("DELETE FROM item WHERE id < 100") }
        #expect(try kdrCount(database) == kdRowCount - 100)
        try database.restore(from: backup)
        #expect(try kdrCount(database) == kdRowCount)
        let report = try database.delete()
        #expect(report.removedFiles.first == fixture.path)
        let message = try #require(expectError(DatabaseError.Code.misuse) { try kdrCount(database) }?.message)
        #expect(message.contains("its KeyedDatabase deleted the database"))
    }
}
