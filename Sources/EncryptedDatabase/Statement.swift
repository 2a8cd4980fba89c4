// Prepared statements and the rows they produce.
public import Foundation
internal import SecureStoreCore
internal import CSQLCipher

/// A prepared SQL statement of one ``Database`` connection.
///
/// Get one from ``Database/makeStatement(_:)`` or ``Database/cachedStatement(_:)``. Like its connection it is
/// not `Sendable`; it is finalized when it is released or when its connection closes, whichever comes first.
public final class Statement {
    /// The SQL text, as given (without argument values).
    public let sql: String
    // A statement is confined to its connection's queue, so the run-time exclusivity checks of its hot properties
    // (read on every column of every row) are left out.
    @exclusivity(unchecked) private(set) var handle: OpaquePointer?
    unowned let database: Database
    let columnCount: Int
    let parameterCount: Int
    /// Incremented on every step, reset and finalize, so that a ``Row`` can tell it is stale.
    @exclusivity(unchecked) var generation: UInt64 = 0
    /// True while the statement is being stepped, so that a nested use of the same SQL prepares another.
    var isBusy = false
    /// The result columns by name, built on the first lookup by name and kept as long as the statement.
    @exclusivity(unchecked) var columnLookup: ColumnLookup?
    /// The tables the statement reads, lowercased, as SQLite's authorizer reported them while it was prepared
    /// (a view or a join gives its underlying tables); nil when they are unknown: a read-only statement that
    /// reported no table, such as `SELECT count(*) FROM t` on SQLite before 3.19 (Debian 12's 3.15.2), which
    /// reports no read for a query that reads no column. An observation learns its tables from these
    /// (``DatabaseReader/observe(tables:interval:_:)``).
    public let readTables: Set<String>?
    /// ``observedTables()``, once computed (DatabaseObservation.swift).
    var observedTablesCache: Set<String>??

    /// The message of the error a statement with several statements in its SQL text throws (``Database/execute(_:_:)``
    /// runs them one by one instead).
    static let severalStatements = "the SQL text holds more than one statement"

    init(database: Database, sql: String) throws {
        self.database = database
        self.sql = sql
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        database.authorizer.beginRecording()
        let result = sql.withCString { sqlite3_prepare_v2(database.connection, $0, -1, &statement, &tail) }
        let readTables = database.authorizer.endRecording(
            readOnly: statement.map { sqlite3_stmt_readonly($0) != 0 } ?? true,
            hasColumns: statement.map { sqlite3_column_count($0) > 0 } ?? false)
        guard result == SQLITE_OK else {
            throw DatabaseError.sqlite(result, connection: database.connection, sql: sql)
        }
        guard let statement else {
            throw DatabaseError(.misuse, "the SQL text holds no statement", sql: sql)
        }
        if let tail, tail.pointee != 0,
            String(cString: tail).contains(where: { !$0.isWhitespace && $0 != ";" })
        {
            sqlite3_finalize(statement)
            throw DatabaseError(.misuse, Statement.severalStatements, sql: sql)
        }
        handle = statement
        self.readTables = readTables
        columnCount = Int(sqlite3_column_count(statement))
        parameterCount = Int(sqlite3_bind_parameter_count(statement))
        database.preparedStatementCount += 1
    }

    deinit {
        finalize()
    }

    func finalize() {
        if let handle {
            sqlite3_finalize(handle)
            self.handle = nil
            generation &+= 1
        }
    }

    /// The names of the result columns, in order.
    public var columnNames: [String] {
        guard let handle else { return [] }
        return (0..<Int32(columnCount)).map { String(cString: sqlite3_column_name(handle, $0)) }
    }

    /// Runs the statement with `arguments`, ignoring any rows.
    public func execute(_ arguments: StatementArguments = .none) throws {
        try run(arguments) { _ in false }
    }

    /// Runs the statement with `arguments` and returns every row mapped by `transform`.
    ///
    /// `transform` reads the current row through its typed accessors; the ``Row`` is valid only during that
    /// call.
    @inlinable
    public func fetch<T>(_ arguments: StatementArguments = .none, _ transform: (Row) throws -> T) throws -> [T] {
        var results: [T] = []
        try run(arguments) { row in
            results.append(try transform(row))
            return true
        }
        return results
    }

