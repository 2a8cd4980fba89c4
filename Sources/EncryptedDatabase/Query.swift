// A small query value: filters with bound arguments, an order, a limit and an offset.

/// A column of a table, to build filters and orderings from.
///
/// ```swift
/// let open = Column("isDone") == false
/// let newestFirst = Column("creationDate").desc
/// ```
///
/// The name is quoted as an SQL identifier; values compared with it are always bound as arguments.
public struct Column: Sendable, Hashable {
    /// The column's name.
    public let name: String

    /// The column named `name`.
    public init(_ name: String) { self.name = name }

    var quoted: String { quoteIdentifier(name) }

    /// Ascending order (`ASC`).
    public var asc: SQLOrdering { SQLOrdering(sql: quoted + " ASC") }
    /// Descending order (`DESC`).
    public var desc: SQLOrdering { SQLOrdering(sql: quoted + " DESC") }

    /// The column matches the `LIKE` pattern (`%` any run of characters, `_` one character; ASCII letters
    /// match case-insensitively), with `\` as the escape character.
    public func like(_ pattern: String) -> SQLExpression {
        SQLExpression(sql: quoted + " LIKE ? ESCAPE '\\'", arguments: [.text(pattern)])
    }

    /// The column's value is one of `values` (never true for an empty collection).
    public func `in`(_ values: some Collection<some DatabaseValueConvertible>) -> SQLExpression {
        guard !values.isEmpty else { return SQLExpression(sql: "0", arguments: []) }
        return SQLExpression(
            sql: quoted + " IN (" + repeatElement("?", count: values.count).joined(separator: ", ") + ")",
            arguments: values.map(\.databaseValue))
    }

    /// The column is `NULL`.
    public var isNull: SQLExpression { SQLExpression(sql: quoted + " IS NULL", arguments: []) }

    /// The column is not `NULL`.
    public var isNotNull: SQLExpression { SQLExpression(sql: quoted + " IS NOT NULL", arguments: []) }

    /// The column equals `value`; `nil` tests `IS NULL`.
    public static func == (column: Column, value: (any DatabaseValueConvertible)?) -> SQLExpression {
        guard let value else { return column.isNull }
        return column.compare("=", value)
    }

    /// The column differs from `value`; `nil` tests `IS NOT NULL`.
    public static func != (column: Column, value: (any DatabaseValueConvertible)?) -> SQLExpression {
        guard let value else { return column.isNotNull }
        return column.compare("<>", value)
    }

    /// The column is less than `value`.
    public static func < (column: Column, value: any DatabaseValueConvertible) -> SQLExpression {
        column.compare("<", value)
    }

    /// The column is less than or equal to `value`.
    public static func <= (column: Column, value: any DatabaseValueConvertible) -> SQLExpression {
        column.compare("<=", value)
    }

    /// The column is greater than `value`.
    public static func > (column: Column, value: any DatabaseValueConvertible) -> SQLExpression {
        column.compare(">", value)
    }

    /// The column is greater than or equal to `value`.
    public static func >= (column: Column, value: any DatabaseValueConvertible) -> SQLExpression {
        column.compare(">=", value)
    }

    private func compare(_ operation: String, _ value: any DatabaseValueConvertible) -> SQLExpression {
        SQLExpression(sql: quoted + " " + operation + " ?", arguments: [value.databaseValue])
    }
}

/// A condition of a query: SQL text with `?` parameters, and the values bound to them.
///
/// Build one from ``Column`` comparisons, combine them with `&&`, `||` and `!`, or write the SQL yourself with
/// ``init(sql:arguments:)`` — with `?` for every value, never a value in the text.
public struct SQLExpression: Sendable, CustomStringConvertible {
    /// The SQL text, with `?` where values are bound.
    public let sql: String
    let arguments: [DatabaseValue]

    init(sql: String, arguments: [DatabaseValue]) {
        self.sql = sql
        self.arguments = arguments
    }

    /// A condition written in SQL, with a `?` for each of `arguments`.
    ///
    /// ```swift
    /// let recent = SQLExpression(sql: "creationDate > ?", arguments: [Date().addingTimeInterval(-86_400)])
    /// ```
    public init(sql: String, arguments: [(any DatabaseValueConvertible)?] = []) {
        self.sql = sql
        self.arguments = arguments.map { $0?.databaseValue ?? .null }
    }

    /// Both conditions hold.
    public static func && (lhs: SQLExpression, rhs: SQLExpression) -> SQLExpression {
        SQLExpression(sql: "(\(lhs.sql)) AND (\(rhs.sql))", arguments: lhs.arguments + rhs.arguments)
    }

    /// Either condition holds.
    public static func || (lhs: SQLExpression, rhs: SQLExpression) -> SQLExpression {
        SQLExpression(sql: "(\(lhs.sql)) OR (\(rhs.sql))", arguments: lhs.arguments + rhs.arguments)
    }

    /// The condition does not hold.
    public static prefix func ! (expression: SQLExpression) -> SQLExpression {
        SQLExpression(sql: "NOT (\(expression.sql))", arguments: expression.arguments)
    }

    /// The SQL text and the number of bound values; never the values.
    public var description: String { "\(sql) <\(arguments.count) values redacted>" }
}

/// One term of an `ORDER BY`: a column and a direction, or SQL of your own.
public struct SQLOrdering: Sendable {
    /// The SQL of the term.
    public let sql: String

    init(sql: String) { self.sql = sql }

