// Upsert and INSERT OR …: native `ON CONFLICT DO UPDATE` from SQLite 3.24, the same result emulated before.
internal import CSQLCipher

extension Database {
    /// What an `INSERT` does when it would break a `UNIQUE`, `NOT NULL`, `CHECK` or `PRIMARY KEY` constraint
    /// (SQLite's `INSERT OR …`; GRDB's name).
    public enum ConflictResolution: String, Sendable {
        /// Undo the whole transaction and throw.
        case rollback = "ROLLBACK"
        /// Undo the statement and throw (SQLite's default).
        case abort = "ABORT"
        /// Keep the statement's earlier changes and throw.
        case fail = "FAIL"
        /// Skip the row, without an error.
        case ignore = "IGNORE"
        /// Delete the rows in the way, then insert (their `ON DELETE` actions run; delete triggers run only with
        /// `recursive_triggers`).
        case replace = "REPLACE"
    }
}

/// Whether the SQLite inside this process's SQLCipher has `INSERT … ON CONFLICT DO UPDATE` (3.24.0 and later;
/// Debian 12's 3.15.2 does not).
package let sqliteHasUpsert = sqlite3_libversion_number() >= 3_024_000

extension PersistableRecord {
    /// Inserts the record, or updates the row that has its primary key (GRDB's `upsert`): every column of the
    /// record is written either way.
    ///
    /// ```swift
    /// try Player(id: 1, name: "Arthur", score: 100).upsert(db)   // inserted
    /// try Player(id: 1, name: "Arthur", score: 120).upsert(db)   // updated
    /// ```
    ///
    /// From SQLite 3.24 it is one `INSERT … ON CONFLICT(primary key) DO UPDATE`; on older engines (Debian 12's
    /// SQLCipher has 3.15.2) it is an `UPDATE` and, when no row changed, an `INSERT`, in one savepoint: the same
    /// rows and the same triggers run. A conflict on another unique column throws
    /// ``DatabaseError/Code/constraint`` either way, and nothing is changed: name that column with
    /// ``upsert(_:onConflict:)``.
    public func upsert(_ db: Database) throws {
        try upsert(db, emulated: !sqliteHasUpsert)
    }

    /// ``upsert(_:)`` with the path chosen by the caller: the tests run the emulation on every engine.
    package func upsert(_ db: Database, emulated: Bool) throws {
        _ = try performUpsert(db, onConflict: [], emulated: emulated)
    }

    /// Inserts the record, or, when a row already has the values of `conflictTarget` — the columns of a
    /// `UNIQUE` constraint or of the primary key — updates that row (`INSERT … ON CONFLICT(label) DO UPDATE`).
    ///
    /// ```swift
    /// try Tag(id: nil, label: "swift", color: "orange").upsert(db, onConflict: ["label"])   // inserted
    /// try Tag(id: nil, label: "swift", color: "red").upsert(db, onConflict: ["label"])      // its color updated
    /// ```
    ///
    /// On a conflict every column but the primary key is written, as GRDB does: the row keeps its key. An empty
    /// `conflictTarget` is the primary key (``upsert(_:)``). Columns that are no unique constraint of the table
    /// throw ``DatabaseError/Code/sqlite`` ("ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE
    /// constraint"), and a conflict on another constraint throws ``DatabaseError/Code/constraint``; nothing changes.
    /// SQLite 3.24 and later run one statement; before (Debian 12's 3.15.2), an `UPDATE` of the row that has the
    /// target's values and, when there is none, the `INSERT`, in one savepoint: the same rows, the same triggers.
    public func upsert(_ db: Database, onConflict conflictTarget: [String]) throws {
        _ = try performUpsert(db, onConflict: conflictTarget, emulated: !sqliteHasUpsert)
    }

    /// ``upsert(_:onConflict:)`` with the path chosen by the caller: the tests run the emulation on every engine.
    package func upsert(_ db: Database, onConflict conflictTarget: [String], emulated: Bool) throws {
        _ = try performUpsert(db, onConflict: conflictTarget, emulated: emulated)
    }

    /// Upserts the record as ``upsert(_:onConflict:)`` does and returns the row as stored (GRDB's name): with the
    /// key SQLite chose for a new row, or the key of the row that was updated.
    ///
    /// ```swift
    /// let tag = try Tag(id: nil, label: "swift", color: "red").upsertAndFetch(db, onConflict: ["label"])
    /// print(tag.id!)   // the existing tag's id when "swift" was there
    /// ```
    ///
    /// SQLite 3.15.2 has no `RETURNING`, so neither path uses it: the row is read back by the target's values
    /// (unique), or by its rowid when it was inserted because a target value was `NULL`.
    public func upsertAndFetch(_ db: Database, onConflict conflictTarget: [String] = []) throws -> Self
    where Self: FetchableRecord {
        try upsertAndFetch(db, onConflict: conflictTarget, emulated: !sqliteHasUpsert)
    }

    /// ``upsertAndFetch(_:onConflict:)`` with the path chosen by the caller.
    package func upsertAndFetch(_ db: Database, onConflict conflictTarget: [String], emulated: Bool) throws -> Self
    where Self: FetchableRecord {
        try db.inSavepoint {
            let row = try performUpsert(db, onConflict: conflictTarget, emulated: emulated)
            let request = row.key.isEmpty ? Self.filter(sql: "rowid = ?", arguments: [row.rowID])
                : Self.all().filter(key: row.key)
            guard let record = try request.fetchOne(db) else {
                throw DatabaseError(
                    .notFound, "the row upserted into table '\(Self.databaseTableName)' could not be read back")
            }
            return record
        }
    }