    /// Binds `arguments`, steps through all rows calling `body` (which returns false to stop), then resets.
    @usableFromInline
    func run(_ arguments: StatementArguments, _ body: (Row) throws -> Bool) throws {
        try run(binding: { handle in try self.bind(arguments, to: handle) }, body)
    }

    /// Runs the statement once with its parameters bound by `bind`, ignoring any rows: ``execute(_:)`` for the hot
    /// loops of this package (the task list's batch insert), without the ``StatementArguments`` of existentials and
    /// the `Data` of each `UUID` that `execute(_:)` builds per row. `bind` must bind every parameter once; the checks
    /// and the errors are `execute(_:)`'s.
    package func execute(binding bind: (inout StatementBinder) throws -> Void) throws {
        try run(binding: { handle in
            var binder = StatementBinder(statement: self, handle: handle)
            try bind(&binder)
            guard binder.count == parameterCount else {
                throw DatabaseError(
                    .misuse,
                    "the statement has \(parameterCount) parameters but \(binder.count) arguments were given",
                    sql: sql)
            }
        }, { _ in false })
    }

    /// ``run(_:_:)`` with the parameters bound by `bind`.
    private func run(binding bind: (OpaquePointer) throws -> Void, _ body: (Row) throws -> Bool) throws {
        guard let handle else {
            throw DatabaseError(.misuse, "the statement was finalized when its database closed", sql: sql)
        }
        if let region = database.observedRegion {
            database.observedRegion = region.flatMap { tables in observedTables().map { tables.union($0) } }
        }
        isBusy = true
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            generation &+= 1
            isBusy = false
            columnLookup?.endRun()
        }
        try bind(handle)
        while true {
            generation &+= 1
            let result = sqlite3_step(handle)
            if result == SQLITE_ROW {
                if try !body(Row(statement: self, generation: generation)) { return }
            } else if result == SQLITE_DONE {
                return
            } else {
                throw DatabaseError.step(result, connection: database.connection, path: database.path, sql: sql)
            }
        }
    }

    private func bind(_ arguments: StatementArguments, to handle: OpaquePointer) throws {
        switch arguments.storage {
        case .positional(let values):
            guard values.count == parameterCount else {
                throw DatabaseError(
                    .misuse,
                    "the statement has \(parameterCount) parameters but \(values.count) arguments were given",
                    sql: sql)
            }
            for (offset, value) in values.enumerated() {
                try bind(value, at: Int32(offset + 1), to: handle)
            }
        case .named(let values):
            var used = 0
            for index in 1...max(parameterCount, 1) where parameterCount > 0 {
                guard let cName = sqlite3_bind_parameter_name(handle, Int32(index)) else {
                    throw DatabaseError(
                        .misuse, "parameter \(index) is positional but named arguments were given", sql: sql)
                }
                let name = String(String(cString: cName).dropFirst())
                guard let value = values[name] else {
                    throw DatabaseError(.misuse, "no argument was given for parameter '\(name)'", sql: sql)
                }
                used += 1
                try bind(value, at: Int32(index), to: handle)
            }
            if used != values.count {
                let names = Set(values.keys).subtracting(namedParameters(handle)).sorted()
                throw DatabaseError(
                    .misuse, "the statement has no parameter named \(names.joined(separator: ", "))", sql: sql)
            }
        }
    }

    private func namedParameters(_ handle: OpaquePointer) -> Set<String> {
        var names: Set<String> = []
        for index in 0..<parameterCount {
            if let cName = sqlite3_bind_parameter_name(handle, Int32(index + 1)) {
                names.insert(String(String(cString: cName).dropFirst()))
            }
        }
        return names
    }

    fileprivate func bind(_ value: DatabaseValue, at index: Int32, to handle: OpaquePointer) throws {
        let result: Int32
        switch value {
        case .null:
            result = sqlite3_bind_null(handle, index)
        case .integer(let integer):
            result = sqlite3_bind_int64(handle, index, integer)
        case .real(let real):
            result = sqlite3_bind_double(handle, index, real)
        case .text(var text):
            result = text.withUTF8 { buffer in
                // An empty buffer may have no address, and a NULL address would bind NULL, not ''.
                guard let base = buffer.baseAddress, buffer.count > 0 else {
                    return sqlite3_bind_text(handle, index, "", 0, securestore_sqlite_transient())
                }
                return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    sqlite3_bind_text(handle, index, $0, Int32(buffer.count), securestore_sqlite_transient())
                }
            }
        case .blob(let data):
            if data.isEmpty {
                result = sqlite3_bind_zeroblob(handle, index, 0)
            } else {
                result = data.withUnsafeBytes {
                    sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), securestore_sqlite_transient())
                }
            }
        }
        guard result == SQLITE_OK else {
            throw DatabaseError.sqlite(result, connection: database.connection, sql: sql)
        }
    }
}