    /// An ordering term written in SQL (`"lower(name) ASC"`). Ordering takes no arguments: it holds no values.
    public init(sql literal: StaticString) { self.sql = literal.description }
}

/// The records of one table that a query selects: filters (each bound, none concatenated), an order, a limit and
/// an offset. A value: refining it returns a new query.
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Item: Codable, FetchableRecord, PersistableRecord {
///     var id: Int64?
///     var title: String
///     var isDone: Bool
/// }
///
/// func openItems(_ db: Database) throws -> [Item] {
///     try Item.filter(Column("isDone") == false).order(Column("title").asc).limit(50).fetchAll(db)
/// }
/// ```
public struct Query<Record: TableRecord>: Sendable {
    private var filters: [SQLExpression] = []
    private var orderings: [SQLOrdering] = []
    private var limit: Int?
    private var offset: Int?

    init() {}

    /// The rows that also match `predicate`.
    public func filter(_ predicate: SQLExpression) -> Query {
        var query = self
        query.filters.append(predicate)
        return query
    }

    /// The rows that also match a condition written in SQL with a `?` for each of `arguments`.
    public func filter(sql: String, arguments: [(any DatabaseValueConvertible)?] = []) -> Query {
        filter(SQLExpression(sql: sql, arguments: arguments))
    }

    /// The row whose primary key is `id`.
    public func filter(id: some DatabaseValueConvertible) -> Query {
        filter(Column(Record.databasePrimaryKey) == id)
    }

    /// Ordered by `orderings`, replacing any previous order.
    public func order(_ orderings: SQLOrdering...) -> Query { order(orderings) }

    /// Ordered by `orderings`, replacing any previous order.
    public func order(_ orderings: [SQLOrdering]) -> Query {
        var query = self
        query.orderings = orderings
        return query
    }

    /// At most `limit` rows, after skipping `offset` rows.
    public func limit(_ limit: Int, offset: Int? = nil) -> Query {
        var query = self
        query.limit = max(0, limit)
        query.offset = offset.map { max(0, $0) }
        return query
    }

    /// The SQL of the query with `selection` as its result columns, and its arguments.
    func sql(selecting selection: String, withOrderAndLimit: Bool = true) -> (String, [DatabaseValue]) {
        var sql = "SELECT \(selection) FROM \(quoteIdentifier(Record.databaseTableName))"
        var arguments: [DatabaseValue] = []
        if !filters.isEmpty {
            sql += " WHERE " + filters.map { "(\($0.sql))" }.joined(separator: " AND ")
            for filter in filters { arguments += filter.arguments }
        }
        guard withOrderAndLimit else { return (sql, arguments) }
        if !orderings.isEmpty { sql += " ORDER BY " + orderings.map(\.sql).joined(separator: ", ") }
        if limit != nil || offset != nil {
            sql += " LIMIT ?"
            arguments.append(.integer(Int64(limit ?? -1)))
            if let offset {
                sql += " OFFSET ?"
                arguments.append(.integer(Int64(offset)))
            }
        }
        return (sql, arguments)
    }

    /// The number of rows the query selects; nothing is decoded.
    public func fetchCount(_ db: Database) throws -> Int {
        let (sql, arguments): (String, [DatabaseValue])
        if limit != nil || offset != nil {
            let (inner, innerArguments) = self.sql(selecting: "1")
            (sql, arguments) = ("SELECT count(*) FROM (\(inner))", innerArguments)
        } else {
            (sql, arguments) = self.sql(selecting: "count(*)", withOrderAndLimit: false)
        }
        return try db.fetchOne(sql, StatementArguments(values: arguments)) { try $0.int(at: 0) } ?? 0
    }

    /// Deletes the rows the query selects (its order and limit are ignored); returns how many.
    @discardableResult
    public func deleteAll(_ db: Database) throws -> Int {
        var sql = "DELETE FROM \(quoteIdentifier(Record.databaseTableName))"
        var arguments: [DatabaseValue] = []
        if !filters.isEmpty {
            sql += " WHERE " + filters.map { "(\($0.sql))" }.joined(separator: " AND ")
            for filter in filters { arguments += filter.arguments }
        }
        if limit != nil || offset != nil {
            // SQLite's DELETE … LIMIT is a compile-time option; select the rows by primary key instead.
            let key = quoteIdentifier(Record.databasePrimaryKey)
            let (inner, innerArguments) = self.sql(selecting: key)
            sql = "DELETE FROM \(quoteIdentifier(Record.databaseTableName)) WHERE \(key) IN (\(inner))"
            arguments = innerArguments
        }
        try db.execute(sql, StatementArguments(values: arguments))
        return db.changes
    }
}

extension Query where Record: FetchableRecord {
    /// Every record the query selects.
    public func fetchAll(_ db: Database) throws -> [Record] {
        let (sql, arguments) = self.sql(selecting: "*")
        return try db.fetch(sql, StatementArguments(values: arguments)) { row in try Record(row: row) }
    }

    /// The first record the query selects, or `nil`.
    public func fetchOne(_ db: Database) throws -> Record? {
        let (sql, arguments) = limit(1, offset: offset).sql(selecting: "*")
        return try db.fetchOne(sql, StatementArguments(values: arguments)) { row in try Record(row: row) }
    }

    /// Calls `body` with each record the query selects, one at a time, without collecting them.
    public func forEach(_ db: Database, _ body: (Record) throws -> Void) throws {
        let (sql, arguments) = self.sql(selecting: "*")
        try db.forEachRow(sql, StatementArguments(values: arguments)) { row in try body(try Record(row: row)) }
    }
}
