// Undoing a removed device's bundles: a replication engine may deliver a removed device's later bundle before the
// signed removal (Syncthing pulls files in any order), so a device can apply it before it knows. Every version a
// bundle of another device sets is marked with that bundle, and every version it replaces is kept, until the roster
// says whether that device was removed before it. Docs/sync.md, "A removal that arrives late".
internal import EncryptedDatabase
internal import Foundation

enum SyncUndo {
    /// The bookkeeping: each applied bundle of another device of this generation (`sync_sources`), the versions those
    /// bundles replaced (`sync_preimages`, one row per cell or tombstone, keyed by the bundle that replaced it).
    /// `sync_clock.src` and `sync_conflicts.src` name the bundle a version or a log entry came with. Emptied when the
    /// device enters a new key generation (nothing of an older generation can be removed any more).
    static let createSQL = """
        CREATE TABLE IF NOT EXISTS sync_sources (
            id INTEGER PRIMARY KEY AUTOINCREMENT, device TEXT NOT NULL, sequence INTEGER NOT NULL, UNIQUE (device, sequence));
        CREATE TABLE IF NOT EXISTS sync_preimages (
            src INTEGER NOT NULL, tbl TEXT NOT NULL, key NOT NULL, col TEXT NOT NULL, hlc INTEGER NOT NULL,
            device TEXT NOT NULL, base_hlc INTEGER NOT NULL, base_device TEXT NOT NULL, pending INTEGER NOT NULL, value,
            prev_src INTEGER, PRIMARY KEY (src, tbl, key, col)) WITHOUT ROWID;
        """

    /// Adds what this version keeps to a database set up by an earlier one (in the caller's transaction).
    static func upgrade(_ db: Database) throws {
        try db.executeScript(createSQL)
        for table in ["sync_clock", "sync_conflicts"] {
            let columns = try db.fetch("PRAGMA table_info(\(table))") { try $0.string(at: 1) }
            if !columns.contains("src") { try db.execute("ALTER TABLE \(table) ADD COLUMN src INTEGER") }
        }
    }

    /// The id of `device`'s bundle `sequence` as a source, recorded when it is first applied.
    static func source(_ db: Database, device: String, sequence: Int64) throws -> Int64 {
        try db.execute("INSERT OR IGNORE INTO sync_sources (device, sequence) VALUES (?, ?)", [device, sequence])
        return try db.scalar("SELECT id FROM sync_sources WHERE device = ? AND sequence = ?", [device, sequence], as: Int64.self)!
    }

