// A query value: a selection, filters with bound arguments, grouping, an order, a limit, associations.

/// A request for rows of one table, decoded as `Record`: a selection, filters (each bound, none
/// concatenated), a grouping, an order, a limit and an offset, and associated records. A value: refining it
/// returns a new query. GRDB calls it `QueryInterfaceRequest`.
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
///     try Item.filter(Column("isDone") == false).order(Column("title")).limit(50).fetchAll(db)
/// }
///
/// func titles(_ db: Database) throws -> [String] {
///     try Item.select(Column("title"), as: String.self).order(Column("title").collating(.nocase)).fetchAll(db)
/// }
/// ```
///
/// What a query decodes its rows as:
/// - a ``FetchableRecord`` (through its `init(row:)`),
/// - a ``DatabaseValueConvertible`` scalar (`Int`, `String`, `Date`…, from the first column; `fetchOne` returns
///   `nil` for `NULL`),
/// - any other `Decodable` type, its coding keys naming the result columns.
public struct Query<Record>: Sendable {
    let table: String
    let primaryKey: String
    var selection: [SQLSelection] = []
    var isDistinct = false
    var filters: [SQLExpression] = []
    var groups: [SQLExpression] = []
    var havings: [SQLExpression] = []
    var orderings: [SQLOrdering] = []
    var limit: Int?
    var offset: Int?
    var joins: [JoinPart] = []
    var prefetches: [PrefetchPart] = []
    /// Whether ``annotated(with:)`` added columns: a `Decodable` type then reads the record as a property of its
    /// own (`var tag: Tag` beside `var noteCount: Int`), as with associations.
    var isAnnotated = false

    init(table: String, primaryKey: String) {
        self.table = table
        self.primaryKey = primaryKey
    }

    /// The query with the same parts, decoding rows as `T`.
    func converted<T>(to type: T.Type) -> Query<T> {
        var query = Query<T>(table: table, primaryKey: primaryKey)
        query.selection = selection
        query.isDistinct = isDistinct
        query.filters = filters
        query.groups = groups
        query.havings = havings
        query.orderings = orderings
        query.limit = limit
        query.offset = offset
        query.joins = joins
        query.prefetches = prefetches
        query.isAnnotated = isAnnotated
        return query
    }

    // MARK: Refining

    /// The query selecting `selection` (columns, expressions, aggregates) instead of every column, still decoded
    /// as `Record`.
    public func select(_ selection: any SQLSelectable...) -> Query { select(selection) }

    /// The query selecting `selection` instead of every column, still decoded as `Record`.
    public func select(_ selection: [any SQLSelectable]) -> Query {
        var query = self
        query.selection = selection.map(\.sqlSelection)
        return query
    }

    /// The query selecting `selection`, decoded as `type`: a scalar (`String.self`, `Int.self`) read from the
    /// first column, or any `Decodable` type whose keys are the selected columns.
    ///
    /// ```swift
    /// let best = try Player.select(max(Column("score")), as: Int.self).fetchOne(db)
    /// ```
    public func select<T>(_ selection: any SQLSelectable..., as type: T.Type) -> Query<T> {
        self.select(selection).converted(to: type)
    }

    /// The query selecting `selection`, decoded as `type`.
    public func select<T>(_ selection: [any SQLSelectable], as type: T.Type) -> Query<T> {
        self.select(selection).converted(to: type)
    }

    /// The same query, decoded as `type` (GRDB's `asRequest(of:)`).
    public func asRequest<T>(of type: T.Type) -> Query<T> { converted(to: type) }

    /// The query without duplicate rows (`SELECT DISTINCT`).
    public func distinct() -> Query {
        var query = self
        query.isDistinct = true
        return query
    }

    /// The rows that also match `predicate`.
    public func filter(_ predicate: some SQLSpecificExpressible) -> Query {
        var query = self
        query.filters.append(predicate.sqlExpression)
        return query
    }

