// Observation through SQLite's hooks: this handle's own commits are delivered without waiting for the poll
// (the observations here poll once an hour), only to observers of the tables a commit touched, WITHOUT ROWID
// tables included.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// The poll interval of these observations: a value delivered here came from the hooks.
private let hourly = Duration.seconds(3600)

/// Iterates `stream`, collecting every value, until `done` holds for the values so far (or the stream ends, or
/// `failsafe` seconds pass: a guard against a hang, not a timing under test). Returns what was collected.
func observedValues<T: Sendable>(
    _ stream: AsyncThrowingStream<T, any Error>, failsafe: Double = 60, until done: @escaping @Sendable ([T]) -> Bool
) async throws -> [T] {
    try await withThrowingTaskGroup(of: [T]?.self) { group in
        group.addTask {
            var values: [T] = []
            for try await value in stream {
                values.append(value)
                if done(values) { break }
            }
            return values
        }
        group.addTask {
            try await Task.sleep(for: .seconds(failsafe))
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first ?? []
    }
}

@Suite struct HookObservationTests {
    @Test func thisQueuesWriteIsDeliveredWithoutWaitingForThePoll() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        let titles = queue.observe(tables: ["item"], interval: hourly) { db in
            try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) }
        }
        var iterator = titles.makeAsyncIterator()
        #expect(try await iterator.next() == ["one"], "the first result comes at once")
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try await iterator.next() == ["one", "two"], "the commit wakes the observation (the poll is hourly)")
        try queue.writeWithoutTransaction { db in try db.execute("DELETE FROM item WHERE title = 'one'") }
        #expect(try await iterator.next() == ["two"], "a statement outside a transaction commits and wakes it too")
        try await queue.write { db in try db.execute("DELETE FROM item") }
        #expect(try await iterator.next() == [], "a DELETE without WHERE deletes row by row, and is seen")
    }

    @Test func aWriteToAnotherTableGivesNoDuplicateResult() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        try await queue.write { db in try db.execute("CREATE TABLE other (n INTEGER)") }
        let items = queue.observe(tables: ["ITEM"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        let others = queue.observe(tables: ["other"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM other", as: Int.self) ?? 0
        }
        // The first result before any commit: the observation's first read runs when its task does, which may be
        // after the writes below on a loaded machine (then it would start at 2).
        var itemIterator = items.makeAsyncIterator()
        #expect(try await itemIterator.next() == 1)
        var otherIterator = others.makeAsyncIterator()
        #expect(try await otherIterator.next() == 0)
        // Three commits to `other`, each seen by its own observer before the next; then one to `item`.
        for n in 1...3 {
            try await queue.write { db in try db.execute("INSERT INTO other (n) VALUES (?)", [n]) }
            #expect(try await otherIterator.next() == n)
        }
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try await itemIterator.next() == 2, "no result for the commits to the other table")
    }

    @Test func aWithoutRowidTableWakesItsObserversToo() async throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        try await queue.write { db in
            try db.execute("CREATE TABLE setting (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID")
        }
        let values = queue.observe(tables: ["setting"], interval: hourly) { db in
            try db.fetch("SELECT name || '=' || value FROM setting ORDER BY name") { try $0.string(at: 0) }
        }
        var iterator = values.makeAsyncIterator()
        #expect(try await iterator.next() == [])
        try await queue.write { db in try db.execute("INSERT INTO setting VALUES ('theme', 'dark')") }
        #expect(try await iterator.next() == ["theme=dark"], "the update hook is silent here; the change count is not")
        try queue.writeWithoutTransaction { db in try db.execute("DELETE FROM setting") }
        #expect(try await iterator.next() == [])
    }

    @Test func aRolledBackWriteGivesNoResult() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        let counts = queue.observe(tables: ["item"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        var iterator = counts.makeAsyncIterator()
        #expect(try await iterator.next() == 1, "the first result, before any write")
        struct Abandon: Error {}
        for _ in 0..<3 {
            await #expect(throws: Abandon.self) {
                try await queue.write { db in
                    try db.execute("INSERT INTO item (title) VALUES ('rolled back')")
                    throw Abandon()
                }
            }
        }
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two'), ('three')") }
        #expect(try await iterator.next() == 3, "no result for the rolled-back writes")
    }

    @Test func anotherConnectionOfThisProcessIsSeenByThePoll() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let queue = try makeItemDatabase(path, key: try testKey(), titles: ["one"])
        let other = try DatabaseQueue(path: path, key: try testKey())
        let counts = queue.observe(tables: ["item"], interval: .milliseconds(20)) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        let seen = Task { try await observedValues(counts) { $0.last == 2 } }
        try await other.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try await seen.value.last == 2)
    }

    @Test func dropStatementsStillDropWhileDeletesAreSeenRowByRow() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one", "two"])
        try queue.writeWithoutTransaction { db in
            try db.execute("CREATE TABLE gone (n INTEGER)")
            try db.execute("CREATE TABLE gone_too (k TEXT PRIMARY KEY) WITHOUT ROWID")
            try db.execute("CREATE VIEW titles AS SELECT title FROM item")
            try db.execute("DROP TABLE gone")
            try db.execute("DROP TABLE IF EXISTS gone_too")
            try db.execute("DROP VIEW titles")
        }
        #expect(try queue.read { db in try db.fetch("SELECT name FROM sqlite_master ORDER BY name") { try $0.string(at: 0) } }
            == ["item"], "every DROP dropped")
        try queue.write { db in try db.execute("DELETE FROM item") }
        #expect(try titles(queue) == [], "a DELETE without WHERE still deletes every row")
        try queue.write { db in
            try db.execute("CREATE TABLE item2 (n INTEGER)")
            try db.execute("DROP TABLE item2")
            try db.execute("CREATE TABLE item2 (n INTEGER)")
        }
        #expect(try queue.read { db in try db.tableExists("item2") }, "a table made again after a DROP stays")
    }
}
