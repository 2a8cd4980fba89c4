// SQL expressions of the query interface: columns, values (always bound), operators, functions and aggregates.

/// A value that can be used in an SQL expression: a ``Column``, an ``SQLExpression``, or any
/// ``DatabaseValueConvertible`` value (which is bound as an argument, never written into the SQL text).
public protocol SQLExpressible: Sendable {
    /// The expression.
    var sqlExpression: SQLExpression { get }
}

/// An expression that is SQL and not a plain Swift value: a ``Column`` or an ``SQLExpression``.
///
/// The operators of the query interface need one of these on one side, so that `1 < 2` stays a Swift `Bool`
/// while `Column("a") < 2` and `Column("a") < Column("b")` are SQL.
public protocol SQLSpecificExpressible: SQLExpressible, SQLOrderingTerm, SQLSelectable {}

extension DatabaseValueConvertible {
    /// The value, bound as an argument (`?`).
    public var sqlExpression: SQLExpression { SQLExpression(pieces: [.value(databaseValue)]) }
}

/// A column of a table, to build filters, orderings and selections from.
///
/// ```swift
/// import EncryptedDatabase
///
/// let open = Column("isDone") == false
/// let newestFirst = Column("creationDate").desc
/// let overdue = Column("dueDate") < Column("completionDate")
/// let byTitle = Column("title").collating(.nocase)
/// ```
///
/// The name is quoted as an SQL identifier; values compared with it are always bound as arguments. In a request
/// with associations, a column belongs to the table of the request or association it is used in.
public struct Column: SQLSpecificExpressible, Hashable {
    /// The column's name.
    public let name: String

    /// The column named `name`.
    public init(_ name: String) { self.name = name }

    var quoted: String { quoteIdentifier(name) }

    /// The column.
    public var sqlExpression: SQLExpression { SQLExpression(pieces: [.column(name)]) }
}

/// An SQL expression: SQL text with `?` parameters and the values bound to them, and columns that are qualified
/// with their table where a request joins several.
///
/// Build one from ``Column`` comparisons, combine them with `&&`, `||` and `!`, or write the SQL yourself with
/// ``init(sql:arguments:)`` — with `?` for every value, never a value in the text.
public struct SQLExpression: SQLSpecificExpressible, CustomStringConvertible {
    enum Piece: Sendable {
        /// SQL text.
        case sql(String)
        /// A column of the table the expression is used with.
        case column(String)
        /// A value, bound to a `?`.
        case value(DatabaseValue)
        /// SQL text with `?` parameters and their values.
        case literal(String, [DatabaseValue])
        /// A column of a table alias (``TableAlias``), qualified with it wherever the expression is used.
        case aliasedColumn(alias: String, column: String)
        /// An aggregate over an association (``AssociationAggregate``): a subquery once the request is prepared.
        case aggregate(AggregateOverAssociation)
    }

    var pieces: [Piece]

    init(pieces: [Piece]) { self.pieces = pieces }

    init(sql: String, arguments: [DatabaseValue]) { pieces = [.literal(sql, arguments)] }

    /// A condition or value written in SQL, with a `?` for each of `arguments`.
    ///
    /// ```swift
    /// import EncryptedDatabase
    /// import Foundation
    ///
    /// let recent = SQLExpression(sql: "creationDate > ?", arguments: [Date().addingTimeInterval(-86_400)])
    /// ```
    ///
    /// Column names in the text are not qualified with a table: in a request with associations, write
    /// `"book"."title"` yourself where a name is in several tables.
    public init(sql: String, arguments: [(any DatabaseValueConvertible)?] = []) {
        pieces = [.literal(sql, arguments.map { $0?.databaseValue ?? .null })]
    }

    /// The expression itself.
    public var sqlExpression: SQLExpression { self }

    /// The SQL text, with `?` where values are bound (columns unqualified).
    public var sql: String { render(qualifier: nil).sql }

    var arguments: [DatabaseValue] { render(qualifier: nil).arguments }