    /// The rows that also match a condition written in SQL with a `?` for each of `arguments`.
    public func filter(sql: String, arguments: [(any DatabaseValueConvertible)?] = []) -> Query {
        filter(SQLExpression(sql: sql, arguments: arguments))
    }

    /// The row whose primary key is `id`.
    public func filter(id: some DatabaseValueConvertible) -> Query {
        filter(Column(primaryKey) == id)
    }

    /// The row whose primary key is `key` (GRDB's spelling of ``filter(id:)``).
    public func filter(key: some DatabaseValueConvertible) -> Query { filter(id: key) }

    /// The rows whose columns have the values of `key` (`["email": "a@b.c"]`; a `nil` value matches `NULL`).
    public func filter(key: [String: (any DatabaseValueConvertible)?]) -> Query {
        var query = self
        for (column, value) in key.sorted(by: { $0.key < $1.key }) {
            query = query.filter(Column(column) == value)
        }
        return query
    }

    /// Grouped by `expressions` (`GROUP BY`), replacing any previous grouping; select aggregates with it.
    ///
    /// ```swift
    /// struct Total: Decodable { var kind: String; var count: Int }
    /// let totals = try Note.select(Column("kind"), count(Column("id")).forKey("count"), as: Total.self)
    ///     .group(Column("kind")).having(count(Column("id")) > 1).fetchAll(db)
    /// ```
    public func group(_ expressions: any SQLExpressible...) -> Query { group(expressions) }

    /// Grouped by `expressions`, replacing any previous grouping.
    public func group(_ expressions: [any SQLExpressible]) -> Query {
        var query = self
        query.groups = expressions.map(\.sqlExpression)
        return query
    }

    /// The query selecting `selection` beside what it selects already (every column when nothing was chosen):
    /// GRDB's `annotated(with:)`, most often with an aggregate over an association.
    ///
    /// ```swift
    /// struct TagInfo: Decodable, FetchableRecord { var tag: Tag; var noteCount: Int }
    /// let infos = try TagInfo.fetchAll(db, Tag.annotated(with: Tag.notes.count))
    /// ```
    public func annotated(with selection: any SQLSelectable...) -> Query { annotated(with: selection) }

    /// The query selecting `selection` beside what it selects already.
    public func annotated(with selection: [any SQLSelectable]) -> Query {
        var query = self
        if query.selection.isEmpty { query.selection = [.allColumns] }
        query.selection += selection.map(\.sqlSelection)
        query.isAnnotated = true
        return query
    }

    /// The groups that also match `predicate` (`HAVING`). A request that is not grouped and whose `predicate`
    /// uses an aggregate over an association (`Tag.notes.isEmpty == false`) is grouped by its primary key.
    public func having(_ predicate: some SQLSpecificExpressible) -> Query {
        var query = self
        query.havings.append(predicate.sqlExpression)
        return query
    }

    /// Ordered by `orderings` (columns ascending, or `.asc`/`.desc`, expressions), replacing any previous order.
    public func order(_ orderings: any SQLOrderingTerm...) -> Query { order(orderings) }

    /// Ordered by `orderings`, replacing any previous order.
    public func order(_ orderings: [any SQLOrderingTerm]) -> Query {
        var query = self
        query.orderings = orderings.map(\.sqlOrdering)
        return query
    }

    /// At most `limit` rows, after skipping `offset` rows.
    public func limit(_ limit: Int, offset: Int? = nil) -> Query {
        var query = self
        query.limit = Swift.max(0, limit)
        query.offset = offset.map { Swift.max(0, $0) }
        return query
    }

    // MARK: SQL

