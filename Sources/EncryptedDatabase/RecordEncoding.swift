// Encoding an `Encodable` record into columns, the way a row reads them back.
internal import Foundation

/// The columns of a record to store, in order: names and values.
///
/// ``PersistableRecord`` fills one from an `Encodable` record; write ``PersistableRecord/encode(to:)-(inout PersistenceContainer)``
/// yourself to choose column names or values:
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Note: PersistableRecord {
///     static let databaseTableName = "note"
///     var id: Int64?
///     var text: String
///
///     func encode(to container: inout PersistenceContainer) throws {
///         container["id"] = id
///         container["text"] = text
///     }
/// }
/// ```
///
/// The description names the columns, never their values.
public struct PersistenceContainer: Sendable, CustomStringConvertible {
    /// The column names, in the order they were set.
    public private(set) var columns: [String] = []
    /// The values, in the order of ``columns``.
    public var values: [DatabaseValue] { stored.map(\.databaseValue) }
    /// The values as they are kept until they are bound: a `UUID` from an `Encodable` record stays its 16 bytes
    /// (a `Data` for it would be one more allocation per row; the insert binds them by index).
    private(set) var stored: [ColumnValue] = []

    /// An empty container.
    public init() {}

    init(capacity: Int) {
        columns.reserveCapacity(capacity)
        stored.reserveCapacity(capacity)
    }

    /// The value of `column`: setting it adds the column or replaces its value; `nil` stores `NULL`.
    public subscript(_ column: String) -> (any DatabaseValueConvertible)? {
        get { columns.firstIndex(of: column).map { stored[$0].databaseValue } }
        set {
            let value = newValue?.databaseValue ?? .null
            if let index = columns.firstIndex(of: column) {
                stored[index] = .value(value)
            } else {
                append(column, value)
            }
        }
    }

    /// The value of the column at `index` of ``columns``.
    func value(at index: Int) -> DatabaseValue { stored[index].databaseValue }

    @inline(__always)
    mutating func append(_ column: String, _ value: DatabaseValue) {
        columns.append(column)
        stored.append(.value(value))
    }

    @inline(__always)
    mutating func append(_ column: String, uuid: UUID) {
        columns.append(column)
        stored.append(.uuid(uuid))
    }

    /// Binds the values to the parameters 1, 2, … of `binder`'s statement, in the order of ``columns``.
    func bind(_ binder: inout StatementBinder) throws {
        for (offset, value) in stored.enumerated() {
            switch value {
            case .value(let value): try binder.bind(value, at: Int32(offset + 1))
            case .uuid(let uuid): try binder.bind(uuid, at: Int32(offset + 1))
            }
        }
    }

    /// `PersistenceContainer(columns: id, title)`: the names, never the values.
    public var description: String { "PersistenceContainer(columns: \(columns.joined(separator: ", ")))" }
}

/// One value of a ``PersistenceContainer``: a database value, or a UUID kept as itself (stored as its 16 bytes).
enum ColumnValue: Sendable {
    case value(DatabaseValue)
    case uuid(UUID)

    var databaseValue: DatabaseValue {
        switch self {
        case .value(let value): value
        case .uuid(let uuid): uuid.databaseValue
        }
    }
}

extension PersistableRecord where Self: Encodable {
    /// Encodes the record's properties as columns: each coding key is a column name.
    ///
    /// Values are stored the way ``Row`` reads them (see ``DatabaseValueConvertible``); `nil` stores `NULL`; a
    /// `RawRepresentable` enum or another single-value type stores its raw value; any other `Encodable` value (a
    /// struct, an array, a dictionary) is stored as JSON text with sorted keys.
    public func encode(to container: inout PersistenceContainer) throws {
        let encoder = RecordEncoder()
        try encode(to: encoder)
        if let misuse = encoder.misuse { throw DatabaseError(.misuse, "\(Self.self): \(misuse)") }
        container = encoder.container
    }
}

/// Collects a record's keyed values into a ``PersistenceContainer``.
private final class RecordEncoder: Encoder {
    // An encoder lives for one record's encoding, on one thread: the run-time exclusivity checks of its properties
    // (one per stored column) are left out.
    @exclusivity(unchecked) var container = PersistenceContainer(capacity: 8)
    /// Set when the record asked for something a row cannot hold; thrown once encoding returns (an `Encoder`'s
    /// container functions cannot throw).
    @exclusivity(unchecked) var misuse: String?
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RecordContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        misuse = misuse ?? "a record is stored as columns by name; it cannot encode itself as an array"
        return DiscardingContainer<DiscardedKey>()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        misuse = misuse ?? "a record is stored as columns by name; it cannot encode itself as a single value"
        return DiscardingContainer<DiscardedKey>()
    }
}

