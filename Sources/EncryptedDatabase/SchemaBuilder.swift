// A schema builder for migrations: create and alter tables, indexes; renaming or dropping a column by the
// table rebuild of SQLite's documentation where the engine cannot (SQLite 3.15.2 has neither).
internal import CSQLCipher
internal import Foundation

extension Database {
    /// The declared type of a column, which gives it its affinity (GRDB's names).
    public struct ColumnType: Sendable, Hashable {
        /// The type's SQL name.
        public let rawValue: String
        /// A type by its SQL name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// `TEXT`.
        public static let text = ColumnType(rawValue: "TEXT")
        /// `INTEGER`.
        public static let integer = ColumnType(rawValue: "INTEGER")
        /// `DOUBLE` (real affinity).
        public static let double = ColumnType(rawValue: "DOUBLE")
        /// `REAL`.
        public static let real = ColumnType(rawValue: "REAL")
        /// `NUMERIC`.
        public static let numeric = ColumnType(rawValue: "NUMERIC")
        /// `BOOLEAN` (numeric affinity: `Bool` is stored as 0 or 1).
        public static let boolean = ColumnType(rawValue: "BOOLEAN")
        /// `BLOB` (`Data`, `UUID`).
        public static let blob = ColumnType(rawValue: "BLOB")
        /// `DATE` (numeric affinity: this module stores a `Date` as integer microseconds).
        public static let date = ColumnType(rawValue: "DATE")
        /// `DATETIME` (numeric affinity).
        public static let datetime = ColumnType(rawValue: "DATETIME")
        /// No declared type: any value, kept as given.
        public static let any = ColumnType(rawValue: "")
    }

    /// What a foreign key does when its parent row is deleted or its key changes.
    public enum ForeignKeyAction: String, Sendable {
        /// Delete or update the child rows too.
        case cascade = "CASCADE"
        /// Refuse the change.
        case restrict = "RESTRICT"
        /// Set the child's foreign key to `NULL`.
        case setNull = "SET NULL"
        /// Set the child's foreign key to its default.
        case setDefault = "SET DEFAULT"
    }

    /// Options of ``create(table:options:body:)``.
    public struct TableOptions: OptionSet, Sendable {
        /// The option bits.
        public let rawValue: Int
        /// Options from their bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Do nothing when the table exists (`IF NOT EXISTS`).
        public static let ifNotExists = TableOptions(rawValue: 1 << 0)
        /// A temporary table (`TEMPORARY`).
        public static let temporary = TableOptions(rawValue: 1 << 1)
        /// A table without rowid (`WITHOUT ROWID`); it needs a primary key.
        public static let withoutRowID = TableOptions(rawValue: 1 << 2)
    }

    /// Creates a table from the definition `body` writes (GRDB's schema builder).
    ///
    /// ```swift
    /// try db.create(table: "book") { t in
    ///     t.autoIncrementedPrimaryKey("id")
    ///     t.column("title", .text).notNull().collate(.nocase)
    ///     t.column("pages", .integer).notNull().defaults(to: 0).check(sql: "pages >= 0")
    ///     t.belongsTo("author", onDelete: .cascade)   // authorId INTEGER REFERENCES author(id), indexed
    /// }
    /// ```
    ///
    /// The SQL is valid on SQLite 3.15.2 (Debian 12) and later. Default values are written into the SQL as
    /// literals (a schema takes no bound arguments): numbers as numbers, text quoted with `'` doubled.
    public func create(table name: String, options: TableOptions = [], body: (TableDefinition) throws -> Void) throws {
        let definition = TableDefinition(name: name)
        try body(definition)
        var sql = "CREATE " + (options.contains(.temporary) ? "TEMPORARY " : "") + "TABLE "
        if options.contains(.ifNotExists) { sql += "IF NOT EXISTS " }
        sql += quoteIdentifier(name) + " (" + (try definition.definitions(self)).joined(separator: ", ") + ")"
        if options.contains(.withoutRowID) { sql += " WITHOUT ROWID" }
        try inSavepoint {
            try executeScript(sql)
            for index in definition.indexes { try executeScript(index) }
        }
    }

