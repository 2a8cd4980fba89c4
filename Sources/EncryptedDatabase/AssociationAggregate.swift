// Aggregates over associations (GRDB's `AssociationAggregate`: `Tag.notes.count`, `isEmpty`, `sum`…), table
// aliases (`TableAlias`), and how a request is prepared before it renders: aggregates become correlated
// subqueries (no GROUP BY over a join, the same on SQLite 3.15.2 and 3.46), and a column that only a joined table
// has is qualified with that table.
internal import Synchronization

/// An aggregate of the records an association gives, as it was asked: which association, and which function.
struct AggregateOverAssociation: Sendable {
    enum Function: Sendable {
        /// The number of associated records.
        case count
        /// Whether there is none.
        case isEmpty
        /// An SQL aggregate function (`sum`, `total`, `min`, `max`, `avg`) of an expression of the associated table.
        case call(String, SQLExpression)

        var name: String {
            switch self {
            case .count: "count"
            case .isEmpty: "isEmpty"
            case .call(let function, _): function
            }
        }
    }

    let association: _SQLAssociation
    let function: Function
}

/// An aggregate of a record's associated records (GRDB's name): `Tag.notes.count`, `Tag.notes.isEmpty`,
/// `Author.books.sum(Column("pages"))`. Select it with ``Query/annotated(with:)``, filter with it in
/// ``Query/having(_:)`` or ``Query/filter(_:)``, compare it (`Tag.notes.count >= 2`), order by it.
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Tag: Codable, FetchableRecord, PersistableRecord {
///     static let noteTags = hasMany(NoteTag.self)
///     var id: Int64
///     var label: String
/// }
/// struct NoteTag: Codable, FetchableRecord, PersistableRecord { var noteId: Int64; var tagId: Int64 }
/// struct TagInfo: Decodable, FetchableRecord { var tag: Tag; var noteTagCount: Int }
///
/// func tagsWithCounts(_ db: Database) throws -> [TagInfo] {
///     try TagInfo.fetchAll(db, Tag.annotated(with: Tag.noteTags.count))   // tags without notes count 0
/// }
/// ```
///
/// Each aggregate is a subquery correlated with the request's row (`(SELECT count(*) FROM noteTag WHERE
/// noteTag.tagId = tag.id)`): a record without associated records gets `0` for `count` and `NULL` for `sum`, `min`,
/// `max` and `average` (`0.0` for `total`), and aggregates of several associations never multiply each other.
public struct AssociationAggregate<RowDecoder: TableRecord>: SQLSpecificExpressible {
    let aggregate: AggregateOverAssociation
    let key: String?

    /// The aggregate as an SQL expression, to compare or combine (its name is not kept).
    public var sqlExpression: SQLExpression { SQLExpression(pieces: [.aggregate(aggregate)]) }

    /// The aggregate as a selected column, named by its key (`noteCount` for `Tag.notes.count`).
    public var sqlSelection: SQLSelection { SQLSelection(expression: sqlExpression, alias: key) }

    /// The aggregate selected under another name: the key a `Decodable` type reads it by.
    public func forKey(_ key: String) -> SQLSelection { SQLSelection(expression: sqlExpression, alias: key) }
}

extension AssociationToMany {
    /// The number of associated records (`0` when there is none), named `"<key in the singular>Count"`:
    /// `Tag.notes.count` is `noteCount`.
    public var count: AssociationAggregate<OriginRowDecoder> {
        aggregate(.count, key: singular(_sqlAssociation.key) + "Count")
    }

    /// Whether there is no associated record, named `"hasNo<Key in the singular>"`: `Tag.notes.isEmpty` is
    /// `hasNoNote`. `having(Tag.notes.isEmpty == false)` keeps the tags with notes.
    public var isEmpty: AssociationAggregate<OriginRowDecoder> {
        aggregate(.isEmpty, key: "hasNo" + capitalized(singular(_sqlAssociation.key)))
    }

    /// The sum of `expression` over the associated records (SQL `sum()`: `NULL` when there is none), named
    /// `"<key><Column>Sum"` when `expression` is a column: `Author.books.sum(Column("pages"))` is `bookPagesSum`.
    public func sum(_ expression: some SQLSpecificExpressible) -> AssociationAggregate<OriginRowDecoder> {
        call("sum", expression) { singular(_sqlAssociation.key) + capitalized($0) + "Sum" }
    }

    /// The sum of `expression` as a floating-point number, `0.0` when there is no record (SQL `total()`), named
    /// like ``sum(_:)``.
    public func total(_ expression: some SQLSpecificExpressible) -> AssociationAggregate<OriginRowDecoder> {
        call("total", expression) { singular(_sqlAssociation.key) + capitalized($0) + "Sum" }
    }

    /// The smallest value of `expression` over the associated records (`NULL` when there is none), named
    /// `"minimum<Key><Column>"`.
    public func min(_ expression: some SQLSpecificExpressible) -> AssociationAggregate<OriginRowDecoder> {
        call("min", expression) { "minimum" + capitalized(singular(_sqlAssociation.key)) + capitalized($0) }
    }

    /// The largest value of `expression` over the associated records (`NULL` when there is none), named
    /// `"maximum<Key><Column>"`.
    public func max(_ expression: some SQLSpecificExpressible) -> AssociationAggregate<OriginRowDecoder> {
        call("max", expression) { "maximum" + capitalized(singular(_sqlAssociation.key)) + capitalized($0) }
    }

    /// The average of `expression` over the associated records (SQL `avg()`, `NULL` when there is none), named
    /// `"average<Key><Column>"`.
    public func average(_ expression: some SQLSpecificExpressible) -> AssociationAggregate<OriginRowDecoder> {
        call("avg", expression) { "average" + capitalized(singular(_sqlAssociation.key)) + capitalized($0) }
    }

    private func aggregate(_ function: AggregateOverAssociation.Function, key: String?)
        -> AssociationAggregate<OriginRowDecoder>
    {
        AssociationAggregate(aggregate: AggregateOverAssociation(association: _sqlAssociation, function: function),
                             key: key)
    }

    /// An aggregate function of `expression`, named by `name` from the column's name when it is a column.
    private func call(
        _ function: String, _ expression: some SQLSpecificExpressible, name: (String) -> String
    ) -> AssociationAggregate<OriginRowDecoder> {
        aggregate(.call(function, expression.sqlExpression), key: (expression as? Column).map { name($0.name) })
    }
}

/// `word` with its first letter in upper case (`note` → `Note`), for the default names of aggregates.
private func capitalized(_ word: String) -> String {
    guard let first = word.first else { return word }
    return first.uppercased() + word.dropFirst()
}

// MARK: - Table aliases

/// A name for a joined table, to reach its columns from the rest of the request (GRDB's name).
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Book: Codable, FetchableRecord, PersistableRecord {
///     static let author = belongsTo(Author.self)
///     var id: Int64
///     var authorId: Int64
///     var title: String
/// }
/// struct Author: Codable, FetchableRecord, PersistableRecord { var id: Int64; var name: String }
///
/// func booksByName(_ db: Database) throws -> [Book] {
///     let author = TableAlias()
///     return try Book.joining(required: Book.author.aliased(author))
///         .order(author[Column("name")], Column("title"))
///         .fetchAll(db)
/// }
/// ```
///
/// An alias names one table of one request: giving it to two associations of the same request is `misuse`.
public struct TableAlias: Sendable, Hashable {
    let name: String

    private static let counter = Atomic<Int>(0)

    /// An alias with a name of its own, unique in this process.
    public init() {
        name = "securestore_alias\(Self.counter.add(1, ordering: .relaxed).newValue)"
    }

    /// An alias named `name` (an SQL identifier; quoted in the SQL).
    public init(name: String) { self.name = name }

    /// The column `column` of the aliased table.
    public subscript(_ column: Column) -> SQLExpression {
        SQLExpression(pieces: [.aliasedColumn(alias: name, column: column.name)])
    }

    /// The column named `columnName` of the aliased table.
    public subscript(_ columnName: String) -> SQLExpression { self[Column(columnName)] }
}

extension Association {
    /// The association's table under `alias`, so that the request's filters, selection and order can name its
    /// columns (`alias[Column("name")]`).
    public func aliased(_ alias: TableAlias) -> Self {
        var association = _sqlAssociation
        association.alias = alias.name
        return Self(_sqlAssociation: association)
    }
}

// MARK: - Preparing a request

extension Query {
    /// This request ready to render in `db`, with its joins: every aggregate over an association replaced by its
    /// subquery, a column of a joined request that only one joined table has qualified with that table (a
    /// `count(Column("noteId"))` beside `joining(optional: Tag.noteTags)`), and a request whose `having` uses an
    /// association aggregate grouped by its primary key (SQLite before 3.39 refuses `HAVING` without `GROUP BY`).
    func prepared(_ db: Database) throws -> (query: Query, joins: [ResolvedJoin]) {
        let joins = try resolveJoins(db)
        guard usesAggregates || !joins.isEmpty else { return (self, joins) }
        var preparation = RequestPreparation(query: self, joins: joins, db: db)
        var query = self
        query.selection = try selection.map {
            SQLSelection(expression: try preparation.resolve($0.expression), alias: $0.alias)
        }
        query.filters = try filters.map { try preparation.resolve($0) }
        query.groups = try groups.map { try preparation.resolve($0) }
        query.havings = try havings.map { try preparation.resolve($0) }
        query.orderings = try orderings.map {
            SQLOrdering(expression: try preparation.resolve($0.expression), direction: $0.direction)
        }
        if query.groups.isEmpty, havings.contains(where: \.hasAggregate) {
            query.groups = [Column(primaryKey).sqlExpression]
        }
        return (query, joins)
    }

    /// An expression of this request (an `updateAll` value) with its aggregates replaced by their subqueries.
    func resolving(_ expression: SQLExpression, _ db: Database) throws -> SQLExpression {
        guard expression.hasAggregate else { return expression }
        var preparation = RequestPreparation(query: self, joins: [], db: db)
        return try preparation.resolve(expression)
    }

    /// Whether an aggregate over an association is used anywhere in the request.
    var usesAggregates: Bool {
        selection.contains { $0.expression.hasAggregate } || filters.contains(where: \.hasAggregate)
            || havings.contains(where: \.hasAggregate) || orderings.contains { $0.expression.hasAggregate }
            || groups.contains(where: \.hasAggregate)
    }
}

extension SQLExpression {
    var hasAggregate: Bool {
        pieces.contains { if case .aggregate = $0 { true } else { false } }
    }
}

/// What preparing one request needs: its joins, the columns of the tables involved (read once), the database.
private struct RequestPreparation<Record> {
    let query: Query<Record>
    let joins: [ResolvedJoin]
    let db: Database
    /// The lower-cased names of the selection's aliases, which are never qualified.
    let aliases: Set<String>
    var columns: [String: Set<String>] = [:]

    init(query: Query<Record>, joins: [ResolvedJoin], db: Database) {
        self.query = query
        self.joins = joins
        self.db = db
        aliases = Set(query.selection.compactMap { $0.alias?.lowercased() })
    }

    mutating func resolve(_ expression: SQLExpression) throws -> SQLExpression {
        var pieces: [SQLExpression.Piece] = []
        for piece in expression.pieces {
            switch piece {
            case .aggregate(let aggregate): pieces.append(try subquery(aggregate))
            case .column(let name) where !joins.isEmpty: pieces.append(try column(name))
            default: pieces.append(piece)
            }
        }
        return SQLExpression(pieces: pieces)
    }

    /// A column of the request's table stays its own; a name the table does not have, that exactly one joined
    /// table has, is that table's. Anything else is left to SQLite (`no such column: note.titel`).
    private mutating func column(_ name: String) throws -> SQLExpression.Piece {
        let lowered = name.lowercased()
        if aliases.contains(lowered) { return .column(name) }
        if try columnNames(query.table).contains(lowered) { return .column(name) }
        var owners: [String] = []
        for join in joins {
            for table in join.tables where try columnNames(table.table).contains(lowered) { owners.append(table.alias) }
        }
        return owners.count == 1 ? .aliasedColumn(alias: owners[0], column: name) : .column(name)
    }

    private mutating func columnNames(_ table: String) throws -> Set<String> {
        if let names = columns[table] { return names }
        let names = Set(try db.fetch("PRAGMA table_info(\(quoteIdentifier(table)))") { try $0.string(at: 1).lowercased() })
        columns[table] = names
        return names
    }

    /// The aggregate as a subquery correlated with the request's table by the association's first step.
    private func subquery(_ aggregate: AggregateOverAssociation) throws -> SQLExpression.Piece {
        let chain = aggregate.association.chain
        let firstTable = chain[0].destinationTable
        // Never the request's own name: the subquery's tables would hide it from the correlation.
        var used: Set<String> = [query.table]
        let first = query.uniqueAlias(firstTable, &used)
        let (originColumn, firstColumn) = try query.linkColumns(of: chain[0], in: db)
        let joined = try query.joinedTables(chain.dropFirst(), from: first, used: &used, db)
        let last = joined.last?.alias ?? first
        var sql: String
        var arguments: [DatabaseValue] = []
        switch aggregate.function {
        case .count: sql = "(SELECT count(*)"
        case .isEmpty: sql = "(NOT EXISTS (SELECT 1"
        case .call(let function, let expression):
            sql = "(SELECT \(function)("
            expression.render(qualifier: last, into: &sql, &arguments)
            sql += ")"
        }
        sql += " FROM " + quoteIdentifier(firstTable)
        if first != firstTable { sql += " AS " + quoteIdentifier(first) }
        for table in joined { table.render(required: true, into: &sql, &arguments) }
        sql += " WHERE " + quoteIdentifier(first) + "." + quoteIdentifier(firstColumn) + " = "
            + quoteIdentifier(query.table) + "." + quoteIdentifier(originColumn)
        for filter in chain[0].filters {
            sql += " AND ("
            filter.render(qualifier: first, into: &sql, &arguments)
            sql += ")"
        }
        if case .isEmpty = aggregate.function { sql += ")" }
        sql += ")"
        return .literal(sql, arguments)
    }
}