    /// The SQL of the query and its arguments. `selecting` replaces the selection; `extraColumns` are selected
    /// after every other column.
    func sql(
        selecting override: [SQLSelection]? = nil, extraColumns: [SQLSelection] = [], withOrderAndLimit: Bool = true,
        resolved: [ResolvedJoin] = []
    ) -> (String, [DatabaseValue]) {
        // Every column is qualified with its table: SQLite before 3.29 (Debian 12's 3.15.2) reads an unknown
        // "name" as a string literal, but never "table"."name" (Docs/records.md, "A misspelled column is an error").
        let qualifier: String? = table
        var sql = isDistinct ? "SELECT DISTINCT " : "SELECT "
        var arguments: [DatabaseValue] = []
        var selection = override ?? self.selection
        if selection.isEmpty { selection = [.allColumns] }
        // ORDER BY, GROUP BY and HAVING may name a result column by its alias, which has no table.
        let aliases = Set((selection + extraColumns).compactMap { $0.alias?.lowercased() })
        var first = true
        for column in selection {
            if !first { sql += ", " }
            first = false
            column.render(qualifier: qualifier, into: &sql, &arguments)
        }
        if override == nil {
            for join in resolved where join.part.decode != nil {
                sql += ", " + quoteIdentifier(join.alias) + ".*"
            }
        }
        for column in extraColumns {
            sql += ", "
            column.render(qualifier: qualifier, into: &sql, &arguments)
        }
        sql += " FROM " + quoteIdentifier(table)
        for join in resolved {
            for joined in join.tables { joined.render(required: join.part.required, into: &sql, &arguments) }
        }
        append(" WHERE ", filters, qualifier: qualifier, to: &sql, &arguments)
        if !groups.isEmpty {
            sql += " GROUP BY "
            for (index, group) in groups.enumerated() {
                if index > 0 { sql += ", " }
                group.render(qualifier: qualifier, aliases: aliases, into: &sql, &arguments)
            }
        }
        append(" HAVING ", havings, qualifier: qualifier, aliases: aliases, to: &sql, &arguments)
        guard withOrderAndLimit else { return (sql, arguments) }
        var terms = orderings.map { ($0, qualifier, aliases) }
        for join in resolved { terms += join.part.association.orderings.map { ($0, join.alias, []) } }
        if !terms.isEmpty {
            sql += " ORDER BY "
            for (index, (term, termQualifier, termAliases)) in terms.enumerated() {
                if index > 0 { sql += ", " }
                term.render(qualifier: termQualifier, aliases: termAliases, into: &sql, &arguments)
            }
        }
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

    private func append(
        _ keyword: String, _ conditions: [SQLExpression], qualifier: String?, aliases: Set<String> = [],
        to sql: inout String, _ arguments: inout [DatabaseValue]
    ) {
        guard !conditions.isEmpty else { return }
        sql += keyword
        for (index, condition) in conditions.enumerated() {
            sql += index == 0 ? "(" : " AND ("
            condition.render(qualifier: qualifier, aliases: aliases, into: &sql, &arguments)
            sql += ")"
        }
    }

    // MARK: Counting and deleting

    /// The number of rows the query selects; nothing is decoded.
    public func fetchCount(_ db: Database) throws -> Int {
        let (query, resolved) = try prepared(db)
        return try query.fetchCount(db, resolved: resolved)
    }

    private func fetchCount(_ db: Database, resolved: [ResolvedJoin]) throws -> Int {
        let (sql, arguments): (String, [DatabaseValue])
        if limit != nil || offset != nil || isDistinct || !groups.isEmpty || !resolved.isEmpty || !selection.isEmpty {
            // DISTINCT of every column counts distinct rows (a constant would count one).
            let every = isDistinct ? SQLSelection.allColumns : SQLSelection(expression: SQLExpression(pieces: [.sql("1")]), alias: nil)
            let (inner, innerArguments) = self.sql(
                selecting: selection.isEmpty ? [every] : selection, resolved: resolved)
            (sql, arguments) = ("SELECT count(*) FROM (\(inner))", innerArguments)
        } else {
            (sql, arguments) = self.sql(
                selecting: [SQLSelection(expression: SQLExpression(pieces: [.sql("count(*)")]), alias: nil)],
                withOrderAndLimit: false)
        }
        return try db.fetchOne(sql, StatementArguments(values: arguments)) { try $0.int(at: 0) } ?? 0
    }

    /// Whether the query selects no row.
    public func isEmpty(_ db: Database) throws -> Bool {
        var query = limit(1, offset: offset)
        query.orderings = []   // the order changes nothing here, and may name an alias of the selection replaced
        let (prepared, resolved) = try query.prepared(db)
        let (inner, arguments) = prepared.sql(
            selecting: [SQLSelection(expression: SQLExpression(pieces: [.sql("1")]), alias: nil)], resolved: resolved)
        return try db.fetchOne("SELECT EXISTS (\(inner))", StatementArguments(values: arguments)) {
            try $0.int(at: 0)
        } == 0
    }

    /// Deletes the rows the query selects (its order and limit are kept when it has a limit); returns how many.
    ///
    /// ```swift
    /// let removed = try Note.filter(Column("kind") == "chore").deleteAll(db)
    /// ```
    @discardableResult
    public func deleteAll(_ db: Database) throws -> Int {
        var sql = "DELETE FROM \(quoteIdentifier(table))"
        var arguments: [DatabaseValue] = []
        try appendRowCondition(db, to: &sql, &arguments)
        try db.execute(sql, StatementArguments(values: arguments))
        return db.changes
    }

    /// Sets columns of the rows the query selects (`UPDATE … SET`, GRDB's `updateAll`); returns how many rows
    /// changed. A value is bound; an expression may use the row's other columns.
    ///
    /// ```swift
    /// try Note.filter(Column("kind") == "chore").updateAll(db, Column("kind").set(to: "idea"))
    /// try Book.updateAll(db, Column("readPages").set(to: Column("pages")))
    /// ```
    ///
    /// A column name the table does not have throws `no such column`, and no row changes.
    @discardableResult
    public func updateAll(_ db: Database, _ assignments: ColumnAssignment...) throws -> Int {
        try updateAll(db, assignments)
    }

    /// Sets columns of the rows the query selects; returns how many rows changed.
    @discardableResult
    public func updateAll(_ db: Database, _ assignments: [ColumnAssignment]) throws -> Int {
        guard !assignments.isEmpty else { return 0 }
        var sql = "UPDATE \(quoteIdentifier(table)) SET "
        var arguments: [DatabaseValue] = []
        for (index, assignment) in assignments.enumerated() {
            if index > 0 { sql += ", " }
            // The target of SET is never read as a string: an unknown name is "no such column" on every engine.
            sql += quoteIdentifier(assignment.column.name) + " = "
            try resolving(assignment.value, db).render(qualifier: table, into: &sql, &arguments)
        }
        try appendRowCondition(db, to: &sql, &arguments)
        try db.execute(sql, StatementArguments(values: arguments))
        return db.changes
    }

    /// The `WHERE` clause of a `DELETE` or `UPDATE` of the rows the query selects: its filters, or, with a limit,
    /// a join or a grouping, its primary keys (SQLite's `DELETE … LIMIT` is a compile-time option).
    private func appendRowCondition(_ db: Database, to sql: inout String, _ arguments: inout [DatabaseValue]) throws {
        let (query, resolved) = try prepared(db)
        if limit != nil || offset != nil || !joins.isEmpty || !query.groups.isEmpty || isDistinct {
            let key = SQLSelection(expression: Column(primaryKey).sqlExpression, alias: nil)
            let (inner, innerArguments) = query.sql(selecting: [key], resolved: resolved)
            sql += " WHERE \(quoteIdentifier(table)).\(quoteIdentifier(primaryKey)) IN (\(inner))"
            arguments += innerArguments
        } else {
            append(" WHERE ", query.filters, qualifier: table, to: &sql, &arguments)
        }
    }

    // MARK: Fetching

    /// The SQL and arguments of the query (of its first row when `single`), its joins resolved in `db`.
    func sql(_ db: Database, single: Bool = false) throws -> (String, StatementArguments) {
        let (query, resolved) = try (single ? limit(1, offset: offset) : self).prepared(db)
        let (sql, arguments) = query.sql(resolved: resolved)
        return (sql, StatementArguments(values: arguments))
    }

    /// Whether the query includes associated records (which only `Decodable` types can receive).
    var hasIncludes: Bool { !prefetches.isEmpty || joins.contains { $0.decode != nil } }

    /// Whether a `Decodable` type reads the request's record as a property of its own (with associations or
    /// annotations), rather than from the row's columns alone.
    var decodesRecordAsProperty: Bool { hasIncludes || isAnnotated }

    /// Runs the query and decodes each row with `decode`; `single` asks for one row at most.
    func fetchRows<T>(_ db: Database, single: Bool, _ decode: (Row) throws -> T) throws -> [T] {
        let (sql, arguments) = try self.sql(db, single: single)
        if single {
            return try db.fetchOne(sql, arguments, decode).map { [$0] } ?? []
        }
        return try db.fetch(sql, arguments, decode)
    }

    /// Rows decoded as a scalar from their first column; `NULL` rows are left out of `fetchOne`'s answer.
    func fetchScalars<T: DatabaseValueConvertible>(_ db: Database, single: Bool) throws -> [T] {
        try checkNoAssociations(T.self)
        if single {
            let (sql, arguments) = try self.sql(db, single: true)
            let value = try db.fetchOne(sql, arguments) { row in try row[0] as T? }
            return (value ?? nil).map { [$0] } ?? []
        }
        return try fetchRows(db, single: false) { row in try T.decode(from: row, at: 0) }
    }

    /// Rows decoded through `Decodable`: a scalar from the first column when `T` is one, otherwise by column
    /// names; with associations, the associated records by their keys.
    func fetchDecodable<T: Decodable>(_ db: Database, single: Bool) throws -> [T] {
        if decodesRecordAsProperty { return try fetchAssociated(db, single: single) }
        if let scalar = T.self as? any DatabaseValueConvertible.Type {
            return try fetchRows(db, single: single) { row in
                try scalar.decode(from: row, at: 0) as! T  // the dynamic type is T: the cast cannot fail
            }
        }
        return try fetchRows(db, single: single) { row in
            try T(from: RowDecoder(row: row))
        }
    }

    func checkNoAssociations(_ type: Any.Type) throws {
        guard !hasIncludes else {
            throw DatabaseError(
                .misuse,
                "a request with associations (including…) decodes its rows through Decodable; \(type) is not "
                    + "Decodable: make it Decodable, or use joining(required:)/joining(optional:), which select "
                    + "nothing of the associated table")
        }
    }
}

extension Query {
    /// The SQL and arguments of every row, for a fetch through `init(row:)`; throws for a request with
    /// associations, which only `Decodable` decodes.
    // The fetch that calls this is inlinable, so that it is specialized for the app's record type: the array of
    // records and the call of `init(row:)` are then the app's own code, as in a fetch written by hand, instead of
    // generic code that looks up the array's type on every row (Docs/records.md, issue 34).
    @usableFromInline
    func recordsSQL(_ db: Database) throws -> (String, StatementArguments) {
        try checkNoAssociations(Record.self)
        return try sql(db)
    }

