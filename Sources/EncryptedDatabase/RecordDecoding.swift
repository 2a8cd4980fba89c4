// Decoding a `Decodable` record from a row: columns found by name through the statement's lookup.
internal import Foundation

extension FetchableRecord where Self: Decodable {
    /// Decodes the record from `row`: each coding key is the name of a result column.
    ///
    /// Properties are read the way ``Row`` reads them (see ``DatabaseValueConvertible``): `Int`, `Bool`,
    /// `Double`, `String`, `Data`, `UUID` (16-byte blob), `Date` (integer microseconds) and optionals of them
    /// (`NULL` is `nil`; a column the statement does not have is `nil` too). A `RawRepresentable` enum or another
    /// single-value type reads the column as its raw value; any other `Decodable` property (a struct, an array, a
    /// dictionary) reads the column as JSON text, the way ``PersistableRecord`` stores it.
    ///
    /// Column names are looked up once per statement, not per row.
    @inlinable
    public init(row: Row) throws {
        try self.init(from: row.recordDecoder)
    }
}

extension Row {
    /// The decoder of a record from this row, by column name.
    @usableFromInline
    var recordDecoder: any Decoder { RowDecoder(row: self) }
}

/// Thrown inside a column's decoder when the value asks for a keyed or unkeyed container: the column holds JSON.
private struct ColumnHoldsJSON: Error {}

/// The decoder of one row: a keyed container whose keys are column names.
struct RowDecoder: Decoder {
    let row: Row
    /// The lookup of a request with associations (the columns of one of its tables by name, and the row's
    /// associated records); `nil` for the statement's own lookup, reached through the statement: one counted
    /// reference fewer to copy into the `any Decoder` of every row.
    private let scopeLookup: ColumnLookup?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The decoder of a record of the statement's own columns.
    init(row: Row) {
        self.row = row
        scopeLookup = nil
    }

    /// The decoder of a record whose columns are found through `lookup`.
    init(row: Row, lookup: ColumnLookup) {
        self.row = row
        scopeLookup = lookup === row.statement.columnLookup ? nil : lookup
    }

    /// The columns by name; in a request with associations, also the row's associated records.
    var lookup: ColumnLookup { scopeLookup ?? row.statement.lookup }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard let scopeLookup else {
            // A record of the statement's own columns reuses the statement's container (ColumnLookup.container).
            return row.statement.unretainedLookup._withUnsafeGuaranteedRef { $0.container(keyedBy: type, row: row) }
        }
        return KeyedDecodingContainer(RowContainer<Key>(cursor: RowCursor(row: row, lookup: scopeLookup)))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw DatabaseError(
            .misuse, "a record is decoded from a row by column name; it cannot be an array", sql: row.statement.sql)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        // A single value (an enum, an optional scalar) fetched from a request that selects one column.
        if lookup.associated == nil, row.count == 1 { return ColumnDecoder(row: row, column: 0) }
        throw DatabaseError(
            .misuse, "a record is decoded from a row by column name; it cannot be a single value",
            sql: row.statement.sql)
    }
}

/// The row a keyed container reads: the row it was made for, and the statement's columns by name. A container the
/// statement reuses from row to row (``ColumnLookup/container(keyedBy:row:)``) moves its cursor to each new row, and
/// only while no one else holds the container: one kept past its row keeps its row, and throws `misuse`.
final class RowCursor {
    let statement: Statement
    // Confined to the statement's connection, like the statement: no run-time exclusivity checks.
    @exclusivity(unchecked) var generation: UInt64
    let lookup: ColumnLookup

    init(row: Row, lookup: ColumnLookup) {
        statement = row.statement
        generation = row.generation
        self.lookup = lookup
    }

    var row: Row {
        @inline(__always) get { Row(statement: statement, generation: generation) }
    }
}

