// Undoing a removed device's bundles: a replication engine may deliver a removed device's later bundle before the
// signed removal (Syncthing pulls files in any order), so a device can apply it before it knows. Every version a
// bundle of another device sets is marked with that bundle, and every version it replaces is kept, until the roster
// says whether that device was removed before it. Docs/sync.md, "A removal that arrives late".
internal import EncryptedDatabase
internal import Foundation

enum SyncUndo {
    /// The bookkeeping: each applied bundle of another device of this generation (`sync_sources`), the versions those
    /// bundles replaced (`sync_preimages`, one row per cell or tombstone, keyed by the bundle that replaced it), and
    /// the bundle each version of a row came in (`sync_row_sources`, one entry per row: `src` the source of every
    /// column when they share one, else `cells` the sources of its columns in the order of `sync_tables`,
    /// comma-separated, empty for none; `tomb_src` its tombstone's).
    /// `sync_conflicts.src` names the bundle a log entry came with. The clock itself (`sync_rows`) holds no source:
    /// a row enters `sync_row_sources` when another device's bundle sets a version of it and leaves it when every
    /// bundle it names is settled (``SyncEngine/settleSources(_:)``) — so it is empty but for the rows of bundles
    /// that a removal could still undo, and the clock of the common case costs nothing more. Emptied when the device
    /// enters a new key generation (nothing of an older generation can be removed any more).
    ///
    /// A new device that joins through a snapshot marks what the snapshot brought with one entry, not one a row:
    /// `sync_snapshot_source` names the source, and while it is there every row of `sync_rows` without an entry in
    /// `sync_row_sources` came with it (each column; no tombstone). A row set later by a bundle that keeps no source
    /// then gets an entry that says so (`cells` empty, every source NULL), so that it is not taken for one of the
    /// snapshot's; those entries go with the mark.
    ///
    /// `sync_source_vectors` keeps, for the source a snapshot's rows are marked with (a new device's join, or a
    /// restored device's start across a gap), how far the snapshot held each device's chain: a removal that accepted
    /// less of a device than the snapshot held (its writer had read that device's later bundles before the removal)
    /// undoes what the snapshot brought too, and the source is kept until every device's part of it is settled, not
    /// only its writer's.
    static let createSQL = """
        CREATE TABLE IF NOT EXISTS sync_sources (
            id INTEGER PRIMARY KEY AUTOINCREMENT, device TEXT NOT NULL, sequence INTEGER NOT NULL, UNIQUE (device, sequence));
        CREATE TABLE IF NOT EXISTS sync_preimages (
            src INTEGER NOT NULL, tbl TEXT NOT NULL, key NOT NULL, col TEXT NOT NULL, hlc INTEGER NOT NULL,
            device TEXT NOT NULL, base_hlc INTEGER NOT NULL, base_device TEXT NOT NULL, pending INTEGER NOT NULL, value,
            prev_src INTEGER, PRIMARY KEY (src, tbl, key, col)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS sync_row_sources (
            tbl TEXT NOT NULL, key NOT NULL, src INTEGER, cells TEXT, tomb_src INTEGER, PRIMARY KEY (tbl, key)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS sync_snapshot_source (singleton INTEGER PRIMARY KEY CHECK (singleton = 0), src INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS sync_source_vectors (
            src INTEGER NOT NULL, device TEXT NOT NULL, sequence INTEGER NOT NULL, PRIMARY KEY (src, device)) WITHOUT ROWID;
        """

    /// Adds what this version keeps to a database set up by an earlier one (in the caller's transaction). (A clock
    /// of the version before `sync_rows` had the sources in its own `src` column: SyncClock.upgrade moves them.)
    static func upgrade(_ db: Database) throws {
        try db.executeScript(createSQL)
        let columns = try db.fetch("PRAGMA table_info(sync_conflicts)") { try $0.string(at: 1) }
        if !columns.contains("src") { try db.execute("ALTER TABLE sync_conflicts ADD COLUMN src INTEGER") }
    }

    /// The sources of one row's versions: one per column (nil: none, or settled), and its tombstone's.
    struct RowSources: Equatable {
        var cells: [Int64?]
        var tombstone: Int64?
        var isEmpty: Bool { tombstone == nil && cells.allSatisfy { $0 == nil } }
        var all: Set<Int64> { Set(cells.compactMap { $0 } + [tombstone].compactMap { $0 }) }