    /// ``recordsSQL(_:)`` for a `Decodable` record: `nil` when the request has associations or annotations, which
    /// ``fetchAssociatedRecords(_:)`` reads.
    @usableFromInline
    func decodableRecordsSQL(_ db: Database) throws -> (String, StatementArguments)? {
        if decodesRecordAsProperty { return nil }
        return try sql(db)
    }
}

extension Query where Record: Decodable {
    /// Every record of a request with associations or annotations.
    @usableFromInline
    func fetchAssociatedRecords(_ db: Database) throws -> [Record] { try fetchAssociated(db, single: false) }
}

extension Query where Record: FetchableRecord {
    /// Every record the query selects.
    @inlinable
    public func fetchAll(_ db: Database) throws -> [Record] {
        let (sql, arguments) = try recordsSQL(db)
        return try db.fetch(sql, arguments) { row in try Record(row: row) }
    }

    /// The first record the query selects, or `nil`.
    public func fetchOne(_ db: Database) throws -> Record? {
        try checkNoAssociations(Record.self)
        let (sql, arguments) = try self.sql(db, single: true)
        return try db.fetchOne(sql, arguments) { row in try Record(row: row) }
    }

    /// Calls `body` with each record the query selects, one at a time, without collecting them.
    public func forEach(_ db: Database, _ body: (Record) throws -> Void) throws {
        try checkNoAssociations(Record.self)
        let (sql, arguments) = try self.sql(db)
        try db.forEachRow(sql, arguments) { row in try body(try Record(row: row)) }
    }
}

extension Query where Record: FetchableRecord & Decodable {
    /// Every record the query selects (through `init(row:)`; with associations, through `Decodable`).
    @inlinable
    public func fetchAll(_ db: Database) throws -> [Record] {
        guard let (sql, arguments) = try decodableRecordsSQL(db) else { return try fetchAssociatedRecords(db) }
        return try db.fetch(sql, arguments) { row in try Record(row: row) }
    }

