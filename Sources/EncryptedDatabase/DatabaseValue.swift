// Values stored in and read from a database, and the Swift types that convert to them.
public import Foundation
internal import SecureStoreCore

/// One SQLite value: `NULL`, an integer, a floating-point number, text or a blob.
public enum DatabaseValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit signed integer.
    case integer(Int64)
    /// A 64-bit floating-point number.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes.
    case blob(Data)
}

/// A Swift type that is stored as a ``DatabaseValue`` and read back from a ``Row`` column.
///
/// The module provides `Int64`, `Int`, `Double`, `String`, `Data`, `Bool`, `UUID` and `Date`:
///
/// | Swift | stored as |
/// | --- | --- |
/// | `Int64`, `Int` | INTEGER |
/// | `Bool` | INTEGER 0 or 1 |
/// | `Double` | REAL |
/// | `String` | TEXT (UTF-8) |
/// | `Data` | BLOB (an empty `Data` is an empty blob, not `NULL`) |
/// | `UUID` | BLOB of 16 bytes |
/// | `Date` | INTEGER microseconds since 1970-01-01 00:00:00 UTC (sortable, indexable) |
///
/// `nil` of any `Optional` is stored as `NULL`; read optionals with `try row[i] as T?`.
public protocol DatabaseValueConvertible: SQLExpressible {
    /// The value to store.
    var databaseValue: DatabaseValue { get }
    /// Reads the value in `column` of `row`. Throws ``DatabaseError/Code/typeMismatch`` when the column is
    /// `NULL` or cannot hold this type.
    static func decode(from row: Row, at column: Int) throws -> Self
}

extension Int64: DatabaseValueConvertible {
    /// The integer.
    public var databaseValue: DatabaseValue { .integer(self) }
    /// Reads an integer column.
    public static func decode(from row: Row, at column: Int) throws -> Int64 { try row.int64(at: column) }
}

extension Int: DatabaseValueConvertible {
    /// The integer, as a 64-bit integer.
    public var databaseValue: DatabaseValue { .integer(Int64(self)) }
    /// Reads an integer column.
    public static func decode(from row: Row, at column: Int) throws -> Int { try row.int(at: column) }
}

extension Bool: DatabaseValueConvertible {
    /// 1 for `true`, 0 for `false`.
    public var databaseValue: DatabaseValue { .integer(self ? 1 : 0) }
    /// Reads an integer column of 0 or 1; any other value throws ``DatabaseError/Code/typeMismatch``.
    public static func decode(from row: Row, at column: Int) throws -> Bool { try row.bool(at: column) }
}

extension Double: DatabaseValueConvertible {
    /// The number.
    public var databaseValue: DatabaseValue { .real(self) }
    /// Reads a floating-point column.
    public static func decode(from row: Row, at column: Int) throws -> Double {
        try row.double(at: column)
    }
}

extension String: DatabaseValueConvertible {
    /// The text.
    public var databaseValue: DatabaseValue { .text(self) }
    /// Reads a text column.
    public static func decode(from row: Row, at column: Int) throws -> String {
        try row.string(at: column)
    }
}

extension Data: DatabaseValueConvertible {
    /// The bytes, as a blob.
    public var databaseValue: DatabaseValue { .blob(self) }
    /// Reads a blob column.
    public static func decode(from row: Row, at column: Int) throws -> Data { try row.data(at: column) }
}

extension UUID: DatabaseValueConvertible {
    /// The 16 bytes of the UUID, as a blob.
    public var databaseValue: DatabaseValue {
        withUnsafeBytes(of: uuid) { .blob(Data($0)) }  // straight from the 16 bytes, no array in between
    }
    /// Reads a 16-byte blob column.
    public static func decode(from row: Row, at column: Int) throws -> UUID { try row.uuid(at: column) }
}

extension Date: DatabaseValueConvertible {
    /// Whole microseconds since 1970-01-01 00:00:00 UTC, rounded to the nearest, as an integer.
    public var databaseValue: DatabaseValue { .integer(microsecondsSince1970(self)) }
    /// Reads an integer column of microseconds since 1970.
    public static func decode(from row: Row, at column: Int) throws -> Date { try row.date(at: column) }
}

extension DatabaseValue: DatabaseValueConvertible {
    /// The value itself.
    public var databaseValue: DatabaseValue { self }
    /// Reads any column.
    public static func decode(from row: Row, at column: Int) throws -> DatabaseValue {
        try row.value(at: column)
    }
}

extension DatabaseValueConvertible where Self: RawRepresentable, RawValue: DatabaseValueConvertible {
    /// The raw value.
    public var databaseValue: DatabaseValue { rawValue.databaseValue }

    /// Reads the raw value; throws ``DatabaseError/Code/typeMismatch`` when it is not one of the type's.
    ///
    /// ```swift
    /// enum Priority: Int, Codable, DatabaseValueConvertible { case low, normal, high }
    /// ```
    public static func decode(from row: Row, at column: Int) throws -> Self {
        guard let value = Self(rawValue: try RawValue.decode(from: row, at: column)) else {
            throw DatabaseError(
                .typeMismatch, "column \(column) (\(row.statement.columnNames[column])) holds a value that is not a \(Self.self)",
                sql: row.statement.sql)
        }
        return value
    }
}
