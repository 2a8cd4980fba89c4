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
    /// Clears the per-column pending marks of a packed `cells` value (SyncClock.swift), for rows sent.
    let clearPendingSQL: String

    init(name: String, keyColumn: String, columns: [String]) {
        self.name = name
        self.keyColumn = keyColumn
        self.columns = columns
        let table = SyncSchema.quoted(name), key = SyncSchema.quoted(keyColumn)
        selectSQL = "SELECT \(columns.isEmpty ? "1" : columns.map(SyncSchema.quoted).joined(separator: ", ")) FROM \(table) WHERE \(key) = ?"
        let names = ([keyColumn] + columns).map(SyncSchema.quoted).joined(separator: ", ")
        let marks = Array(repeating: "?", count: columns.count + 1).joined(separator: ", ")
        insertSQL = "INSERT OR ROLLBACK INTO \(table) (\(names)) VALUES (\(marks))"
        clearPendingSQL = columns.isEmpty ? "''" : columns.indices.map { "substr(cells, \($0 * SyncClock.recordWidth + 1), \(SyncClock.recordWidth - 1)) || '0'" }
            .joined(separator: " || ")
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
            generation INTEGER NOT NULL DEFAULT 1,
            device_number INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE sync_tables (name TEXT PRIMARY KEY, key_column TEXT NOT NULL, columns TEXT NOT NULL);
        CREATE TABLE sync_rows (
            tbl TEXT NOT NULL,
            key NOT NULL,
            hlc INTEGER NOT NULL,
            device INTEGER NOT NULL,
            base_hlc INTEGER NOT NULL,
            base_device INTEGER NOT NULL,
            cells TEXT,
            tomb_hlc INTEGER,
            tomb_device INTEGER,
            pending INTEGER NOT NULL,
            PRIMARY KEY (tbl, key)
        ) WITHOUT ROWID;
        CREATE INDEX sync_rows_pending ON sync_rows (pending, tbl, key) WHERE pending <> 0;
        CREATE TABLE sync_values (tbl TEXT NOT NULL, key NOT NULL, col INTEGER NOT NULL, value, PRIMARY KEY (tbl, key, col)) WITHOUT ROWID;
        CREATE TABLE sync_device_numbers (number INTEGER PRIMARY KEY, device TEXT NOT NULL UNIQUE);
        INSERT INTO sync_device_numbers (number, device) VALUES (0, '');
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
    /// changed cells (or the tombstone) in the row's one `sync_rows` entry, in the same transaction — three
    /// statements a row (SyncClock.swift describes the packing). Changes the engine applies from other devices
    /// (`applying = 1`) are not captured again.
    /// `rowFilter`, when given, is a further condition on the row (`ROW.` stands for `NEW.` or `OLD.`): only the
    /// rows it holds for are captured (attachment descriptions of synced tables' rows, SyncAttachments.swift).
    static func triggersSQL(_ table: SyncedTable, rowFilter: String? = nil) -> String {
        let t = quoted(table.name)
        let name = literal(table.name)
        let key = quoted(table.keyColumn)
        let width = SyncClock.recordWidth
        func when(_ row: String) -> String {
            "WHEN (SELECT applying FROM sync_state WHERE singleton = 0) = 0"
                + (rowFilter.map { " AND (" + $0.replacingOccurrences(of: "ROW.", with: row + ".") + ")" } ?? "")
        }
        let now = "(SELECT hlc FROM sync_state WHERE singleton = 0)"
        let me = "(SELECT device_number FROM sync_state WHERE singleton = 0)"
        // Column i's record as stored: from the packed cells, or made from the row's one version when not packed.
        func record(_ i: Int, _ r: String = "") -> String {
            "(CASE WHEN \(r)cells IS NULL THEN printf('%016x%04x%016x%04x%d', \(r)hlc, \(r)device, \(r)base_hlc, \(r)base_device, \(r)pending <> 0) "
                + "ELSE substr(\(r)cells, \(i * width + 1), \(width)) END)"
        }
        // Column i changed here now: this device's clock, based on what it replaced (or, when that was an unsent
        // edit of this device, on what that one replaced).
        func changed(_ i: Int) -> String {
            "printf('%016x%04x', \(now), \(me)) || (CASE WHEN substr(\(record(i)), \(width), 1) = '1' "
                + "THEN substr(\(record(i)), 21, 20) ELSE substr(\(record(i)), 1, 20) END) || '1'"
        }
        let indices = table.columns.indices
        // (A table of a key alone has no cells: its packed form is empty and an update changes nothing.)
        let anyChanged = indices.isEmpty ? "0" : indices.map { "NEW.\(quoted(table.columns[$0])) IS NOT OLD.\(quoted(table.columns[$0]))" }
            .joined(separator: " OR ")
        let updatedCells = indices.isEmpty ? "''" : indices.map {
            "(CASE WHEN NEW.\(quoted(table.columns[$0])) IS NOT OLD.\(quoted(table.columns[$0])) THEN \(changed($0)) ELSE \(record($0)) END)"
        }.joined(separator: " || ")
        let allChanged = indices.isEmpty ? "''" : indices.map(changed).joined(separator: " || ")
        let packed = indices.isEmpty ? "''" : indices.map { record($0, "r.") }.joined(separator: " || ")
        let values = indices.map { "(\(name), OLD.\(key), \($0), OLD.\(quoted(table.columns[$0])))" }.joined(separator: ", ")
        // No INSERT OR REPLACE in the insert and update triggers: the conflict clause of the statement that fires a
        // trigger overrides the trigger's own (the task list writes with OR ROLLBACK), so the row is updated in
        // place, else inserted. A DELETE has no conflict clause to pass on.
        func insertIfMissing(_ row: String, condition: String) -> String {
            """
            INSERT INTO sync_rows (tbl, key, hlc, device, base_hlc, base_device, cells, tomb_hlc, tomb_device, pending)
                SELECT \(name), \(row).\(key), hlc, device_number, 0, 0, NULL, NULL, NULL, hlc FROM sync_state
                WHERE singleton = 0\(condition) AND NOT EXISTS (SELECT 1 FROM sync_rows WHERE tbl = \(name) AND key = \(row).\(key));
            """
        }
        return """
            CREATE TRIGGER sync_\(table.name)_insert AFTER INSERT ON \(t) \(when("NEW")) BEGIN
            \(tickSQL)
            UPDATE sync_rows SET
                cells = CASE WHEN cells IS NULL THEN NULL ELSE \(allChanged) END,
                base_hlc = CASE WHEN pending <> 0 THEN base_hlc ELSE hlc END,
                base_device = CASE WHEN pending <> 0 THEN base_device ELSE device END,
                hlc = \(now), device = \(me), pending = \(now)
                WHERE tbl = \(name) AND key = NEW.\(key);
            \(insertIfMissing("NEW", condition: ""))
            END;
            CREATE TRIGGER sync_\(table.name)_key BEFORE UPDATE OF \(key) ON \(t) WHEN NEW.\(key) IS NOT OLD.\(key) BEGIN
            SELECT RAISE(ABORT, 'the key of a synced row cannot change');
            END;
            CREATE TRIGGER sync_\(table.name)_update AFTER UPDATE ON \(t) \(when("NEW")) BEGIN
            \(tickSQL)
            UPDATE sync_rows SET cells = \(updatedCells), pending = \(now)
                WHERE tbl = \(name) AND key = NEW.\(key) AND (\(anyChanged));
            \(insertIfMissing("NEW", condition: " AND (\(anyChanged))"))
            END;
            CREATE TRIGGER sync_\(table.name)_delete AFTER DELETE ON \(t) \(when("OLD")) BEGIN
            \(tickSQL)
            INSERT OR REPLACE INTO sync_rows (tbl, key, hlc, device, base_hlc, base_device, cells, tomb_hlc, tomb_device, pending)
                SELECT \(name), OLD.\(key), coalesce(r.hlc, 0), coalesce(r.device, 0), coalesce(r.base_hlc, 0),
                    coalesce(r.base_device, 0),
                    CASE WHEN r.cells IS NULL AND coalesce(r.hlc, 0) <> 0 THEN \(packed) ELSE r.cells END,
                    s.hlc, s.device_number, s.hlc
                FROM sync_state s LEFT JOIN sync_rows r ON r.tbl = \(name) AND r.key = OLD.\(key) WHERE s.singleton = 0;
            \(values.isEmpty ? "" : "INSERT OR REPLACE INTO sync_values (tbl, key, col, value) VALUES \(values);")
            END;
            """
    }

    /// Records every existing row of `table` as changed now by this device (its first bundle carries them), in key
    /// order: the clock entries then fill their pages (random keys inserted in any order leave them a third empty).
    static func captureExisting(_ db: Database, _ table: SyncedTable, rowFilter: String? = nil) throws {
        try db.execute(tickSQL)
        let filter = rowFilter.map { " AND (" + $0.replacingOccurrences(of: "ROW.", with: "t.") + ")" } ?? ""
        try db.execute(
            """
            INSERT OR ROLLBACK INTO sync_rows (tbl, key, hlc, device, base_hlc, base_device, cells, tomb_hlc, tomb_device, pending)
            SELECT ?, t.\(quoted(table.keyColumn)), s.hlc, s.device_number, 0, 0, NULL, NULL, NULL, s.hlc
            FROM \(quoted(table.name)) t, sync_state s WHERE s.singleton = 0\(filter) ORDER BY t.\(quoted(table.keyColumn))
            """, [table.name])
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
