// The values a preferences domain can hold, and the Swift types that convert to and from them.
public import Foundation

/// A value stored in a preferences domain.
///
/// The cases are exactly the types the file format keeps apart: a `1` read back is an ``int(_:)``,
/// never a ``double(_:)``. Arrays and string-keyed dictionaries may nest to any reasonable depth
/// (the parser refuses more than 100 levels).
///
/// ```swift
/// let window: PreferenceValue = .dictionary(["width": .int(800), "height": .int(600)])
/// ```
public enum PreferenceValue: Sendable, Hashable {
    /// `true` or `false`.
    case bool(Bool)
    /// A 64-bit signed integer, `Int.min` through `Int.max`.
    case int(Int)
    /// A double; NaN and the infinities are kept too.
    case double(Double)
    /// A Unicode string.
    case string(String)
    /// Raw bytes, stored as base64.
    case data(Data)
    /// A moment in time, stored as ISO-8601 UTC with enough fractional digits to round-trip exactly.
    /// Years 0000 through 9999 only.
    case date(Date)
    /// An ordered list of values, which may mix types.
    case array([PreferenceValue])
    /// A dictionary with string keys.
    case dictionary([String: PreferenceValue])

    /// The name of the case, for messages: `"Int"`, `"String"`, `"Array"`...
    public var typeName: String {
        switch self {
        case .bool: "Bool"
        case .int: "Int"
        case .double: "Double"
        case .string: "String"
        case .data: "Data"
        case .date: "Date"
        case .array: "Array"
        case .dictionary: "Dictionary"
        }
    }

    /// Converts an untyped value (for instance one read from `UserDefaults.dictionaryRepresentation()`)
    /// into a preference value.
    ///
    /// Accepts `Bool`, the integer types that fit in `Int`, `Double`, `Float`, `String`, `Data`, `Date`,
    /// `PreferenceValue`, and arrays and `String`-keyed dictionaries of those.
    /// - Throws: ``PreferencesError`` with code ``PreferencesError/Code/unsupportedType`` naming the type
    ///   of the first value that has no representation. The message never contains the value.
    public init(converting any: Any) throws {
        switch any {
        case let value as PreferenceValue: self = value
        case let value as Bool: self = .bool(value)
        case let value as Int: self = .int(value)
        case let value as Int8: self = .int(Int(value))
        case let value as Int16: self = .int(Int(value))
        case let value as Int32: self = .int(Int(value))
        case let value as Int64: self = .int(Int(value))
        case let value as UInt8: self = .int(Int(value))
        case let value as UInt16: self = .int(Int(value))
        case let value as UInt32: self = .int(Int(value))
        case let value as UInt64 where value <= UInt64(Int.max): self = .int(Int(value))
        case let value as UInt where value <= UInt(Int.max): self = .int(Int(value))
        case let value as Double: self = .double(value)
        case let value as Float: self = .double(Double(value))
        case let value as String: self = .string(value)
        case let value as Data: self = .data(value)
        case let value as Date: self = .date(value)
        case let value as [Any]: self = .array(try value.map { try PreferenceValue(converting: $0) })
        case let value as [String: Any]:
            self = .dictionary(try value.mapValues { try PreferenceValue(converting: $0) })
        default:
            throw PreferencesError(
                .unsupportedType,
                "a value of type \(type(of: any)) cannot be stored in preferences; "
                    + "use Bool, Int, Double, String, Data, Date, or arrays and String-keyed dictionaries of them"
            )
        }
    }
}

/// A Swift type that can be stored in a preferences domain.
///
/// `Bool`, `Int`, `Double`, `String`, `Data`, `Date`, ``PreferenceValue``, and arrays, dictionaries with
/// `String` keys of conforming types conform. Storing any other type is a compile-time error.
/// Conform your own types (a `RawRepresentable` enum, for instance) by mapping to one of these.
public protocol PreferenceRepresentable: Sendable {
    /// The stored form of this value.
    var preferenceValue: PreferenceValue { get }
    /// Reads a value from its stored form; `nil` when the stored value has another type.
    init?(preferenceValue: PreferenceValue)
}

extension PreferenceValue: PreferenceRepresentable {
    /// The value itself.
    public var preferenceValue: PreferenceValue { self }
    /// The value itself; never `nil`.
    public init?(preferenceValue: PreferenceValue) { self = preferenceValue }
}

