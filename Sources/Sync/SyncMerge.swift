// Merge: per-column last writer wins by hybrid logical clock (device id breaks ties), tombstones for deletes,
// the losing value of a concurrent edit kept in the conflict log.
internal import EncryptedDatabase
internal import Foundation

extension SyncValue {
    init(_ value: DatabaseValue) {
        switch value {
        case .null: self = .null
        case .integer(let v): self = .integer(v)
        case .real(let v): self = .real(v)
        case .text(let v): self = .text(v)
        case .blob(let v): self = .blob(v)
        }
    }

    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let v): .integer(v)
        case .real(let v): .real(v)
        case .text(let v): .text(v)
        case .blob(let v): .blob(v)
        }
    }
}

/// A cell as this device holds it.
struct LocalCell {
    var version: SyncVersion
    var base: SyncVersion
    var pending: Bool
    var value: SyncValue
    /// The bundle of another device this version came in (`sync_sources.id`), nil for this device's own edits, a
    /// snapshot's rows and versions from before this was recorded (SyncUndo.swift).
    var source: Int64? = nil
}

enum SyncMerge {
    /// What this device knows of one row: its cells (values from the table when the row is alive, from
    /// `sync_values` when it is deleted), its tombstone, the bundles of other devices its versions came in (kept only
    /// while such a bundle could still be undone: SyncUndo.swift) and its clock entry (nil: none).
    static func localRow(
        _ db: Database, _ table: SyncedTable, key: SyncValue, numbers: SyncDeviceNumbers? = nil
    ) throws -> (alive: Bool, cells: [String: LocalCell], tombstone: SyncVersion?, tombstoneSource: Int64?, entry: SyncClock.Entry?) {
        let numbers = try numbers ?? SyncDeviceNumbers(db)
        // A row this device never heard of has no entry: no need to look for it in the table.
        guard let entry = try SyncClock.read(db, table, key: key.databaseValue, numbers: numbers) else { return (false, [:], nil, nil, nil) }
        var cells: [String: LocalCell] = [:]
        for (index, column) in table.columns.enumerated() { if let cell = entry.cells[index] { cells[column] = cell } }
        let sources = try SyncUndo.sources(db, table, key: key.databaseValue)
        if let sources {
            for (index, column) in table.columns.enumerated() { cells[column]?.source = sources.cells[index] }
        }
        // (A row with no cells — a tombstone of a row never seen, or a row of a table of a key alone — is looked for
        // in the table too: a tombstone must delete what is there.)
        let values = try db.fetchOne(table.selectSQL, [key.databaseValue]
        ) { row in try (0..<table.columns.count).map { SyncValue(try row.value(at: $0)) } }
        if let values {
            for (index, column) in table.columns.enumerated() { cells[column]?.value = values[index] }
        } else if !cells.isEmpty {
            try db.cachedStatement("SELECT col, value FROM sync_values WHERE tbl = ? AND key = ?").fetch(
                StatementArguments([DatabaseValue.text(table.name), key.databaseValue])
            ) { row in (try row.int(at: 0), SyncValue(try row.value(at: 1))) }.forEach { index, value in
                if index < table.columns.count { cells[table.columns[index]]?.value = value }
            }
        }
        return (values != nil, cells, entry.tombstone, entry.tombstone == nil ? nil : sources?.tombstone, entry)
    }

    /// Whether the row's tombstone is this device's own delete, not sent yet (its entry unsent and the tombstone
    /// this device's: a tombstone another device's bundle set is never unsent here).
    static func tombstoneUnsent(_ entry: SyncClock.Entry?, numbers: SyncDeviceNumbers) throws -> Bool {
        guard let entry, let tombstone = entry.tombstone, entry.pending != 0 else { return false }
        return tombstone.device == (try numbers.device(numbers.me))
    }