    /// The SQL text and arguments, with columns qualified by `qualifier` (a table name or alias) when given.
    func render(qualifier: String?) -> (sql: String, arguments: [DatabaseValue]) {
        var sql = ""
        var arguments: [DatabaseValue] = []
        render(qualifier: qualifier, into: &sql, &arguments)
        return (sql, arguments)
    }

    /// Renders the expression; a column is qualified by `qualifier` unless its name is one of `aliases` (the
    /// lower-cased names of the selection's `forKey` aliases, which `ORDER BY`, `GROUP BY` and `HAVING` may use).
    func render(
        qualifier: String?, aliases: Set<String> = [], into sql: inout String, _ arguments: inout [DatabaseValue]
    ) {
        for piece in pieces {
            switch piece {
            case .sql(let text): sql += text
            case .column(let name):
                if let qualifier, aliases.isEmpty || !aliases.contains(name.lowercased()) {
                    sql += quoteIdentifier(qualifier) + "."
                }
                sql += quoteIdentifier(name)
            case .value(let value):
                sql += "?"
                arguments.append(value)
            case .literal(let text, let values):
                sql += text
                arguments += values
            case .aliasedColumn(let alias, let column):
                sql += quoteIdentifier(alias) + "." + quoteIdentifier(column)
            case .aggregate(let aggregate):
                // Replaced by its subquery before a request renders (Query.prepared); only a description gets here.
                sql += "<\(aggregate.function.name) of association '\(aggregate.association.key)'>"
            }
        }
    }

    /// The SQL text and the number of bound values; never the values.
    public var description: String { "\(sql) <\(arguments.count) values redacted>" }

    static func function(_ name: String, _ arguments: [SQLExpression]) -> SQLExpression {
        var pieces: [Piece] = [.sql(name + "(")]
        for (index, argument) in arguments.enumerated() {
            if index > 0 { pieces.append(.sql(", ")) }
            pieces += argument.pieces
        }
        pieces.append(.sql(")"))
        return SQLExpression(pieces: pieces)
    }

    static func binary(_ lhs: SQLExpression, _ operation: String, _ rhs: SQLExpression) -> SQLExpression {
        SQLExpression(pieces: [.sql("(")] + lhs.pieces + [.sql(" \(operation) ")] + rhs.pieces + [.sql(")")])
    }

    static func postfix(_ expression: SQLExpression, _ operation: String) -> SQLExpression {
        SQLExpression(pieces: [.sql("(")] + expression.pieces + [.sql(" \(operation))")])
    }
}

// MARK: - Methods of every SQL expression

extension SQLSpecificExpressible {
    /// Ascending order (`ASC`).
    public var asc: SQLOrdering { SQLOrdering(expression: sqlExpression, direction: " ASC") }
    /// Descending order (`DESC`).
    public var desc: SQLOrdering { SQLOrdering(expression: sqlExpression, direction: " DESC") }

    /// The expression compared with `collation` (`COLLATE NOCASE`), for comparisons and orderings:
    /// `Column("title").collating(.nocase) == "milk"`, `.order(Column("title").collating(.nocase))`.
    public func collating(_ collation: Database.CollationName) -> SQLExpression {
        SQLExpression(pieces: sqlExpression.pieces + [.sql(" COLLATE " + collation.rawValue)])
    }

    /// The text in lower case (SQL `lower()`: ASCII letters only, as SQLite's built-in function).
    public var lowercased: SQLExpression { .function("lower", [sqlExpression]) }
    /// The text in upper case (SQL `upper()`: ASCII letters only, as SQLite's built-in function).
    public var uppercased: SQLExpression { .function("upper", [sqlExpression]) }
    /// The number of characters of a text, or bytes of a blob (SQL `length()`).
    public var length: SQLExpression { .function("length", [sqlExpression]) }

    /// The expression matches the `LIKE` pattern (`%` any run of characters, `_` one character; ASCII letters
    /// match case-insensitively), with `\` as the escape character. The pattern is bound as an argument.
    public func like(_ pattern: String) -> SQLExpression {
        SQLExpression(pieces: [.sql("(")] + sqlExpression.pieces + [.sql(" LIKE "), .value(.text(pattern)),
            .sql(" ESCAPE '\\')")])
    }

