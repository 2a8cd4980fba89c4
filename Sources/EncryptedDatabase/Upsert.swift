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
    /// ``DatabaseError/Code/constraint`` either way, and nothing is changed.
    public func upsert(_ db: Database) throws {
        try upsert(db, emulated: !sqliteHasUpsert)
    }

    /// ``upsert(_:)`` with the path chosen by the caller: the tests run the emulation on every engine.
    package func upsert(_ db: Database, emulated: Bool) throws {
        try willSave(db)
        let container = try persistenceContainer()
        let key = Self.databasePrimaryKey
        guard let keyIndex = container.columns.firstIndex(of: key) else {
            throw DatabaseError(
                .misuse,
                "\(Self.self) has no column '\(key)' (its primary key), so it cannot be upserted; its columns are "
                    + container.columns.joined(separator: ", "))
        }
        let table = quoteIdentifier(Self.databaseTableName)
        let others = container.columns.indices.filter { $0 != keyIndex }
        if !emulated {
            var sql =
                "INSERT INTO \(table) (" + container.columns.map(quoteIdentifier).joined(separator: ", ")
                + ") VALUES (" + repeatElement("?", count: container.columns.count).joined(separator: ", ")
                + ") ON CONFLICT(\(quoteIdentifier(key))) DO "
            sql += others.isEmpty ? "NOTHING" : "UPDATE SET " + others.map {
                quoteIdentifier(container.columns[$0]) + " = excluded." + quoteIdentifier(container.columns[$0])
            }.joined(separator: ", ")
            try db.execute(sql, StatementArguments(values: container.values))
            return
        }
        var keyIsNull = false
        if case .null = container.value(at: keyIndex) { keyIsNull = true }
        try db.inSavepoint {
            if !keyIsNull {
                if others.isEmpty {
                    if try Self.exists(db, id: container.value(at: keyIndex)) { return }
                } else {
                    let sql =
                        "UPDATE \(table) SET "
                        + others.map { quoteIdentifier(container.columns[$0]) + " = ?" }.joined(separator: ", ")
                        + " WHERE \(table)." + quoteIdentifier(key) + " = ?"
                    let values = others.map { container.value(at: $0) } + [container.value(at: keyIndex)]
                    try db.execute(sql, StatementArguments(values: values))
                    if db.changes > 0 { return }
                }
            }
            let statement = try db.recordStatement(.insert, Self.self, columns: container.columns)
            try statement.execute(StatementArguments(values: container.values))
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