/// Binds the parameters of one execution of a statement by index (``Statement/execute(binding:)``), each value
/// straight into SQLite, as ``StatementArguments`` would store it: the same SQL values, the same errors.
package struct StatementBinder {
    let statement: Statement
    let handle: OpaquePointer
    /// How many values were bound.
    private(set) var count = 0

    init(statement: Statement, handle: OpaquePointer) {
        self.statement = statement
        self.handle = handle
    }

    private mutating func check(_ result: Int32) throws {
        guard result == SQLITE_OK else {
            throw DatabaseError.sqlite(result, connection: statement.database.connection, sql: statement.sql)
        }
        count += 1
    }

    /// Binds an integer to parameter `index` (from 1).
    package mutating func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    /// Binds 1 or 0, as `Bool`'s ``DatabaseValueConvertible/databaseValue`` does.
    package mutating func bind(_ value: Bool, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, value ? 1 : 0))
    }

    /// Binds text; an empty string is `''`, not `NULL`.
    package mutating func bind(_ value: String, at index: Int32) throws {
        var text = value
        let handle = handle
        try check(text.withUTF8 { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else {
                return sqlite3_bind_text(handle, index, "", 0, securestore_sqlite_transient())
            }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                sqlite3_bind_text(handle, index, $0, Int32(buffer.count), securestore_sqlite_transient())
            }
        })
    }

    /// Binds any database value, as ``StatementArguments`` binds it.
    package mutating func bind(_ value: DatabaseValue, at index: Int32) throws {
        try statement.bind(value, at: index, to: handle)
        count += 1
    }

    /// Binds the 16 bytes of a UUID as a blob, as `UUID`'s ``DatabaseValueConvertible/databaseValue`` does.
    package mutating func bind(_ value: UUID, at index: Int32) throws {
        let handle = handle
        try check(withUnsafeBytes(of: value.uuid) {
            sqlite3_bind_blob(handle, index, $0.baseAddress, 16, securestore_sqlite_transient())
        })
    }
}

/// The current row of a statement being stepped, read through typed accessors.
///
/// ```swift
/// let items = try db.fetch("SELECT id, title, due FROM item") { row in
///     Item(id: try row.int64(at: 0), title: try row.string(at: 1), due: try row[2] as Date?)
/// }
/// ```
///
/// A row is valid only inside the closure it is given to: once the statement moves on, every accessor throws
/// ``DatabaseError/Code/misuse``. Column indexes start at 0.
public struct Row {
    let statement: Statement
    let generation: UInt64

    @inline(__always)
    private func handle(_ column: Int) throws -> OpaquePointer {
        guard statement.generation == generation, let handle = statement.handle else {
            throw DatabaseError(
                .misuse, "a row was used after its statement moved on; read it inside the closure",
                sql: statement.sql)
        }
        guard column >= 0, column < statement.columnCount else {
            throw DatabaseError(
                .misuse, "column \(column) does not exist; the statement has \(statement.columnCount) columns",
                sql: statement.sql)
        }
        return handle
    }

    @inline(__always)
    private func nonNull(_ column: Int, _ type: String) throws -> OpaquePointer {
        let handle = try handle(column)
        if sqlite3_column_type(handle, Int32(column)) == SQLITE_NULL {
            throw mismatch(column, "is NULL; read it as \(type)? to accept NULL")
        }
        return handle
    }

    /// The column's value, for the `sqlite3_value_*` accessors.
    @inline(__always)
    private func columnValue(_ column: Int) throws -> OpaquePointer {
        let handle = try handle(column)
        guard let value = sqlite3_column_value(handle, Int32(column)) else {
            throw DatabaseError(.misuse, "column \(column) has no value", sql: statement.sql)
        }
        return value
    }

