// Full-text indexes kept in step by generated triggers, on rowid and WITHOUT ROWID tables, FTS4 and (where the
// engine has it) FTS5; patterns from any user text never fail; bad definitions change nothing.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

private struct Note: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var title: String
    var body: String
}

private let engines: [FullTextEngine] = Database.supports(.fts5) ? [.fts4, .fts5] : [.fts4]

@Suite struct FullTextSearchTests {
    private func noteSearch(_ engine: FullTextEngine) -> FullTextIndex {
        FullTextIndex(name: "note_search", table: "note", columns: ["title", "body"], engine: engine)
    }

    private func found(_ queue: DatabaseQueue, _ text: String, _ index: FullTextIndex) throws -> [String] {
        try queue.read { db in
            try Note.all().matching(FullTextPattern(matchingAllPrefixesIn: text), in: index)
                .order(Column("id").asc).fetchAll(db).map(\.title)
        }
    }

    @Test(arguments: engines)
    func aRowidTableIsIndexedAndKeptInStep(_ engine: FullTextEngine) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index = noteSearch(engine)
        try queue.write { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
            try db.execute("INSERT INTO note (title, body) VALUES ('before', 'written before the index')")
            try db.create(fullTextIndex: index)
            let note = Note(id: nil, title: "Groceries", body: "milk, bread and Crème fraîche")
            try note.insert(db)
            try db.execute("INSERT INTO note (title, body) VALUES ('Rent', 'pay the landlord')")
        }
        #expect(try found(queue, "before", index) == ["before"])
        #expect(try found(queue, "creme", index) == ["Groceries"])
        #expect(try found(queue, "land pay", index) == ["Rent"])
        #expect(try found(queue, "milk landlord", index) == [])
        try queue.write { db in
            try db.execute("UPDATE note SET body = 'cheese' WHERE title = 'Groceries'")
            try db.execute("DELETE FROM note WHERE title = 'Rent'")
        }
        #expect(try found(queue, "milk", index) == [])
        #expect(try found(queue, "chee", index) == ["Groceries"])
        #expect(try found(queue, "landlord", index) == [])
        let none = try queue.read { db in try Note.all().matching(nil, in: index).fetchCount(db) }
        #expect(none == 0, "a pattern of no word matches nothing")
        try queue.read { db in try db.integrityCheck() }
    }

    @Test(arguments: engines)
    func aWithoutRowidTableIsIndexedThroughItsKey(_ engine: FullTextEngine) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index = FullTextIndex(name: "doc_search", table: "doc", columns: ["text"], key: ["code"], engine: engine)
        try queue.write { db in
            try db.execute("CREATE TABLE doc (code TEXT PRIMARY KEY, text TEXT NOT NULL) WITHOUT ROWID")
            try db.execute("INSERT INTO doc VALUES ('a', 'alpha beta')")
            try db.create(fullTextIndex: index)
            try db.execute("INSERT INTO doc VALUES ('b', 'beta gamma')")
            try db.execute("UPDATE doc SET code = 'c', text = 'gamma delta' WHERE code = 'a'")
        }
        func codes(_ text: String) throws -> [String] {
            let pattern = try #require(FullTextPattern(matchingAllWordsIn: text))
            return try queue.read { db in
                try db.fetch(
                    "SELECT code FROM doc WHERE \(index.conditionSQL) ORDER BY code", [pattern.text(for: engine)]
                ) { try $0.string(at: 0) }
            }
        }
        #expect(try codes("beta") == ["b"])
        #expect(try codes("gamma") == ["b", "c"])
        #expect(try codes("alpha") == [])
        try queue.write { db in try db.execute("DELETE FROM doc WHERE code = 'b'") }
        #expect(try codes("gamma") == ["c"])
        #expect(try queue.read { db in try db.scalar("SELECT count(*) FROM doc_search_keys", as: Int.self) } == 1)
    }

    @Test func phraseAnyWordAndAllWordsPatterns() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index = noteSearch(.fts4)
        try queue.write { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
            try db.create(fullTextIndex: index)
            try db.execute("INSERT INTO note (title, body) VALUES ('one', 'the quick brown fox')")
            try db.execute("INSERT INTO note (title, body) VALUES ('two', 'brown quick')")
        }
        func titles(_ pattern: FullTextPattern?) throws -> [String] {
            try queue.read { db in
                try Note.all().matching(pattern, in: index).order(Column("id").asc).fetchAll(db).map(\.title)
            }
        }
        #expect(try titles(FullTextPattern(matchingPhrase: "Quick, brown!")) == ["one"])
        #expect(try titles(FullTextPattern(matchingAllWordsIn: "brown quick")) == ["one", "two"])
        #expect(try titles(FullTextPattern(matchingAllWordsIn: "quic")) == [])
        #expect(try titles(FullTextPattern(matchingAnyWordIn: "fox zebra")) == ["one"])
        #expect(FullTextPattern(matchingAllPrefixesIn: " -*\"() ") == nil)
        #expect("\(FullTextPattern(matchingAllPrefixesIn: "secret words")!)".contains("secret") == false)
    }

    /// Random strings of quotes, operators, stars, brackets, control characters, NUL, letters of several scripts
    /// and emoji: every pattern built from them runs without an error, on every engine.
    @Test(arguments: engines)
    func noUserTextMakesAQueryFail(_ engine: FullTextEngine) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index = noteSearch(engine)
        try queue.write { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
            try db.create(fullTextIndex: index)
            for title in ["AND OR NOT", "NEAR the end", "quote \" star *", "Ärger über ß", "数据库 加密"] {
                try db.execute("INSERT INTO note (title, body) VALUES (?, '')", [title])
            }
        }
        let alphabet: [String] = [
            "\"", "'", "*", "-", "+", "^", "(", ")", ":", "{", "}", "[", "]", " ", "  ", "\t", "\n", "\0", "\\", "%",
            "_", "AND", "OR", "NOT", "NEAR", "NEAR/3", "and", "a", "Z", "9", "é", "e\u{301}", "ß", "数", "👍🏽", "\u{200D}",
            "\u{FEFF}", "title:", "body:", "NEAR(", "*\"", "\"*", "\u{301}", "\u{20DD}", "𞤀", "ꬰ", "𑀅", "Ⅻ", "²",
        ]
        var generator = SystemRandomNumberGenerator()
        var kinds = 0
        for round in 0..<600 {
            let length = Int.random(in: 0...(round < 590 ? 12 : 400), using: &generator)
            let text = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            for pattern in [
                FullTextPattern(matchingAllPrefixesIn: text), FullTextPattern(matchingAllWordsIn: text),
                FullTextPattern(matchingAnyWordIn: text), FullTextPattern(matchingPhrase: text),
            ] {
                do {
                    _ = try queue.read { db in try Note.all().matching(pattern, in: index).fetchCount(db) }
                    kinds += pattern == nil ? 0 : 1
                } catch {
                    Issue.record("\(error) for the text \(text.debugDescription)")
                }
            }
        }
        #expect(kinds > 0)
        let all = try queue.read { db in
            try Note.all().matching(FullTextPattern(matchingAnyWordIn: "and near quote ärger 数据库"), in: index).fetchCount(db)
        }
        #expect(all == 5, "operators typed by a person are words")
    }

    /// A bulk insert with the index's trigger deferred indexes every row, through updates and deletes made in the
    /// same body, on both kinds of table; the trigger is back afterwards, and a failed body leaves all as before.
    @Test(arguments: [false, true])
    func deferredIndexingIndexesEveryInsertedRow(_ withoutRowid: Bool) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index =
            withoutRowid
            ? FullTextIndex(name: "s", table: "t", columns: ["text"], key: ["code"])
            : FullTextIndex(name: "s", table: "t", columns: ["text"])
        try queue.write { db in
            try db.execute("CREATE TABLE t (code TEXT PRIMARY KEY NOT NULL, text TEXT NOT NULL)" + (withoutRowid ? " WITHOUT ROWID" : ""))
            try db.execute("INSERT INTO t VALUES ('before', 'old words')")
            try db.create(fullTextIndex: index)
        }
        let schema = { try schemaLines(of: queue) }
        let before = try schema()
        try queue.write { db in
            try db.deferringFullTextIndexing(index) {
                for n in 0..<500 { try db.execute("INSERT INTO t VALUES (?, ?)", ["c\(n)", "bulk word\(n)"]) }
                try db.execute("UPDATE t SET text = 'renamed' WHERE code = 'c7'")
                try db.execute("DELETE FROM t WHERE code = 'c8'")
                try db.execute("UPDATE t SET text = 'new words' WHERE code = 'before'")
            }
        }
        #expect(try schema() == before, "the trigger is back, nothing else is left")
        func codes(_ text: String) throws -> [String] { try matchingCodes(text, in: queue, index) }
        #expect(try codes("bulk").count == 498)
        #expect(try codes("word499") == ["c499"])
        #expect(try codes("renamed") == ["c7"])
        #expect(try codes("old").isEmpty && codes("new") == ["before"])
        try queue.write { db in try db.execute("INSERT INTO t VALUES ('after', 'trigger works')") }
        #expect(try codes("trigger") == ["after"])
        // A body that throws: the transaction rolls back, the trigger is still there.
        #expect(throws: CancellationError.self) {
            try queue.write { db in
                try db.deferringFullTextIndexing(index) {
                    try db.execute("INSERT INTO t VALUES ('lost', 'never indexed')")
                    throw CancellationError()
                }
            }
        }
        #expect(try schema() == before)
        #expect(try codes("never").isEmpty)
        try queue.read { db in try db.integrityCheck() }
    }

    /// A row inserted, deleted and inserted again in one deferred body, by statements that say `OR ROLLBACK` (whose
    /// conflict clause overrides the `OR IGNORE` of the trigger that notes the new row: the sync merge writes that
    /// way): its number comes back, and the row is indexed once, on both kinds of table. Before the fix the second
    /// insert failed with "UNIQUE constraint failed: s_deferred.docid" and rolled the whole transaction back.
    @Test(arguments: [false, true])
    func aRowInsertedAgainInOneDeferredBodyIsIndexedOnce(_ withoutRowid: Bool) throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index =
            withoutRowid
            ? FullTextIndex(name: "s", table: "t", columns: ["text"], key: ["code"])
            : FullTextIndex(name: "s", table: "t", columns: ["text"])
        try queue.write { db in
            try db.execute("CREATE TABLE t (code TEXT PRIMARY KEY NOT NULL, text TEXT NOT NULL)" + (withoutRowid ? " WITHOUT ROWID" : ""))
            try db.create(fullTextIndex: index)
        }
        try queue.write { db in
            try db.deferringFullTextIndexing(index) {
                try db.execute("INSERT OR ROLLBACK INTO t VALUES ('a', 'first apple')")
                try db.execute("INSERT OR ROLLBACK INTO t VALUES ('b', 'first banana')")
                try db.execute("DELETE FROM t WHERE code = 'b'")
                try db.execute("INSERT OR ROLLBACK INTO t VALUES ('b', 'second banana')")
                try db.execute("DELETE FROM t WHERE code = 'a'")
                try db.execute("INSERT OR ROLLBACK INTO t VALUES ('c', 'cherry')")
            }
        }
        func codes(_ text: String) throws -> [String] { try matchingCodes(text, in: queue, index) }
        #expect(try codes("banana") == ["b"])
        #expect(try codes("second") == ["b"])
        #expect(try codes("first").isEmpty, "neither deleted text is in the index")
        #expect(try codes("cherry") == ["c"])
        #expect(try codes("apple").isEmpty)
        try queue.read { db in try db.integrityCheck() }
    }

    /// On a keyed index, updates in a deferred body are indexed at the end: rows there before the body and updated
    /// twice, updated then deleted, given a new key, and a column the index does not hold changed — each found by
    /// its new words only, the old words gone, the index's own check passing, the update trigger back afterwards.
    @Test func updatesOfAKeyedIndexAreDeferredAndEndIndexedOnce() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        let index = FullTextIndex(name: "s", table: "t", columns: ["text"], key: ["code"])
        try queue.write { db in
            try db.execute("CREATE TABLE t (code TEXT PRIMARY KEY NOT NULL, text TEXT NOT NULL, n INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID")
            for (code, text) in [("a", "alpha one"), ("b", "bravo one"), ("c", "charlie one"), ("d", "delta one")] {
                try db.execute("INSERT INTO t (code, text) VALUES (?, ?)", [code, text])
            }
            try db.create(fullTextIndex: index)
        }
        let schema = { try schemaLines(of: queue) }
        let before = try schema()
        try queue.write { db in
            try db.deferringFullTextIndexing(index) {
                try db.execute("UPDATE OR ROLLBACK t SET text = 'alpha two' WHERE code = 'a'")
                try db.execute("UPDATE OR ROLLBACK t SET text = 'alpha three' WHERE code = 'a'")
                try db.execute("UPDATE OR ROLLBACK t SET text = 'bravo two' WHERE code = 'b'")
                try db.execute("DELETE FROM t WHERE code = 'b'")
                try db.execute("UPDATE OR ROLLBACK t SET code = 'c2', text = 'charlie two' WHERE code = 'c'")
                try db.execute("UPDATE OR ROLLBACK t SET n = 5 WHERE code = 'd'")
                try db.execute("INSERT OR ROLLBACK INTO t (code, text) VALUES ('e', 'echo one')")
                try db.execute("UPDATE OR ROLLBACK t SET text = 'echo two' WHERE code = 'e'")
            }
        }
        #expect(try schema() == before, "the triggers are back, nothing else is left")
        func codes(_ text: String) throws -> [String] { try matchingCodes(text, in: queue, index) }
        #expect(try codes("alpha") == ["a"])
        #expect(try codes("three") == ["a"])
        #expect(try codes("two") == ["c2", "e"])
        #expect(try codes("bravo").isEmpty, "an updated then deleted row leaves the index")
        #expect(try codes("charlie") == ["c2"], "found by its new key")
        #expect(try codes("one") == ["d"], "only the row whose text did not change keeps its old words")
        try queue.write { db in try db.execute("INSERT INTO s (s) VALUES ('integrity-check')") }
        try queue.write { db in try db.execute("UPDATE t SET text = 'delta after' WHERE code = 'd'") }
        #expect(try codes("after") == ["d"], "the update trigger works again")
        try queue.read { db in try db.integrityCheck() }
    }

    @Test func aBadDefinitionIsRefusedAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("a.db"), key: try testKey())
        try queue.write { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
            try db.execute("CREATE TABLE doc (code TEXT PRIMARY KEY, text TEXT, other TEXT) WITHOUT ROWID")
        }
        let schema = { try queue.read { db in try db.fetch("SELECT sql FROM sqlite_master ORDER BY name") { try $0.string(at: 0) } } }
        let before = try schema()
        let bad: [(FullTextIndex, String)] = [
            (FullTextIndex(name: "s", table: "notes", columns: ["title"]), "no such table: 'notes'"),
            (FullTextIndex(name: "s", table: "note", columns: ["titel"]), "the table 'note' has no column 'titel'"),
            (FullTextIndex(name: "s", table: "note", columns: []), "names no column"),
            (FullTextIndex(name: "s", table: "doc", columns: ["text"]), "is WITHOUT ROWID: give the full-text index 's' a key"),
            (FullTextIndex(name: "s", table: "doc", columns: ["text"], key: ["other"]), "neither its primary key nor a unique index"),
        ]
        for (index, message) in bad {
            let error = expectError(DatabaseError.Code.misuse) { try queue.write { db in try db.create(fullTextIndex: index) } }
            let description = error.map { "\($0)" } ?? ""
            #expect(description.contains(message), "\(index.name) on \(index.table): \(description)")
        }
        #expect(try schema() == before)
    }
}

/// The codes of table `t`'s rows whose words start with those of `text`, through `index` (the deferred-indexing tests).
private func matchingCodes(_ text: String, in queue: DatabaseQueue, _ index: FullTextIndex) throws -> [String] {
    let pattern = try #require(FullTextPattern(matchingAllPrefixesIn: text))
    return try queue.read { db in
        try db.fetch("SELECT code FROM t WHERE \(index.conditionSQL) ORDER BY code", [pattern.text(for: .fts4)]) { try $0.string(at: 0) }
    }
}

/// Every schema object's name and SQL: "nothing else is left" after a deferred body.
private func schemaLines(of queue: DatabaseQueue) throws -> [String] {
    try queue.read { db in
        try db.fetch("SELECT name, coalesce(sql, '') FROM sqlite_master ORDER BY name") { "\(try $0.string(at: 0)) \(try $0.string(at: 1))" }
    }
}
