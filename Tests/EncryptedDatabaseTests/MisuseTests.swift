// Misuse is caught and messages say what happened: a Database kept after its closure, a write inside a read,
// an enum that does not fit its column, several statements in one execute.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct MisuseTests {
    @Test func aDatabaseKeptAfterItsClosureThrowsMisuseInsteadOfWorkingSilently() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("kept.db"), key: try testKey(), titles: ["a"])
        let kept = try queue.write { db in db }
        let files = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.misuse) { try kept.execute("INSERT INTO item (title) VALUES (?)", ["b"]) }
        #expect(error?.message == "a Database was used after the read or write closure that gave it had returned; "
            + "use the db only inside its closure, and keep values, not the db")
        expectError(DatabaseError.Code.misuse) { try kept.fetch("SELECT title FROM item") { try $0.string(at: 0) } }
        #expect(try snapshot(directory.path) == files)
        // The handle itself goes on working, and a new closure's db is fine.
        #expect(try titles(queue) == ["a"])
        let pool = try DatabasePool(path: directory.file("kept.db"), key: try testKey())
        let keptReader = try pool.read { db in db }
        expectError(DatabaseError.Code.misuse) { try keptReader.scalar("SELECT count(*) FROM item", as: Int.self) }
        #expect(try pool.read { db in try db.scalar("SELECT count(*) FROM item", as: Int.self) } == 1)
    }

    @Test func aWriteInsideAReadSaysSoAndNotCheckThePermissions() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("read.db"), key: try testKey(), titles: ["a"])
        let error = expectError(DatabaseError.Code.readOnly) {
            try queue.read { db in try db.execute("DELETE FROM item") }
        }
        #expect(error?.message == "a write was attempted inside a read { db in … }, which only reads; make the change "
            + "inside write { db in … }")
        #expect(error?.description.contains("permissions") == false)
        #expect(try titles(queue) == ["a"])
    }

    @Test func anEnumThatDoesNotFitItsColumnIsNamedByColumn() throws {
        enum Level: String, Codable, DatabaseValueConvertible { case low, high }
        struct Alarm: Codable, FetchableRecord, TableRecord {
            var id: Int64
            var level: Level
        }
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("enum.db"), key: try testKey())
        try queue.write { db in
            try db.execute("CREATE TABLE alarm (id INTEGER PRIMARY KEY, level TEXT NOT NULL)")
            try db.execute("INSERT INTO alarm VALUES (1, 'medium')")
        }
        try queue.read { (db: Database) throws in
            let byRow = expectError(DatabaseError.Code.typeMismatch) {
                try db.fetch("SELECT id, level FROM alarm") { row in try row[1] as Level }
            }
            #expect(byRow?.message == "column 1 (level) holds a value that is not a Level")
            let byRecord = expectError(DatabaseError.Code.typeMismatch) { try Alarm.fetchAll(db) }
            #expect(byRecord?.message == "column 1 (level) holds a value that is not a Level")
        }
    }

    @Test func severalStatementsInOneExecuteRunInOrderWithTheirArguments() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("many.db"), key: try testKey(), titles: ["a"])
        try queue.write { db in
            try db.execute(
                "CREATE TABLE tag (name TEXT); INSERT INTO tag VALUES (?); UPDATE item SET title = ? WHERE id = ?;",
                ["home", "b", 1])
            try db.execute("INSERT INTO tag VALUES (:first); INSERT INTO tag VALUES (:second)",
                           ["first": "x", "second": "y"])
        }
        #expect(try titles(queue) == ["b"])
        #expect(try queue.read { db in try db.fetch("SELECT name FROM tag ORDER BY rowid") { try $0.string(at: 0) } }
            == ["home", "x", "y"])
        // A wrong number of arguments is refused, and the transaction leaves nothing.
        let files = try snapshot(directory.path)
        expectError(DatabaseError.Code.misuse) {
            try queue.write { db in try db.execute("INSERT INTO tag VALUES (?); INSERT INTO tag VALUES (?)", ["z"]) }
        }
        expectError(DatabaseError.Code.misuse) {
            try queue.write { db in try db.execute("INSERT INTO tag VALUES (?); DELETE FROM tag", ["z", "extra"]) }
        }
        #expect(try snapshot(directory.path) == files)
    }
}
