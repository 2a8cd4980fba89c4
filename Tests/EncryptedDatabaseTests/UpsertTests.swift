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

private struct Tag: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var label: String
    var color: String
}

private struct Membership: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var userId: Int64
    var groupId: Int64
    var role: String
}

private let uniqueSchema = """
    CREATE TABLE tag (id INTEGER PRIMARY KEY, label TEXT NOT NULL COLLATE NOCASE UNIQUE, color TEXT NOT NULL);
    CREATE TABLE membership (
        id INTEGER PRIMARY KEY, userId INTEGER NOT NULL, groupId INTEGER NOT NULL, role TEXT NOT NULL,
        UNIQUE (groupId, userId));
    CREATE TABLE log (what TEXT NOT NULL);
    CREATE TRIGGER tag_insert AFTER INSERT ON tag BEGIN INSERT INTO log VALUES ('insert ' || NEW.label); END;
    CREATE TRIGGER tag_update AFTER UPDATE ON tag BEGIN INSERT INTO log VALUES ('update ' || NEW.label); END;
    """

/// Upserts on a unique column and a two-column unique key, then returns what a user would see.
private func uniqueScenario(_ directory: TemporaryDirectory, emulated: Bool) throws
    -> (tags: [Tag], fetched: [Tag], members: [Membership], log: [String])
{
    let queue = try DatabaseQueue(path: directory.file(emulated ? "emulated.db" : "native.db"), key: try testKey())
    let fetched = try queue.write { (db: Database) throws -> [Tag] in
        try db.executeScript(uniqueSchema)
        try Tag(id: nil, label: "swift", color: "orange").upsert(db, onConflict: ["label"], emulated: emulated)
        try Tag(id: nil, label: "rust", color: "red").upsert(db, onConflict: ["label"], emulated: emulated)
        try Tag(id: nil, label: "swift", color: "red").upsert(db, onConflict: ["label"], emulated: emulated)
        // Another id on a conflict keeps the row's id (every column but the primary key is written, as GRDB does);
        // NOCASE: "Swift" is the same label, written as given.
        try Tag(id: 9, label: "Swift", color: "blue").upsert(db, onConflict: ["label"], emulated: emulated)
        let rust = try Tag(id: nil, label: "rust", color: "black").upsertAndFetch(db, onConflict: ["label"], emulated: emulated)
        let go = try Tag(id: nil, label: "go", color: "cyan").upsertAndFetch(db, onConflict: ["label"], emulated: emulated)
        let byKey = try Tag(id: nil, label: "zig", color: "gold").upsertAndFetch(db, onConflict: [], emulated: emulated)
        try Membership(id: nil, userId: 1, groupId: 7, role: "reader").upsert(db, onConflict: ["userId", "groupId"], emulated: emulated)
        try Membership(id: nil, userId: 2, groupId: 7, role: "reader").upsert(db, onConflict: ["userId", "groupId"], emulated: emulated)
        try Membership(id: nil, userId: 1, groupId: 7, role: "admin").upsert(db, onConflict: ["userId", "groupId"], emulated: emulated)
        return [rust, go, byKey]
    }
    return try queue.read { (db: Database) throws in
        (try Tag.order(Column("id")).fetchAll(db), fetched, try Membership.order(Column("id")).fetchAll(db),
         try db.fetch("SELECT what FROM log ORDER BY rowid") { try $0.string(at: 0) })
    }
}

@Suite struct UpsertOnUniqueColumnsTests {
    @Test func theEmulatedUpsertOnAUniqueColumnUpdatesTheRowThatHasItsValue() throws {
        let directory = try TemporaryDirectory()
        let result = try uniqueScenario(directory, emulated: true)
        #expect(result.tags == [
            Tag(id: 1, label: "Swift", color: "blue"), Tag(id: 2, label: "rust", color: "black"),
            Tag(id: 3, label: "go", color: "cyan"), Tag(id: 4, label: "zig", color: "gold"),
        ])
        #expect(result.fetched == Array(result.tags[1...]))
        #expect(result.members == [
            Membership(id: 1, userId: 1, groupId: 7, role: "admin"), Membership(id: 2, userId: 2, groupId: 7, role: "reader"),
        ])
        #expect(result.log == [
            "insert swift", "insert rust", "update swift", "update Swift", "update rust", "insert go", "insert zig",
        ])
    }

    @Test(.enabled(if: sqliteHasUpsert, "the engine has no ON CONFLICT DO UPDATE (SQLite < 3.24, Debian 12)"))
    func theNativeAndTheEmulatedUpsertOnAUniqueColumnLeaveTheSameRows() throws {
        let directory = try TemporaryDirectory()
        let native = try uniqueScenario(directory, emulated: false)
        let emulated = try uniqueScenario(directory, emulated: true)
        #expect(native.tags == emulated.tags && native.fetched == emulated.fetched)
        #expect(native.members == emulated.members && native.log == emulated.log)
    }

    @Test(arguments: [true, false])
    func anUpsertOnTheKeyStillRefusesAnotherUniqueColumnAndATargetThatIsNoConstraintIsAnError(emulated: Bool) throws {
        guard emulated || sqliteHasUpsert else { return }
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("tags.db"), key: try testKey())
        try queue.write { (db: Database) throws in
            try db.executeScript(uniqueSchema)
            try Tag(id: 1, label: "swift", color: "orange").insert(db)
        }
        _ = try queue.read { db in try Tag.fetchCount(db) }  // sets this connection's read mark in the -shm
        let files = try snapshot(directory.path)
        // The primary key is the target of upsert(_:): the label's conflict is the error it was.
        let error = expectError(DatabaseError.Code.constraint) {
            try queue.write { (db: Database) throws in
                try Tag(id: nil, label: "swift", color: "red").upsert(db, emulated: emulated)
            }
        }
        #expect(error?.message.contains("UNIQUE constraint failed: tag.label") == true)
        // A column without a unique constraint is no conflict target, on both paths, with SQLite's words.
        let notUnique = expectError(DatabaseError.Code.sqlite) {
            try queue.write { (db: Database) throws in
                try Tag(id: nil, label: "go", color: "orange").upsert(db, onConflict: ["color"], emulated: emulated)
            }
        }
        #expect(notUnique?.message.contains("ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint") == true)
        expectError(DatabaseError.Code.sqlite) {
            try queue.write { (db: Database) throws in
                try Membership(id: nil, userId: 1, groupId: 7, role: "x").upsert(db, onConflict: ["userId"], emulated: emulated)
            }
        }
        #expect(try snapshot(directory.path) == files)
        #expect(try queue.read { db in try Tag.fetchAll(db) } == [Tag(id: 1, label: "swift", color: "orange")])
    }
}