    private func mismatch(_ column: Int, _ problem: String) -> DatabaseError {
        let name = statement.handle.map { String(cString: sqlite3_column_name($0, Int32(column))) } ?? "?"
        return DatabaseError(.typeMismatch, "column \(column) (\(name)) \(problem)", sql: statement.sql)
    }

    /// The number of columns.
    public var count: Int { statement.columnCount }

    /// The names of the columns, in order.
    public var columnNames: [String] { statement.columnNames }

    /// Whether the column holds `NULL`.
    ///
    /// The corresponding C function is `sqlite3_column_type`.
    public func isNull(at column: Int) throws -> Bool {
        sqlite3_column_type(try handle(column), Int32(column)) == SQLITE_NULL
    }

    /// Whether the column holds an integer (its storage class, before any conversion).
    @usableFromInline
    func isInteger(at column: Int) throws -> Bool {
        sqlite3_column_type(try handle(column), Int32(column)) == SQLITE_INTEGER
    }

    /// The column as a 64-bit integer. Throws ``DatabaseError/Code/typeMismatch`` for `NULL`, and for text or
    /// a blob that is no number (SQLite would read it as 0).
    ///
    /// The corresponding C function is `sqlite3_column_int64`.
    public func int64(at column: Int) throws -> Int64 {
        let handle = try handle(column)
        let value = sqlite3_column_int64(handle, Int32(column))
        // SQLite answers 0 for NULL and for what is no number: only then is the type read (no cost per row).
        if value == 0 { try checkNumber(handle, column, "Int64", "an integer") }
        return value
    }

    /// Throws ``DatabaseError/Code/typeMismatch`` when the column, read as the number 0, is `NULL`, text or a blob.
    private func checkNumber(_ handle: OpaquePointer, _ column: Int, _ type: String, _ kind: String) throws {
        switch sqlite3_column_type(handle, Int32(column)) {
        case SQLITE_NULL: throw mismatch(column, "is NULL; read it as \(type)? to accept NULL")
        case SQLITE_TEXT: throw mismatch(column, "holds text that is no number, so it is not \(kind)")
        case SQLITE_BLOB: throw mismatch(column, "holds a blob, so it is not \(kind)")
        default: return
        }
    }

    /// The column as an `Int`.
    ///
    /// The corresponding C function is `sqlite3_column_int64`.
    public func int(at column: Int) throws -> Int {
        Int(try int64(at: column))
    }

    /// The column as a Boolean, stored as 0 or 1. Any other value (a date, a count, text) throws
    /// ``DatabaseError/Code/typeMismatch`` naming the column.
    ///
    /// The corresponding C function is `sqlite3_column_int64`.
    public func bool(at column: Int) throws -> Bool {
        switch try int64(at: column) {
        case 0: return false
        case 1: return true
        default: throw mismatch(column, "holds an integer other than 0 and 1, so it is not a Bool")
        }
    }

    /// The column as a `Double`.
    ///
    /// The corresponding C function is `sqlite3_column_double`.
    public func double(at column: Int) throws -> Double {
        let handle = try handle(column)
        let value = sqlite3_column_double(handle, Int32(column))
        if value == 0 { try checkNumber(handle, column, "Double", "a number") }
        return value
    }