struct RowContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// The only stored reference: the standard library's box copies the container on every `decode` call, a
    /// retain and a release per reference in it.
    let cursor: RowCursor
    var row: Row { @inline(__always) get { cursor.row } }
    var lookup: ColumnLookup { @inline(__always) get { cursor.lookup } }
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { row.statement.lookup.index.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool {
        lookup.index[key.stringValue] != nil || lookup.associated?.values[key.stringValue] != nil
    }

    /// The associated record (or array of records) under `key`, as `T`; `nil` when `key` is no association.
    private func associatedValue<T>(_ type: T.Type, _ key: Key, optional: Bool) throws -> T?? {
        guard let value = lookup.associated?.values[key.stringValue] else { return nil }
        if value is NoAssociatedRecord {
            if optional { return .some(nil) }
            throw DatabaseError(
                .typeMismatch,
                "the row has no '\(key.stringValue)' (included with including(optional:)): declare the property "
                    + "as \(T.self)?", sql: row.statement.sql)
        }
        guard let typed = value as? T else {
            throw DatabaseError(
                .typeMismatch,
                "the association '\(key.stringValue)' holds \(Swift.type(of: value)), not \(T.self)",
                sql: row.statement.sql)
        }
        return typed
    }

    @inline(__always)
    private func column(_ key: Key) throws -> Int {
        guard let column = lookup.column(named: key.stringValue, row: row.generation) else {
            throw DatabaseError(
                .typeMismatch,
                "the row has no column named '\(key.stringValue)' (its columns: "
                    + row.statement.columnNames.joined(separator: ", ") + ")",
                sql: row.statement.sql)
        }
        return column
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        if let value = lookup.associated?.values[key.stringValue] { return value is NoAssociatedRecord }
        guard let column = lookup.column(named: key.stringValue, row: row.generation) else { return true }
        return try row.isNull(at: column)
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try row.bool(at: column(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try row.string(at: column(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try row.double(at: column(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try row.double(at: column(key))) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try row.int(at: column(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try row.int64(at: column(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try integer(key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try integer(key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try integer(key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try integer(key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try integer(key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try integer(key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try integer(key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try integer(key) }

    private func integer<T: FixedWidthInteger>(_ key: Key) throws -> T {
        let column = try column(key)
        return try checkedInteger(try row.int64(at: column), row: row, column: column)
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // The plain path first and alone: the association checks live in a function of their own, which kept
        // this one as fast as before associations existed (measured: records-fetch 1.25× slower with them inline).
        if lookup.associated == nil { return try decodeColumn(type, row: row, column: column(key)) }
        return try decodeAssociated(type, forKey: key)
    }

    @inline(never)
    private func decodeAssociated<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if let value = try associatedValue(type, key, optional: false) { return value! }
        // A property that is no column and no association is a record of the row's own columns
        // (`var book: Book` beside `var author: Author`).
        guard let column = lookup.column(named: key.stringValue, row: row.generation) else {
            return try T(from: RowDecoder(row: row, lookup: lookup))
        }
        return try decodeColumn(type, row: row, column: column)
    }

    // Optionals: one lookup instead of the default's three (contains, decodeNil, decode).
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(key) { try row.bool(at: $0) } }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try optional(key) { try row.string(at: $0) }
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try optional(key) { try row.double(at: $0) }
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(key) { try row.int(at: $0) } }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
        try optional(key) { try row.int64(at: $0) }
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        if lookup.associated == nil { return try optional(key) { try decodeColumn(type, row: row, column: $0) } }
        return try decodeAssociatedIfPresent(type, forKey: key)
    }

    @inline(never)
    private func decodeAssociatedIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        if let value = try associatedValue(type, key, optional: true) { return value }
        return try optional(key) { try decodeColumn(type, row: row, column: $0) }
    }

    @inline(__always)
    private func optional<T>(_ key: Key, _ read: (Int) throws -> T) throws -> T? {
        guard let column = lookup.column(named: key.stringValue, row: row.generation), try !row.isNull(at: column) else { return nil }
        return try read(column)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        throw nestedMisuse(key)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw nestedMisuse(key) }

    func superDecoder() throws -> any Decoder { throw nestedMisuse(nil) }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw nestedMisuse(key) }

    private func nestedMisuse(_ key: Key?) -> DatabaseError {
        DatabaseError(
            .misuse,
            "a record decoded from a row cannot use nested containers or a super decoder"
                + (key.map { " (key '\($0.stringValue)')" } ?? "")
                + "; decode the column as a Codable value, which is stored as JSON text",
            sql: row.statement.sql)
    }
}

/// Reads column `column` of `row` as `T`: directly for the types ``Row`` reads, as a single value for wrappers
/// and `RawRepresentable` enums, and as JSON text for everything else.
func decodeColumn<T: Decodable>(_ type: T.Type, row: Row, column: Int) throws -> T {
    // The common types first, without a conformance lookup. No input reaches a failing cast here: each cast follows
    // an exact type check (`T.self == Date.self`, or T's own conformance decoding a T), so it cannot trap. `as?` with
    // a thrown error was tried and measured: 18 % more instructions for a 200 000-row fetch (callgrind), and a trap
    // it would guard against cannot happen. `Date` and `UUID` (plain values, no references) are reinterpreted as
    // the `T` they are instead of going through the run time's dynamic cast: 2 % fewer instructions (callgrind).
    if T.self == Date.self { return unsafeBitCast(try row.date(at: column), to: T.self) }
    if T.self == UUID.self { return unsafeBitCast(try row.uuid(at: column), to: T.self) }
    if T.self == Data.self { return try row.data(at: column) as! T }
    if let convertible = T.self as? any DatabaseValueConvertible.Type {
        return try convertible.decode(from: row, at: column) as! T
    }
    do {
        return try T(from: ColumnDecoder(row: row, column: column))
    } catch is DecodingError {
        // Never the value itself in the message: a column may hold anything.
        throw DatabaseError(
            .typeMismatch,
            "column \(column) (\(row.statement.columnNames[column])) holds a value that is not a \(T.self)",
            sql: row.statement.sql)
    } catch is ColumnHoldsJSON {
        let text = try row.string(at: column)
        do {
            return try JSONDecoder().decode(T.self, from: Data(text.utf8))
        } catch {
            throw DatabaseError(
                .typeMismatch,
                "column \(column) (\(row.statement.columnNames[column])) does not hold the JSON of a \(T.self)",
                sql: row.statement.sql)
        }
    }
}

func checkedInteger<T: FixedWidthInteger>(_ value: Int64, row: Row, column: Int) throws -> T {
    guard let result = T(exactly: value) else {
        throw DatabaseError(
            .typeMismatch,
            "column \(column) (\(row.statement.columnNames[column])) holds an integer out of the range of \(T.self)",
            sql: row.statement.sql)
    }
    return result
}

/// The decoder of one column, for a value that decodes itself from a single value (a `RawRepresentable` enum,
/// a wrapper). Asking it for a keyed or unkeyed container means the column holds JSON.
private struct ColumnDecoder: Decoder, SingleValueDecodingContainer {
    let row: Row
    let column: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw ColumnHoldsJSON()
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw ColumnHoldsJSON() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { (try? row.isNull(at: column)) ?? false }
    func decode(_ type: Bool.Type) throws -> Bool { try row.bool(at: column) }
    func decode(_ type: String.Type) throws -> String { try row.string(at: column) }
    func decode(_ type: Double.Type) throws -> Double { try row.double(at: column) }
    func decode(_ type: Float.Type) throws -> Float { Float(try row.double(at: column)) }
    func decode(_ type: Int.Type) throws -> Int { try row.int(at: column) }
    func decode(_ type: Int64.Type) throws -> Int64 { try row.int64(at: column) }
    func decode(_ type: Int8.Type) throws -> Int8 { try checkedInteger(row.int64(at: column), row: row, column: column) }
    func decode(_ type: Int16.Type) throws -> Int16 {
        try checkedInteger(row.int64(at: column), row: row, column: column)
    }
    func decode(_ type: Int32.Type) throws -> Int32 {
        try checkedInteger(row.int64(at: column), row: row, column: column)
    }
    func decode(_ type: UInt.Type) throws -> UInt { try checkedInteger(row.int64(at: column), row: row, column: column) }
    func decode(_ type: UInt8.Type) throws -> UInt8 {
        try checkedInteger(row.int64(at: column), row: row, column: column)
    }
    func decode(_ type: UInt16.Type) throws -> UInt16 {
        try checkedInteger(row.int64(at: column), row: row, column: column)
    }
    func decode(_ type: UInt32.Type) throws -> UInt32 {
        try checkedInteger(row.int64(at: column), row: row, column: column)
    }
    func decode(_ type: UInt64.Type) throws -> UInt64 {
        try checkedInteger(row.int64(at: column), row: row, column: column)
    }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeColumn(type, row: row, column: column) }
}