    /// Changes a table: adds columns, renames or drops them.
    ///
    /// ```swift
    /// try db.alter(table: "book") { t in
    ///     t.add(column: "isbn", .text)
    ///     t.rename(column: "pages", to: "pageCount")
    ///     t.drop(column: "isbn")
    /// }
    /// ```
    ///
    /// Adding is `ALTER TABLE … ADD COLUMN`. Renaming is `RENAME COLUMN` from SQLite 3.25 and dropping
    /// `DROP COLUMN` from 3.35; on older engines (Debian 12's 3.15.2) the table is rebuilt as SQLite's
    /// documentation describes: a new table made from the stored `CREATE TABLE` with the change, the rows
    /// copied, the old table dropped, the new one renamed, and the table's indexes and triggers created again
    /// (with the new column name) — all inside the caller's transaction, so a failure changes nothing. A column
    /// used by an index, a table constraint or another column's constraint cannot be dropped (as with
    /// `DROP COLUMN`): drop the index first. With foreign keys on, a table that others refer to cannot be rebuilt
    /// (dropping it would run their `ON DELETE` actions): migrations run with foreign keys off, so alter tables
    /// in a migration.
    public func alter(table name: String, body: (TableAlteration) -> Void) throws {
        try alter(table: name, rebuild: false, body: body)
    }

    /// ``alter(table:body:)`` with the rebuild forced when `rebuild` is true: the tests run it on every engine.
    package func alter(table name: String, rebuild: Bool, body: (TableAlteration) -> Void) throws {
        let alteration = TableAlteration(name: name)
        body(alteration)
        let version = sqlite3_libversion_number()
        try inSavepoint {
            for change in alteration.changes {
                switch change {
                case .add(let column):
                    try executeScript(
                        "ALTER TABLE \(quoteIdentifier(name)) ADD COLUMN " + (try column.sql(self, table: name)))
                    if let index = column.indexSQL(table: name) { try executeScript(index) }
                case .addSQL(let sql):
                    try executeScript("ALTER TABLE \(quoteIdentifier(name)) ADD COLUMN \(sql)")
                case .rename(let old, let new):
                    if !rebuild, version >= 3_025_000 {
                        try executeScript(
                            "ALTER TABLE \(quoteIdentifier(name)) RENAME COLUMN \(quoteIdentifier(old)) TO "
                                + quoteIdentifier(new))
                    } else {
                        try rebuildTable(name, renaming: old, to: new)
                    }
                case .drop(let column):
                    if !rebuild, version >= 3_035_000 {
                        try executeScript("ALTER TABLE \(quoteIdentifier(name)) DROP COLUMN \(quoteIdentifier(column))")
                    } else {
                        try rebuildTable(name, renaming: column, to: nil)
                    }
                }
            }
        }
    }

    /// Renames a table.
    public func rename(table name: String, to newName: String) throws {
        try executeScript("ALTER TABLE \(quoteIdentifier(name)) RENAME TO \(quoteIdentifier(newName))")
    }

    /// Drops a table.
    public func drop(table name: String) throws {
        try executeScript("DROP TABLE \(quoteIdentifier(name))")
    }

    /// Creates an index on `columns` of `table`; `condition` (SQL without arguments) makes it partial.
    ///
    /// ```swift
    /// try db.create(index: "book_on_title", on: "book", columns: ["title"], unique: true)
    /// ```
    public func create(
        index name: String, on table: String, columns: [String], unique: Bool = false, ifNotExists: Bool = false,
        condition sql: String? = nil
    ) throws {
        try checkColumns(columns, existIn: table, for: "index '\(name)'")
        var text = "CREATE " + (unique ? "UNIQUE " : "") + "INDEX " + (ifNotExists ? "IF NOT EXISTS " : "")
        text += quoteIdentifier(name) + " ON " + quoteIdentifier(table)
        text += "(" + columns.map(quoteIdentifier).joined(separator: ", ") + ")"
        if let sql { text += " WHERE " + sql }
        try executeScript(text)
    }

    /// Drops an index.
    public func drop(index name: String) throws {
        try executeScript("DROP INDEX \(quoteIdentifier(name))")
    }

    /// Throws `no such column`, naming the column and the table, when `table` has no column named one of
    /// `columns`. A DDL statement cannot qualify a column with its table, and SQLite before 3.29 reads an unknown
    /// `"name"` there as a string: `CREATE INDEX … ON note("titel")` makes an index on a constant, without an
    /// error. A table that does not exist is left to SQLite's own error.
    func checkColumns(_ columns: [String], existIn table: String, for use: String) throws {
        let existing = try fetch("PRAGMA table_info(\(quoteIdentifier(table)))") { try $0.string(at: 1) }
        guard !existing.isEmpty else { return }
        try checkColumns(columns, areIn: existing, of: table, for: use)
    }

