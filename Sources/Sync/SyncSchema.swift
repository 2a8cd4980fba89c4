// Change capture: the sync tables and the triggers that record every change of a synced table in the same
// transaction as the change. Created when sync is enabled on a database, never by an application migration.
internal import EncryptedDatabase
internal import Foundation

/// A table that takes part in sync, as the engine found it: its key column and the columns that merge.
public struct SyncedTable: Sendable, Equatable {
    /// The table's name.
    public let name: String
    /// The column that identifies a row on every device: a UUID (16-byte blob) or text key.
    public let keyColumn: String
    /// The other columns, each merged on its own (last writer wins by hybrid logical clock).
    public let columns: [String]

    /// The merge's statements, built once per table rather than once per row.
    let selectSQL: String
    let insertSQL: String
    /// The clock of every column of a new row in one statement (eight arguments a column: table, key, column,
    /// version, base, the bundle it came in), nil for a table with too many columns for SQLite's 999 arguments.
    let insertCellsSQL: String?

    init(name: String, keyColumn: String, columns: [String]) {
        self.name = name
        self.keyColumn = keyColumn
        self.columns = columns
        let table = SyncSchema.quoted(name), key = SyncSchema.quoted(keyColumn)
        selectSQL = "SELECT \(columns.map(SyncSchema.quoted).joined(separator: ", ")) FROM \(table) WHERE \(key) = ?"
        let names = ([keyColumn] + columns).map(SyncSchema.quoted).joined(separator: ", ")
        let marks = Array(repeating: "?", count: columns.count + 1).joined(separator: ", ")
        insertSQL = "INSERT OR ROLLBACK INTO \(table) (\(names)) VALUES (\(marks))"
        insertCellsSQL = columns.count * 8 > 999 ? nil
            : "INSERT OR ROLLBACK INTO sync_clock (tbl, key, col, hlc, device, base_hlc, base_device, pending, value, src) VALUES "
                + Array(repeating: "(?, ?, ?, ?, ?, ?, ?, 0, NULL, ?)", count: columns.count).joined(separator: ", ")
    }

    /// Tables are equal when they sync the same columns by the same key.
    public static func == (lhs: SyncedTable, rhs: SyncedTable) -> Bool {
        lhs.name == rhs.name && lhs.keyColumn == rhs.keyColumn && lhs.columns == rhs.columns
    }
}

enum SyncSchema {
    /// The bookkeeping tables (all named `sync_*`).
    static let createSQL = """
        CREATE TABLE sync_state (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 0),
            device TEXT NOT NULL,
            hlc INTEGER NOT NULL,
            applying INTEGER NOT NULL,
            remote_kind TEXT NOT NULL,
            remote_location TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            last_hash BLOB NOT NULL,
            last_sync INTEGER,
            generation INTEGER NOT NULL DEFAULT 1
        );
        CREATE TABLE sync_tables (name TEXT PRIMARY KEY, key_column TEXT NOT NULL, columns TEXT NOT NULL);
        CREATE TABLE sync_clock (
            tbl TEXT NOT NULL,
            key NOT NULL,
            col TEXT NOT NULL,
            hlc INTEGER NOT NULL,
            device TEXT NOT NULL,
            base_hlc INTEGER NOT NULL,
            base_device TEXT NOT NULL,
            pending INTEGER NOT NULL,
            value,
            src INTEGER,
            PRIMARY KEY (tbl, key, col)
        ) WITHOUT ROWID;
        CREATE INDEX sync_clock_pending ON sync_clock (pending) WHERE pending = 1;
        CREATE TABLE sync_devices (
            device TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            last_hash BLOB NOT NULL,
            applied_at INTEGER NOT NULL
        );
        CREATE TABLE sync_conflicts (
            id INTEGER PRIMARY KEY,
            tbl TEXT NOT NULL,
            key NOT NULL,
            col TEXT NOT NULL,
            lost_value,
            lost_hlc INTEGER NOT NULL,
            lost_device TEXT NOT NULL,
            won_hlc INTEGER NOT NULL,
            won_device TEXT NOT NULL,
            recorded_at INTEGER NOT NULL,
            restored INTEGER NOT NULL DEFAULT 0,
            src INTEGER
        );
        """

    /// The next hybrid logical clock, in SQL: 48 bits of milliseconds since 1970 and a 16-bit counter, never
    /// less than one past the last clock this device saw (its own or a remote one).
    static let tickSQL =
        "UPDATE sync_state SET hlc = max(hlc + 1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 65536) WHERE singleton = 0;"