        init(cells: [Int64?], tombstone: Int64?) {
            self.cells = cells
            self.tombstone = tombstone
        }

        /// From the stored columns (`src`, `cells`, `tomb_src`); `count` columns (nil: as many as the text names).
        init(_ row: Row, from index: Int, count: Int?) throws {
            let tombstone = try row.isNull(at: index + 2) ? nil : try row.int64(at: index + 2)
            if try row.isNull(at: index + 1) {
                let source = try row.isNull(at: index) ? nil : try row.int64(at: index)
                self.init(cells: Array(repeating: source, count: count ?? 1), tombstone: tombstone)
            } else {
                self.init(text: try row.string(at: index + 1), tombstone: tombstone, count: count)
            }
        }

        /// From the text of `cells`; `count` columns (nil: as many as the text names).
        init(text: String, tombstone: Int64?, count: Int?) {
            var cells = text.split(separator: ",", omittingEmptySubsequences: false).map { Int64($0) }
            if let count {
                if cells.count < count { cells += Array(repeating: nil, count: count - cells.count) }
                cells = Array(cells.prefix(count))
            }
            self.cells = cells
            self.tombstone = tombstone
        }

        var text: String { cells.map { $0.map(String.init) ?? "" }.joined(separator: ",") }
    }

    /// The sources of the versions of `key` in `table`, nil when none is kept (the common case: one lookup in an
    /// empty or small table).
    /// Call only for a row that has a clock entry: without an entry of its own, such a row came with the snapshot a
    /// new device joined through while that snapshot's mark is kept.
    static func sources(_ db: Database, _ table: SyncedTable, key: DatabaseValue) throws -> RowSources? {
        let entry = try db.cachedStatement("SELECT src, cells, tomb_src FROM sync_row_sources WHERE tbl = ? AND key = ?").fetch(
            StatementArguments([DatabaseValue.text(table.name), key])
        ) { row in try RowSources(row, from: 0, count: table.columns.count) }.first
        if let entry { return entry }
        return try snapshotSource(db).map { RowSources(cells: Array(repeating: $0, count: table.columns.count), tombstone: nil) }
    }

    /// The source of the snapshot a new device joined through, while a removal could still undo it (nil: none).
    static func snapshotSource(_ db: Database) throws -> Int64? {
        try db.cachedStatement("SELECT src FROM sync_snapshot_source WHERE singleton = 0").fetch(StatementArguments([DatabaseValue]())) {
            try $0.int64(at: 0)
        }.first
    }

    /// Marks every row a new device's join through a snapshot brings with `source` at once (in the caller's
    /// transaction, before the first row is applied).
    /// A mark of another snapshot still there (a join killed between parts, resumed from another device's snapshot)
    /// is first written out as an entry for each row it covers, so that those rows keep their own source.
    static func markSnapshot(_ db: Database, source: Int64) throws {
        if let earlier = try snapshotSource(db), earlier != source {
            try db.execute(
                """
                INSERT INTO sync_row_sources (tbl, key, src, cells, tomb_src)
                SELECT r.tbl, r.key, ?, NULL, NULL FROM sync_rows r
                WHERE NOT EXISTS (SELECT 1 FROM sync_row_sources s WHERE s.tbl = r.tbl AND s.key = r.key)
                """, [earlier])
        }
        try db.execute("INSERT OR REPLACE INTO sync_snapshot_source (singleton, src) VALUES (0, ?)", [source])
    }

    /// Records how far the snapshot whose rows are marked with `source` held each chain (`sync_source_vectors`; of two
    /// snapshots marked with one source, the farther position of each chain).
    static func recordVector(_ db: Database, source: Int64, vector: SyncVector) throws {
        for (device, entry) in vector.entries.sorted(by: { $0.key < $1.key }) where entry.sequence > 0 {
            try db.cachedStatement(
                """
                INSERT OR REPLACE INTO sync_source_vectors (src, device, sequence)
                VALUES (?, ?, max(?, coalesce((SELECT sequence FROM sync_source_vectors WHERE src = ? AND device = ?), 0)))
                """
            ).execute(StatementArguments([.integer(source), .text(device), .integer(entry.sequence), .integer(source), .text(device)]))
        }
    }