    /// Throws `no such column` when one of `columns` is not one of `existing` (compared as SQLite does, without
    /// case).
    func checkColumns(_ columns: [String], areIn existing: [String], of table: String, for use: String) throws {
        let known = Set(existing.map { $0.lowercased() })
        for column in columns where !known.contains(column.lowercased()) {
            throw DatabaseError(
                .sqlite,
                "no such column: '\(column)' in table '\(table)' (\(use)); its columns are "
                    + existing.joined(separator: ", "),
                extendedResultCode: SQLITE_ERROR)
        }
    }

    // MARK: The rebuild

    /// Rebuilds `table` with column `old` renamed to `new`, or dropped when `new` is `nil` (SQLite's twelve steps,
    /// inside the current transaction).
    func rebuildTable(_ table: String, renaming old: String, to new: String?) throws {
        guard
            let createSQL = try fetchOne(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", [table],
                { try $0.string(at: 0) })
        else {
            throw DatabaseError(.misuse, "no table named '\(table)' to alter")
        }
        let dependents = try fetch(
            "SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name = ? "
                + "COLLATE NOCASE AND sql IS NOT NULL ORDER BY type, name", [table]
        ) { (type: try $0.string(at: 0), name: try $0.string(at: 1), sql: try $0.string(at: 2)) }
        let columns = try fetch("PRAGMA table_info(\(quoteIdentifier(table)))") { try $0.string(at: 1) }
        try checkColumns([old], areIn: columns, of: table, for: new == nil ? "drop column" : "rename column")
        var parsed = try TableSQL(createSQL)
        if let new {
            parsed.rename(old, to: new)
        } else {
            try parsed.drop(old, table: table)
            for dependent in dependents where dependent.type == "index" && SQLTokens.mentions(dependent.sql, old) {
                throw DatabaseError(
                    .misuse,
                    "column '\(old)' of table '\(table)' is used by index '\(dependent.name)': drop the index first")
            }
        }
        if try scalar("PRAGMA foreign_keys", as: Int.self) == 1, try isReferenced(table) {
            throw DatabaseError(
                .misuse,
                "table '\(table)' is referred to by foreign keys and foreign keys are on: rebuilding it would run "
                    + "their ON DELETE actions; alter it inside a migration (migrations run with foreign keys off)")
        }
        // Views and other tables' triggers that name the table: 3.15.2 would keep their old SQL (a renamed column
        // missing); they are dropped now and created again after the rename, rewritten.
        let outside = try rebuildDependents(of: table)
        let recreated = try rewritten(outside, table: table, renaming: old, to: new)
        let temporary = "securestore_rebuild_" + table
        let kept = columns.filter { $0.caseInsensitiveCompare(old) != .orderedSame }
        let sourceColumns = (new == nil ? kept : columns).map(quoteIdentifier).joined(separator: ", ")
        let targetColumns = (new == nil ? kept : columns.map { $0.caseInsensitiveCompare(old) == .orderedSame ? new! : $0 })
            .map(quoteIdentifier).joined(separator: ", ")
        let legacy = try scalar("PRAGMA legacy_alter_table", as: Int.self)
        try executeScript(parsed.createSQL(named: temporary))
        try executeScript(
            "INSERT INTO \(quoteIdentifier(temporary)) (\(targetColumns)) SELECT \(sourceColumns) FROM "
                + quoteIdentifier(table))
        try drop(outside)
        try executeScript("DROP TABLE \(quoteIdentifier(table))")
        // Since SQLite 3.26 a rename checks views and triggers that name the (now missing) table; the legacy
        // behaviour renames only, as the rebuild needs. 3.15.2 has no such pragma and ignores it.
        if legacy == 0 { try executeScript("PRAGMA legacy_alter_table = ON") }
        defer { if legacy == 0 { try? executeScript("PRAGMA legacy_alter_table = OFF") } }
        try executeScript("ALTER TABLE \(quoteIdentifier(temporary)) RENAME TO \(quoteIdentifier(table))")
        // Indexes name the table's columns only; its triggers are rewritten as the views are (a trigger's body
        // may name another table's column of the same name).
        let ownTriggers = try rewritten(
            dependents.filter { $0.type == "trigger" }
                .map { RebuildDependent(type: $0.type, name: $0.name, table: table, sql: $0.sql) },
            table: table, renaming: old, to: new)
        for dependent in dependents where dependent.type == "index" {
            try executeScript(new.map { SQLTokens.replacing(old, with: $0, in: dependent.sql) } ?? dependent.sql)
        }
        try create(ownTriggers + recreated)
        let violations = try fetch("PRAGMA foreign_key_check(\(quoteIdentifier(table)))") { try $0.string(at: 2) }
        if let parent = violations.first {
            throw DatabaseError(
                .constraint,
                "rebuilding table '\(table)' leaves \(violations.count) rows whose foreign key refers to no row of "
                    + "'\(parent)'; nothing was changed")
        }
    }

