// The reader/writer protocols: a queue through `some DatabaseReader`, `any DatabaseWriter`, the migrator on them.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// What a component that depends on the protocol (and not on a queue) looks like.
private struct RWNotes {
    let database: any DatabaseWriter

    init(_ database: any DatabaseWriter) throws {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("notes 1") { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        }
        try migrator.migrate(database)
        self.database = database
    }

    func add(_ text: String) throws {
        try database.write { db in try db.execute("INSERT INTO note (text) VALUES (?)", [text]) }
    }

    func texts() throws -> [String] {
        try rwTexts(database)
    }
}

private func rwTexts(_ reader: some DatabaseReader) throws -> [String] {
    try reader.read { db in try db.fetch("SELECT text FROM note ORDER BY id") { try $0.string(at: 0) } }
}

@Suite struct ReaderWriterTests {
    @Test func aQueueWorksThroughTheWriterProtocol() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("notes.db"), key: try testKey())
        let notes = try RWNotes(queue)
        try notes.add("first")
        try notes.add("second")
        #expect(try notes.texts() == ["first", "second"])
        #expect(notes.database.path == directory.file("notes.db"))
        #expect(try DatabaseMigrator().appliedMigrations(notes.database) == ["notes 1"])
        #expect(try DatabaseMigrator().appliedMigrations(queue) == ["notes 1"])
        try queue.close()
    }

    @Test func aWriteThroughTheProtocolRollsBackWhenItsBodyThrows() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("notes.db"), key: try testKey())
        let notes = try RWNotes(queue)
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try notes.database.write { db in
                try db.execute("INSERT INTO note (text) VALUES (?)", ["lost"])
                throw Stop()
            }
        }
        #expect(try notes.texts() == [])
        try queue.close()
    }

    @Test func aReadThroughTheProtocolCannotWrite() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("notes.db"), key: try testKey())
        let notes = try RWNotes(queue)
        let reader: any DatabaseReader = notes.database
        expectError(DatabaseError.Code.readOnly) {
            try reader.read { db in try db.execute("INSERT INTO note (text) VALUES (?)", ["nope"]) }
        }
        #expect(try notes.texts() == [])
        try queue.close()
    }

    @Test func writeWithoutTransactionRunsStatementsThatATransactionRefuses() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("notes.db"), key: try testKey())
        let notes = try RWNotes(queue)
        try notes.add("kept")
        try notes.database.writeWithoutTransaction { db in try db.execute("VACUUM") }
        #expect(try notes.texts() == ["kept"])
        try queue.close()
    }

    @Test func aClosedQueueSaysItIsClosed() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("notes.db"), key: try testKey())
        let notes = try RWNotes(queue)
        try queue.close()
        let error = expectError(DatabaseError.Code.misuse) { try notes.add("late") }
        #expect(error?.message == "the database '\(directory.file("notes.db"))' is closed")
    }
}
