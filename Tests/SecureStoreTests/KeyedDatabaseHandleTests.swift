// The keyed database as a DatabaseWriter: a handle kept across a key rotation keeps working; a queue kept
// from before the rotation says why it is closed.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Synchronization
import TestSupport
import Testing

@Suite(.serialized) struct KeyedDatabaseHandleTests {
    @Test func aHandleKeptAsADatabaseWriterReadsAndWritesAfterARotation() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        let writer: any DatabaseWriter = database
        try kdFill(database)
        let oldHex = try #require(try fixture.storedHex())

        try database.rotateKey()

        #expect(try fixture.storedHex() != oldHex, "the key was rotated")
        try writer.write { db in try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "after"]) }
        let titles = try writer.read { db in try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) } }
        #expect(titles == (0..<kdRowCount).map(kdTitle) + ["after"])
        #expect(writer.path == fixture.path)
        #expect(database.path == database.url.path)
        try database.close()
    }

    @Test func aQueueKeptFromBeforeARotationSaysTheRotationClosedIt() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let kept = database.queue

        try database.rotateKey()

        let message = try #require(expectError(DatabaseError.Code.misuse) { try kept.read { try $0.scalar("SELECT 1", as: Int.self) } }?.message)
        #expect(message.hasPrefix("the database '\(fixture.path)' is closed: a key rotation of its KeyedDatabase replaced this queue"))
        #expect(message.contains("Keep the KeyedDatabase"))
        // The handle itself, and the queue it has now, read the rows.
        #expect(try database.read { try $0.scalar("SELECT count(*) FROM item", as: Int.self) } == kdRowCount)
        try kdExpectRows(database.queue)
        try database.close()
        let closed = try #require(expectError(DatabaseError.Code.misuse) { try database.read { _ in } }?.message)
        #expect(closed == "the database '\(fixture.path)' is closed: its KeyedDatabase was closed")
    }

    @Test func aMigratorAppliesThroughTheKeyedDatabaseBeforeAndAfterARotation() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("notes 1") { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
            try db.execute("INSERT INTO note (text) VALUES ('first')")
        }
        try migrator.migrate(database)
        #expect(try migrator.appliedMigrations(database) == ["notes 1"])

        try database.rotateKey()

        migrator.registerMigration("notes 2") { db in
            try db.execute("ALTER TABLE note ADD COLUMN done INTEGER NOT NULL DEFAULT 0")
            try db.execute("INSERT INTO note (text, done) VALUES ('second', 1)")
        }
        try migrator.migrate(database)
        #expect(try migrator.appliedMigrations(database) == ["notes 1", "notes 2"])
        let rows = try database.read { db in
            try db.fetch("SELECT text, done FROM note ORDER BY id") { "\(try $0.string(at: 0)) \(try $0.int(at: 1))" }
        }
        #expect(rows == ["first 0", "second 1"])
        try database.close()

        // A newer database is still refused through the keyed database: the old migrator knows only "notes 1".
        let reopened = try fixture.open()
        var older = DatabaseMigrator()
        older.registerMigration("notes 1") { _ in }
        _ = expectError(DatabaseError.Code.unknownMigration) { try older.migrate(reopened) }
        try reopened.close()
    }

    @Test func aHandleUsedByAnotherThreadWaitsForTheRotationAndGoesOn() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try database.write { db in try db.execute("CREATE TABLE tick (n INTEGER NOT NULL)") }
        let oldHex = try #require(try fixture.storedHex())

        let writer: any DatabaseWriter = database
        let state = KDHandleProgress()
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { finished.signal() }
            var afterRotation = 0
            for n in 0..<10_000 {
                do {
                    try writer.write { db in try db.execute("INSERT INTO tick (n) VALUES (?)", [n]) }
                    _ = try writer.read { db in try db.scalar("SELECT count(*) FROM tick", as: Int.self) }
                } catch {
                    state.mutex.withLock { $0.errors.append("\(error)") }
                    return
                }
                let rotated = state.mutex.withLock { state in
                    state.written += 1
                    return state.rotated
                }
                if n == 0 { started.signal() }
                if rotated {
                    afterRotation += 1
                    if afterRotation == 20 { return }
                }
            }
            state.mutex.withLock { $0.errors.append("the rotation did not end while 10 000 rows were written") }
        }
        thread.start()
        started.wait()
        try database.rotateKey()
        state.mutex.withLock { $0.rotated = true }
        finished.wait()

        let (written, errors) = state.mutex.withLock { ($0.written, $0.errors) }
        #expect(errors == [], "the other thread's writes all succeeded")
        #expect(written >= 21)
        #expect(try database.read { try $0.scalar("SELECT count(*) FROM tick", as: Int.self) } == written)
        #expect(try fixture.storedHex() != oldHex, "the key was rotated")
        try database.close()
        let queue = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: try #require(try fixture.storedHex())))
        #expect(try queue.read { try $0.scalar("SELECT count(*) FROM tick", as: Int.self) } == written)
        try queue.close()
    }

    @Test func aNestedCallOnTheSameHandleThrowsInsteadOfDeadlocking() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database, rows: 3)

        let nested = try #require(expectError(DatabaseError.Code.misuse) {
            try database.write { _ in try database.read { _ in } }
        }?.message)
        #expect(nested.contains("was called inside read, write or rotateKey of the same database"))
        _ = expectError(DatabaseError.Code.misuse) { try database.read { _ in try database.rotateKey() } }
        // The queue, asked for inside a write, is handed out (no deadlock), and refuses a nested read.
        let inner = try #require(expectError(DatabaseError.Code.misuse) {
            try database.write { _ in try database.queue.read { _ in } }
        }?.message)
        #expect(inner.hasPrefix("read or write was called inside another read or write of the same database"))
        var inProgress: [String] = []
        try database.rotateKey { _ in
            do {
                try database.read { _ in }
                inProgress.append("read")
            } catch {
                inProgress.append((error as? DatabaseError)?.code.name ?? "\(error)")
            }
        }
        #expect(inProgress == Array(repeating: "misuse", count: KeyedDatabase.RotationStep.allCases.count))
        try kdExpectRows(database.queue, rows: 3)
        try database.close()
    }
}

/// What the writing thread has done, shared with the test.
private final class KDHandleProgress: Sendable {
    let mutex = Mutex<(written: Int, rotated: Bool, errors: [String])>((0, false, []))
}