    /// Whether a foreign key of any table refers to `table`.
    private func isReferenced(_ table: String) throws -> Bool {
        let tables = try fetch("SELECT name FROM sqlite_master WHERE type = 'table'") { try $0.string(at: 0) }
        for other in tables {
            let parents = try fetch("PRAGMA foreign_key_list(\(quoteIdentifier(other)))") { try $0.string(at: 2) }
            if parents.contains(where: { $0.caseInsensitiveCompare(table) == .orderedSame }) { return true }
        }
        return false
    }
}

/// The columns and constraints of a table being created, in order.
public final class TableDefinition {
    let name: String
    private var items: [Item] = []
    /// `CREATE INDEX` statements run after the table is created (`indexed()`, `belongsTo`).
    private(set) var indexes: [String] = []
    /// The columns named by table constraints, checked against the table's columns before it is created.
    private var constrainedColumns: [(use: String, columns: [String])] = []
    /// The columns other tables' foreign keys refer to, checked against those tables.
    private var referencedColumns: [(use: String, table: String, columns: [String])] = []
    /// Whether a column was written in SQL (`column(sql:)`), whose name the builder does not know.
    private var hasColumnsInSQL = false

    enum Item {
        case column(ColumnDefinition)
        case sql(String)
        case belongsTo(BelongsToDefinition)
    }

    struct BelongsToDefinition {
        let name: String
        let table: String?
        let onDelete: Database.ForeignKeyAction?
        let onUpdate: Database.ForeignKeyAction?
        let deferred: Bool
        let indexed: Bool
    }

    init(name: String) { self.name = name }

    /// An `INTEGER PRIMARY KEY AUTOINCREMENT` column: SQLite chooses its values and never reuses one.
    @discardableResult
    public func autoIncrementedPrimaryKey(_ name: String = "id") -> ColumnDefinition {
        column(name, .integer).primaryKey(autoincrement: true)
    }

    /// A primary-key column of `type` (`NOT NULL`, as a key should be).
    @discardableResult
    public func primaryKey(_ name: String, _ type: Database.ColumnType) -> ColumnDefinition {
        column(name, type).primaryKey().notNull()
    }

    /// A column; refine it with the returned definition (`.notNull()`, `.defaults(to:)`…).
    @discardableResult
    public func column(_ name: String, _ type: Database.ColumnType? = nil) -> ColumnDefinition {
        let column = ColumnDefinition(name: name, type: type)
        items.append(.column(column))
        return column
    }

    /// A column written in SQL (`"score INTEGER NOT NULL"`).
    public func column(sql: String) {
        hasColumnsInSQL = true
        items.append(.sql(sql))
    }

    /// A primary key of several columns (`PRIMARY KEY (a, b)`).
    public func primaryKey(_ columns: [String]) {
        constrainedColumns.append(("primary key", columns))
        items.append(.sql("PRIMARY KEY (" + columns.map(quoteIdentifier).joined(separator: ", ") + ")"))
    }

    /// A unique key of several columns (`UNIQUE (a, b)`).
    public func uniqueKey(_ columns: [String]) {
        constrainedColumns.append(("unique key", columns))
        items.append(.sql("UNIQUE (" + columns.map(quoteIdentifier).joined(separator: ", ") + ")"))
    }

