// The values bound to a statement's parameters.

/// The values bound to the parameters of a statement: positional (`?`) or named (`:name`, `@name`, `$name`).
///
/// ```swift
/// try db.execute("INSERT INTO item(title, due) VALUES (?, ?)", ["Pay rent", nil])
/// try db.execute("UPDATE item SET done = :done WHERE id = :id", ["done": true, "id": 7])
/// ```
///
/// Every parameter of the statement must be given a value (use `nil` for `NULL`), and no extra value may be
/// given: a mismatch throws ``DatabaseError/Code/misuse`` instead of silently binding `NULL`.
/// The description never shows the values.
public struct StatementArguments: Sendable, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral,
    CustomStringConvertible
{
    enum Storage: Sendable {
        case positional([DatabaseValue])
        case named([String: DatabaseValue])
    }

    let storage: Storage

    init(storage: Storage) { self.storage = storage }

    /// Positional arguments, bound to `?` or `?NNN` parameters in order.
    public init(_ values: [(any DatabaseValueConvertible)?]) {
        storage = .positional(values.map { $0?.databaseValue ?? .null })
    }

    /// Positional arguments already converted: bound as they are, without boxing each value in an existential
    /// (what code that binds many rows builds its arguments from).
    ///
    /// ```swift
    /// let values: [DatabaseValue] = [.text("Pay rent"), .integer(1)]
    /// try db.cachedStatement("INSERT INTO item(title, done) VALUES (?, ?)").execute(StatementArguments(values))
    /// ```
    public init(_ values: [DatabaseValue]) {
        storage = .positional(values)
    }

    /// Named arguments; a key is a parameter name without its `:`, `@` or `$` prefix.
    public init(named values: [String: (any DatabaseValueConvertible)?]) {
        storage = .named(values.mapValues { $0?.databaseValue ?? .null })
    }

    /// Positional arguments from an array literal.
    public init(arrayLiteral elements: (any DatabaseValueConvertible)?...) {
        self.init(elements)
    }

    /// Named arguments from a dictionary literal.
    public init(dictionaryLiteral elements: (String, (any DatabaseValueConvertible)?)...) {
        var values: [String: DatabaseValue] = [:]
        for (name, value) in elements { values[name] = value?.databaseValue ?? .null }
        storage = .named(values)
    }

    /// The number of values.
    var count: Int {
        switch storage {
        case .positional(let values): values.count
        case .named(let values): values.count
        }
    }

    /// No arguments.
    public static let none = StatementArguments([])

    /// `StatementArguments(<n values redacted>)`: values are never printed.
    public var description: String {
        switch storage {
        case .positional(let values): "StatementArguments(<\(values.count) values redacted>)"
        case .named(let values): "StatementArguments(<\(values.count) named values redacted>)"
        }
    }
}