    /// Everything this device knows of the row, as a change to send.
    static func outgoing(_ db: Database, _ table: SyncedTable, key: SyncValue, numbers: SyncDeviceNumbers? = nil) throws -> SyncRowChange {
        let numbers = try numbers ?? SyncDeviceNumbers(db)
        let local = try localRow(db, table, key: key, numbers: numbers)
        // This device's own delete goes out with what it had of the row when it deleted it (SyncDeleteLog.swift).
        if !local.alive, let tombstone = local.tombstone,
            let kept = try SyncDeleteLog.view(db, table: table.name, key: key, tombstone: tombstone),
            try tombstoneUnsent(local.entry, numbers: numbers)
        {
            return SyncRowChange(table: table.name, key: key, tombstone: tombstone, cells: kept)
        }
        let cells = table.columns.compactMap { column in
            local.cells[column].map { SyncCell(column: column, value: $0.value, version: $0.version, base: $0.base) }
        }
        return SyncRowChange(table: table.name, key: key, tombstone: local.tombstone, cells: cells)
    }

    /// Applies one row change from another device (inside the caller's transaction, with capture off).
    /// Returns whether the row changed and how many conflicts were logged.
    ///
    /// With an application's `merge` for the table, two concurrent edits of a value are given to it (earlier and
    /// later by version, the same order on every device); a merged value other than the later one becomes a new
    /// pending edit of this device (a new clock tick, based on the later edit), and nothing is logged.
    ///
    /// `source` is the bundle the change came in (`sync_sources.id`, SyncUndo.swift): every version it sets is marked
    /// with it, and every version it replaces is kept in `sync_preimages`, so that a removed device's bundles can be
    /// undone; nil for a snapshot's rows.
    static func apply(
        _ db: Database, _ table: SyncedTable, _ change: SyncRowChange, now: Int64, merge: SyncMergeFunction? = nil,
        source: Int64? = nil, sender: String? = nil, numbers: SyncDeviceNumbers? = nil, snapshotMark: Int64?? = nil
    ) throws -> (changed: Bool, conflicts: Int) {
        let numbers = try numbers ?? SyncDeviceNumbers(db)
        let local = try localRow(db, table, key: change.key, numbers: numbers)
        // The mark of a snapshot this device joined through (SyncUndo.createSQL), looked at for a new row only: an
        // entry of its own says a new row did not come with it.
        let mark: Int64? = local.entry == nil ? try snapshotMark ?? SyncUndo.snapshotSource(db) : nil
        if local.entry == nil, try insertNew(db, table, change, source: source, snapshotMark: mark, numbers: numbers) { return (true, 0) }
        // This device's unsent delete of the row: what it had seen is kept before anything merges into it.
        if !local.alive, local.tombstone != nil, try tombstoneUnsent(local.entry, numbers: numbers) {
            try SyncDeleteLog.keepOwnView(db, table, key: change.key, local: (local.cells, local.tombstone))
        }
        var cells = local.cells
        var changedColumns: [String] = []
        var conflicts = 0
        func log(_ column: String, lost: SyncValue, lostVersion: SyncVersion, won: SyncVersion) throws {
            // A value is logged once, however often the bundles that make it lose are applied (idempotence).
            let logged = try db.scalar(
                "SELECT 1 FROM sync_conflicts WHERE tbl = ? AND key = ? AND col = ? AND lost_hlc = ? AND lost_device = ? AND lost_to_delete = 0",
                [table.name, change.key.databaseValue, column, lostVersion.hlc, lostVersion.device], as: Int.self)
            if logged != nil { return }
            try db.execute(
                """
                INSERT OR ROLLBACK INTO sync_conflicts (tbl, key, col, lost_value, lost_hlc, lost_device, won_hlc, won_device, recorded_at, src)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [table.name, change.key.databaseValue, column, lost.databaseValue, lostVersion.hlc, lostVersion.device,
                 won.hlc, won.device, now, source.map { DatabaseValue.integer($0) } ?? .null])
            conflicts += 1
        }
        /// The application's merge of two concurrent edits: true when it handled them (the merged value, if not the
        /// later one, is in `cells` as this device's new edit).
        func merged(_ column: String, earlier: LocalCell, later: LocalCell) throws -> Bool {
            guard let merge,
                let value = merge(
                    SyncConcurrentEdit(
                        table: table.name, column: column, key: change.key.databaseValue,
                        earlier: earlier.value.databaseValue, later: later.value.databaseValue))
            else { return false }
            let mergedValue = SyncValue(value)
            if mergedValue != later.value {
                try db.execute(SyncSchema.tickSQL)
                let version = try db.fetchOne("SELECT hlc, device FROM sync_state WHERE singleton = 0") { row in
                    SyncVersion(hlc: try row.int64(at: 0), device: try row.string(at: 1))
                }!
                cells[column] = LocalCell(version: version, base: later.version, pending: true, value: mergedValue)
                if !changedColumns.contains(column) { changedColumns.append(column) }
            }
            return true
        }
        for cell in change.cells {
            guard let mine = cells[cell.column] else {
                cells[cell.column] = LocalCell(version: cell.version, base: cell.base, pending: false, value: cell.value, source: source)
                changedColumns.append(cell.column)
                continue
            }
            let theirs = LocalCell(version: cell.version, base: cell.base, pending: false, value: cell.value, source: source)
            if mine.version < cell.version {
                // Theirs wins. Had its writer not seen ours, ours was a concurrent edit: keep it in the log.
                cells[cell.column] = theirs
                changedColumns.append(cell.column)
                if cell.base != mine.version && mine.value != cell.value,
                    try !merged(cell.column, earlier: mine, later: theirs)
                {
                    try log(cell.column, lost: mine.value, lostVersion: mine.version, won: cell.version)
                    // This device's own edit, never sent, beaten by another device's: its next bundle says so, or no
                    // other device would ever log it. (Beaten by its own later edit — a restored device replaying its own
                    // bundle — is no conflict anyone else should see.)
                    let me = try numbers.device(numbers.me)
                    if mine.pending, mine.version.device == me, cell.version.device != me {
                        try SyncDeleteLog.keepLostUnsent(
                            db, SyncLostEdit(table: table.name, key: change.key, column: cell.column, value: mine.value, version: mine.version, won: cell.version))
                    }
                }
            } else if cell.version < mine.version {
                if mine.base != cell.version && mine.value != cell.value && !(cell.version < mine.base),
                    try !merged(cell.column, earlier: theirs, later: mine)
                {
                    try log(cell.column, lost: cell.value, lostVersion: cell.version, won: mine.version)
                }
            }
        }
        var tombstone = local.tombstone
        if let theirs = change.tombstone, tombstone.map({ $0 < theirs }) ?? true { tombstone = theirs }
        let newest = cells.values.map(\.version).max()
        let alive = newest.map { version in tombstone.map { $0 < version } ?? true } ?? false
        let quotedTable = SyncSchema.quoted(table.name)
        let keyColumn = SyncSchema.quoted(table.keyColumn)
        var rowChanged = false
        if alive {
            guard table.columns.allSatisfy({ cells[$0] != nil }) else {
                throw SyncError(SyncError.Code.refusedBundle, "a change of table '\(table.name)' lacks columns")
            }
            if local.alive {
                if !changedColumns.isEmpty {
                    let assignments = changedColumns.map { "\(SyncSchema.quoted($0)) = ?" }.joined(separator: ", ")
                    try db.execute(
                        "UPDATE OR ROLLBACK \(quotedTable) SET \(assignments) WHERE \(keyColumn) = ?",
                        StatementArguments(changedColumns.map { cells[$0]!.value.databaseValue } + [change.key.databaseValue]))
                    rowChanged = true
                }
            } else {
                try db.execute(
                    table.insertSQL,
                    StatementArguments([change.key.databaseValue] + table.columns.map { cells[$0]!.value.databaseValue }))
                rowChanged = true
            }
        } else if local.alive {
            try db.execute("DELETE FROM \(quotedTable) WHERE \(keyColumn) = ?", [change.key.databaseValue])
            rowChanged = true
        }
        // The clock: one entry a row; the cells' values are kept (in `sync_values`) only while the row is deleted
        // (the table holds them otherwise). Every statement here is OR ROLLBACK and touches one row: SQLite then
        // keeps no statement journal, whose pages SQLCipher would encrypt (a constraint failure rolls the whole
        // bundle back, which is what we want).
        let tombstoneChanged = tombstone != local.tombstone
        if !changedColumns.isEmpty || local.alive != alive || tombstoneChanged {
            // Unsent here: a cell still pending, or this device's own tombstone that no later one replaced.
            let me = try numbers.device(numbers.me)
            let tombstonePending = !tombstoneChanged && (local.entry?.pending ?? 0) != 0 && tombstone?.device == me
            let pendingCells = table.columns.compactMap { cells[$0] }.filter(\.pending)
            var pending: Int64 = 0
            if tombstonePending || !pendingCells.isEmpty {
                pending = max(local.entry?.pending ?? 0, pendingCells.map(\.version.hlc).max() ?? 0, 1)
            }
            let entry = SyncClock.Entry(cells: table.columns.map { cells[$0] }, tombstone: tombstone, pending: pending)
            try SyncClock.write(db, table, key: change.key.databaseValue, entry, exists: local.entry != nil, numbers: numbers)
            if !alive {
                for (index, column) in table.columns.enumerated() where changedColumns.contains(column) || local.alive {
                    guard let cell = cells[column] else { continue }
                    try db.cachedStatement("INSERT OR REPLACE INTO sync_values (tbl, key, col, value) VALUES (?, ?, ?, ?)")
                        .execute(StatementArguments([DatabaseValue.text(table.name), change.key.databaseValue, .integer(Int64(index)), cell.value.databaseValue]))
                }
            } else if !local.alive && local.entry != nil {
                try db.execute("DELETE FROM sync_values WHERE tbl = ? AND key = ?", [table.name, change.key.databaseValue])
            }
            // The versions this bundle replaces, kept until it is settled, and the bundle each version came in
            // (SyncUndo.swift).
            if let source {
                for column in changedColumns {
                    guard let old = local.cells[column], let new = cells[column], old.version != new.version else { continue }
                    try SyncUndo.keep(db, source: source, table: table.name, key: change.key, column: column, cell: old)
                }
                if tombstoneChanged, let old = local.tombstone {
                    try SyncUndo.keep(
                        db, source: source, table: table.name, key: change.key, column: "",
                        cell: LocalCell(version: old, base: .zero, pending: false, value: .null, source: local.tombstoneSource))
                }
            }
            let tombstoneSource = tombstoneChanged ? source : local.tombstoneSource
            if source != nil || mark != nil || local.tombstoneSource != nil || local.cells.values.contains(where: { $0.source != nil }) {
                try SyncUndo.setSources(
                    db, table, key: change.key.databaseValue, cells: table.columns.map { cells[$0]?.source },
                    tombstone: tombstone == nil ? nil : tombstoneSource)
            }
        }
        // Edits lost to a delete (SyncDeleteLog.swift): the delete's own bundle says what its writer had seen.
        if let theirs = change.tombstone, theirs.device == sender {
            try SyncDeleteLog.recordView(db, table: table.name, key: change.key, tombstone: theirs, cells: change.cells)
        }
        if !alive || !local.alive {
            let before = try db.scalar("SELECT count(*) FROM sync_conflicts", as: Int.self) ?? 0
            try SyncDeleteLog.update(db, table, key: change.key, now: now)
            conflicts += max(0, (try db.scalar("SELECT count(*) FROM sync_conflicts", as: Int.self) ?? 0) - before)
        }
        return (rowChanged, conflicts)
    }

    /// A row this device has never heard of (no cells, no tombstone) that arrives alive with every column: nothing
    /// to merge, so it is inserted with its clock in two statements, without the general path's per-column
    /// bookkeeping (the whole of a new device's first sync). The result is the one the general path gives — the
    /// row, and one clock entry a column with the sender's version and base, not pending. Returns false, having
    /// written nothing, for any other change (a tombstone, a column missing or twice), which the general path takes.
    private static func insertNew(
        _ db: Database, _ table: SyncedTable, _ change: SyncRowChange, source: Int64?, snapshotMark: Int64?, numbers: SyncDeviceNumbers
    ) throws -> Bool {
        guard change.tombstone == nil, change.cells.count == table.columns.count else { return false }
        var ordered: [SyncCell] = []
        ordered.reserveCapacity(table.columns.count)
        for column in table.columns {
            guard let cell = change.cells.first(where: { $0.column == column }) else { return false }
            ordered.append(cell)
        }
        let key = change.key.databaseValue
        var values: [DatabaseValue] = [key]
        values.reserveCapacity(table.columns.count + 1)
        for cell in ordered { values.append(cell.value.databaseValue) }
        try db.cachedStatement(table.insertSQL).execute(StatementArguments(values))
        let entry = SyncClock.Entry(
            cells: ordered.map { LocalCell(version: $0.version, base: $0.base, pending: false, value: .null) }, tombstone: nil, pending: 0)
        try SyncClock.write(db, table, key: key, entry, exists: false, numbers: numbers)
        // Nothing to record when the snapshot's mark already says it (a new device joining through a snapshot), or
        // when there is no source and no mark.
        if source != snapshotMark {
            try SyncUndo.setSources(
                db, table, key: key, cells: Array(repeating: source, count: table.columns.count), tombstone: nil)
        }
        return true
    }

    /// Applies `rows` from other devices in the caller's transaction (capture off), as ``apply(_:_:_:now:merge:)``
    /// does each. Many rows (64 or more): the synced tables' full-text indexes index them in one statement at the end,
    /// since a per-row index trigger makes every insert copy pages to an encrypted statement journal (a 100 000-task
    /// join took 15.8 s that way, 2.2 s with it: Docs/performance.md, "Sync").
    static func apply(
        _ db: Database, _ rows: [SyncRowChange], tables: [String: SyncedTable], now: Int64, merges: SyncMergeFunctions
    ) throws -> (changed: Int, conflicts: Int) {
        var given = false
        return try apply(db, tables: tables, deferringIndexing: rows.count >= 64, now: now, merges: merges) {
            if given { return nil }
            given = true
            return (rows, nil, nil)
        }
    }

    /// Applies the rows of each group `next` hands out (a bundle's, a snapshot part's) until it returns nil, in the
    /// caller's transaction (capture off): before each group the clock moves past the group's newest version. Each
    /// group comes with the bundle it is from (`sync_sources.id`) and the device that wrote it (nil for a snapshot's part).
    /// With `deferringIndexing`, the full-text indexes of `tables` index every row in one statement at the end.
    static func apply(
        _ db: Database, tables: [String: SyncedTable], deferringIndexing: Bool, now: Int64, merges: SyncMergeFunctions,
        next: () throws -> (rows: [SyncRowChange], source: Int64?, sender: String?)?
    ) throws -> (changed: Int, conflicts: Int) {
        let indexes = deferringIndexing ? try tables.keys.sorted().flatMap { try db.fullTextIndexes(on: $0) } : []
        return try db.deferringFullTextIndexing(of: indexes) {
            var changed = 0
            var conflicts = 0
            let numbers = try SyncDeviceNumbers(db)
            while let (rows, source, sender) = try next() {
                let mark = try SyncUndo.snapshotSource(db)
                let newest = rows.lazy.flatMap { row in row.cells.lazy.map(\.version.hlc) + [row.tombstone?.hlc ?? 0] }.max() ?? 0
                try db.execute("UPDATE sync_state SET hlc = max(hlc, ?) WHERE singleton = 0", [newest])
                for row in rows {
                    let result = try apply(
                        db, tables[row.table]!, row, now: now, merge: merges.function(for: row.table), source: source, sender: sender,
                        numbers: numbers, snapshotMark: .some(mark))
                    if result.changed { changed += 1 }
                    conflicts += result.conflicts
                }
            }
            return (changed, conflicts)
        }
    }
}
