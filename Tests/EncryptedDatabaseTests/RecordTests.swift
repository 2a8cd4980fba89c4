// Records: Codable values stored as rows and read back, queried with bound filters, and refused cleanly.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// The seeds' to-do item, with the kinds of properties apps have: a UUID key, a date, an enum, an optional, a
/// nested Codable value.
private struct Todo: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "todo"

    enum Priority: Int, Codable { case low, normal, high }
    struct Details: Codable, Equatable {
        var tags: [String]
        var estimateMinutes: Int
    }

    var id: UUID
    var title: String
    var isDone: Bool
    var creationDate: Date
    var priority: Priority
    var note: String?
    var details: Details?

    init(
        _ title: String, isDone: Bool = false, priority: Priority = .normal, note: String? = nil,
        details: Details? = nil, creationDate: Date = Date(timeIntervalSince1970: 1_700_000_000)
    ) {
        id = UUID()
        self.title = title
        self.isDone = isDone
        // The database keeps whole microseconds.
        self.creationDate = Date(
            timeIntervalSince1970: (creationDate.timeIntervalSince1970 * 1_000_000).rounded() / 1_000_000)
        self.priority = priority
        self.note = note
        self.details = details
    }
}

/// An integer-keyed record whose key SQLite chooses.
private struct Player: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var score: Int

    mutating func didInsert(rowID: Int64) { id = rowID }

    func willSave(_ db: Database) throws {
        guard !name.isEmpty else { throw DatabaseError(.constraint, "a player needs a name") }
    }
}

private let todoSchema = """
    CREATE TABLE todo (
        id BLOB PRIMARY KEY NOT NULL,
        title TEXT NOT NULL,
        isDone INTEGER NOT NULL,
        creationDate INTEGER NOT NULL,
        priority INTEGER NOT NULL,
        note TEXT,
        details TEXT
    );
    CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL);
    """

private func makeRecordDatabase(_ directory: TemporaryDirectory) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.file("records.db"), key: try testKey())
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in try db.executeScript(todoSchema) }
    try migrator.migrate(queue)
    return queue
}

@Suite struct RecordTests {
    @Test func aCodableRecordReadsBackEqualAndIsStoredTheWayRowsReadIt() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let todo = Todo(
            "Pay rent", priority: .high, note: "before the 3rd",
            details: .init(tags: ["home", "money"], estimateMinutes: 10))
        try queue.write { db in try todo.insert(db) }

        let fetched = try queue.read { db in try Todo.fetchOne(db, id: todo.id) }
        #expect(fetched == todo)