    /// A foreign key of `columns` referring to `destinationColumns` of `table` (its primary key when `nil`).
    public func foreignKey(
        _ columns: [String], references table: String, columns destinationColumns: [String]? = nil,
        onDelete: Database.ForeignKeyAction? = nil, onUpdate: Database.ForeignKeyAction? = nil, deferred: Bool = false
    ) {
        constrainedColumns.append(("foreign key", columns))
        if let destinationColumns {
            referencedColumns.append(("foreign key of table '\(name)'", table, destinationColumns))
        }
        var sql = "FOREIGN KEY (" + columns.map(quoteIdentifier).joined(separator: ", ") + ") REFERENCES "
        sql += quoteIdentifier(table)
        if let destinationColumns { sql += "(" + destinationColumns.map(quoteIdentifier).joined(separator: ", ") + ")" }
        sql += foreignKeyClauses(onDelete, onUpdate, deferred)
        items.append(.sql(sql))
    }

    /// A column `<name>Id` that refers to the primary key of table `name` (or `table`), indexed, as GRDB's
    /// `belongsTo` writes it; its type is that of the parent's primary key.
    public func belongsTo(
        _ name: String, inTable table: String? = nil, onDelete: Database.ForeignKeyAction? = nil,
        onUpdate: Database.ForeignKeyAction? = nil, deferred: Bool = false, indexed: Bool = true
    ) {
        items.append(
            .belongsTo(
                BelongsToDefinition(
                    name: name, table: table, onDelete: onDelete, onUpdate: onUpdate, deferred: deferred,
                    indexed: indexed)))
    }

    /// A `CHECK` constraint written in SQL.
    public func check(sql: String) { items.append(.sql("CHECK (\(sql))")) }

    /// A table constraint written in SQL.
    public func constraint(sql: String) { items.append(.sql(sql)) }

    /// The column and constraint definitions; records the indexes to create.
    func definitions(_ db: Database) throws -> [String] {
        var definitions: [String] = []
        var constraints: [String] = []
        indexes = []
        for item in items {
            switch item {
            case .column(let column):
                definitions.append(try column.sql(db, table: name))
                if let index = column.indexSQL(table: name) { indexes.append(index) }
            case .sql(let sql):
                constraints.append(sql)
            case .belongsTo(let belongsTo):
                let parent = try belongsTo.table ?? parentTable(belongsTo.name, db)
                let key = try db.fetch("PRAGMA table_info(\(quoteIdentifier(parent)))") { row in
                    (name: try row.string(at: 1), type: try row.string(at: 2), pk: try row.int(at: 5))
                }.filter { $0.pk > 0 }
                let column = belongsTo.name + "Id"
                var sql = quoteIdentifier(column) + " " + (key.count == 1 ? key[0].type : "INTEGER")
                sql += " REFERENCES " + quoteIdentifier(parent)
                if key.count == 1 { sql += "(" + quoteIdentifier(key[0].name) + ")" }
                sql += foreignKeyClauses(belongsTo.onDelete, belongsTo.onUpdate, belongsTo.deferred)
                definitions.append(sql)
                if belongsTo.indexed {
                    indexes.append(indexSQL(table: name, column: column))
                }
            }
        }
        try checkConstrainedColumns(db)
        return definitions + constraints
    }

    /// Throws `no such column` for a column of a table constraint that is not among the table's columns, or a
    /// referred column that is not in its table (SQLite 3.15.2 reads an unknown `"name"` in `UNIQUE (…)` as an
    /// expression, and checks a foreign key's parent columns only when a row is written).
    private func checkConstrainedColumns(_ db: Database) throws {
        var columns: [String] = []
        for item in items {
            switch item {
            case .column(let column): columns.append(column.name)
            case .belongsTo(let belongsTo): columns.append(belongsTo.name + "Id")
            case .sql: break
            }
        }
        if !hasColumnsInSQL {
            for (use, named) in constrainedColumns {
                try db.checkColumns(named, areIn: columns, of: name, for: use)
            }
        }
        for (use, table, named) in referencedColumns {
            if table.caseInsensitiveCompare(name) == .orderedSame {
                if !hasColumnsInSQL { try db.checkColumns(named, areIn: columns, of: name, for: use) }
            } else {
                try db.checkColumns(named, existIn: table, for: use)
            }
        }
    }