    /// The column as a `String` (text is read as UTF-8; invalid sequences are repaired).
    ///
    /// The corresponding C functions are `sqlite3_column_value` and `sqlite3_value_text`.
    public func string(at column: Int) throws -> String {
        // One column call, then the value's own accessors (no per-call statement checks and mutex of
        // sqlite3_column_*): the connection is confined to its queue, so the value is read by one thread only.
        let value = try columnValue(column)
        // sqlite3_value_text returns NULL only for a NULL value (or out of memory): '' has an address.
        guard let text = sqlite3_value_text(value) else {
            if sqlite3_value_type(value) != SQLITE_NULL {
                throw mismatch(column, "could not be converted to text (SQLite is out of memory)")
            }
            throw mismatch(column, "is NULL; read it as String? to accept NULL")
        }
        let count = Int(sqlite3_value_bytes(value))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The column as `Data` (a zero-length blob is an empty `Data`).
    ///
    /// The corresponding C function is `sqlite3_column_blob`.
    public func data(at column: Int) throws -> Data {
        let handle = try nonNull(column, "Data")
        guard let blob = sqlite3_column_blob(handle, Int32(column)) else { return Data() }
        return Data(bytes: blob, count: Int(sqlite3_column_bytes(handle, Int32(column))))
    }

    /// The column as a `UUID`, stored as a blob of exactly 16 bytes.
    ///
    /// The corresponding C functions are `sqlite3_column_value` and `sqlite3_value_blob`.
    public func uuid(at column: Int) throws -> UUID {
        let value = try columnValue(column)  // as in string(at:)
        let type = sqlite3_value_type(value)
        if type == SQLITE_NULL { throw mismatch(column, "is NULL; read it as UUID? to accept NULL") }
        guard type == SQLITE_BLOB,
            let blob = sqlite3_value_blob(value),
            sqlite3_value_bytes(value) == 16
        else {
            throw mismatch(column, "is not a 16-byte blob, so it is not a UUID")
        }
        let b = blob.assumingMemoryBound(to: UInt8.self)
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                           b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    /// The column as a `Date`, stored as integer microseconds since 1970-01-01 00:00:00 UTC.
    ///
    /// The corresponding C function is `sqlite3_column_int64`.
    public func date(at column: Int) throws -> Date {
        let handle = try nonNull(column, "Date")
        guard sqlite3_column_type(handle, Int32(column)) == SQLITE_INTEGER else {
            throw mismatch(column, "is not an integer of microseconds since 1970, so it is not a Date")
        }
        return dateFromMicroseconds(sqlite3_column_int64(handle, Int32(column)))
    }

    /// The column as whatever SQLite holds.
    ///
    /// The corresponding C function is `sqlite3_column_value`.
    public func value(at column: Int) throws -> DatabaseValue {
        let handle = try handle(column)
        switch sqlite3_column_type(handle, Int32(column)) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, Int32(column)))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, Int32(column)))
        case SQLITE_TEXT: return .text(try string(at: column))
        case SQLITE_BLOB: return .blob(try data(at: column))
        default: return .null
        }
    }

    /// The column converted to `T`; throws ``DatabaseError/Code/typeMismatch`` on `NULL`.
    ///
    /// ```swift
    /// let id = try row[0] as Int64
    /// ```
    @inlinable
    public subscript<T: DatabaseValueConvertible>(_ column: Int) -> T {
        get throws { try T.decode(from: self, at: column) }
    }

    /// The column converted to `T`, or `nil` when it is `NULL`.
    ///
    /// ```swift
    /// let due = try row[2] as Date?
    /// ```
    @inlinable
    public subscript<T: DatabaseValueConvertible>(_ column: Int) -> T? {
        get throws { try isNull(at: column) ? nil : T.decode(from: self, at: column) }
    }

    /// The column named `name` (as in the statement's result columns) converted to `T`.
    @inlinable
    public subscript<T: DatabaseValueConvertible>(_ name: String) -> T {
        get throws { try T.decode(from: self, at: index(of: name)) }
    }

    /// The column named `name` converted to `T`, or `nil` when it is `NULL`.
    @inlinable
    public subscript<T: DatabaseValueConvertible>(_ name: String) -> T? {
        get throws {
            let column = try index(of: name)
            return try isNull(at: column) ? nil : T.decode(from: self, at: column)
        }
    }

    /// The index of the result column named `name` (the first one, when several have that name).
    public func index(of name: String) throws -> Int {
        _ = try handle(0)
        // The lookup is reached without a retain and a release (the statement keeps it, and keeps it as long as
        // itself): `init(row:)` by name calls this once per property per row (Docs/records.md, issue 34).
        let column = statement.unretainedLookup._withUnsafeGuaranteedRef { $0.column(named: name, row: generation) }
        guard let column else {
            throw DatabaseError(.misuse, "the statement has no column named '\(name)'", sql: statement.sql)
        }
        return column
    }
}

/// The result columns of one statement by name: built once per statement, then shared by every row it
/// produces, so that reading a column by name (or a `Decodable` record) does not look names up in SQLite per row.
final class ColumnLookup {
    /// Column names to indexes; the first column wins when a name repeats.
    let index: [String: Int]
    /// The names asked for so far in the order a record's decoder asks for them, with their columns (-1 for a
    /// name that is no column): a `Decodable` type asks for the same keys in the same order on every row, so the
    /// next lookup is one string comparison instead of a hash.
    // Confined to the statement's connection like everything here: the run-time exclusivity checks of these
    // properties cost more than the lookup itself, so they are left out.
    @exclusivity(unchecked) private var orderNames: [String] = []
    @exclusivity(unchecked) private var orderColumns: [Int] = []
    /// The position of the next lookup in that order, and the row (statement generation) it counts for.
    @exclusivity(unchecked) private var position = 0
    @exclusivity(unchecked) private var row: UInt64 = 0

