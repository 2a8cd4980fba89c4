// Records: Swift values stored as rows of a table, fetched and persisted without writing SQL.

/// A type stored in a table of its own: the table's name and its primary key column.
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Player: Codable, FetchableRecord, PersistableRecord {
///     static let databaseTableName = "player"   // the default is the type name with a lower-case first letter
///     var id: Int64?
///     var name: String
///     var score: Int
///     mutating func didInsert(rowID: Int64) { id = rowID }
/// }
/// ```
public protocol TableRecord {
    /// The name of the table. The default is the type's name with its first letter in lower case (`player`
    /// for `Player`).
    static var databaseTableName: String { get }
    /// The name of the primary key column, used by the functions that take an `id` and by ``PersistableRecord``'s
    /// update, save, delete and exists. The default is `id`. One column; for a composite key, write the SQL.
    static var databasePrimaryKey: String { get }
}

extension TableRecord {
    /// The type's name with its first letter in lower case.
    public static var databaseTableName: String {
        let name = String(describing: Self.self)
        return name.prefix(1).lowercased() + name.dropFirst()
    }

    /// `id`.
    public static var databasePrimaryKey: String { "id" }
}

/// A type that can be made from a row.
///
/// A `Decodable` type gets ``init(row:)`` for free: each coding key is a result column, looked up by name once per
/// statement. Write `init(row:)` yourself where you want column indexes or names of your choosing:
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Score: FetchableRecord {
///     var name: String
///     var points: Int
///     init(row: Row) throws {
///         name = try row["name"]
///         points = try row["points"]
///     }
/// }
/// ```
public protocol FetchableRecord {
    /// Reads the record from the current row of a statement. The row is valid only during this call.
    init(row: Row) throws
}

/// A type that can be written to its table: inserted, updated, saved and deleted by primary key.
///
/// An `Encodable` type gets ``encode(to:)-(inout PersistenceContainer)`` for free: each coding key is a column.
/// Every value is bound as a statement argument; nothing of a record's values is ever put into SQL text.
public protocol PersistableRecord: TableRecord {
    /// Sets the record's columns in `container`.
    func encode(to container: inout PersistenceContainer) throws
    /// Called before every insert, update and save, inside the same transaction: throw to refuse the write (a
    /// validation). The default does nothing.
    func willSave(_ db: Database) throws
    /// Called by ``inserted(_:)`` on the copy it returns, with the rowid of the new row: store it when SQLite
    /// chose your integer primary key. The default does nothing.
    mutating func didInsert(rowID: Int64)
}

extension PersistableRecord {
    /// Does nothing.
    public func willSave(_ db: Database) throws {}
    /// Does nothing.
    public mutating func didInsert(rowID: Int64) {}
}

// MARK: - Fetching

extension FetchableRecord {
    /// Every record of a query of your own, with arguments bound to its parameters.
    ///
    /// ```swift
    /// let best = try Player.fetchAll(db, sql: "SELECT * FROM player WHERE score > ?", arguments: [100])
    /// ```
    @inlinable
    public static func fetchAll(_ db: Database, sql: String, arguments: StatementArguments = .none) throws -> [Self] {
        try db.fetch(sql, arguments) { row in try Self(row: row) }
    }

    /// The first record of a query of your own, or `nil`.
    public static func fetchOne(_ db: Database, sql: String, arguments: StatementArguments = .none) throws -> Self? {
        try db.fetchOne(sql, arguments) { row in try Self(row: row) }
    }
}

extension FetchableRecord where Self: TableRecord {
    /// Every record of the table, in the table's order (for a defined order use `order(_:)`).
    @inlinable
    public static func fetchAll(_ db: Database) throws -> [Self] { try all().fetchAll(db) }

    /// The record whose primary key is `id`, or `nil`.
    public static func fetchOne(_ db: Database, id: some DatabaseValueConvertible) throws -> Self? {
        try all().filter(id: id).fetchOne(db)
    }

    /// The record whose primary key is `key`, or `nil` (GRDB's spelling of ``fetchOne(_:id:)``).
    public static func fetchOne(_ db: Database, key: some DatabaseValueConvertible) throws -> Self? {
        try all().filter(id: key).fetchOne(db)
    }

    /// The first record whose columns have the values of `key` (`["email": "a@b.c"]`), or `nil`.
    public static func fetchOne(_ db: Database, key: [String: (any DatabaseValueConvertible)?]) throws -> Self? {
        try all().filter(key: key).fetchOne(db)
    }

    /// The record whose primary key is `id`; throws ``DatabaseError/Code/notFound`` when there is none (the
    /// message names the table and the key column, never the value).
    ///
    /// ```swift
    /// let player = try Player.find(db, id: 1)
    /// ```
    public static func find(_ db: Database, id: some DatabaseValueConvertible) throws -> Self {
        guard let record = try fetchOne(db, id: id) else {
            throw DatabaseError(
                .notFound,
                "no row of table '\(databaseTableName)' has the \(databasePrimaryKey) asked for (\(Self.self).find)")
        }
        return record
    }

    /// The records whose primary keys are in `ids`, in the table's order; missing ones are left out.
    public static func fetchAll(_ db: Database, ids: some Collection<some DatabaseValueConvertible>) throws -> [Self] {
        try all().filter(Column(databasePrimaryKey).in(ids)).fetchAll(db)
    }
}

extension TableRecord {
    /// A query of every row of the table, to refine with filters, an order and a limit.
    public static func all() -> Query<Self> { Query(table: databaseTableName, primaryKey: databasePrimaryKey) }

    /// The rows that match `predicate`.
    public static func filter(_ predicate: some SQLSpecificExpressible) -> Query<Self> { all().filter(predicate) }

    /// The rows that match a condition written in SQL with a `?` for each of `arguments`.
    public static func filter(sql: String, arguments: [(any DatabaseValueConvertible)?] = []) -> Query<Self> {
        all().filter(sql: sql, arguments: arguments)
    }

    /// The row whose primary key is `id`.
    public static func filter(id: some DatabaseValueConvertible) -> Query<Self> { all().filter(id: id) }

    /// The row whose primary key is `key`.
    public static func filter(key: some DatabaseValueConvertible) -> Query<Self> { all().filter(id: key) }

    /// The rows whose columns have the values of `key`.
    public static func filter(key: [String: (any DatabaseValueConvertible)?]) -> Query<Self> {
        all().filter(key: key)
    }

    /// Every row, ordered.
    public static func order(_ orderings: any SQLOrderingTerm...) -> Query<Self> { all().order(orderings) }

    /// Every row, selecting `selection` instead of every column.
    public static func select(_ selection: any SQLSelectable...) -> Query<Self> { all().select(selection) }

    /// Every row, selecting `selection`, decoded as `type` (a scalar, or any `Decodable` type).
    ///
    /// ```swift
    /// let names = try Player.select(Column("name"), as: String.self).fetchAll(db)
    /// ```
    public static func select<T>(_ selection: any SQLSelectable..., as type: T.Type) -> Query<T> {
        all().select(selection, as: type)
    }

    /// Every row, with `selection` selected beside every column (GRDB's `annotated(with:)`):
    /// `Tag.annotated(with: Tag.notes.count)`.
    public static func annotated(with selection: any SQLSelectable...) -> Query<Self> {
        all().annotated(with: selection)
    }

    /// The rows that match `predicate`, an aggregate over an association (`Tag.notes.isEmpty == false`): grouped
    /// by the primary key, as GRDB's `having(_:)` is.
    public static func having(_ predicate: some SQLSpecificExpressible) -> Query<Self> { all().having(predicate) }

    /// At most `limit` rows after skipping `offset`.
    public static func limit(_ limit: Int, offset: Int? = nil) -> Query<Self> { all().limit(limit, offset: offset) }

    /// The number of rows of the table (`SELECT count(*)`): nothing is decoded.
    public static func fetchCount(_ db: Database) throws -> Int { try all().fetchCount(db) }

    /// Whether a row has `id` as its primary key.
    public static func exists(_ db: Database, id: some DatabaseValueConvertible) throws -> Bool {
        try !all().filter(id: id).isEmpty(db)
    }

    /// Whether a row has `key` as its primary key (GRDB's spelling of ``exists(_:id:)``).
    public static func exists(_ db: Database, key: some DatabaseValueConvertible) throws -> Bool {
        try exists(db, id: key)
    }

    /// Whether a row has the column values of `key`.
    public static func exists(_ db: Database, key: [String: (any DatabaseValueConvertible)?]) throws -> Bool {
        try !all().filter(key: key).isEmpty(db)
    }

    /// Deletes the row whose primary key is `id`; returns whether there was one.
    @discardableResult
    public static func deleteOne(_ db: Database, id: some DatabaseValueConvertible) throws -> Bool {
        try all().filter(id: id).deleteAll(db) > 0
    }

    /// Deletes every row of the table; returns how many there were.
    @discardableResult
    public static func deleteAll(_ db: Database) throws -> Int { try all().deleteAll(db) }

    /// Sets columns of every row of the table (GRDB's `updateAll`); returns how many rows changed.
    ///
    /// ```swift
    /// try Player.updateAll(db, Column("score").set(to: 0))
    /// ```
    @discardableResult
    public static func updateAll(_ db: Database, _ assignments: ColumnAssignment...) throws -> Int {
        try all().updateAll(db, assignments)
    }

    /// Sets columns of every row of the table; returns how many rows changed.
    @discardableResult
    public static func updateAll(_ db: Database, _ assignments: [ColumnAssignment]) throws -> Int {
        try all().updateAll(db, assignments)
    }
}

// MARK: - Persisting

extension PersistableRecord {
    /// Inserts the record as a new row (`INSERT`).
    ///
    /// Throws ``DatabaseError/Code/constraint`` when a row already has the primary key or a constraint fails.
    /// When SQLite chooses the key (a `nil` integer primary key, `var id: Int64?`), use ``inserted(_:)``.
    public func insert(_ db: Database) throws {
        try willSave(db)
        let container = try persistenceContainer()
        let statement = try db.recordStatement(.insert, Self.self, columns: container.columns)
        try statement.execute(binding: container.bind)
    }

    /// Inserts the record and returns a copy that knows its new rowid (through ``didInsert(rowID:)``).
    ///
    /// ```swift
    /// let saved = try player.inserted(db)   // saved.id is the key SQLite chose
    /// ```
    ///
    /// When the record's primary key was `nil` and ``didInsert(rowID:)`` left it `nil` (the default does nothing),
    /// a record that is also ``FetchableRecord`` is read back from its new row, so the copy has the key SQLite
    /// chose, as GRDB fills an `id`; any other type throws ``DatabaseError/Code/misuse`` naming the function to
    /// write (and the transaction's write is rolled back), never a copy that silently keeps `nil`.
    public func inserted(_ db: Database) throws -> Self {
        try willSave(db)
        let container = try persistenceContainer()
        let statement = try db.recordStatement(.insert, Self.self, columns: container.columns)
        try statement.execute(binding: container.bind)
        let rowID = db.lastInsertRowID
        var copy = self
        copy.didInsert(rowID: rowID)
        let key = Self.databasePrimaryKey
        guard let index = container.columns.firstIndex(of: key), case .null = container.value(at: index) else {
            return copy
        }
        let after = try copy.persistenceContainer()
        guard let afterIndex = after.columns.firstIndex(of: key), case .null = after.value(at: afterIndex) else {
            return copy
        }
        if let fetchable = Self.self as? any FetchableRecord.Type,
            let stored = try fetchable.fetchOne(
                db, sql: "SELECT * FROM \(quoteIdentifier(Self.databaseTableName)) WHERE rowid = ?",
                arguments: [rowID]) as? Self
        {
            return stored
        }
        throw DatabaseError(
            .misuse,
            "\(Self.self) was inserted with a nil '\(key)' and keeps it: write "
                + "`mutating func didInsert(rowID: Int64) { \(key) = rowID }` in \(Self.self), or make it FetchableRecord "
                + "so that inserted(_:) reads the new row back")
    }

    /// Updates the row with the record's primary key (`UPDATE … WHERE id = ?`); throws
    /// ``DatabaseError/Code/notFound`` when there is none.
    public func update(_ db: Database) throws {
        guard try updateIfPresent(db) else {
            throw DatabaseError(
                .notFound, "no row of table '\(Self.databaseTableName)' has this \(Self.self)'s primary key")
        }
    }

    /// Updates the row with the record's primary key, or inserts the record when there is none.
    public func save(_ db: Database) throws {
        if try !updateIfPresent(db) { try insert(db) }
    }

    /// Deletes the row with the record's primary key; returns whether there was one.
    @discardableResult
    public func delete(_ db: Database) throws -> Bool {
        let container = try persistenceContainer()
        return try Self.all().filter(Column(Self.databasePrimaryKey) == primaryKey(in: container)).deleteAll(db) > 0
    }

    /// Whether a row has the record's primary key.
    public func exists(_ db: Database) throws -> Bool {
        let container = try persistenceContainer()
        return try Self.all().filter(Column(Self.databasePrimaryKey) == primaryKey(in: container)).fetchCount(db) > 0
    }

    /// The record's columns.
    public func persistenceContainer() throws -> PersistenceContainer {
        var container = PersistenceContainer()
        try encode(to: &container)
        return container
    }

    private func updateIfPresent(_ db: Database) throws -> Bool {
        try willSave(db)
        let container = try persistenceContainer()
        let key = try primaryKey(in: container)
        if case .null = key { return false }
        var values = container.values
        values.append(key)
        let statement = try db.recordStatement(.update, Self.self, columns: container.columns)
        try statement.execute(StatementArguments(values: values))
        return db.changes > 0
    }

    private func primaryKey(in container: PersistenceContainer) throws -> DatabaseValue {
        guard let index = container.columns.firstIndex(of: Self.databasePrimaryKey) else {
            throw DatabaseError(
                .misuse,
                "\(Self.self) has no column '\(Self.databasePrimaryKey)' (its primary key); its columns are "
                    + container.columns.joined(separator: ", "))
        }
        return container.value(at: index)
    }
}

extension StatementArguments {
    init(values: [DatabaseValue]) { self.init(storage: .positional(values)) }
}

/// The statements the records layer writes with, per table and column list.
enum RecordStatementKind: Hashable {
    case insert
    case update
}

struct RecordStatementKey: Hashable {
    let kind: RecordStatementKind
    let type: ObjectIdentifier
}

/// One cached write statement of a record type: its columns, and the statement.
final class RecordStatement {
    let columns: [String]
    let statement: Statement
    init(columns: [String], statement: Statement) {
        self.columns = columns
        self.statement = statement
    }
}

extension Database {
    /// The insert or update statement of `type` for `columns`, prepared once per connection and column list.
    func recordStatement<Record: TableRecord>(
        _ kind: RecordStatementKind, _ type: Record.Type, columns: [String]
    ) throws -> Statement {
        let key = RecordStatementKey(kind: kind, type: ObjectIdentifier(type))
        if let cached = recordStatements[key], cached.columns == columns, !cached.statement.isBusy,
            cached.statement.handle != nil
        {
            return cached.statement
        }
        guard !columns.isEmpty else {
            throw DatabaseError(.misuse, "\(Record.self) has no columns to store")
        }
        let table = quoteIdentifier(Record.databaseTableName)
        let sql: String
        switch kind {
        case .insert:
            sql =
                "INSERT INTO \(table) (" + columns.map(quoteIdentifier).joined(separator: ", ") + ") VALUES ("
                + repeatElement("?", count: columns.count).joined(separator: ", ") + ")"
        case .update:
            sql =
                "UPDATE \(table) SET " + columns.map { quoteIdentifier($0) + " = ?" }.joined(separator: ", ")
                + " WHERE \(table)." + quoteIdentifier(Record.databasePrimaryKey) + " = ?"
        }
        let statement = try cachedStatement(sql)
        recordStatements[key] = RecordStatement(columns: columns, statement: statement)
        return statement
    }
}

/// `name` as an SQL identifier: in double quotes, with any double quote doubled. Identifiers come from code (type,
/// key and column names), never from user data, and are quoted all the same.
func quoteIdentifier(_ name: String) -> String {
    var quoted = "\""
    for character in name {
        if character == "\"" { quoted += "\"\"" } else { quoted.append(character) }
    }
    return quoted + "\""
}