    /// Keeps `cell`, the version of (`table`, `key`, `column`) that the bundle `source` replaces (the first one it
    /// replaced, when it sets the cell twice). `column` is empty for a tombstone.
    static func keep(_ db: Database, source: Int64, table: String, key: SyncValue, column: String, cell: LocalCell) throws {
        try db.execute(
            """
            INSERT OR IGNORE INTO sync_preimages (src, tbl, key, col, hlc, device, base_hlc, base_device, pending, value, prev_src)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [source, table, key.databaseValue, column, cell.version.hlc, cell.version.device, cell.base.hlc, cell.base.device,
             cell.pending ? 1 : 0, cell.value.databaseValue, cell.source.map { DatabaseValue.integer($0) } ?? .null])
    }

    /// Forgets every source and kept version (a new key generation; in the caller's transaction).
    static func forgetAll(_ db: Database) throws {
        try db.execute("DELETE FROM sync_preimages")
        try db.execute("DELETE FROM sync_sources")
        try db.execute("UPDATE sync_clock SET src = NULL WHERE src IS NOT NULL")
        try db.execute("UPDATE sync_conflicts SET src = NULL WHERE src IS NOT NULL")
    }

    /// Puts one row back as it was before the bundles `tainted` (a removed device's bundles after its last accepted
    /// one): each cell and the tombstone whose version one of them set goes back to the version it replaced (and
    /// further back while that one came with another of them), or goes when it had none; a row left without a value
    /// for every column did not exist before them and is gone (its tombstone, if one was there before, stays).
    /// This device's own versions are never undone. Returns whether the row changed. Capture is off (the caller's).
    static func restore(
        _ db: Database, _ table: SyncedTable, key: SyncValue, tainted: Set<Int64>, thisDevice: String
    ) throws -> Bool {
        let local = try SyncMerge.localRow(db, table, key: key)
        func back(_ cell: LocalCell?, column: String) throws -> LocalCell? {
            var cell = cell
            while let current = cell, let source = current.source, tainted.contains(source), current.version.device != thisDevice {
                cell = try db.fetchOne(
                    """
                    SELECT hlc, device, base_hlc, base_device, pending, value, prev_src FROM sync_preimages
                    WHERE src = ? AND tbl = ? AND key = ? AND col = ?
                    """, [source, table.name, key.databaseValue, column]
                ) { row in
                    LocalCell(
                        version: SyncVersion(hlc: try row.int64(at: 0), device: try row.string(at: 1)),
                        base: SyncVersion(hlc: try row.int64(at: 2), device: try row.string(at: 3)), pending: try row.int(at: 4) == 1,
                        value: SyncValue(try row.value(at: 5)), source: try row.isNull(at: 6) ? nil : try row.int64(at: 6))
                }
            }
            return cell
        }
        var cells: [String: LocalCell] = [:]
        for column in table.columns {
            if let cell = try back(local.cells[column], column: column) { cells[column] = cell }
        }
        let tombstone = try back(
            local.tombstone.map { LocalCell(version: $0, base: .zero, pending: false, value: .null, source: local.tombstoneSource) },
            column: "")
        let complete = table.columns.allSatisfy { cells[$0] != nil }
        if !complete { cells = [:] }
        let newest = cells.values.map(\.version).max()
        let alive = complete && newest.map { version in tombstone.map { $0.version < version } ?? true } ?? false
        let unchanged = local.alive == alive && local.tombstone == tombstone?.version && local.tombstoneSource == tombstone?.source
            && local.cells.count == cells.count
            && cells.allSatisfy { column, cell in
                local.cells[column].map { $0.version == cell.version && $0.source == cell.source && $0.value == cell.value } ?? false
            }
        if unchanged { return false }
        let quotedTable = SyncSchema.quoted(table.name), keyColumn = SyncSchema.quoted(table.keyColumn)
        if alive && local.alive {
            let assignments = table.columns.map { "\(SyncSchema.quoted($0)) = ?" }.joined(separator: ", ")
            try db.execute(
                "UPDATE OR ROLLBACK \(quotedTable) SET \(assignments) WHERE \(keyColumn) = ?",
                StatementArguments(table.columns.map { cells[$0]!.value.databaseValue } + [key.databaseValue]))
        } else if alive {
            try db.execute(table.insertSQL, StatementArguments([key.databaseValue] + table.columns.map { cells[$0]!.value.databaseValue }))
        } else if local.alive {
            try db.execute("DELETE FROM \(quotedTable) WHERE \(keyColumn) = ?", [key.databaseValue])
        }
        try db.execute("DELETE FROM sync_clock WHERE tbl = ? AND key = ?", [table.name, key.databaseValue])
        func insert(_ column: String, _ cell: LocalCell, value: DatabaseValue) throws {
            try db.execute(
                """
                INSERT OR ROLLBACK INTO sync_clock (tbl, key, col, hlc, device, base_hlc, base_device, pending, value, src)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [table.name, key.databaseValue, column, cell.version.hlc, cell.version.device, cell.base.hlc, cell.base.device,
                 cell.pending ? 1 : 0, value, cell.source.map { DatabaseValue.integer($0) } ?? .null])
        }
        for (column, cell) in cells { try insert(column, cell, value: alive ? .null : cell.value.databaseValue) }
        if let tombstone { try insert("", LocalCell(version: tombstone.version, base: .zero, pending: false, value: .null, source: tombstone.source), value: .null) }
        return true
    }
}

