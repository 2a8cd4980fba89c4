// Edits lost to a delete, logged alike on every device whatever the order of sync (issue 32, part 3). Docs/sync.md,
// "What a conflict becomes".
internal import EncryptedDatabase
internal import Foundation

/// A delete makes every edit its writer had not seen lose. What the writer had seen is the row's cells as they were
/// when it deleted the row: the deleter keeps them (`sync_delete_views`, before anything merges into the deleted row,
/// or when it seals the bundle that carries the delete) and sends *those* cells with the delete, so that every device,
/// applying the deleter's own bundle (`SyncRowChange.tombstone.device` is the bundle's writer), keeps the same view. The log entries of edits lost to a delete are then a function
/// of the row's state and that view, recomputed whenever either changes: while the row is deleted by that tombstone,
/// the newest version of each column that is not the one in the view is logged, lost to the tombstone
/// (`sync_conflicts.lost_to_delete = 1`); an entry whose version is no longer the newest (its writer, or a concurrent
/// edit, replaced it — the latter logs it as an ordinary conflict) or whose row came back goes.
enum SyncDeleteLog {
    static let createSQL = """
        CREATE TABLE IF NOT EXISTS sync_delete_views (
            tbl TEXT NOT NULL, key NOT NULL, col TEXT NOT NULL, t_hlc INTEGER NOT NULL, t_device TEXT NOT NULL,
            hlc INTEGER NOT NULL, device TEXT NOT NULL, base_hlc INTEGER NOT NULL, base_device TEXT NOT NULL, value,
            PRIMARY KEY (tbl, key, col)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS sync_lost_unsent (
            tbl TEXT NOT NULL, key NOT NULL, col TEXT NOT NULL, value, hlc INTEGER NOT NULL, device TEXT NOT NULL,
            won_hlc INTEGER NOT NULL, won_device TEXT NOT NULL, PRIMARY KEY (tbl, key, col, hlc, device)) WITHOUT ROWID;
        """

    /// Adds what this version keeps to a database set up by an earlier one (in the caller's transaction).
    static func upgrade(_ db: Database) throws {
        try db.executeScript(createSQL)
        let columns = try db.fetch("PRAGMA table_info(sync_conflicts)") { try $0.string(at: 1) }
        if !columns.contains("lost_to_delete") {
            try db.execute("ALTER TABLE sync_conflicts ADD COLUMN lost_to_delete INTEGER NOT NULL DEFAULT 0")
        }
    }