    /// Runs the upsert on `conflictTarget` (the primary key when empty); returns how to find the row: the target's
    /// values, or, when one of them is `NULL` (no conflict is possible: the row was inserted), its rowid.
    private func performUpsert(_ db: Database, onConflict conflictTarget: [String], emulated: Bool) throws
        -> (key: [String: DatabaseValue], rowID: Int64)
    {
        try willSave(db)
        let container = try persistenceContainer()
        let primaryKey = Self.databasePrimaryKey
        let target = conflictTarget.isEmpty ? [primaryKey] : conflictTarget
        var targetIndexes: [Int] = []
        for column in target {
            guard let index = container.columns.firstIndex(where: { $0.lowercased() == column.lowercased() }) else {
                throw DatabaseError(
                    .misuse,
                    "\(Self.self) has no column '\(column)' (of the conflict target), so it cannot be upserted on it; "
                        + "its columns are " + container.columns.joined(separator: ", "))
            }
            targetIndexes.append(index)
        }
        let table = quoteIdentifier(Self.databaseTableName)
        // On a conflict every column but the primary key is written (GRDB's rule): the row keeps its key.
        let updated = container.columns.indices.filter { container.columns[$0].lowercased() != primaryKey.lowercased() }
        let targetIsNull = targetIndexes.contains { if case .null = container.value(at: $0) { true } else { false } }
        let key = targetIsNull ? [:] : Dictionary(
            targetIndexes.map { (container.columns[$0], container.value(at: $0)) }, uniquingKeysWith: { first, _ in first })
        if !emulated {
            var sql =
                "INSERT INTO \(table) (" + container.columns.map(quoteIdentifier).joined(separator: ", ")
                + ") VALUES (" + repeatElement("?", count: container.columns.count).joined(separator: ", ")
                + ") ON CONFLICT(" + target.map(quoteIdentifier).joined(separator: ", ") + ") DO "
            sql += updated.isEmpty ? "NOTHING" : "UPDATE SET " + updated.map {
                quoteIdentifier(container.columns[$0]) + " = excluded." + quoteIdentifier(container.columns[$0])
            }.joined(separator: ", ")
            try db.execute(sql, StatementArguments(values: container.values))
            return (key, db.lastInsertRowID)
        }
        if !conflictTarget.isEmpty { try db.checkConflictTarget(target, of: Self.databaseTableName) }
        return try db.inSavepoint {
            if !targetIsNull {
                // The row that has the target's values (one at most: the target is unique), compared as the
                // constraint compares them (the column's collation and affinity).
                var condition = ""
                for (number, index) in targetIndexes.enumerated() {
                    condition += (number == 0 ? " WHERE " : " AND ") + "\(table)." + quoteIdentifier(container.columns[index])
                        + " = ?"
                }
                let targetValues = targetIndexes.map { container.value(at: $0) }
                if updated.isEmpty {
                    if try db.fetchOne("SELECT 1 FROM \(table)" + condition, StatementArguments(values: targetValues),
                                       { _ in true }) == true {
                        return (key, 0)
                    }
                } else {
                    let sql =
                        "UPDATE \(table) SET "
                        + updated.map { quoteIdentifier(container.columns[$0]) + " = ?" }.joined(separator: ", ")
                        + condition
                    let values = updated.map { container.value(at: $0) } + targetValues
                    try db.execute(sql, StatementArguments(values: values))
                    if db.changes > 0 { return (key, 0) }
                }
            }
            let statement = try db.recordStatement(.insert, Self.self, columns: container.columns)
            try statement.execute(StatementArguments(values: container.values))
            return (key, db.lastInsertRowID)
        }
    }

    /// Inserts the record with `INSERT OR <conflict>`: `.ignore` skips a row whose key or unique column is taken,
    /// `.replace` deletes the rows in the way first.
    ///
    /// ```swift
    /// try Player(id: 1, name: "Arthur", score: 100).insert(db, onConflict: .ignore)
    /// ```
    public func insert(_ db: Database, onConflict conflict: Database.ConflictResolution) throws {
        try willSave(db)
        let container = try persistenceContainer()
        guard !container.columns.isEmpty else { throw DatabaseError(.misuse, "\(Self.self) has no columns to store") }
        let sql =
            "INSERT OR \(conflict.rawValue) INTO \(quoteIdentifier(Self.databaseTableName)) ("
            + container.columns.map(quoteIdentifier).joined(separator: ", ") + ") VALUES ("
            + repeatElement("?", count: container.columns.count).joined(separator: ", ") + ")"
        try db.execute(sql, StatementArguments(values: container.values))
    }
}

extension Database {
    /// Throws what SQLite 3.24+ says of an `ON CONFLICT` target that is no unique constraint, where the upsert is
    /// emulated (SQLite 3.15.2), which would otherwise update every row that has the values: `columns` must be
    /// the primary key, or the columns of a unique index that is not partial, in any order.
    func checkConflictTarget(_ columns: [String], of table: String) throws {
        let wanted = Set(columns.map { $0.lowercased() })
        let primaryKey = try fetch("PRAGMA table_info(\(quoteIdentifier(table)))") { row in
            (name: try row.string(at: 1).lowercased(), position: try row.int(at: 5))
        }.filter { $0.position > 0 }.map(\.name)
        if Set(primaryKey) == wanted { return }
        let indexes = try fetch("PRAGMA index_list(\(quoteIdentifier(table)))") { row in
            (name: try row.string(at: 1), unique: try row.int(at: 2) == 1, partial: try row.int(at: 4) == 1)
        }
        for index in indexes where index.unique && !index.partial {
            let names = try fetch("PRAGMA index_info(\(quoteIdentifier(index.name)))") { row in
                (try row[2] as String?)?.lowercased() ?? ""
            }
            if Set(names) == wanted, names.count == wanted.count { return }
        }
        throw DatabaseError(.sqlite, "ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint")
    }
}