    /// The live sources whose snapshot held `device`'s chain past `sequence`.
    static func sources(holding device: String, past sequence: Int64, _ db: Database) throws -> Set<Int64> {
        Set(try db.fetch(
            """
            SELECT v.src FROM sync_source_vectors v WHERE v.device = ? AND v.sequence > ? AND v.src IN (SELECT id FROM sync_sources)
            """, [device, sequence]) { try $0.int64(at: 0) })
    }

    /// Every recorded snapshot vector, by source.
    static func vectors(_ db: Database) throws -> [Int64: [String: Int64]] {
        var vectors: [Int64: [String: Int64]] = [:]
        try db.forEachRow("SELECT src, device, sequence FROM sync_source_vectors") { row in
            vectors[try row.int64(at: 0), default: [:]][try row.string(at: 1)] = try row.int64(at: 2)
        }
        return vectors
    }

    /// Drops the mark of the snapshot this device joined through (settled, undone, or a new generation).
    static func dropSnapshotMark(_ db: Database) throws {
        try db.execute("DELETE FROM sync_snapshot_source")
    }

    /// Records the sources of the versions of `key` in `table` (none: the entry goes).
    static func setSources(_ db: Database, _ table: SyncedTable, key: DatabaseValue, cells: [Int64?], tombstone: Int64?) throws {
        let sources = RowSources(cells: cells, tombstone: tombstone)
        let snapshot = try snapshotSource(db)
        if let snapshot, sources == RowSources(cells: Array(repeating: snapshot, count: cells.count), tombstone: nil) {
            // What the snapshot's mark says of a row without an entry.
            try db.cachedStatement("DELETE FROM sync_row_sources WHERE tbl = ? AND key = ?").execute(
                StatementArguments([DatabaseValue.text(table.name), key]))
        } else if sources.isEmpty, snapshot != nil {
            // No source, said explicitly: the row is not one of the snapshot's.
            try db.cachedStatement("INSERT OR REPLACE INTO sync_row_sources (tbl, key, src, cells, tomb_src) VALUES (?, ?, NULL, '', NULL)")
                .execute(StatementArguments([DatabaseValue.text(table.name), key]))
        } else if sources.isEmpty {
            try db.cachedStatement("DELETE FROM sync_row_sources WHERE tbl = ? AND key = ?").execute(
                StatementArguments([DatabaseValue.text(table.name), key]))
        } else {
            // One source for every column (a row a bundle inserted: most of them) in `src`, else the list.
            let uniform = cells.allSatisfy { $0 == cells.first ?? nil }
            try db.cachedStatement("INSERT OR REPLACE INTO sync_row_sources (tbl, key, src, cells, tomb_src) VALUES (?, ?, ?, ?, ?)").execute(
                StatementArguments([
                    DatabaseValue.text(table.name), key, uniform ? (cells.first ?? nil).map { DatabaseValue.integer($0) } ?? .null : .null,
                    uniform ? .null : .text(sources.text), tombstone.map { DatabaseValue.integer($0) } ?? .null,
                ]))
        }
    }