    /// The expression's value is one of `values` (never true for an empty collection); the values are bound.
    public func `in`(_ values: some Collection<some DatabaseValueConvertible>) -> SQLExpression {
        guard !values.isEmpty else { return SQLExpression(pieces: [.sql("0")]) }
        var pieces = [SQLExpression.Piece.sql("(")] + sqlExpression.pieces + [.sql(" IN (")]
        for (index, value) in values.enumerated() {
            if index > 0 { pieces.append(.sql(", ")) }
            pieces.append(.value(value.databaseValue))
        }
        pieces.append(.sql("))"))
        return SQLExpression(pieces: pieces)
    }

    /// The expression is `NULL`.
    public var isNull: SQLExpression { .postfix(sqlExpression, "IS NULL") }

    /// The expression is not `NULL`.
    public var isNotNull: SQLExpression { .postfix(sqlExpression, "IS NOT NULL") }

    /// The expression with a name in the selection (`expr AS "name"`), the key a `Decodable` type reads it by.
    public func forKey(_ key: String) -> SQLSelection { SQLSelection(expression: sqlExpression, alias: key) }

    /// The expression as a selected result column.
    public var sqlSelection: SQLSelection { SQLSelection(expression: sqlExpression, alias: nil) }

    /// The expression as an ordering term (in the order of the values, `ASC`).
    public var sqlOrdering: SQLOrdering { SQLOrdering(expression: sqlExpression, direction: "") }
}

extension Sequence where Element: DatabaseValueConvertible {
    /// `expression IN (values…)`, as GRDB spells it: `[1, 2, 3].contains(Column("id"))`.
    public func contains(_ expression: some SQLSpecificExpressible) -> SQLExpression {
        expression.in(Array(self))
    }
}

extension Database {
    /// The name of a collation: how text compares in `collating(_:)`.
    public struct CollationName: Sendable, Hashable {
        /// The collation's SQL name.
        public let rawValue: String
        /// A collation by its SQL name (an identifier: letters, digits and `_`).
        public init(rawValue: String) {
            self.rawValue = rawValue.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
                ? rawValue : quoteIdentifier(rawValue)
        }
        /// Byte by byte (SQLite's default).
        public static let binary = CollationName(rawValue: "BINARY")
        /// ASCII letters compared without case.
        public static let nocase = CollationName(rawValue: "NOCASE")
        /// Trailing spaces ignored.
        public static let rtrim = CollationName(rawValue: "RTRIM")
    }
}

// MARK: - Orderings

/// Something a request can be ordered by: a ``Column`` (ascending), an ``SQLExpression``, or an ``SQLOrdering``
/// (`Column("title").desc`).
public protocol SQLOrderingTerm: Sendable {
    /// The term.
    var sqlOrdering: SQLOrdering { get }
}

/// One term of an `ORDER BY`: an expression and a direction.
public struct SQLOrdering: SQLOrderingTerm {
    let expression: SQLExpression
    let direction: String

    init(expression: SQLExpression, direction: String) {
        self.expression = expression
        self.direction = direction
    }

    init(sql: String) { self.init(expression: SQLExpression(pieces: [.sql(sql)]), direction: "") }

    /// An ordering term written in SQL (`"lower(name) ASC"`). Ordering takes no arguments: it holds no values.
    public init(sql literal: StaticString) { self.init(sql: literal.description) }

    /// The SQL of the term (columns unqualified).
    public var sql: String { expression.sql + direction }

    /// The term itself.
    public var sqlOrdering: SQLOrdering { self }

    func render(
        qualifier: String?, aliases: Set<String> = [], into sql: inout String, _ arguments: inout [DatabaseValue]
    ) {
        expression.render(qualifier: qualifier, aliases: aliases, into: &sql, &arguments)
        sql += direction
    }
}

// MARK: - Selections