    /// The table `name` refers to: `name` itself, or its plural, whichever exists.
    private func parentTable(_ name: String, _ db: Database) throws -> String {
        if try db.tableExists(name) || name.caseInsensitiveCompare(self.name) == .orderedSame { return name }
        if try db.tableExists(plural(name)) { return plural(name) }
        throw DatabaseError(
            .misuse,
            "belongsTo(\"\(name)\") in table '\(self.name)' refers to no table named '\(name)' or '\(plural(name))': "
                + "create it first, or pass inTable:")
    }
}

/// The index GRDB's builder makes for an indexed column: `<table>_on_<column>`.
func indexSQL(table: String, column: String) -> String {
    "CREATE INDEX " + quoteIdentifier("\(table)_on_\(column)") + " ON " + quoteIdentifier(table) + "("
        + quoteIdentifier(column) + ")"
}

func foreignKeyClauses(_ onDelete: Database.ForeignKeyAction?, _ onUpdate: Database.ForeignKeyAction?, _ deferred: Bool)
    -> String
{
    var sql = ""
    if let onDelete { sql += " ON DELETE " + onDelete.rawValue }
    if let onUpdate { sql += " ON UPDATE " + onUpdate.rawValue }
    if deferred { sql += " DEFERRABLE INITIALLY DEFERRED" }
    return sql
}

/// One column of a table being created or altered; each method adds a constraint and returns the column.
public final class ColumnDefinition {
    let name: String
    let type: Database.ColumnType?
    private var constraints: [String] = []
    private var isIndexed = false
    private var isUnique = false

    init(name: String, type: Database.ColumnType?) {
        self.name = name
        self.type = type
    }

    /// `PRIMARY KEY`; `autoincrement` for an `INTEGER` key whose values are never reused.
    @discardableResult
    public func primaryKey(onConflict: Database.ConflictResolution? = nil, autoincrement: Bool = false) -> Self {
        constraints.append(
            "PRIMARY KEY" + (onConflict.map { " ON CONFLICT " + $0.rawValue } ?? "") + (autoincrement ? " AUTOINCREMENT" : ""))
        return self
    }

    /// `NOT NULL`.
    @discardableResult
    public func notNull(onConflict: Database.ConflictResolution? = nil) -> Self {
        constraints.append("NOT NULL" + (onConflict.map { " ON CONFLICT " + $0.rawValue } ?? ""))
        return self
    }

    /// `UNIQUE`.
    @discardableResult
    public func unique(onConflict: Database.ConflictResolution? = nil) -> Self {
        isUnique = true
        constraints.append("UNIQUE" + (onConflict.map { " ON CONFLICT " + $0.rawValue } ?? ""))
        return self
    }

    /// An index on the column, named `<table>_on_<column>`, created with the table.
    @discardableResult
    public func indexed() -> Self {
        isIndexed = true
        return self
    }

    /// A `CHECK` constraint written in SQL.
    @discardableResult
    public func check(sql: String) -> Self {
        constraints.append("CHECK (\(sql))")
        return self
    }

    /// `DEFAULT value`, written as an SQL literal.
    @discardableResult
    public func defaults(to value: some DatabaseValueConvertible) -> Self {
        constraints.append("DEFAULT " + sqlLiteral(value.databaseValue))
        return self
    }

    /// `DEFAULT` written in SQL (`"CURRENT_TIMESTAMP"`, `"(lower(hex(randomblob(16))))"`).
    @discardableResult
    public func defaults(sql: String) -> Self {
        constraints.append("DEFAULT \(sql)")
        return self
    }

    /// `COLLATE collation`.
    @discardableResult
    public func collate(_ collation: Database.CollationName) -> Self {
        constraints.append("COLLATE " + collation.rawValue)
        return self
    }

    /// `REFERENCES table(column)`: a foreign key to `column` of `table` (its primary key when `nil`).
    @discardableResult
    public func references(
        _ table: String, column: String? = nil, onDelete: Database.ForeignKeyAction? = nil,
        onUpdate: Database.ForeignKeyAction? = nil, deferred: Bool = false
    ) -> Self {
        constraints.append(
            "REFERENCES " + quoteIdentifier(table) + (column.map { "(" + quoteIdentifier($0) + ")" } ?? "")
                + foreignKeyClauses(onDelete, onUpdate, deferred))
        return self
    }

    func sql(_ db: Database, table: String) throws -> String {
        var sql = quoteIdentifier(name)
        if let type, !type.rawValue.isEmpty { sql += " " + type.rawValue }
        for constraint in constraints { sql += " " + constraint }
        return sql
    }

