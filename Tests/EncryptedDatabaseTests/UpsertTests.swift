// Upsert (native from SQLite 3.24, emulated on Debian 12's 3.15.2: the same rows), INSERT OR …, and the id of
// an integer-keyed record filled by inserted(_:).
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

private struct Player: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var score: Int
}

/// A record that cannot be read back and does not store its rowid: inserted(_:) must say so.
private struct Event: Encodable, PersistableRecord {
    var id: Int64?
    var what: String
}

private let schema = """
    CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, score INTEGER NOT NULL);
    CREATE TABLE event (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
    CREATE TABLE log (what TEXT NOT NULL);
    CREATE TRIGGER player_insert AFTER INSERT ON player BEGIN INSERT INTO log VALUES ('insert ' || NEW.name); END;
    CREATE TRIGGER player_update AFTER UPDATE ON player BEGIN INSERT INTO log VALUES ('update ' || NEW.name); END;
    """

private func makeDatabase(_ directory: TemporaryDirectory, _ name: String) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.file(name), key: try testKey())
    try queue.write { db in try db.executeScript(schema) }
    return queue
}

/// Runs the same upserts, then returns what a user would see: the rows and the trigger log.
private func upsertScenario(_ queue: DatabaseQueue, emulated: Bool) throws -> (players: [Player], log: [String]) {
    try queue.write { (db: Database) throws in
        try Player(id: 1, name: "Arthur", score: 100).upsert(db, emulated: emulated)
        try Player(id: 2, name: "Barbara", score: 50).upsert(db, emulated: emulated)
        try Player(id: 1, name: "Arthur", score: 120).upsert(db, emulated: emulated)
        try Player(id: nil, name: "Craig", score: 7).upsert(db, emulated: emulated)
    }
    return try queue.read { (db: Database) throws in
        (try Player.order(Column("id")).fetchAll(db),
         try db.fetch("SELECT what FROM log ORDER BY rowid") { try $0.string(at: 0) })
    }
}

@Suite struct UpsertTests {
    @Test func theEmulatedUpsertInsertsThenUpdatesEveryColumn() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory, "emulated.db")
        let (players, log) = try upsertScenario(queue, emulated: true)
        #expect(players == [
            Player(id: 1, name: "Arthur", score: 120), Player(id: 2, name: "Barbara", score: 50),
            Player(id: 3, name: "Craig", score: 7),
        ])
        #expect(log == ["insert Arthur", "insert Barbara", "update Arthur", "insert Craig"])
    }

    @Test(.enabled(if: sqliteHasUpsert, "the engine has no ON CONFLICT DO UPDATE (SQLite < 3.24, Debian 12)"))
    func theNativeAndTheEmulatedUpsertLeaveTheSameRowsAndRunTheSameTriggers() throws {
        let directory = try TemporaryDirectory()
        let native = try upsertScenario(try makeDatabase(directory, "native.db"), emulated: false)
        let emulated = try upsertScenario(try makeDatabase(directory, "emulated.db"), emulated: true)
        #expect(native.players == emulated.players)
        #expect(native.log == emulated.log)
    }

    @Test func anEmulatedUpsertThatBreaksAnotherUniqueColumnThrowsAndChangesNothing() throws {
        try upsertBreakingUniqueColumn(emulated: true)
    }

    @Test(.enabled(if: sqliteHasUpsert, "the engine has no ON CONFLICT DO UPDATE (SQLite < 3.24, Debian 12)"))
    func aNativeUpsertThatBreaksAnotherUniqueColumnThrowsAndChangesNothing() throws {
        try upsertBreakingUniqueColumn(emulated: false)
    }

    private func upsertBreakingUniqueColumn(emulated: Bool) throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory, "unique.db")
        try queue.write { (db: Database) throws in
            try Player(id: 1, name: "Arthur", score: 1).insert(db)
            try Player(id: 2, name: "Barbara", score: 2).insert(db)
        }
        let before = try queue.read { (db: Database) throws in try Player.order(Column("id")).fetchAll(db) }
        let files = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.constraint) {
            try queue.write { (db: Database) throws in
                try Player(id: 2, name: "Arthur", score: 9).upsert(db, emulated: emulated)
            }
        }
        #expect(error?.message.contains("UNIQUE constraint failed: player.name") == true)
        #expect(try queue.read { (db: Database) throws in try Player.order(Column("id")).fetchAll(db) } == before)
        #expect(try snapshot(directory.path) == files)
    }

    @Test func insertOnConflictIgnoreSkipsAndReplaceReplaces() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory, "conflict.db")
        try queue.write { (db: Database) throws in
            try Player(id: 1, name: "Arthur", score: 1).insert(db)
            try Player(id: 1, name: "Other", score: 5).insert(db, onConflict: .ignore)
            #expect(db.changes == 0)
            try Player(id: 2, name: "Arthur", score: 9).insert(db, onConflict: .replace)
        }
        let players = try queue.read { (db: Database) throws in try Player.fetchAll(db) }
        #expect(players == [Player(id: 2, name: "Arthur", score: 9)])
        expectError(DatabaseError.Code.constraint) {
            try queue.write { (db: Database) throws in
                try Player(id: 2, name: "Arthur", score: 9).insert(db, onConflict: .abort)
            }
        }
    }

    @Test func insertedFillsANilIntegerKeyOrSaysWhatToWrite() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory, "ids.db")
        // No didInsert(rowID:) written: a FetchableRecord is read back with the key SQLite chose.
        let saved = try queue.write { (db: Database) throws in
            try Player(id: 10, name: "Arthur", score: 1).insert(db)
            return try Player(id: nil, name: "Barbara", score: 2).inserted(db)
        }
        #expect(saved == Player(id: 11, name: "Barbara", score: 2))
        // A type that cannot be read back: the mistake is an error, and nothing was inserted.
        let error = expectError(DatabaseError.Code.misuse) {
            try queue.write { (db: Database) throws in try Event(id: nil, what: "boot").inserted(db) }
        }
        #expect(error?.message == "Event was inserted with a nil 'id' and keeps it: write "
            + "`mutating func didInsert(rowID: Int64) { id = rowID }` in Event, or make it FetchableRecord so that "
            + "inserted(_:) reads the new row back")
        #expect(try queue.read { (db: Database) throws in try db.scalar("SELECT count(*) FROM event", as: Int.self) } == 0)
    }
}