extension Bool: PreferenceRepresentable {
    /// `.bool(self)`.
    public var preferenceValue: PreferenceValue { .bool(self) }
    /// Reads `.bool`; `nil` for any other case.
    public init?(preferenceValue: PreferenceValue) {
        guard case .bool(let value) = preferenceValue else { return nil }
        self = value
    }
}

extension Int: PreferenceRepresentable {
    /// `.int(self)`.
    public var preferenceValue: PreferenceValue { .int(self) }
    /// Reads `.int`; `nil` for any other case (a double is not silently truncated).
    public init?(preferenceValue: PreferenceValue) {
        guard case .int(let value) = preferenceValue else { return nil }
        self = value
    }
}

extension Double: PreferenceRepresentable {
    /// `.double(self)`.
    public var preferenceValue: PreferenceValue { .double(self) }
    /// Reads `.double`, or an `.int` that converts to a double exactly (a hand-edited `1` for `1.0`).
    public init?(preferenceValue: PreferenceValue) {
        switch preferenceValue {
        case .double(let value): self = value
        case .int(let value):
            guard let exact = Double(exactly: value) else { return nil }
            self = exact
        default: return nil
        }
    }
}

extension String: PreferenceRepresentable {
    /// `.string(self)`.
    public var preferenceValue: PreferenceValue { .string(self) }
    /// Reads `.string`; `nil` for any other case.
    public init?(preferenceValue: PreferenceValue) {
        guard case .string(let value) = preferenceValue else { return nil }
        self = value
    }
}

extension Data: PreferenceRepresentable {
    /// `.data(self)`.
    public var preferenceValue: PreferenceValue { .data(self) }
    /// Reads `.data`; `nil` for any other case.
    public init?(preferenceValue: PreferenceValue) {
        guard case .data(let value) = preferenceValue else { return nil }
        self = value
    }
}

extension Date: PreferenceRepresentable {
    /// `.date(self)`.
    public var preferenceValue: PreferenceValue { .date(self) }
    /// Reads `.date`; `nil` for any other case.
    public init?(preferenceValue: PreferenceValue) {
        guard case .date(let value) = preferenceValue else { return nil }
        self = value
    }
}

extension Array: PreferenceRepresentable where Element: PreferenceRepresentable {
    /// `.array` of the elements' stored forms.
    public var preferenceValue: PreferenceValue { .array(map(\.preferenceValue)) }
    /// Reads `.array` whose every element converts; `nil` otherwise.
    public init?(preferenceValue: PreferenceValue) {
        guard case .array(let values) = preferenceValue else { return nil }
        var result: [Element] = []
        result.reserveCapacity(values.count)
        for value in values {
            guard let element = Element(preferenceValue: value) else { return nil }
            result.append(element)
        }
        self = result
    }
}

extension Dictionary: PreferenceRepresentable where Key == String, Value: PreferenceRepresentable {
    /// `.dictionary` of the values' stored forms.
    public var preferenceValue: PreferenceValue { .dictionary(mapValues(\.preferenceValue)) }
    /// Reads `.dictionary` whose every value converts; `nil` otherwise.
    public init?(preferenceValue: PreferenceValue) {
        guard case .dictionary(let values) = preferenceValue else { return nil }
        var result: [String: Value] = [:]
        result.reserveCapacity(values.count)
        for (key, value) in values {
            guard let converted = Value(preferenceValue: value) else { return nil }
            result[key] = converted
        }
        self = result
    }
}

/// A preference key that carries its value type and its default.
///
/// ```swift
/// extension PreferenceKey where Value == Int {
///     static let fontSize = PreferenceKey("fontSize", default: 13)
/// }
/// let size = prefs[.fontSize]          // 13 until set
/// try prefs.set(15, for: .fontSize)
/// ```
public struct PreferenceKey<Value: PreferenceRepresentable>: Sendable, Hashable {
    /// The key's name in the file.
    public let name: String
    /// The value read when the domain holds nothing for this key (or a value of another type).
    public let defaultValue: Value

    /// Creates a typed key.
    public init(_ name: String, default defaultValue: Value) {
        self.name = name
        self.defaultValue = defaultValue
    }

    /// Keys are equal when their names are.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name == rhs.name }
    /// Hashes the name.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}