    /// Keeps `edit` — this device's value that lost to a concurrent edit before it was sent — for the next bundle
    /// (``SyncLostEdit``; `sync_lost_unsent`, in the caller's transaction). Kept until a bundle that carries it is sent.
    static func keepLostUnsent(_ db: Database, _ edit: SyncLostEdit) throws {
        try db.execute(
            """
            INSERT OR IGNORE INTO sync_lost_unsent (tbl, key, col, value, hlc, device, won_hlc, won_device)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [edit.table, edit.key.databaseValue, edit.column, edit.value.databaseValue, edit.version.hlc, edit.version.device,
             edit.won.hlc, edit.won.device])
    }

    /// The lost edits waiting for a bundle (at most `limit`), of the tables and columns `tables` syncs.
    static func lostUnsent(_ db: Database, tables: [String: SyncedTable], limit: Int) throws -> [SyncLostEdit] {
        guard try db.tableExists("sync_lost_unsent") else { return [] }
        return try db.fetch(
            "SELECT tbl, key, col, value, hlc, device, won_hlc, won_device FROM sync_lost_unsent ORDER BY tbl, key, col, hlc, device LIMIT ?",
            [limit]
        ) { row in
            SyncLostEdit(
                table: try row.string(at: 0), key: SyncValue(try row.value(at: 1)), column: try row.string(at: 2),
                value: SyncValue(try row.value(at: 3)), version: SyncVersion(hlc: try row.int64(at: 4), device: try row.string(at: 5)),
                won: SyncVersion(hlc: try row.int64(at: 6), device: try row.string(at: 7)))
        }.filter { tables[$0.table]?.columns.contains($0.column) ?? false }
    }

    /// Forgets lost edits a bundle carried (it is sent: every device that applies it logs them).
    static func sentLostUnsent(_ db: Database, _ edits: [SyncLostEdit]) throws {
        for edit in edits {
            try db.execute(
                "DELETE FROM sync_lost_unsent WHERE tbl = ? AND key = ? AND col = ? AND hlc = ? AND device = ?",
                [edit.table, edit.key.databaseValue, edit.column, edit.version.hlc, edit.version.device])
        }
    }

    /// Logs the lost edits of a bundle of `sender` (in the caller's transaction): each value that lost on its writer
    /// before it was sent, once, as any conflict (`source`: the bundle, so that a removal undoes the entry). Only the
    /// sender's own values are taken (a device speaks for its own edits), of synced tables and columns.
    static func logLost(_ db: Database, _ edits: [SyncLostEdit], sender: String, tables: [String: SyncedTable], source: Int64?, now: Int64) throws -> Int {
        var logged = 0
        for edit in edits where edit.version.device == sender && edit.version < edit.won {
            guard tables[edit.table]?.columns.contains(edit.column) ?? false else { continue }
            let known = try db.scalar(
                "SELECT 1 FROM sync_conflicts WHERE tbl = ? AND key = ? AND col = ? AND lost_hlc = ? AND lost_device = ? AND lost_to_delete = 0",
                [edit.table, edit.key.databaseValue, edit.column, edit.version.hlc, edit.version.device], as: Int.self)
            if known != nil { continue }
            try db.execute(
                """
                INSERT OR ROLLBACK INTO sync_conflicts (tbl, key, col, lost_value, lost_hlc, lost_device, won_hlc, won_device, recorded_at, src)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [edit.table, edit.key.databaseValue, edit.column, edit.value.databaseValue, edit.version.hlc, edit.version.device,
                 edit.won.hlc, edit.won.device, now, source.map { DatabaseValue.integer($0) } ?? .null])
            logged += 1
        }
        return logged
    }

    /// Records `cells` as what the writer of `tombstone` had seen of the row, unless a view of that tombstone is kept
    /// already (the first carrier counts). A view of an older tombstone is replaced.
    static func recordView(_ db: Database, table: String, key: SyncValue, tombstone: SyncVersion, cells: [SyncCell]) throws {
        let current = try db.fetchOne(
            "SELECT t_hlc, t_device FROM sync_delete_views WHERE tbl = ? AND key = ? LIMIT 1", [table, key.databaseValue]
        ) { SyncVersion(hlc: try $0.int64(at: 0), device: try $0.string(at: 1)) }
        if let current, !(current < tombstone) { return }
        try db.execute("DELETE FROM sync_delete_views WHERE tbl = ? AND key = ?", [table, key.databaseValue])
        // The row marker (an empty column) says a view is kept even when the deleter had no cell of the row.
        for cell in [SyncCell(column: "", value: .null, version: .zero, base: .zero)] + cells {
            try db.execute(
                """
                INSERT OR ROLLBACK INTO sync_delete_views (tbl, key, col, t_hlc, t_device, hlc, device, base_hlc, base_device, value)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [table, key.databaseValue, cell.column, tombstone.hlc, tombstone.device, cell.version.hlc, cell.version.device,
                 cell.base.hlc, cell.base.device, cell.value.databaseValue])
        }
    }

    /// The cells kept as what the writer of `tombstone` had seen of the row, or nil when none are kept.
    static func view(_ db: Database, table: String, key: SyncValue, tombstone: SyncVersion) throws -> [SyncCell]? {
        var cells: [SyncCell] = []
        var viewed = false
        try db.forEachRow(
            """
            SELECT col, hlc, device, base_hlc, base_device, value FROM sync_delete_views
            WHERE tbl = ? AND key = ? AND t_hlc = ? AND t_device = ? ORDER BY col
            """, [table, key.databaseValue, tombstone.hlc, tombstone.device]
        ) { row in
            viewed = true
            let column = try row.string(at: 0)
            guard !column.isEmpty else { return }
            cells.append(SyncCell(
                column: column, value: SyncValue(try row.value(at: 5)), version: SyncVersion(hlc: try row.int64(at: 1), device: try row.string(at: 2)),
                base: SyncVersion(hlc: try row.int64(at: 3), device: try row.string(at: 4))))
        }
        return viewed ? cells : nil
    }

    /// This device's own delete of a row, not sent yet (the caller knows: ``SyncMerge/tombstoneUnsent(_:numbers:)``),
    /// about to be merged into: what it had of the row is kept first.
    static func keepOwnView(_ db: Database, _ table: SyncedTable, key: SyncValue, local: (cells: [String: LocalCell], tombstone: SyncVersion?)) throws {
        guard let tombstone = local.tombstone, try view(db, table: table.name, key: key, tombstone: tombstone) == nil
        else { return }
        try recordView(
            db, table: table.name, key: key, tombstone: tombstone,
            cells: table.columns.compactMap { column in
                local.cells[column].map { SyncCell(column: column, value: $0.value, version: $0.version, base: $0.base) }
            })
    }

    /// Brings the log entries of edits lost to a delete of one row in line with its state (see the type).
    static func update(_ db: Database, _ table: SyncedTable, key: SyncValue, now: Int64) throws {
        let local = try SyncMerge.localRow(db, table, key: key)
        var wanted: [(column: String, cell: LocalCell, tombstone: SyncVersion)] = []
        if !local.alive, let tombstone = local.tombstone {
            if let cells = try view(db, table: table.name, key: key, tombstone: tombstone) {
                let seen = Dictionary(uniqueKeysWithValues: cells.map { ($0.column, $0.version) })
                for column in table.columns {
                    guard let cell = local.cells[column], cell.version < tombstone, cell.version != seen[column] else { continue }
                    wanted.append((column, cell, tombstone))
                }
            }
        }
        let existing = try db.fetch(
            "SELECT id, col, lost_hlc, lost_device, won_hlc, won_device FROM sync_conflicts WHERE tbl = ? AND key = ? AND lost_to_delete = 1 AND restored = 0",
            [table.name, key.databaseValue]
        ) { row in
            (
                try row.int64(at: 0), try row.string(at: 1), SyncVersion(hlc: try row.int64(at: 2), device: try row.string(at: 3)),
                SyncVersion(hlc: try row.int64(at: 4), device: try row.string(at: 5))
            )
        }
        for (id, column, lost, won) in existing
        where !wanted.contains(where: { $0.column == column && $0.cell.version == lost && $0.tombstone == won }) {
            try db.execute("DELETE FROM sync_conflicts WHERE id = ?", [id])
        }
        for entry in wanted
        where !existing.contains(where: { $0.1 == entry.column && $0.2 == entry.cell.version && $0.3 == entry.tombstone }) {
            try db.execute(
                """
                INSERT OR ROLLBACK INTO sync_conflicts
                    (tbl, key, col, lost_value, lost_hlc, lost_device, won_hlc, won_device, recorded_at, lost_to_delete)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
                """,
                [table.name, key.databaseValue, entry.column, entry.cell.value.databaseValue, entry.cell.version.hlc,
                 entry.cell.version.device, entry.tombstone.hlc, entry.tombstone.device, now])
        }
    }
}