/// Something a request can select: a ``Column``, an ``SQLExpression``, an aggregate, or one of them named with
/// `forKey(_:)`.
public protocol SQLSelectable: Sendable {
    /// The selected result column.
    var sqlSelection: SQLSelection { get }
}

/// One result column of a request: an expression, and the name it is read by.
public struct SQLSelection: SQLSelectable {
    let expression: SQLExpression
    let alias: String?

    /// The selection itself.
    public var sqlSelection: SQLSelection { self }

    /// All the columns of the table (`*`).
    public static let allColumns = SQLSelection(expression: SQLExpression(pieces: [.sql("*")]), alias: nil)

    func render(qualifier: String?, into sql: inout String, _ arguments: inout [DatabaseValue]) {
        if case .sql("*") = expression.pieces.first, expression.pieces.count == 1 {
            if let qualifier { sql += quoteIdentifier(qualifier) + "." }
            sql += "*"
        } else {
            expression.render(qualifier: qualifier, into: &sql, &arguments)
        }
        if let alias { sql += " AS " + quoteIdentifier(alias) }
    }
}

// MARK: - Comparison operators

/// `lhs = rhs`; `== nil` is `IS NULL`.
public func == (lhs: some SQLSpecificExpressible, rhs: (any SQLExpressible)?) -> SQLExpression {
    guard let rhs else { return lhs.isNull }
    return .binary(lhs.sqlExpression, "=", rhs.sqlExpression)
}

/// `lhs = rhs`; `nil ==` is `IS NULL`.
public func == (lhs: (any SQLExpressible)?, rhs: some SQLSpecificExpressible) -> SQLExpression {
    guard let lhs else { return rhs.isNull }
    return .binary(lhs.sqlExpression, "=", rhs.sqlExpression)
}

/// `lhs = rhs`.
public func == (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "=", rhs.sqlExpression)
}

/// `lhs <> rhs`; `!= nil` is `IS NOT NULL`.
public func != (lhs: some SQLSpecificExpressible, rhs: (any SQLExpressible)?) -> SQLExpression {
    guard let rhs else { return lhs.isNotNull }
    return .binary(lhs.sqlExpression, "<>", rhs.sqlExpression)
}

/// `lhs <> rhs`; `nil !=` is `IS NOT NULL`.
public func != (lhs: (any SQLExpressible)?, rhs: some SQLSpecificExpressible) -> SQLExpression {
    guard let lhs else { return rhs.isNotNull }
    return .binary(lhs.sqlExpression, "<>", rhs.sqlExpression)
}

/// `lhs <> rhs`.
public func != (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<>", rhs.sqlExpression)
}

/// `lhs < rhs`.
public func < (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<", rhs.sqlExpression)
}
/// `lhs < rhs`.
public func < (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<", rhs.sqlExpression)
}
/// `lhs < rhs`.
public func < (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<", rhs.sqlExpression)
}
/// `lhs <= rhs`.
public func <= (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<=", rhs.sqlExpression)
}
/// `lhs <= rhs`.
public func <= (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<=", rhs.sqlExpression)
}
/// `lhs <= rhs`.
public func <= (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "<=", rhs.sqlExpression)
}
/// `lhs > rhs`.
public func > (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, ">", rhs.sqlExpression)
}
/// `lhs > rhs`.
public func > (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, ">", rhs.sqlExpression)
}
/// `lhs > rhs`.
public func > (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, ">", rhs.sqlExpression)
}
/// `lhs >= rhs`.
public func >= (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, ">=", rhs.sqlExpression)
}
/// `lhs >= rhs`.
public func >= (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, ">=", rhs.sqlExpression)
}
/// `lhs >= rhs`.
public func >= (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, ">=", rhs.sqlExpression)
}

// MARK: - Logical operators

/// Both conditions hold (`AND`).
public func && (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "AND", rhs.sqlExpression)
}

/// Either condition holds (`OR`).
public func || (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "OR", rhs.sqlExpression)
}

/// The condition does not hold (`NOT`).
public prefix func ! (expression: some SQLSpecificExpressible) -> SQLExpression {
    SQLExpression(pieces: [.sql("(NOT ")] + expression.sqlExpression.pieces + [.sql(")")])
}