    /// Drops from `sync_row_sources` every source no longer in `sync_sources` (settled or undone), and the entries left
    /// with none. Everything at once when no source is left (the usual case after a sync).
    static func dropSettledSources(_ db: Database) throws {
        let live = Set(try db.fetch("SELECT id FROM sync_sources") { try $0.int64(at: 0) })
        if let snapshot = try snapshotSource(db), !live.contains(snapshot) { try dropSnapshotMark(db) }
        try db.execute("DELETE FROM sync_source_vectors WHERE src NOT IN (SELECT id FROM sync_sources)")
        let snapshotMarked = try snapshotSource(db) != nil
        if live.isEmpty {
            try db.execute("DELETE FROM sync_row_sources")
            return
        }
        // Uniform entries in SQL (every row a bundle inserted), listed ones one by one (rows edited by several bundles).
        // An entry left with no source goes, or while the snapshot's mark is kept says so (`cells` empty).
        let dead = "NOT IN (SELECT id FROM sync_sources)"
        try db.execute("UPDATE sync_row_sources SET src = NULL WHERE src IS NOT NULL AND src \(dead)")
        try db.execute("UPDATE sync_row_sources SET tomb_src = NULL WHERE tomb_src IS NOT NULL AND tomb_src \(dead)")
        if snapshotMarked {
            try db.execute("UPDATE sync_row_sources SET cells = '' WHERE src IS NULL AND cells IS NULL AND tomb_src IS NULL")
        } else {
            try db.execute(
                "DELETE FROM sync_row_sources WHERE src IS NULL AND (cells IS NULL OR cells NOT GLOB '*[0-9]*') AND tomb_src IS NULL")
        }
        let rows = try db.fetch("SELECT tbl, key, cells, tomb_src FROM sync_row_sources WHERE cells IS NOT NULL AND cells <> ''") { row in
            (try row.value(at: 0), try row.value(at: 1), try row.string(at: 2), try row.isNull(at: 3) ? nil : try row.int64(at: 3))
        }
        for (table, key, text, tombstone) in rows {
            let old = RowSources(text: text, tombstone: tombstone, count: nil)
            let new = RowSources(cells: old.cells.map { $0.flatMap { live.contains($0) ? $0 : nil } }, tombstone: old.tombstone.flatMap { live.contains($0) ? $0 : nil })
            if new == old { continue }
            if new.isEmpty && !snapshotMarked {
                try db.execute("DELETE FROM sync_row_sources WHERE tbl = ? AND key = ?", [table, key])
            } else {
                try db.execute(
                    "UPDATE sync_row_sources SET src = NULL, cells = ?, tomb_src = ? WHERE tbl = ? AND key = ?",
                    [new.isEmpty ? "" : new.text, new.tombstone.map { DatabaseValue.integer($0) } ?? .null, table, key])
            }
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
        try db.execute("DELETE FROM sync_row_sources")
        try dropSnapshotMark(db)
        try db.execute("DELETE FROM sync_source_vectors")
        try db.execute("UPDATE sync_conflicts SET src = NULL WHERE src IS NOT NULL")
    }

    /// Puts one row back as it was before the bundles `tainted` (a removed device's bundles after its last accepted
    /// one): each cell and the tombstone whose version one of them set goes back to the version it replaced (and
    /// further back while that one came with another of them), or goes when it had none; a row left without a value
    /// for every column did not exist before them and is gone (its tombstone, if one was there before, stays).
    /// This device's own versions are never undone. Returns whether the row changed. Capture is off (the caller's).
    ///
    /// With `keepingRowsThisDeviceEdited` (undoing a snapshot this device joined through), a row that would be left
    /// incomplete while one of its columns holds this device's own edit is kept whole instead: the edit is the user's,
    /// and the snapshot's other columns come again with the other devices' bundles.
    static func restore(
        _ db: Database, _ table: SyncedTable, key: SyncValue, tainted: Set<Int64>, thisDevice: String, numbers: SyncDeviceNumbers,
        keepingRowsThisDeviceEdited: Bool = false
    ) throws -> Bool {
        let local = try SyncMerge.localRow(db, table, key: key, numbers: numbers)
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
        if !complete && keepingRowsThisDeviceEdited && local.cells.values.contains(where: { $0.version.device == thisDevice }) {
            return false
        }
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
        // The clock entry as it was (SyncClock.swift): unsent where a restored cell is an unsent edit of this device;
        // the cells' values kept in `sync_values` while the row is deleted.
        let ordered = table.columns.map { cells[$0] }
        guard !cells.isEmpty || tombstone != nil else {
            try SyncClock.forget(db, table: table.name, key: key.databaseValue)
            return true
        }
        let pendingCells = ordered.compactMap { $0 }.filter(\.pending)
        let pending: Int64 = pendingCells.isEmpty ? 0 : max(pendingCells.map(\.version.hlc).max() ?? 0, 1)
        let entry = SyncClock.Entry(cells: ordered, tombstone: tombstone?.version, pending: pending)
        try SyncClock.write(db, table, key: key.databaseValue, entry, exists: local.entry != nil, numbers: numbers)
        try db.execute("DELETE FROM sync_values WHERE tbl = ? AND key = ?", [table.name, key.databaseValue])
        if !alive {
            for (index, cell) in ordered.enumerated() {
                guard let cell else { continue }
                try db.execute(
                    "INSERT OR ROLLBACK INTO sync_values (tbl, key, col, value) VALUES (?, ?, ?, ?)",
                    [table.name, key.databaseValue, index, cell.value.databaseValue])
            }
        }
        try setSources(db, table, key: key.databaseValue, cells: ordered.map { $0?.source }, tombstone: tombstone?.source)
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
                  AND (EXISTS (SELECT 1 FROM sync_sources o WHERE o.device = r.device AND o.sequence > r.last_sequence)
                    OR EXISTS (SELECT 1 FROM sync_source_vectors v WHERE v.device = r.device AND v.sequence > r.last_sequence
                      AND v.src IN (SELECT id FROM sync_sources)))
                """
            ) { (try $0.string(at: 0), try $0.int64(at: 1), [UInt8](try $0.data(at: 2))) }
        }
        var changed = 0
        for (removed, last, lastHash) in removals {
            changed += try database.write { db -> Int in
                var tainted = Set(
                    try db.fetch("SELECT id FROM sync_sources WHERE device = ? AND sequence > ?", [removed, last]) { try $0.int64(at: 0) })
                // A snapshot this device started from (a join, or a start across a gap) held the removed device's chain
                // past the removal (its writer had read those bundles): what it brought is undone as if its writer had
                // been removed.
                let snapshot = try SyncUndo.snapshotSource(db)
                let heldMore = try SyncUndo.sources(holding: removed, past: last, db)
                tainted.formUnion(heldMore)
                let byName = Dictionary(uniqueKeysWithValues: try SyncSchema.tables(db).map { ($0.name, $0) })
                try db.execute("UPDATE sync_state SET applying = 1 WHERE singleton = 0")
                // The rows a version of which one of them set (sync_row_sources holds only unsettled bundles' rows).
                var keys: [(String, SyncValue)] = []
                try db.forEachRow("SELECT tbl, key, src, cells, tomb_src FROM sync_row_sources") { row in
                    let sources = try SyncUndo.RowSources(row, from: 2, count: nil)
                    if !sources.all.isDisjoint(with: tainted) { keys.append((try row.string(at: 0), SyncValue(try row.value(at: 1)))) }
                }
                // The rows the snapshot this device joined through brought, when it is undone: the snapshot's writer is
                // removed at a bundle before the snapshot, or the snapshot held the removed device's chain past the
                // bundle the removal accepted. Everything the snapshot brought goes (a row this device
                // edited stays whole), and so do the positions it gave: the next sync takes every other device's changes again,
                // from their bundles or from another snapshot, so that nothing another device wrote is lost with it.
                let snapshotUndone = snapshot.map { tainted.contains($0) } ?? false
                let startUndone = snapshotUndone || !heldMore.isEmpty
                if snapshotUndone {
                    try db.forEachRow(
                        """
                        SELECT r.tbl, r.key FROM sync_rows r
                        WHERE NOT EXISTS (SELECT 1 FROM sync_row_sources s WHERE s.tbl = r.tbl AND s.key = r.key)
                        """
                    ) { row in keys.append((try row.string(at: 0), SyncValue(try row.value(at: 1)))) }
                }
                let numbers = try SyncDeviceNumbers(db)
                var rows = 0
                for (name, key) in keys {
                    guard let table = byName[name] else { continue }
                    if try SyncUndo.restore(
                        db, table, key: key, tainted: tainted, thisDevice: device, numbers: numbers,
                        keepingRowsThisDeviceEdited: startUndone)
                    { rows += 1 }
                }
                let sources = "(SELECT id FROM sync_sources WHERE device = ? AND sequence > ?)"
                try db.execute("DELETE FROM sync_conflicts WHERE src IN \(sources)", [removed, last])
                try db.execute("DELETE FROM sync_preimages WHERE src IN \(sources)", [removed, last])
                try db.execute("DELETE FROM sync_sources WHERE device = ? AND sequence > ?", [removed, last])
                for held in heldMore {
                    // Its writer stays: only the snapshot's source goes (its log entries, versions kept, the mark).
                    try db.execute("DELETE FROM sync_conflicts WHERE src = ?", [held])
                    try db.execute("DELETE FROM sync_preimages WHERE src = ?", [held])
                    try db.execute("DELETE FROM sync_sources WHERE id = ?", [held])
                }
                try SyncUndo.dropSettledSources(db)
                if startUndone { try db.execute("DELETE FROM sync_devices") }
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

/// How far each device's chain is settled (``SyncEngine/settleSources(_:)``): the last of its bundles that every
/// other device on the roster (removed ones included) has applied, by its signed seen vector; every bundle when there is
/// no such device. Read once a sync round (the folder does not change during it).
struct SyncSettledHorizon {
    let removers: [String]
    let vectors: [String: SyncVector]

    /// Bundles of `chain` up to this sequence are settled (0: none).
    func through(_ chain: String) -> Int64 {
        let counts = removers.filter { $0 != chain }.map { vectors[$0]?.entries[chain]?.sequence ?? 0 }
        return counts.min() ?? Int64.max  // no other device: only this one could remove it
    }
}

extension SyncEngine {
    /// The settled horizon of every chain by `roster` (``SyncSettledHorizon``).
    func settledHorizon(_ roster: SyncRoster) -> SyncSettledHorizon {
        // A removed member counts too (its seen vectors are not believed: nothing is settled in this generation any
        // more, which soon ends): two devices may remove each other before the rightful removal is known here, and
        // whichever it is must still be able to undo the other's later bundles (SyncRoster.swift).
        let removers = roster.members.keys.filter { $0 != device }.sorted()
        var vectors: [String: SyncVector] = [:]
        for writer in removers {
            vectors[writer] = SyncSeenFiles.newest(root: layoutRoot, device: writer, key: key, accept: { bytes in
                roster.accepts(bytes, device: writer, sequence: 0, generation: self.generation)
            })?.vector
        }
        return SyncSettledHorizon(removers: removers, vectors: vectors)
    }

    /// The source to mark what `writer`'s bundle `sequence` sets with (SyncUndo.swift), or nil when nothing of it need
    /// be kept: this device's own bundle, or one already settled by `horizon` — every device that could remove its
    /// writer has applied it, so no removal can undo it (the bookkeeping would be dropped right after applying). A
    /// new device's first sync and every sync of a group of two keep nothing.
    static func undoSource(_ db: Database, writer: String, sequence: Int64, thisDevice: String, horizon: SyncSettledHorizon) throws -> Int64? {
        if writer == thisDevice || sequence <= horizon.through(writer) { return nil }
        return try SyncUndo.source(db, device: writer, sequence: sequence)
    }

    /// Drops what is kept for undoing bundles that can no longer be undone: a bundle of X is settled once every other
    /// device on the roster that could remove X (not removed, not X, not this device) has applied it by its signed seen
    /// vector — any of them that removes X names at least that bundle — and at once when no such device exists (only
    /// this one could remove X, and it has applied it). Called after applying, so that a sync that applied a settled
    /// bundle leaves nothing behind for the next one to remove.
    func settleSources(_ roster: SyncRoster) throws {
        let horizon = settledHorizon(roster)
        let chains = try database.read { db in
            try db.fetch("SELECT device, max(sequence) FROM sync_sources GROUP BY device") { (try $0.string(at: 0), try $0.int64(at: 1)) }
        }
        var settled: [(String, Int64)] = []
        for (chain, _) in chains {
            let least = horizon.through(chain)
            if least > 0 { settled.append((chain, least)) }
        }
        guard !settled.isEmpty else { return }
        try database.write { db in
            // The source of a snapshot this device started from is kept while a removal of any device whose chain it
            // held could still undo it (SyncUndo.createSQL), not only one of its writer. (Numbers of this database's
            // own table, written into the statement.)
            let kept = try SyncUndo.vectors(db).filter { _, vector in
                vector.contains { chain, sequence in chain != device && horizon.through(chain) < sequence }
            }.keys
            let keep = "(" + (kept.map(String.init) + ["-1"]).joined(separator: ",") + ")"
            var dropped = 0
            for (chain, through) in settled {
                try db.execute(
                    "DELETE FROM sync_preimages WHERE src IN (SELECT id FROM sync_sources WHERE device = ? AND sequence <= ? AND id NOT IN \(keep))",
                    [chain, through])
                try db.execute("DELETE FROM sync_sources WHERE device = ? AND sequence <= ? AND id NOT IN \(keep)", [chain, through])
                dropped += db.changes
            }
            if dropped > 0 { try SyncUndo.dropSettledSources(db) }
        }
    }
}