    /// The first record the query selects, or `nil`.
    public func fetchOne(_ db: Database) throws -> Record? {
        if decodesRecordAsProperty { return (try fetchAssociated(db, single: true) as [Record]).first }
        let (sql, arguments) = try self.sql(db, single: true)
        return try db.fetchOne(sql, arguments) { row in try Record(row: row) }
    }
}

extension Query where Record: Decodable {
    /// Every row the query selects, decoded as `Record` (a scalar from the first column, or by column names).
    public func fetchAll(_ db: Database) throws -> [Record] { try fetchDecodable(db, single: false) }

    /// The first row the query selects decoded as `Record`, or `nil`.
    public func fetchOne(_ db: Database) throws -> Record? { (try fetchDecodable(db, single: true) as [Record]).first }
}

extension Query where Record: DatabaseValueConvertible {
    /// The first column of every row the query selects.
    public func fetchAll(_ db: Database) throws -> [Record] { try fetchScalars(db, single: false) }

    /// The first column of the first row, or `nil` when there is no row or it is `NULL` (an aggregate over no rows).
    public func fetchOne(_ db: Database) throws -> Record? { (try fetchScalars(db, single: true) as [Record]).first }
}

extension Query where Record: DatabaseValueConvertible & Decodable {
    /// The first column of every row the query selects.
    public func fetchAll(_ db: Database) throws -> [Record] { try fetchScalars(db, single: false) }