    static func quoted(_ identifier: String) -> String { "\"\(identifier)\"" }
    static func literal(_ text: String) -> String { "'\(text.replacingOccurrences(of: "'", with: "''"))'" }

    /// Whether `name` is a plain identifier (letters, digits, `_`, not starting with a digit).
    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(first >= 0x30 && first <= 0x39), name.utf8.count <= 128 else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
    }

    /// Reads `table`'s columns and finds its sync key: a single-column primary key, or (a `WITHOUT ROWID`
    /// table keyed by several columns, like the task list's `(created_at, id)`) a column named `id` with a
    /// unique index; it must be declared `BLOB` or `TEXT`. A rowid table (no primary key, or an `INTEGER
    /// PRIMARY KEY`) is refused: its keys are small integers that two devices hand out twice.
    static func describe(_ db: Database, table: String) throws -> SyncedTable {
        guard isIdentifier(table), !table.hasPrefix("sync_"), !table.hasPrefix("sqlite_") else {
            throw SyncError(
                SyncError.Code.invalidArgument,
                "the table name '\(table)' cannot be synced: use a table named with letters, digits and '_' (not sync_… or sqlite_…)")
        }
        guard try db.tableExists(table) else {
            throw SyncError(SyncError.Code.invalidArgument, "there is no table '\(table)' to sync; nothing was changed")
        }
        struct Column { var name: String; var type: String; var primaryKey: Int }
        let columns = try db.fetch("PRAGMA table_info(\(quoted(table)))") { row in
            Column(name: try row.string(at: 1), type: try row.string(at: 2).uppercased(), primaryKey: try row.int(at: 5))
        }
        let sql = try db.scalar("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table], as: String.self) ?? ""
        let withoutRowid = sql.uppercased().replacingOccurrences(of: " ", with: "").hasSuffix("WITHOUTROWID")
        let primary = columns.filter { $0.primaryKey > 0 }
        var key: Column?
        if primary.count == 1 {
            key = primary[0]
        } else if primary.count > 1, let id = columns.first(where: { $0.name == "id" }) {
            let unique = try db.fetch("PRAGMA index_list(\(quoted(table)))") { row in
                (name: try row.string(at: 1), unique: try row.int(at: 2) == 1)
            }.filter(\.unique)
            for index in unique {
                let indexed = try db.fetch("PRAGMA index_info(\(quoted(index.name)))") { try $0.string(at: 2) }
                if indexed == ["id"] { key = id }
            }
        }
        guard let key, key.type == "BLOB" || key.type == "TEXT",
            withoutRowid || !(key.type == "INTEGER")
        else {
            throw SyncError(
                SyncError.Code.invalidArgument,
                "the table '\(table)' cannot be synced: its rows are keyed by SQLite's rowid (or by no single BLOB or "
                    + "TEXT column), and two devices would hand out the same keys; give it a UUID (16-byte BLOB) or TEXT "
                    + "primary key. Nothing was changed")
        }
        let others = columns.map(\.name).filter { $0 != key.name }
        guard others.allSatisfy(isIdentifier), isIdentifier(key.name) else {
            throw SyncError(SyncError.Code.invalidArgument, "the table '\(table)' has a column name that sync cannot quote; nothing was changed")
        }
        return SyncedTable(name: table, keyColumn: key.name, columns: others)
    }

    /// The capture triggers of `table`: each local insert, update or delete ticks the clock and records the
    /// changed cells (or the tombstone) in `sync_clock`, in the same transaction. Changes the engine applies
    /// from other devices (`applying = 1`) are not captured again.
    /// `rowFilter`, when given, is a further condition on the row (`ROW.` stands for `NEW.` or `OLD.`): only the
    /// rows it holds for are captured (attachment descriptions of synced tables' rows, SyncAttachments.swift).
    static func triggersSQL(_ table: SyncedTable, rowFilter: String? = nil) -> String {
        let t = quoted(table.name)
        let name = literal(table.name)
        let key = quoted(table.keyColumn)
        func when(_ row: String) -> String {
            "WHEN (SELECT applying FROM sync_state WHERE singleton = 0) = 0"
                + (rowFilter.map { " AND (" + $0.replacingOccurrences(of: "ROW.", with: row + ".") + ")" } ?? "")
        }
        // No INSERT OR REPLACE here: the conflict clause of the statement that fires a trigger overrides the
        // trigger's own (the task list writes with OR ROLLBACK), so a cell is updated in place, else inserted.
        func record(_ column: String, _ row: String, condition: String?) -> String {
            let cell = "tbl = \(name) AND key = \(row).\(key) AND col = \(literal(column))"
            let extra = condition.map { " AND " + $0 } ?? ""
            return """
                UPDATE sync_clock SET
                    base_hlc = CASE WHEN pending = 1 THEN base_hlc ELSE hlc END,
                    base_device = CASE WHEN pending = 1 THEN base_device ELSE device END,
                    hlc = (SELECT hlc FROM sync_state WHERE singleton = 0),
                    device = (SELECT device FROM sync_state WHERE singleton = 0), pending = 1, value = NULL
                    WHERE \(cell)\(extra);
                INSERT INTO sync_clock (tbl, key, col, hlc, device, base_hlc, base_device, pending, value)
                    SELECT \(name), \(row).\(key), \(literal(column)), hlc, device, 0, '', 1, NULL FROM sync_state
                    WHERE singleton = 0 AND NOT EXISTS (SELECT 1 FROM sync_clock WHERE \(cell))\(extra);
                """
        }
        let inserts = table.columns.map { record($0, "NEW", condition: nil) }.joined(separator: "\n")
        let updates = table.columns.map { record($0, "NEW", condition: "NEW.\(quoted($0)) IS NOT OLD.\(quoted($0))") }
            .joined(separator: "\n")
        let keeps = table.columns.map {
            "UPDATE sync_clock SET value = OLD.\(quoted($0)) WHERE tbl = \(name) AND key = OLD.\(key) AND col = \(literal($0));"
        }.joined(separator: "\n")
        return """
            CREATE TRIGGER sync_\(table.name)_insert AFTER INSERT ON \(t) \(when("NEW")) BEGIN
            \(tickSQL)
            \(inserts)
            END;
            CREATE TRIGGER sync_\(table.name)_key BEFORE UPDATE OF \(key) ON \(t) WHEN NEW.\(key) IS NOT OLD.\(key) BEGIN
            SELECT RAISE(ABORT, 'the key of a synced row cannot change');
            END;
            CREATE TRIGGER sync_\(table.name)_update AFTER UPDATE ON \(t) \(when("NEW")) BEGIN
            \(tickSQL)
            \(updates)
            END;
            CREATE TRIGGER sync_\(table.name)_delete AFTER DELETE ON \(t) \(when("OLD")) BEGIN
            \(tickSQL)
            \(keeps)
            DELETE FROM sync_clock WHERE tbl = \(name) AND key = OLD.\(key) AND col = '';
            INSERT INTO sync_clock (tbl, key, col, hlc, device, base_hlc, base_device, pending, value)
                SELECT \(name), OLD.\(key), '', hlc, device, 0, '', 1, NULL FROM sync_state WHERE singleton = 0;
            END;
            """
    }

    /// Records every existing row of `table` as changed now by this device (its first bundle carries them).
    static func captureExisting(_ db: Database, _ table: SyncedTable, rowFilter: String? = nil) throws {
        try db.execute(tickSQL)
        let filter = rowFilter.map { " AND (" + $0.replacingOccurrences(of: "ROW.", with: "t.") + ")" } ?? ""
        for column in table.columns {
            try db.execute(
                """
                INSERT OR ROLLBACK INTO sync_clock (tbl, key, col, hlc, device, base_hlc, base_device, pending, value)
                SELECT ?, t.\(quoted(table.keyColumn)), ?, s.hlc, s.device, 0, '', 1, NULL
                FROM \(quoted(table.name)) t, sync_state s WHERE s.singleton = 0\(filter)
                """, [table.name, column])
        }
    }

    /// The synced tables recorded in the database.
    static func tables(_ db: Database) throws -> [SyncedTable] {
        try db.fetch("SELECT name, key_column, columns FROM sync_tables ORDER BY name") { row in
            SyncedTable(
                name: try row.string(at: 0), keyColumn: try row.string(at: 1),
                columns: try row.string(at: 2).split(separator: ",").map(String.init))
        }
    }

    /// Adds `table` to sync: records it, creates its triggers, captures its rows. In the caller's transaction.
    static func add(_ db: Database, table name: String) throws -> SyncedTable {
        let table = try describe(db, table: name)
        if try db.scalar("SELECT 1 FROM sync_tables WHERE name = ?", [name], as: Int.self) != nil { return table }
        try db.execute(
            "INSERT INTO sync_tables (name, key_column, columns) VALUES (?, ?, ?)",
            [table.name, table.keyColumn, table.columns.joined(separator: ",")])
        try db.executeScript(triggersSQL(table))
        try captureExisting(db, table)
        return table
    }
}