    func indexSQL(table: String) -> String? {
        guard isIndexed, !isUnique else { return nil }
        return EncryptedDatabase.indexSQL(table: table, column: name)
    }
}

/// The changes of ``Database/alter(table:body:)``, applied in order.
public final class TableAlteration {
    let name: String
    enum Change {
        case add(ColumnDefinition)
        case addSQL(String)
        case rename(String, String)
        case drop(String)
    }
    private(set) var changes: [Change] = []

    init(name: String) { self.name = name }

    /// Adds a column (`ADD COLUMN`; SQLite wants a default for a `NOT NULL` one, and no `UNIQUE`).
    @discardableResult
    public func add(column name: String, _ type: Database.ColumnType? = nil) -> ColumnDefinition {
        let column = ColumnDefinition(name: name, type: type)
        changes.append(.add(column))
        return column
    }

    /// Adds a column written in SQL.
    public func addColumn(sql: String) { changes.append(.addSQL(sql)) }

    /// Renames a column (natively from SQLite 3.25, by a rebuild before).
    public func rename(column name: String, to newName: String) { changes.append(.rename(name, newName)) }

    /// Drops a column (natively from SQLite 3.35, by a rebuild before).
    public func drop(column name: String) { changes.append(.drop(name)) }
}

/// `value` as an SQL literal, for the places SQL takes no arguments (a column's default).
func sqlLiteral(_ value: DatabaseValue) -> String {
    switch value {
    case .null: return "NULL"
    case .integer(let integer): return String(integer)
    case .real(let real):
        guard real.isFinite else { return real.isNaN ? "NULL" : (real > 0 ? "9e999" : "-9e999") }
        return "\(real)"
    case .text(let text): return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    case .blob(let data):
        let digits = Array("0123456789ABCDEF")
        var hex = ""
        for byte in data {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0xF)])
        }
        return "X'" + hex + "'"
    }
}

// MARK: - Reading a stored CREATE TABLE

/// The identifiers of SQL text, for finding and renaming a column in stored `CREATE` statements. Quoted
/// identifiers (`"…"`, `` `…` ``, `[…]`) and bare words are identifiers; string literals and comments are not.
enum SQLTokens {
    /// The ranges of the identifiers of `sql`, with their unquoted names.
    static func identifiers(_ sql: String) -> [(range: Range<String.Index>, name: String)] {
        var result: [(Range<String.Index>, String)] = []
        var index = sql.startIndex
        func isWord(_ character: Character) -> Bool {
            character == "_" || character == "$" || character.isLetter || character.isNumber
        }
        while index < sql.endIndex {
            let character = sql[index]
            if character == "'" {
                index = closing("'", from: sql.index(after: index), in: sql)
            } else if character == "\"" || character == "`" || character == "[" {
                let close: Character = character == "[" ? "]" : character
                let start = index
                let end = closing(close, from: sql.index(after: index), in: sql)
                let inner = sql[sql.index(after: start)..<sql.index(before: end)]
                result.append((start..<end, inner.replacingOccurrences(of: String(close) + String(close), with: String(close))))
                index = end
            } else if character == "-", sql[index...].hasPrefix("--") {
                index = sql[index...].firstIndex(of: "\n") ?? sql.endIndex
            } else if character == "/", sql[index...].hasPrefix("/*") {
                index = sql[index...].range(of: "*/")?.upperBound ?? sql.endIndex
            } else if isWord(character), !character.isNumber {
                let start = index
                while index < sql.endIndex, isWord(sql[index]) { index = sql.index(after: index) }
                result.append((start..<index, String(sql[start..<index])))
            } else {
                index = sql.index(after: index)
            }
        }
        return result
    }

    /// The index after the quote that closes one opened just before `start` (a doubled quote is no close).
    private static func closing(_ quote: Character, from start: String.Index, in sql: String) -> String.Index {
        var index = start
        while index < sql.endIndex {
            if sql[index] == quote {
                let next = sql.index(after: index)
                if quote != "]", next < sql.endIndex, sql[next] == quote {
                    index = sql.index(after: next)
                    continue
                }
                return next
            }
            index = sql.index(after: index)
        }
        return sql.endIndex
    }