        // The columns hold what Row reads: a 16-byte blob, integer microseconds, 0/1, the raw value, JSON text.
        let stored = try queue.read { (db: Database) throws in
            try db.fetchOne(
                "SELECT typeof(id), length(id), creationDate, isDone, priority, details FROM todo WHERE id = ?",
                [todo.id]
            ) { row in
                (try row.string(at: 0), try row.int(at: 1), try row[2] as Date, try row.int(at: 3),
                 try row.int(at: 4), try row.string(at: 5))
            }
        }
        #expect(stored?.0 == "blob" && stored?.1 == 16)
        #expect(stored?.2 == todo.creationDate)
        #expect(stored?.3 == 0 && stored?.4 == 2)
        #expect(stored?.5 == #"{"estimateMinutes":10,"tags":["home","money"]}"#)
    }

    @Test func uuidsDatesAndDataPresentOrNilAreStoredAsRowsReadThem() throws {
        // The encoder stores UUID, Date and Data without a conformance lookup; optionals and wrappers of them too.
        struct Reference: Codable, Equatable { var id: UUID }  // keyed: stored as JSON
        struct Wrapped: Codable, Equatable {  // a single value: stored as the UUID itself
            var id: UUID
            init(_ id: UUID) { self.id = id }
            init(from decoder: any Decoder) throws { id = try decoder.singleValueContainer().decode(UUID.self) }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode(id)
            }
        }
        struct Attachment: Codable, Equatable, FetchableRecord, PersistableRecord {
            var id: UUID
            var parent: UUID?
            var bytes: Data
            var checked: Date?
            var wrapped: Wrapped
            var reference: Reference?
        }
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("attachments.db"), key: try testKey())
        let first = Attachment(
            id: UUID(), parent: UUID(), bytes: Data([0, 1, 2, 255]), checked: Date(timeIntervalSince1970: 1_700_000_000.123_456),
            wrapped: Wrapped(UUID()), reference: Reference(id: UUID()))
        let second = Attachment(id: UUID(), parent: nil, bytes: Data(), checked: nil, wrapped: Wrapped(UUID()), reference: nil)
        try queue.write { db in
            try db.execute(
                "CREATE TABLE attachment (id BLOB PRIMARY KEY, parent BLOB, bytes BLOB NOT NULL, checked INTEGER, wrapped BLOB, reference TEXT)")
            try first.insert(db)
            try second.insert(db)
        }
        let stored = try queue.read { (db: Database) throws in
            try db.fetch(
                "SELECT typeof(parent), length(parent), typeof(bytes), length(bytes), typeof(checked), checked, "
                    + "typeof(wrapped), length(wrapped), typeof(reference) FROM attachment ORDER BY parent IS NULL"
            ) { row in
                try (0..<9).map { column in try row.isNull(at: column) ? "NULL" : try row.string(at: column) }
                    .joined(separator: " ")
            }
        }
        #expect(stored == [
            "blob 16 blob 4 integer 1700000000123456 blob 16 text",
            "null NULL blob 0 null NULL blob 16 null",
        ])
        #expect(try queue.read { db in try Attachment.fetchOne(db, id: first.id) } == first)
        #expect(try queue.read { db in try Attachment.fetchOne(db, id: second.id) } == second)

        // The container an app inspects shows the UUIDs as the blobs they are stored as.
        let container = try first.persistenceContainer()
        #expect(container.columns == ["id", "parent", "bytes", "checked", "wrapped", "reference"])
        #expect(container.values[0] == .blob(withUnsafeBytes(of: first.id.uuid) { Data($0) }))
        #expect(container.values[1] == .blob(withUnsafeBytes(of: first.parent!.uuid) { Data($0) }))
        #expect(container["id"] as? DatabaseValue == .blob(withUnsafeBytes(of: first.id.uuid) { Data($0) }))
        #expect(try second.persistenceContainer().values[1] == .null)
        // Upserting and updating through the same container keep the key a 16-byte blob.
        var changed = second
        changed.bytes = Data([9])
        try queue.write { db in
            try changed.update(db)
            try changed.upsert(db)
        }
        #expect(try queue.read { db in try Attachment.fetchOne(db, id: second.id) } == changed)
        #expect(try queue.read { db in try Attachment.fetchCount(db) } == 2)
    }

    @Test func queriesFilterOrderLimitAndCountWithBoundValues() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let base = Date(timeIntervalSince1970: 1_700_000_000)
        let todos = (0..<10).map { i in
            Todo("task \(i)", isDone: i % 3 == 0, creationDate: base.addingTimeInterval(Double(i)))
        }
        try queue.write { db in for todo in todos { try todo.insert(db) } }

        try queue.read { (db: Database) throws in
            #expect(try Todo.fetchCount(db) == 10)
            #expect(try Todo.filter(Column("isDone") == true).fetchCount(db) == 4)
            let newestOpen = try Todo.filter(Column("isDone") == false)
                .order(Column("creationDate").desc).limit(2).fetchAll(db)
            #expect(newestOpen.map(\.title) == ["task 8", "task 7"])
            let secondPage = try Todo.all().order(Column("creationDate").asc).limit(3, offset: 3).fetchAll(db)
            #expect(secondPage.map(\.title) == ["task 3", "task 4", "task 5"])
            #expect(try Todo.all().limit(3, offset: 8).fetchCount(db) == 2)
            #expect(try Todo.filter(Column("title").like("task 1%")).fetchOne(db)?.title == "task 1")
            #expect(try Todo.filter(Column("note") == nil).fetchCount(db) == 10)
            #expect(try Todo.filter(Column("priority") == Todo.Priority.normal.rawValue).fetchCount(db) == 10)
            let some = try Todo.fetchAll(db, ids: [todos[1].id, todos[2].id, UUID()])
            #expect(Set(some.map(\.title)) == ["task 1", "task 2"])
            let either = try Todo.filter(Column("title") == "task 0" || !(Column("isDone") == true)).fetchCount(db)
            #expect(either == 7)
        }
    }

    @Test func aValueThatLooksLikeSQLIsBoundNotRun() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let hostile = "x'); DROP TABLE todo; --"
        try queue.write { db in try Todo(hostile).insert(db) }
        try queue.read { (db: Database) throws in
            #expect(try Todo.filter(Column("title") == hostile).fetchOne(db)?.title == hostile)
            #expect(try Todo.filter(sql: "title = ?", arguments: [hostile]).fetchCount(db) == 1)
            #expect(try db.tableExists("todo"))
        }
    }

    @Test func updateSaveAndDeleteWorkByPrimaryKey() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        var todo = Todo("Buy milk", note: "2 litres")
        try queue.write { db in try todo.insert(db) }

        todo.isDone = true
        todo.note = nil  // nil clears the column on update, it is not left out
        try queue.write { db in try todo.update(db) }
        #expect(try queue.read { db in try Todo.fetchOne(db, id: todo.id) } == todo)

        let unsaved = Todo("Walk the dog")
        try queue.write { db in
            try unsaved.save(db)  // no row yet: inserted
            try unsaved.save(db)  // now updated, not inserted twice
        }
        #expect(try queue.read { db in try Todo.fetchCount(db) } == 2)

        #expect(try queue.write { db in try todo.delete(db) } == true)
        #expect(try queue.write { db in try todo.delete(db) } == false)
        #expect(try queue.read { db in try todo.exists(db) } == false)
        #expect(try queue.read { db in try unsaved.exists(db) } == true)
        #expect(try queue.write { db in try Todo.deleteOne(db, id: unsaved.id) } == true)
        #expect(try queue.read { db in try Todo.fetchCount(db) } == 0)
    }

    @Test func updatingAMissingRowThrowsNotFoundAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let kept = Todo("kept")
        try queue.write { db in try kept.insert(db) }
        let before = try queue.read { db in try Todo.fetchAll(db) }
        #expect {
            try queue.write { db in try Todo("never inserted").update(db) }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.notFound
                && "\(error)".contains("no row of table 'todo'")
        }
        #expect(try queue.read { db in try Todo.fetchAll(db) } == before)
    }

    @Test func anIntegerKeyChosenBySQLiteIsReturnedByInsert() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let alice = try queue.write { db in try Player(id: nil, name: "Alice", score: 10).inserted(db) }
        let bob = try queue.write { db in try Player(id: nil, name: "Bob", score: 3).inserted(db) }
        #expect(alice.id == 1 && bob.id == 2)
        let ranked = try queue.read { db in try Player.order(Column("score").desc).fetchAll(db) }
        #expect(ranked == [alice, bob])
    }

    @Test func willSaveRefusesAWriteAndNothingIsStored() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        #expect {
            try queue.write { db in try Player(id: nil, name: "", score: 1).insert(db) }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.constraint && "\(error)".contains("needs a name")
        }
        #expect(try queue.read { db in try Player.fetchCount(db) } == 0)
    }

    @Test func aRowThatDoesNotFitTheRecordGetsAClearError() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        try queue.write { db in
            try Todo("one").insert(db)
            try db.execute("INSERT INTO player (name, score) VALUES ('x', 1)")
        }
        try queue.read { (db: Database) throws -> Void in
            // A query that leaves a column out.
            #expect {
                try Todo.fetchAll(db, sql: "SELECT id, title FROM todo")
            } throws: { error in
                (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
                    && "\(error)".contains("no column named 'isDone'")
            }
        }
        // A raw value the enum does not have.
        try queue.write { db in try db.execute("UPDATE todo SET priority = 7") }
        #expect {
            try queue.read { db in try Todo.fetchAll(db) }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
        }
        // JSON text that is not the nested value's.
        try queue.write { db in try db.execute("UPDATE todo SET priority = 1, details = '{\"tags\": 3}'") }
        #expect {
            try queue.read { db in try Todo.fetchAll(db) }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
                && "\(error)".contains("does not hold the JSON of a Details")
        }
    }

    /// The decoder reuses a statement's keyed container from row to row, and only while no one else holds it: a
    /// container a record keeps still reads its own row while it lasts and throws `misuse` once the statement has
    /// moved on, a record that asks for two containers on one row reads both, and a statement is released after
    /// its fetch (the container it kept is dropped when it is reset).
    @Test func aKeptContainerKeepsItsRowAndTheStatementIsReleasedAfterItsFetch() throws {
        struct Keeper: Decodable, FetchableRecord {
            enum CodingKeys: String, CodingKey { case title, isDone }
            var title: String
            var container: KeyedDecodingContainer<CodingKeys>
            init(from decoder: any Decoder) throws {
                container = try decoder.container(keyedBy: CodingKeys.self)
                title = try container.decode(String.self, forKey: .title)
            }
        }
        struct Twice: Decodable, Equatable, FetchableRecord {
            enum CodingKeys: String, CodingKey { case title, isDone }
            var title: String
            var isDone: Bool
            init(title: String, isDone: Bool) { (self.title, self.isDone) = (title, isDone) }
            init(from decoder: any Decoder) throws {
                let first = try decoder.container(keyedBy: CodingKeys.self)
                let second = try decoder.container(keyedBy: CodingKeys.self)
                title = try first.decode(String.self, forKey: .title)
                isDone = try second.decode(Bool.self, forKey: .isDone)
                guard try first.decode(Bool.self, forKey: .isDone) == isDone else {
                    throw DatabaseError(.misuse, "two containers of one row disagree")
                }
            }
        }
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let todos = (0..<6).map { Todo("t\($0)", isDone: $0 % 2 == 1) }
        try queue.write { db in for todo in todos { try todo.insert(db) } }
        weak var released: Statement?
        try queue.read { (db: Database) throws -> Void in
            let sql = "SELECT title, isDone FROM todo ORDER BY title"
            let kept = try Keeper.fetchAll(db, sql: sql)
            #expect(kept.map(\.title) == ["t0", "t1", "t2", "t3", "t4", "t5"])
            for keeper in kept {
                #expect {
                    try keeper.container.decode(String.self, forKey: .title)
                } throws: { error in
                    (error as? DatabaseError)?.code == DatabaseError.Code.misuse
                        && "\(error)".contains("a row was used after its statement moved on")
                }
            }
            let expected = (0..<6).map { Twice(title: "t\($0)", isDone: $0 % 2 == 1) }
            #expect(try Twice.fetchAll(db, sql: sql) == expected)
            // Each row once more, after rows whose containers were kept.
            #expect(try Twice.fetchAll(db, sql: sql) == expected)
            let statement = try db.makeStatement(sql)
            released = statement
            #expect(try statement.fetch { row in try Twice(row: row) } == expected)
        }
        #expect(released == nil)
    }

    /// The decoder remembers the order in which a record asks for its keys, names that are no column included,
    /// to skip the hash on later rows: whatever order the SELECT gives the columns, whatever order the record asks
    /// for them (even one that changes from row to row), and with keys that are no column, every row decodes as
    /// it would alone; a NULL for a non-optional and a value an enum does not have still name their column.
    @Test func keysAskedInAnyOrderAndKeysThatAreNoColumnDecodeTheSameOnEveryRow() throws {
        struct Entry: Decodable, Equatable, FetchableRecord {
            enum CodingKeys: String, CodingKey { case id, title, isDone, note, missing }
            var title: String
            var detail: String?
            var missing: String?
            init(title: String, detail: String?, missing: String? = nil) {
                (self.title, self.detail, self.missing) = (title, detail, missing)
            }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                // Done rows ask for a key that is no column first; the others ask for the title first.
                if try container.decode(Bool.self, forKey: .isDone) {
                    missing = try container.decodeIfPresent(String.self, forKey: .missing)
                    detail = try container.decodeIfPresent(String.self, forKey: .note)
                    title = try container.decode(String.self, forKey: .title)
                } else {
                    title = try container.decode(String.self, forKey: .title)
                    missing = try container.decodeIfPresent(String.self, forKey: .missing)
                    detail = nil
                }
            }
        }
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        let todos = (0..<6).map { Todo("t\($0)", isDone: $0 % 2 == 1, note: $0 == 3 ? nil : "n\($0)") }
        try queue.write { db in for todo in todos { try todo.insert(db) } }
        try queue.read { (db: Database) throws -> Void in
            let reordered = try Todo.fetchAll(
                db, sql: "SELECT details, note, priority, creationDate, isDone, title, id FROM todo ORDER BY title")
            #expect(reordered == todos)
            let entries = try Entry.fetchAll(db, sql: "SELECT note, title, isDone FROM todo ORDER BY title")
            #expect(entries == [
                Entry(title: "t0", detail: nil), Entry(title: "t1", detail: "n1"), Entry(title: "t2", detail: nil),
                Entry(title: "t3", detail: nil), Entry(title: "t4", detail: nil), Entry(title: "t5", detail: "n5"),
            ])
            #expect {
                try Todo.fetchAll(
                    db, sql: "SELECT id, CASE WHEN title = 't4' THEN NULL ELSE title END AS title, isDone, "
                        + "creationDate, priority, note, details FROM todo ORDER BY creationDate, id")
            } throws: { error in
                (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
                    && "\(error)".contains("column 1 (title) is NULL")
            }
        }
        try queue.write { db in try db.execute("UPDATE todo SET priority = 9 WHERE title = 't5'") }
        #expect {
            try queue.read { db in try Todo.fetchAll(db, sql: "SELECT * FROM todo ORDER BY title") }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
                && "\(error)".contains("column 4 (priority) holds a value that is not a Priority")
        }
    }

    @Test func fetchingAgainReusesTheStatementAndItsColumnLookup() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        try queue.write { db in
            let prepared = db.preparedStatementCount
            for i in 0..<50 { try Todo("t\(i)").insert(db) }
            #expect(db.preparedStatementCount == prepared + 1, "one INSERT statement for every record")
        }
        try queue.read { (db: Database) throws in
            _ = try Todo.fetchAll(db)
            let prepared = db.preparedStatementCount
            for _ in 0..<20 { #expect(try Todo.fetchAll(db).count == 50) }
            #expect(db.preparedStatementCount == prepared, "the same query is not prepared again")
        }
        try queue.write { db in
            let prepared = db.preparedStatementCount
            for i in 0..<20 { try Todo("more \(i)").insert(db) }
            #expect(db.preparedStatementCount == prepared, "the connection keeps the INSERT")
        }
    }

    @Test func aRawRepresentableEnumGetsItsDatabaseConformanceFromOneLine() throws {
        enum Level: String, DatabaseValueConvertible { case low, high }
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        try queue.write { db in
            try db.execute("CREATE TABLE setting (level TEXT)")
            try db.execute("INSERT INTO setting (level) VALUES (?)", [Level.high])
            try db.execute("INSERT INTO setting (level) VALUES ('medium')")
        }
        try queue.read { (db: Database) throws in
            #expect(try db.fetchOne("SELECT level FROM setting WHERE rowid = 1") { try $0[0] as Level } == .high)
            #expect {
                try db.fetchOne("SELECT level FROM setting WHERE rowid = 2") { try $0[0] as Level }
            } throws: { error in
                (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
                    && "\(error)".contains("not a Level")
            }
        }
    }

    @Test func aRecordThatCannotBeStoredAsColumnsGetsAClearErrorAndNothingIsStored() throws {
        /// Encodes itself as one value, not by key: a row has no place for that.
        struct Scalar: Encodable, PersistableRecord {
            static let databaseTableName = "player"
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                try container.encode("not columns")
            }
        }
        /// A score no SQLite integer holds.
        struct Huge: Encodable, PersistableRecord {
            static let databaseTableName = "player"
            var name = "x"
            var score = UInt64.max
        }
        let directory = try TemporaryDirectory()
        let queue = try makeRecordDatabase(directory)
        #expect {
            try queue.write { db in try Scalar().insert(db) }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.misuse
                && "\(error)".contains("Scalar: a record is stored as columns by name; it cannot encode itself as a single value")
        }
        #expect {
            try queue.write { db in try Huge().insert(db) }
        } throws: { error in
            (error as? DatabaseError)?.code == DatabaseError.Code.typeMismatch
                && "\(error)".contains("the value of column 'score' is out of the range of a 64-bit signed integer")
                && !"\(error)".contains("\(UInt64.max)")
        }
        #expect(try queue.read { db in try Player.fetchCount(db) } == 0)
    }

    @Test func aPersistenceContainerDescribesColumnsNeverValues() throws {
        let container = try Todo("secret title 42").persistenceContainer()
        #expect(container.columns == ["id", "title", "isDone", "creationDate", "priority", "note", "details"])
        #expect(!"\(container)".contains("secret"))
        let filter = Column("title") == "secret title 42"
        #expect(!"\(filter)".contains("secret"))
    }
}
