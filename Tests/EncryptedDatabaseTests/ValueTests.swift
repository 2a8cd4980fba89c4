// Round trips of every supported type, arguments, rows and the statement cache.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct ValueTests {
    let directory: TemporaryDirectory
    let queue: DatabaseQueue

    init() throws {
        directory = try TemporaryDirectory()
        queue = try DatabaseQueue(path: directory.file("values.db"), key: try testKey())
        try queue.write { db in try db.execute("CREATE TABLE value (id INTEGER PRIMARY KEY, v)") }
    }

    /// Stores `value` and reads it back as `T?`.
    func roundTrip<T: DatabaseValueConvertible>(_ value: T?) throws -> T? {
        try queue.write { db in
            try db.execute("DELETE FROM value")
            try db.execute("INSERT INTO value (id, v) VALUES (1, ?)", [value])
            return try db.fetchOne("SELECT v FROM value WHERE id = 1") { try $0[0] as T? } ?? nil
        }
    }

    @Test func integersRoundTripIncludingExtremes() throws {
        for value: Int64 in [0, 1, -1, .min, .max] { #expect(try roundTrip(value) == value) }
        #expect(try roundTrip(Int.max) == Int.max)
        #expect(try roundTrip(Int.min) == Int.min)
    }

    @Test func doublesAndBoolsRoundTrip() throws {
        for value in [0.0, -1.5, 1e-300, .greatestFiniteMagnitude, .infinity, -.infinity] {
            #expect(try roundTrip(value) == value)
        }
        #expect(try roundTrip(true) == true)
        #expect(try roundTrip(false) == false)
    }

    @Test func textRoundTripsIncludingUnicodeAndEmpty() throws {
        for value in ["", "plain", "naïve café 日本語 🔐", "e\u{301}", "a\u{0}b"] {
            #expect(try roundTrip(value) == value)
        }
        let empty = try queue.read { db in
            try db.fetchOne("SELECT typeof(v), length(v) FROM value") { (try $0[0] as String, try $0[1] as Int) }
        }
        #expect(empty?.0 == "text")  // the last value stored was text, not NULL
    }

    @Test func emptyStringIsNotNull() throws {
        #expect(try roundTrip("") == "")
        let type = try queue.read { db in try db.scalar("SELECT typeof(v) FROM value", as: String.self) }
        #expect(type == "text")
    }

    @Test func dataRoundTripsAndEmptyDataIsAnEmptyBlob() throws {
        let bytes = Data((0...255).map { UInt8($0) })
        #expect(try roundTrip(bytes) == bytes)
        #expect(try roundTrip(Data()) == Data())
        let type = try queue.read { db in try db.scalar("SELECT typeof(v) FROM value", as: String.self) }
        #expect(type == "blob")
    }

    @Test func uuidIsASixteenByteBlob() throws {
        let id = UUID()
        #expect(try roundTrip(id) == id)
        let stored = try queue.read { db in
            try db.fetchOne("SELECT typeof(v), length(v) FROM value") { (try $0[0] as String, try $0[1] as Int) }
        }
        #expect(stored?.0 == "blob")
        #expect(stored?.1 == 16)
    }

    @Test func datesKeepMicrosecondsAndSortAsIntegers() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.123456)
        let back = try #require(try roundTrip(date))
        #expect(abs(back.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.000_001)
        let stored = try queue.read { db in
            try db.fetchOne("SELECT typeof(v), v FROM value") { (try $0[0] as String, try $0[1] as Int64) }
        }
        #expect(stored?.0 == "integer")
        #expect(stored?.1 == 1_700_000_000_123_456)
        let early = Date(timeIntervalSince1970: -86_400.5)
        #expect(try roundTrip(early)?.timeIntervalSince1970 == -86_400.5)
        // Dates sort in SQL the way they sort in Swift.
        let dates = (0..<20).map { _ in Date(timeIntervalSince1970: Double.random(in: -1e9...4e9)) }
        let sorted = try queue.write { db in
            try db.execute("DELETE FROM value")
            for (index, date) in dates.enumerated() {
                try db.execute("INSERT INTO value (id, v) VALUES (?, ?)", [index, date])
            }
            return try db.fetch("SELECT id FROM value ORDER BY v") { try $0.int(at: 0) }
        }
        #expect(sorted == dates.indices.sorted { dates[$0] < dates[$1] })
    }

    @Test func nullReadsAsNilAndAsATypeMismatchWhenNotOptional() throws {
        #expect(try roundTrip(nil as String?) == nil)
        #expect(try roundTrip(nil as Int64?) == nil)
        let error = #expect(throws: DatabaseError.self) {
            try queue.read { db in try db.fetchOne("SELECT v FROM value") { try $0.string(at: 0) } }
        }
        #expect(error?.code == .typeMismatch)
        #expect(error?.message.contains("NULL") == true)
    }

    @Test func aBlobOfTheWrongSizeIsNotAUUID() throws {
        _ = try roundTrip(Data([1, 2, 3]))
        expectError(DatabaseError.Code.typeMismatch) {
            try queue.read { db in try db.fetchOne("SELECT v FROM value") { try $0.uuid(at: 0) } }
        }
    }

    @Test func readsKeepSQLitesConversionsAndSayWhatIsWrong() throws {
        func read<T>(_ sql: String, _ transform: @escaping (Row) throws -> T) throws -> T? {
            try queue.read { db in try db.fetchOne(sql, .none, transform) }
        }
        // What SQLite converts to a number is still read as one (as GRDB does): numeric text, a real as an integer.
        #expect(try read("SELECT '12'") { try $0.int(at: 0) } == 12)
        #expect(try read("SELECT 0.0") { try $0.int(at: 0) } == 0)
        #expect(try read("SELECT 0") { try $0.double(at: 0) } == 0)
        #expect(try read("SELECT 1") { try $0.bool(at: 0) } == true)
        #expect(try read("SELECT 0") { try $0.bool(at: 0) } == false)
        #expect(try read("SELECT 42") { try $0.string(at: 0) } == "42")
        #expect(try read("SELECT 1.5") { try $0.string(at: 0) } == "1.5")
        #expect(try read("SELECT ''") { try $0.string(at: 0) } == "")
        #expect(try read("SELECT x'C328'") { try $0.string(at: 0) } == "\u{FFFD}(")  // invalid UTF-8 is repaired
        #expect(try read("SELECT 'naïve 🔐'") { try $0.string(at: 0) } == "naïve 🔐")
        let id = UUID()
        #expect(try queue.write { db in
            try db.execute("DELETE FROM value")
            try db.execute("INSERT INTO value (id, v) VALUES (1, ?)", [id])
            return try db.fetchOne("SELECT v, v FROM value") { (try $0.uuid(at: 0), try $0.data(at: 1)) }
        }.map { [$0.0 == id, $0.1 == withUnsafeBytes(of: id.uuid) { Data($0) }] } == [true, true])

        let cases: [(String, (Row) throws -> Any, String)] = [
            ("SELECT NULL AS v", { try $0.string(at: 0) }, "column 0 (v) is NULL; read it as String? to accept NULL"),
            ("SELECT NULL AS v", { try $0.uuid(at: 0) }, "column 0 (v) is NULL; read it as UUID? to accept NULL"),
            ("SELECT '0123456789abcdef' AS v", { try $0.uuid(at: 0) }, "column 0 (v) is not a 16-byte blob, so it is not a UUID"),
            ("SELECT x'00112233445566778899aabbccddee' AS v", { try $0.uuid(at: 0) }, "column 0 (v) is not a 16-byte blob, so it is not a UUID"),
            ("SELECT 7 AS v", { try $0.uuid(at: 0) }, "column 0 (v) is not a 16-byte blob, so it is not a UUID"),
            // Text or a blob that SQLite would read as the number 0, and a date (or any integer but 0 and 1) as a Bool.
            ("SELECT 'soon' AS v", { try $0.int(at: 0) }, "column 0 (v) holds text that is no number, so it is not an integer"),
            ("SELECT x'00' AS v", { try $0.int64(at: 0) }, "column 0 (v) holds a blob, so it is not an integer"),
            ("SELECT 'soon' AS v", { try $0.double(at: 0) }, "column 0 (v) holds text that is no number, so it is not a number"),
            ("SELECT NULL AS v", { try $0.int(at: 0) }, "column 0 (v) is NULL; read it as Int64? to accept NULL"),
            ("SELECT 1764300000000000 AS v", { try $0.bool(at: 0) }, "column 0 (v) holds an integer other than 0 and 1, so it is not a Bool"),
        ]
        for (sql, transform, message) in cases {
            let error = expectError(DatabaseError.Code.typeMismatch) { _ = try read(sql, transform) }
            #expect(error?.message == message)
        }
    }

    @Test func aRecordWhosePropertyDoesNotFitItsColumnThrowsNamingTheColumn() throws {
        struct Reminder: Decodable, FetchableRecord {
            var id: Int64
            var count: Int
            var isDone: Bool
        }
        try queue.write { db in
            try db.execute("CREATE TABLE reminder (id INTEGER PRIMARY KEY, count, isDone)")
            try db.execute("INSERT INTO reminder VALUES (1, 'three', 0), (2, 3, ?)", [Date()])
        }
        try queue.read { (db: Database) throws in
            let text = expectError(DatabaseError.Code.typeMismatch) {
                try Reminder.fetchAll(db, sql: "SELECT * FROM reminder WHERE id = 1")
            }
            #expect(text?.message.contains("(count) holds text") == true, "\(String(describing: text))")
            let date = expectError(DatabaseError.Code.typeMismatch) {
                try Reminder.fetchAll(db, sql: "SELECT * FROM reminder WHERE id = 2")
            }
            #expect(date?.message.contains("(isDone) holds an integer other than 0 and 1") == true,
                    "\(String(describing: date))")
        }
    }

    @Test func bindingByIndexChecksTheCountAndWritesNothingWhenItIsWrong() throws {
        let id = UUID()
        try queue.write { db in
            try db.execute("DELETE FROM value")
            try db.execute("CREATE TABLE four (a INTEGER, b BLOB, c TEXT, d INTEGER)")
            let statement = try db.cachedStatement("INSERT INTO four (a, b, c, d) VALUES (?, ?, ?, ?)")
            try statement.execute { binder in
                try binder.bind(Int64.min, at: 1)
                try binder.bind(id, at: 2)
                try binder.bind("", at: 3)
                try binder.bind(true, at: 4)
            }
            let short = expectError(DatabaseError.Code.misuse) {
                try statement.execute { binder in try binder.bind(Int64(1), at: 1) }
            }
            #expect(short?.message == "the statement has 4 parameters but 1 arguments were given")
        }
        let rows = try queue.read { db in
            try db.fetch("SELECT a, b, c, typeof(c), d FROM four") { row in
                "\(try row.int64(at: 0)) \(try row.uuid(at: 1) == id) '\(try row.string(at: 2))' \(try row.string(at: 3)) \(try row.bool(at: 4))"
            }
        }
        #expect(rows == ["\(Int64.min) true '' text true"])
    }

    @Test func namedAndPositionalArguments() throws {
        let rows = try queue.write { db in
            try db.execute("INSERT INTO value (id, v) VALUES (?, ?)", [10, "positional"])
            try db.execute("INSERT INTO value (id, v) VALUES (:id, :v)", ["id": 11, "v": "colon"])
            try db.execute("INSERT INTO value (id, v) VALUES (@id, $v)", ["id": 12, "v": "at and dollar"])
            try db.execute("INSERT INTO value (id, v) VALUES (?2, ?1)", ["numbered", 13])
            return try db.fetch("SELECT id, v FROM value WHERE id >= ? ORDER BY id", [10]) { row in
                "\(try row.int(at: 0)) \(try row.string(at: 1))"
            }
        }
        #expect(rows == ["10 positional", "11 colon", "12 at and dollar", "13 numbered"])
    }

    @Test func aMissingOrExtraArgumentIsAMisuseNotANull() throws {
        try queue.write { db in
            expectError(DatabaseError.Code.misuse) { try db.execute("INSERT INTO value (id, v) VALUES (?, ?)", [1]) }
            expectError(DatabaseError.Code.misuse) {
                try db.execute("INSERT INTO value (id, v) VALUES (?, ?)", [1, 2, 3])
            }
            expectError(DatabaseError.Code.misuse) {
                try db.execute("INSERT INTO value (id, v) VALUES (:id, :v)", ["id": 1])
            }
            expectError(DatabaseError.Code.misuse) {
                try db.execute("INSERT INTO value (id, v) VALUES (:id, :v)", ["id": 1, "v": 2, "w": 3])
            }
            let count = try db.scalar("SELECT count(*) FROM value", as: Int.self)
            #expect(count == 0)
        }
    }

    @Test func rowsAreReadByIndexByNameAndAsValues() throws {
        let row = try queue.read { db in
            try db.fetchOne("SELECT 7 AS n, 'x' AS s, NULL AS z, 2.5 AS d, x'00ff' AS b") { row in
                (
                    try row["n"] as Int, try row["s"] as String, try row["z"] as Int?, try row.value(at: 3),
                    try row.value(at: 4), row.columnNames, try row.isNull(at: 2)
                )
            }
        }
        let values = try #require(row)
        #expect(values.0 == 7)
        #expect(values.1 == "x")
        #expect(values.2 == nil)
        #expect(values.3 == .real(2.5))
        #expect(values.4 == .blob(Data([0, 255])))
        #expect(values.5 == ["n", "s", "z", "d", "b"])
        #expect(values.6)
    }

    @Test func aRowUsedAfterItsStatementMovedOnThrows() throws {
        let rows = try queue.read { db in try db.fetch("SELECT 1 UNION ALL SELECT 2") { $0 } }
        #expect(rows.count == 2)
        expectError(DatabaseError.Code.misuse) { try rows[0].int(at: 0) }
        let error = #expect(throws: DatabaseError.self) {
            try queue.read { db in try db.fetchOne("SELECT 1") { try $0.int(at: 3) } }
        }
        #expect(error?.code == .misuse)
    }

    @Test func theStatementCacheReusesPreparedStatements() throws {
        let (before, after, nested) = try queue.write { db in
            try db.execute("INSERT INTO value (id, v) VALUES (?, ?)", [1, "a"])
            let before = db.preparedStatementCount
            for id in 2...101 { try db.execute("INSERT INTO value (id, v) VALUES (?, ?)", [id, "a"]) }
            let after = db.preparedStatementCount
            // The same SQL nested inside itself gets a second statement instead of breaking the first.
            var nested: [Int] = []
            try db.forEachRow("SELECT id FROM value WHERE id <= ? ORDER BY id", [2]) { row in
                let outer = try row.int(at: 0)
                let inner = try db.fetch("SELECT id FROM value WHERE id <= ? ORDER BY id", [2]) {
                    try $0.int(at: 0)
                }
                nested.append(outer * 10 + inner.count)
            }
            return (before, after, nested)
        }
        #expect(after == before)
        #expect(nested == [12, 22])
        #expect(try queue.read { db in try db.scalar("SELECT count(*) FROM value", as: Int.self) } == 101)
    }

    @Test func multipleStatementsRunInOneExecuteAsInGRDB() throws {
        try queue.write { db in
            try db.execute("INSERT INTO value (id) VALUES (1); INSERT INTO value (id) VALUES (?)", [2])
            try db.executeScript("INSERT INTO value (id) VALUES (3); INSERT INTO value (id) VALUES (4);")
            #expect(try db.scalar("SELECT count(*) FROM value", as: Int.self) == 4)
        }
    }
}