    /// Whether `sql` names `identifier` (case-insensitively).
    static func mentions(_ sql: String, _ identifier: String) -> Bool {
        identifiers(sql).contains { $0.name.caseInsensitiveCompare(identifier) == .orderedSame }
    }

    /// `sql` with every identifier `old` replaced by `new`, quoted.
    static func replacing(_ old: String, with new: String, in sql: String) -> String {
        var result = sql
        for (range, name) in identifiers(sql).reversed() where name.caseInsensitiveCompare(old) == .orderedSame {
            result.replaceSubrange(range, with: quoteIdentifier(new))
        }
        return result
    }
}

/// A stored `CREATE TABLE` statement cut into its head, its column and constraint definitions, and its tail.
struct TableSQL {
    var definitions: [String]
    let tail: String

    init(_ sql: String) throws {
        // The definitions are between the first parenthesis and its match, split at commas of depth one.
        var depth = 0
        var parts: [String] = []
        var current = ""
        var tail: String?
        var index = sql.startIndex
        var quote: Character?
        while index < sql.endIndex {
            let character = sql[index]
            if let open = quote {
                if character == (open == "[" ? "]" : open) { quote = nil }
                if depth >= 1 { current.append(character) }
            } else if character == "'" || character == "\"" || character == "`" || character == "[" {
                quote = character
                if depth >= 1 { current.append(character) }
            } else if character == "(" {
                depth += 1
                if depth > 1 { current.append(character) }
            } else if character == ")" {
                depth -= 1
                if depth == 0 {
                    parts.append(current)
                    tail = String(sql[sql.index(after: index)...])
                    break
                }
                current.append(character)
            } else if character == ",", depth == 1 {
                parts.append(current)
                current = ""
            } else if depth >= 1 {
                current.append(character)
            }
            index = sql.index(after: index)
        }
        guard let tail else { throw DatabaseError(.misuse, "the stored CREATE TABLE could not be read", sql: sql) }
        definitions = parts.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        self.tail = tail
    }

    /// Whether a definition is a table constraint rather than a column.
    private static func isConstraint(_ definition: String) -> Bool {
        guard let first = SQLTokens.identifiers(definition).first, definition[first.range.lowerBound].isLetter else {
            return false
        }
        return ["constraint", "primary", "unique", "check", "foreign"].contains(first.name.lowercased())
    }

    private static func columnName(_ definition: String) -> String? {
        isConstraint(definition) ? nil : SQLTokens.identifiers(definition).first?.name
    }

    /// Renames the column's definition and the column in table constraints. A column's own `CHECK` that names
    /// the column is left as it is (the new table then fails to be created, and nothing changes).
    mutating func rename(_ old: String, to new: String) {
        definitions = definitions.map { definition in
            if Self.isConstraint(definition) { return SQLTokens.replacing(old, with: new, in: definition) }
            guard let first = SQLTokens.identifiers(definition).first,
                first.name.caseInsensitiveCompare(old) == .orderedSame
            else { return definition }
            var renamed = definition
            renamed.replaceSubrange(first.range, with: quoteIdentifier(new))
            return renamed
        }
    }

    mutating func drop(_ column: String, table: String) throws {
        guard let position = definitions.firstIndex(where: {
            Self.columnName($0)?.caseInsensitiveCompare(column) == .orderedSame
        }) else {
            throw DatabaseError(.misuse, "table '\(table)' has no column '\(column)'")
        }
        let definition = definitions[position]
        let words = SQLTokens.identifiers(definition).map { $0.name.lowercased() }
        if words.contains("primary") || words.contains("unique") {
            throw DatabaseError(
                .misuse, "column '\(column)' of table '\(table)' is its primary key or unique: it cannot be dropped")
        }
        for (offset, other) in definitions.enumerated() where offset != position {
            let mentions = SQLTokens.identifiers(other).dropFirst(Self.isConstraint(other) ? 0 : 1)
                .contains { $0.name.caseInsensitiveCompare(column) == .orderedSame }
            if mentions {
                throw DatabaseError(
                    .misuse,
                    "column '\(column)' of table '\(table)' is used by a constraint (\(other)): it cannot be dropped")
            }
        }
        definitions.remove(at: position)
    }

    func createSQL(named name: String) -> String {
        "CREATE TABLE " + quoteIdentifier(name) + " (" + definitions.joined(separator: ", ") + ")" + tail
    }
}