// MARK: - Arithmetic

/// `lhs + rhs`.
public func + (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "+", rhs.sqlExpression)
}
/// `lhs + rhs`.
public func + (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "+", rhs.sqlExpression)
}
/// `lhs + rhs`.
public func + (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "+", rhs.sqlExpression)
}
/// `lhs - rhs`.
public func - (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "-", rhs.sqlExpression)
}
/// `lhs - rhs`.
public func - (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "-", rhs.sqlExpression)
}
/// `lhs - rhs`.
public func - (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "-", rhs.sqlExpression)
}
/// `lhs * rhs`.
public func * (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "*", rhs.sqlExpression)
}
/// `lhs * rhs`.
public func * (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "*", rhs.sqlExpression)
}
/// `lhs * rhs`.
public func * (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "*", rhs.sqlExpression)
}
/// `lhs / rhs` (SQLite divides integers as integers: `7 / 2` is 3).
public func / (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "/", rhs.sqlExpression)
}
/// `lhs / rhs`.
public func / (lhs: some SQLExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "/", rhs.sqlExpression)
}
/// `lhs / rhs`.
public func / (lhs: some SQLSpecificExpressible, rhs: some SQLSpecificExpressible) -> SQLExpression {
    .binary(lhs.sqlExpression, "/", rhs.sqlExpression)
}
/// `-value`.
public prefix func - (value: some SQLSpecificExpressible) -> SQLExpression {
    SQLExpression(pieces: [.sql("(-")] + value.sqlExpression.pieces + [.sql(")")])
}

// MARK: - Functions and aggregates (GRDB's names)

/// The absolute value (SQL `abs()`).
public func abs(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("abs", [value.sqlExpression]) }

/// The first non-`NULL` value (SQL `IFNULL`): `Column("note") ?? ""`.
public func ?? (lhs: some SQLSpecificExpressible, rhs: some SQLExpressible) -> SQLExpression {
    .function("IFNULL", [lhs.sqlExpression, rhs.sqlExpression])
}

/// The number of non-`NULL` values (SQL `count()`); `count(Column("id"))`. For a number of rows, use
/// ``Query/fetchCount(_:)``.
public func count(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("count", [value.sqlExpression]) }

/// The number of distinct non-`NULL` values (SQL `count(DISTINCT …)`).
public func count(distinct value: some SQLSpecificExpressible) -> SQLExpression {
    SQLExpression(pieces: [.sql("count(DISTINCT ")] + value.sqlExpression.pieces + [.sql(")")])
}

/// The sum of the non-`NULL` values (SQL `sum()`): `NULL` when there is none, an integer when every value is one.
public func sum(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("sum", [value.sqlExpression]) }

/// The sum of the values as a floating-point number, `0.0` when there is none (SQL `total()`).
public func total(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("total", [value.sqlExpression]) }

/// The smallest value (SQL aggregate `min()`); `NULL` when there are no rows.
public func min(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("min", [value.sqlExpression]) }

/// The largest value (SQL aggregate `max()`); `NULL` when there are no rows.
public func max(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("max", [value.sqlExpression]) }

/// The average of the non-`NULL` values as a floating-point number (SQL `avg()`); `NULL` when there is none.
public func average(_ value: some SQLSpecificExpressible) -> SQLExpression { .function("avg", [value.sqlExpression]) }

// MARK: - Assignments

/// A new value for a column in `updateAll(_:_:)`: `Column("score").set(to: 0)`.
public struct ColumnAssignment: Sendable {
    let column: Column
    let value: SQLExpression
}

extension Column {
    /// The column set to `value` in `updateAll(_:_:)` (`nil` is `NULL`); a value
    /// is bound, an expression (`Column("pages") + 1`) is computed from the row.
    public func set(to value: (any SQLExpressible)?) -> ColumnAssignment {
        ColumnAssignment(column: self, value: value?.sqlExpression ?? DatabaseValue.null.sqlExpression)
    }
}
