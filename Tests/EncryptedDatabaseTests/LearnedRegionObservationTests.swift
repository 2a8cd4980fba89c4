// Observation that learns the tables its query reads (SQLite's authorizer, while statements are prepared): no
// table list, only the commits that matter, a misspelt table refused, duplicates removable.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// The poll interval of these observations: a value delivered here came from the hooks.
private let hourly = Duration.seconds(3600)

@Suite struct LearnedRegionObservationTests {
    @Test func aStatementKnowsTheTablesItReadsThroughJoinsAndViews() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        try queue.write { db in
            try db.execute("CREATE TABLE Tag (item INTEGER, name TEXT)")
            try db.execute("CREATE VIEW tagged AS SELECT title, name FROM item JOIN tag ON tag.item = item.id")
            try db.execute("CREATE TABLE other (n INTEGER)")
        }
        try queue.read { db in
            #expect(try db.makeStatement("SELECT title FROM item WHERE id > ?").readTables == ["item"])
            #expect(try db.makeStatement("SELECT title FROM item JOIN tag ON tag.item = item.id").readTables == ["item", "tag"])
            let view = try db.makeStatement("SELECT * FROM tagged").readTables
            #expect(view?.isSuperset(of: ["item", "tag"]) == true, "\(String(describing: view))")
            #expect(try db.makeStatement("SELECT 1 + 1").readTables == nil, "a read of no table is unknown, so observed widely")
            #expect(try db.makeStatement("SELECT count(title) FROM item").readTables == ["item"])
            // What Docs/database.md says of Debian 12: SQLite before 3.19 reports no read for count(*).
            let count = try db.makeStatement("SELECT count(*) FROM item").readTables
            #expect(count == (Database.sqliteVersion < SQLiteVersion(3, 19, 0) ? nil : ["item"]))
        }
    }

    @Test func anObservationWithoutATableListIsWokenOnlyByTheTablesItReads() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        try await queue.write { db in try db.execute("CREATE TABLE other (n INTEGER)") }
        let items = queue.observe(interval: hourly) { db in
            try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) }
        }
        let others = queue.observe(interval: hourly) { db in
            try db.fetch("SELECT n FROM other ORDER BY n") { try $0.int(at: 0) }
        }
        // The first result before any commit: while an observation runs its query for the first time, it does
        // not know its tables yet and any commit wakes it (documented), which this test is not about.
        var itemIterator = items.makeAsyncIterator()
        #expect(try await itemIterator.next() == ["one"])
        var otherIterator = others.makeAsyncIterator()
        #expect(try await otherIterator.next() == [])
        // Three commits to `other`, each seen by its own observer before the next; then one to `item`.
        for n in 1...3 {
            try await queue.write { db in try db.execute("INSERT INTO other (n) VALUES (?)", [n]) }
            #expect(try await otherIterator.next() == Array(1...n))
        }
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try await itemIterator.next() == ["one", "two"], "no result for the commits to the other table")
    }

    @Test func aQueryThatChangesItsTablesIsFollowed() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        try await queue.write { db in
            try db.execute("CREATE TABLE setting (useOther INTEGER)")
            try db.execute("INSERT INTO setting VALUES (0)")
            try db.execute("CREATE TABLE other (title TEXT)")
        }
        // Reads `setting`, then `item` or `other` depending on it.
        let titles = queue.observe(interval: hourly) { db in
            let useOther = try db.scalar("SELECT useOther FROM setting", as: Bool.self) ?? false
            return try db.fetch(useOther ? "SELECT title FROM other" : "SELECT title FROM item") { try $0.string(at: 0) }
        }
        var iterator = titles.makeAsyncIterator()
        #expect(try await iterator.next() == ["one"])
        try await queue.write { db in try db.execute("UPDATE setting SET useOther = 1") }
        #expect(try await iterator.next() == [])
        // `item` is no longer read: a commit there gives nothing; one to `other` does.
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        try await queue.write { db in try db.execute("INSERT INTO other VALUES ('elsewhere')") }
        #expect(try await iterator.next() == ["elsewhere"])
    }

    @Test func aMisspeltTableEndsTheObservationWithAnError() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        let counts = queue.observe(tables: ["item", "itmes"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        var received: [Int] = []
        let error = await expectError(DatabaseError.Code.misuse) {
            for try await count in counts { received.append(count) }
        }
        let description = error.map { "\($0)" } ?? ""
        #expect(description.contains("'itmes', which is neither a table nor a view"), "\(description)")
        #expect(received.isEmpty)
        // A name in another case, and a view, are fine.
        try await queue.write { db in try db.execute("CREATE VIEW titles AS SELECT title FROM item") }
        let fine = queue.observe(tables: ["ITEM", "titles"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM titles", as: Int.self) ?? 0
        }
        var iterator = fine.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
    }

    /// SQLite before 3.19 names no table for `count(*)`: alone, or as a subquery of a query that reads another
    /// table's columns, the observation still wakes for its table (the statement's program is read too).
    @Test func aCountSubqueryIsObservedOnEveryEngine() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        try await queue.write { db in
            try db.execute("CREATE TABLE other (n INTEGER)")
            try db.execute("CREATE TABLE unrelated (n INTEGER)")
        }
        let rows = queue.observe(interval: hourly) { db in
            try db.fetch("SELECT title, (SELECT count(*) FROM other) FROM item") { "\(try $0.string(at: 0)) \(try $0.int(at: 1))" }
        }
        var iterator = rows.makeAsyncIterator()
        #expect(try await iterator.next() == ["one 0"])
        try await queue.write { db in try db.execute("INSERT INTO unrelated (n) VALUES (1)") }
        try await queue.write { db in try db.execute("INSERT INTO other (n) VALUES (1)") }
        #expect(try await iterator.next() == ["one 1"], "woken by `other`, not by `unrelated`")
    }

    @Test func removeDuplicatesDropsAResultEqualToThePreviousOne() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        try await queue.write { db in try db.execute("CREATE TABLE other (n INTEGER)") }
        // Observing both tables: a commit to `other` gives the same count again.
        let raw = queue.observe(tables: ["item", "other"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        let deduplicated = queue.observe(tables: ["item", "other"], interval: hourly) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }.removeDuplicates()
        var rawIterator = raw.makeAsyncIterator()
        #expect(try await rawIterator.next() == 1)
        var deduplicatedIterator = deduplicated.makeAsyncIterator()
        #expect(try await deduplicatedIterator.next() == 1, "the first result, before any commit")
        try await queue.write { db in try db.execute("INSERT INTO other (n) VALUES (1)") }
        #expect(try await rawIterator.next() == 1, "the duplicate is there without removeDuplicates")
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try await rawIterator.next() == 2)
        #expect(try await deduplicatedIterator.next() == 2, "the same count again (after the commit to `other`) was dropped")
    }

    @Test func aFullTextQueryIsWokenByChangesOfItsTable() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["Pay rent"])
        let search = FullTextIndex(name: "item_search", table: "item", columns: ["title"])
        try await queue.write { db in try db.create(fullTextIndex: search) }
        let pattern = try #require(FullTextPattern(matchingAllPrefixesIn: "rent"))
        let counts = queue.observe(interval: hourly) { db in
            // Reads the index only: woken by the index's own tables' changes.
            try db.scalar("SELECT count(*) FROM item_search WHERE item_search MATCH ?", [pattern.text(for: .fts4)], as: Int.self) ?? 0
        }
        let values = Task { try await observedValues(counts) { $0.last == 2 } }
        try await queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('Rent again')") }
        #expect(try await values.value.last == 2)
    }
}