    /// The records of the current row's associations, by key, in a request that includes some (set per row by
    /// the request; `nil` for a statement's own lookup).
    @exclusivity(unchecked) var associated: AssociatedValues?

    /// The keyed container of the last record decoded from the statement's rows (a `KeyedDecodingContainer`, one
    /// reference to the standard library's box), the type of its keys and its cursor: a `Decodable` record asks
    /// for a container on every row, and the standard library allocates a box for each new one and looks up two
    /// generic types. Dropped when the statement is reset (``endRun()``), which also breaks the reference cycle
    /// statement → lookup → container → cursor → statement.
    @exclusivity(unchecked) private var cachedContainer: AnyObject?
    @exclusivity(unchecked) private var cachedKeys: ObjectIdentifier?
    @exclusivity(unchecked) private var cachedCursor: RowCursor?

    init(names: [String]) {
        var index: [String: Int] = [:]
        index.reserveCapacity(names.count)
        for (column, name) in names.enumerated() where index[name] == nil { index[name] = column }
        self.index = index
    }

    /// The column named `name`, or `nil`; remembers the order of lookups for the next row. `row` is the
    /// generation of the row being read: the order starts again on each row.
    @inline(__always)
    func column(named name: String, row: UInt64) -> Int? {
        var position = self.position
        if row != self.row {
            self.row = row
            position = 0
        }
        self.position = position &+ 1
        if position < orderNames.count, orderNames[position] == name {
            let column = orderColumns[position]
            return column < 0 ? nil : column
        }
        let column = index[name]
        // A name that is no column is remembered too (as -1): a record with a nested record or an association
        // asks for a key that is no column on every row, and the names after it keep their places in the order.
        if position < orderNames.count {
            orderNames[position] = name
            orderColumns[position] = column ?? -1
        } else if position == orderNames.count {
            orderNames.append(name)
            orderColumns.append(column ?? -1)
        }
        return column
    }
}

extension ColumnLookup {
    /// A keyed container of `row`: the one of the last row when no one else holds it any more (it is moved to
    /// `row`), otherwise a new one. A container kept past its row (stored by an `init(from:)`) is never moved: it
    /// still reads its own row, and throws `misuse` once the statement has moved on, as a new one would.
    func container<Key: CodingKey>(keyedBy type: Key.Type, row: Row) -> KeyedDecodingContainer<Key> {
        if cachedKeys == ObjectIdentifier(Key.self), let cursor = cachedCursor, cursor.statement === row.statement,
            isKnownUniquelyReferenced(&cachedContainer)
        {
            cursor.generation = row.generation
            // The stored value is a KeyedDecodingContainer<Key> (checked by the key type above).
            return unsafeBitCast(cachedContainer.unsafelyUnwrapped, to: KeyedDecodingContainer<Key>.self)
        }
        let cursor = RowCursor(row: row, lookup: self)
        let container = KeyedDecodingContainer(RowContainer<Key>(cursor: cursor))
        cachedContainer = unsafeBitCast(container, to: AnyObject.self)
        cachedKeys = ObjectIdentifier(Key.self)
        cachedCursor = cursor
        return container
    }

    /// Drops the kept container: called when the statement is reset.
    @inline(__always)
    func endRun() {
        if cachedCursor != nil {
            cachedContainer = nil
            cachedKeys = nil
            cachedCursor = nil
        }
    }
}

extension Statement {
    /// The statement's columns by name, built on first use.
    var lookup: ColumnLookup {
        if let columnLookup { return columnLookup }
        let lookup = ColumnLookup(names: columnNames)
        columnLookup = lookup
        return lookup
    }

    /// ``lookup``, unretained: the statement holds the lookup from its first use to its end, and never replaces it.
    var unretainedLookup: Unmanaged<ColumnLookup> {
        @inline(__always) get {
            if let columnLookup { return Unmanaged.passUnretained(columnLookup) }
            return Unmanaged.passUnretained(lookup)
        }
    }
}