    /// The first column of the first row, or `nil` when there is no row or it is `NULL` (an aggregate over no rows).
    public func fetchOne(_ db: Database) throws -> Record? { (try fetchScalars(db, single: true) as [Record]).first }
}

extension FetchableRecord {
    /// The records a request of another type selects, decoded as this type (GRDB's spelling of
    /// `request.asRequest(of: Self.self).fetchAll(db)`).
    public static func fetchAll<R>(_ db: Database, _ request: Query<R>) throws -> [Self] {
        try request.asRequest(of: Self.self).fetchAll(db)
    }

    /// The first record a request of another type selects, decoded as this type, or `nil`.
    public static func fetchOne<R>(_ db: Database, _ request: Query<R>) throws -> Self? {
        try request.asRequest(of: Self.self).fetchOne(db)
    }
}

extension FetchableRecord where Self: Decodable {
    /// The records a request of another type selects, decoded as this type: with associations, each record with
    /// its associated records in the properties named after them.
    ///
    /// ```swift
    /// let infos = try BookInfo.fetchAll(db, Book.including(required: Book.author))
    /// ```
    public static func fetchAll<R>(_ db: Database, _ request: Query<R>) throws -> [Self] {
        try request.asRequest(of: Self.self).fetchAll(db)
    }

    /// The first record a request of another type selects, decoded as this type, or `nil`.
    public static func fetchOne<R>(_ db: Database, _ request: Query<R>) throws -> Self? {
        try request.asRequest(of: Self.self).fetchOne(db)
    }
}