private struct RecordContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: RecordEncoder
    var codingPath: [any CodingKey] { [] }

    @inline(__always)
    private func store(_ value: DatabaseValue, _ key: Key) { encoder.container.append(key.stringValue, value) }

    mutating func encodeNil(forKey key: Key) throws { store(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { store(.integer(value ? 1 : 0), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { store(.text(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { store(.real(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { store(.real(Double(value)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { store(.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { store(try integer(value, key), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { store(.integer(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { store(try integer(value, key), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if T.self == UUID.self {  // kept as itself until bound (exact type check, as in encodeColumn)
            encoder.container.append(key.stringValue, uuid: unsafeBitCast(value, to: UUID.self))
            return
        }
        store(try encodeColumn(value, name: key.stringValue), key)
    }

    private func integer<T: BinaryInteger>(_ value: T, _ key: Key) throws -> DatabaseValue {
        try checkedColumnInteger(value, name: key.stringValue)
    }

    // `nil` stores NULL, so that an update clears the column (the default would leave the column out).
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { store(.null, key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        refuseNesting(key)
        return KeyedEncodingContainer(DiscardingContainer<NestedKey>())
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        refuseNesting(key)
        return DiscardingContainer<DiscardedKey>()
    }

    mutating func superEncoder() -> any Encoder {
        refuseNesting(nil)
        return DiscardingEncoder()
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        refuseNesting(key)
        return DiscardingEncoder()
    }

    private func refuseNesting(_ key: Key?) {
        encoder.misuse =
            encoder.misuse
            ?? ("a record stored as columns cannot use nested containers or a super encoder"
                + (key.map { " (key '\($0.stringValue)')" } ?? "")
                + "; encode a Codable value, which is stored as JSON text")
    }
}

private func checkedColumnInteger<T: BinaryInteger>(_ value: T, name: String) throws -> DatabaseValue {
    guard let integer = Int64(exactly: value) else {
        throw DatabaseError(
            .typeMismatch, "the value of column '\(name)' is out of the range of a 64-bit signed integer")
    }
    return .integer(integer)
}

/// The stored form of `value` for column `name`: directly for the types ``Row`` reads, the single value of a
/// wrapper or `RawRepresentable` enum, or JSON text (sorted keys) for anything else.
func encodeColumn<T: Encodable>(_ value: T, name: String) throws -> DatabaseValue {
    // The common types first, without a conformance lookup (the cast to `any DatabaseValueConvertible` below looks
    // up T's conformances on every call: about 900 instructions of a 4-column insert's row, callgrind), as
    // decodeColumn does. Each reinterpretation follows an exact type check, so it cannot be wrong.
    if T.self == UUID.self { return unsafeBitCast(value, to: UUID.self).databaseValue }
    if T.self == Date.self { return unsafeBitCast(value, to: Date.self).databaseValue }
    if T.self == Data.self { return .blob(value as! Data) }
    if let convertible = value as? any DatabaseValueConvertible { return convertible.databaseValue }
    let encoder = ColumnEncoder(name: name)
    try value.encode(to: encoder)
    if !encoder.needsJSON { return encoder.value ?? .null }
    let json = JSONEncoder()
    json.outputFormatting = [.sortedKeys]
    let data: Data
    do {
        data = try json.encode(value)
    } catch {
        throw DatabaseError(.typeMismatch, "the value of column '\(name)' (a \(T.self)) cannot be stored as JSON")
    }
    return .text(String(decoding: data, as: UTF8.self))
}

/// The encoder of one column: keeps a single value; a keyed or unkeyed container means "store as JSON" (its
/// contents are discarded and the value is encoded again by `JSONEncoder`).
private final class ColumnEncoder: Encoder, SingleValueEncodingContainer {
    let name: String
    var value: DatabaseValue?
    var needsJSON = false
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(name: String) { self.name = name }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        needsJSON = true
        return KeyedEncodingContainer(DiscardingContainer<Key>())
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        needsJSON = true
        return DiscardingContainer<DiscardedKey>()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { value = .null }
    func encode(_ value: Bool) throws { self.value = .integer(value ? 1 : 0) }
    func encode(_ value: String) throws { self.value = .text(value) }
    func encode(_ value: Double) throws { self.value = .real(value) }
    func encode(_ value: Float) throws { self.value = .real(Double(value)) }
    func encode(_ value: Int) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: Int8) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: Int16) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: Int32) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: Int64) throws { self.value = .integer(value) }
    func encode(_ value: UInt) throws { self.value = try checkedColumnInteger(value, name: name) }
    func encode(_ value: UInt8) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: UInt16) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: UInt32) throws { self.value = .integer(Int64(value)) }
    func encode(_ value: UInt64) throws { self.value = try checkedColumnInteger(value, name: name) }
    func encode<T: Encodable>(_ value: T) throws {
        if let convertible = value as? any DatabaseValueConvertible {
            self.value = convertible.databaseValue
            return
        }
        // A wrapper of a value stored as JSON is stored as JSON as a whole (its JSON is the wrapped value's).
        let inner = ColumnEncoder(name: name)
        try value.encode(to: inner)
        if inner.needsJSON { needsJSON = true } else { self.value = inner.value ?? .null }
    }
}

private struct DiscardedKey: CodingKey {
    var stringValue: String { "" }
    var intValue: Int? { nil }
    init?(stringValue: String) {}
    init?(intValue: Int) {}
    init() {}
}

/// Accepts and drops everything: the value is encoded again as JSON.
private struct DiscardingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol, UnkeyedEncodingContainer,
    SingleValueEncodingContainer
{
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    { KeyedEncodingContainer(DiscardingContainer<NestedKey>()) }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { DiscardingEncoder() }

    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    { KeyedEncodingContainer(DiscardingContainer<NestedKey>()) }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
}

private struct DiscardingEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(DiscardingContainer<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingContainer<DiscardedKey>() }
    func singleValueContainer() -> any SingleValueEncodingContainer { DiscardingContainer<DiscardedKey>() }
}