extension SyncEngine {
    /// Undoes, on this device, whatever the bundles of a removed device after its last accepted one brought here
    /// (applied before the removal arrived), for every removal of this device's key generation it knows — from this
    /// generation's roster, or carried in a newer generation's roster before this device enters it: rows and
    /// tombstones go back to the versions those bundles replaced, rows they created go, log entries made while they
    /// were applied go, and that device's position goes back to its last accepted bundle. Nothing of them is then
    /// sent, in this generation or the next. Returns the rows that changed.
    @discardableResult
    func undoRemovedDevices() throws -> Int {
        let removals = try database.read { db in
            try db.fetch(
                """
                SELECT r.device, r.last_sequence, r.last_hash FROM sync_removed r, sync_state s
                WHERE s.singleton = 0 AND r.generation = s.generation
                  AND EXISTS (SELECT 1 FROM sync_sources o WHERE o.device = r.device AND o.sequence > r.last_sequence)
                """
            ) { (try $0.string(at: 0), try $0.int64(at: 1), [UInt8](try $0.data(at: 2))) }
        }
        var changed = 0
        for (removed, last, lastHash) in removals {
            changed += try database.write { db -> Int in
                let tainted = Set(
                    try db.fetch("SELECT id FROM sync_sources WHERE device = ? AND sequence > ?", [removed, last]) { try $0.int64(at: 0) })
                let byName = Dictionary(uniqueKeysWithValues: try SyncSchema.tables(db).map { ($0.name, $0) })
                try db.execute("UPDATE sync_state SET applying = 1 WHERE singleton = 0")
                let keys = try db.fetch(
                    """
                    SELECT DISTINCT tbl, key FROM sync_clock
                    WHERE src IN (SELECT id FROM sync_sources WHERE device = ? AND sequence > ?)
                    """, [removed, last]
                ) { (try $0.string(at: 0), SyncValue(try $0.value(at: 1))) }
                var rows = 0
                for (name, key) in keys {
                    guard let table = byName[name] else { continue }
                    if try SyncUndo.restore(db, table, key: key, tainted: tainted, thisDevice: device) { rows += 1 }
                }
                let sources = "(SELECT id FROM sync_sources WHERE device = ? AND sequence > ?)"
                try db.execute("DELETE FROM sync_conflicts WHERE src IN \(sources)", [removed, last])
                try db.execute("DELETE FROM sync_preimages WHERE src IN \(sources)", [removed, last])
                try db.execute("DELETE FROM sync_sources WHERE device = ? AND sequence > ?", [removed, last])
                try db.execute(
                    "UPDATE sync_devices SET sequence = ?, last_hash = ? WHERE device = ? AND sequence > ?",
                    [last, Data(lastHash), removed, last])
                try db.execute("UPDATE sync_state SET applying = 0 WHERE singleton = 0")
                return rows
            }
        }
        return changed
    }
}

extension SyncEngine {
    /// Drops what is kept for undoing bundles that can no longer be undone: a bundle of X is settled once every other
    /// device on the roster that could remove X (not removed, not X, not this device) has applied it by its signed seen
    /// vector — any of them that removes X names at least that bundle — and at once when no such device exists (only
    /// this one could remove X, and it has applied it). Called after applying, so that a sync that applied a settled
    /// bundle leaves nothing behind for the next one to remove.
    func settleSources(_ roster: SyncRoster) throws {
        let removers = roster.members.keys.filter { $0 != device && roster.removed[$0] == nil }
        var vectors: [String: SyncVector] = [:]
        for writer in removers {
            vectors[writer] = SyncSeenFiles.newest(root: layoutRoot, device: writer, key: key, accept: { bytes in
                roster.accepts(bytes, device: writer, sequence: 0, generation: self.generation)
            })?.vector
        }
        let chains = try database.read { db in
            try db.fetch("SELECT device, max(sequence) FROM sync_sources GROUP BY device") { (try $0.string(at: 0), try $0.int64(at: 1)) }
        }
        var settled: [(String, Int64)] = []
        for (chain, _) in chains {
            let counts = removers.filter { $0 != chain }.map { vectors[$0]?.entries[chain]?.sequence ?? 0 }
            let least = counts.min() ?? Int64.max  // no other device: only this one could remove it
            if least > 0 { settled.append((chain, least)) }
        }
        guard !settled.isEmpty else { return }
        try database.write { db in
            for (chain, through) in settled {
                try db.execute(
                    "DELETE FROM sync_preimages WHERE src IN (SELECT id FROM sync_sources WHERE device = ? AND sequence <= ?)",
                    [chain, through])
                try db.execute("DELETE FROM sync_sources WHERE device = ? AND sequence <= ?", [chain, through])
            }
        }
    }
}
