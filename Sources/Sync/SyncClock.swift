// The clock of synced rows: one `sync_rows` entry per row (issue 35), device ids numbered in
// `sync_device_numbers`, and the upgrade from the one-entry-per-cell `sync_clock` of earlier versions.
//
// An entry holds the row's tombstone (`tomb_hlc`, `tomb_device`; NULL when none), `pending` (0 when everything of it
// was sent, else the clock of its latest unsent local change), and its cells' versions in one of two forms:
// - not packed (`cells` NULL): every column has the version (`hlc`, `device`) and the base (`base_hlc`,
//   `base_device`), unsent when `pending` is not 0 — a row inserted and not edited since, which is most rows;
//   `hlc` 0 means no cells at all (a tombstone of a row never seen);
// - packed (`cells` text): one record of `recordWidth` characters per column, in the order of `sync_tables`:
//   version hlc (16 hex digits), device number (4), base hlc (16), base device number (4), unsent ('0'/'1');
//   a version hlc of 0 is a cell this device does not know.
// Text and hex because the capture triggers write it with SQLite 3.15's own functions (printf, substr, ||).
// The values of a deleted row's cells are in `sync_values` (by column index) while it stays deleted.
internal import EncryptedDatabase
internal import Foundation

enum SyncClock {
    /// Characters of one packed cell record.
    static let recordWidth = 41

    /// What `sync_rows` says of one row.
    struct Entry {
        /// One per synced column (nil: not known here).
        var cells: [LocalCell?]
        var tombstone: SyncVersion?
        var pending: Int64
    }

    static let selectSQL =
        "SELECT hlc, device, base_hlc, base_device, cells, tomb_hlc, tomb_device, pending FROM sync_rows WHERE tbl = ? AND key = ?"

    /// Reads the entry of `key` in `table`, or nil when this device has none.
    static func read(_ db: Database, _ table: SyncedTable, key: DatabaseValue, numbers: SyncDeviceNumbers) throws -> Entry? {
        try db.cachedStatement(selectSQL).fetch(StatementArguments([DatabaseValue.text(table.name), key])) { row in
            let count = table.columns.count
            var cells = [LocalCell?](repeating: nil, count: count)
            if try row.isNull(at: 4) {
                let hlc = try row.int64(at: 0)
                if hlc != 0 {
                    let cell = LocalCell(
                        version: SyncVersion(hlc: hlc, device: try numbers.device(try row.int64(at: 1))),
                        base: SyncVersion(hlc: try row.int64(at: 2), device: try numbers.device(try row.int64(at: 3))),
                        pending: try row.int64(at: 7) != 0, value: .null)
                    cells = [LocalCell?](repeating: cell, count: count)
                }
            } else {
                let text = Array(try row.string(at: 4).utf8)
                guard text.count == count * recordWidth else {
                    throw SyncError(SyncError.Code.invalidArgument, "the sync clock of a row of '\(table.name)' is damaged")
                }
                for index in 0..<count {
                    let start = index * recordWidth
                    guard let hlc = hex(text[start..<(start + 16)]), let device = hex(text[(start + 16)..<(start + 20)]),
                        let baseHlc = hex(text[(start + 20)..<(start + 36)]), let baseDevice = hex(text[(start + 36)..<(start + 40)])
                    else { throw SyncError(SyncError.Code.invalidArgument, "the sync clock of a row of '\(table.name)' is damaged") }
                    if hlc == 0 { continue }
                    cells[index] = LocalCell(
                        version: SyncVersion(hlc: hlc, device: try numbers.device(device)),
                        base: SyncVersion(hlc: baseHlc, device: try numbers.device(baseDevice)),
                        pending: text[start + 40] == UInt8(ascii: "1"), value: .null)
                }
            }
            var tombstone: SyncVersion?
            if try !row.isNull(at: 5) {
                tombstone = SyncVersion(hlc: try row.int64(at: 5), device: try numbers.device(try row.int64(at: 6)))
            }
            return Entry(cells: cells, tombstone: tombstone, pending: try row.int64(at: 7))
        }.first
    }

    private static func hex(_ digits: ArraySlice<UInt8>) -> Int64? {
        var value: UInt64 = 0
        for digit in digits {
            let nibble: UInt8
            switch digit {
            case 0x30...0x39: nibble = digit - 0x30
            case 0x61...0x66: nibble = digit - 0x61 + 10
            default: return nil
            }
            value = value << 4 | UInt64(nibble)
        }
        return Int64(bitPattern: value)
    }

    private static func hexDigits(_ value: Int64, _ width: Int) -> String {
        let digits = String(UInt64(bitPattern: value), radix: 16)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// The stored form of `entry`: not packed when every cell is known and shares one version, base and unsent
    /// mark (and that mark is the row's), else packed.
    static func columns(_ entry: Entry, numbers: SyncDeviceNumbers) throws -> [DatabaseValue] {
        let tombstone: [DatabaseValue] = try entry.tombstone.map { [.integer($0.hlc), .integer(try numbers.number($0.device))] }
            ?? [.null, .null]
        if entry.cells.allSatisfy({ $0 == nil }) {
            return [.integer(0), .integer(0), .integer(0), .integer(0), .null] + tombstone + [.integer(entry.pending)]
        }
        if let first = entry.cells[0],
            entry.cells.allSatisfy({ $0?.version == first.version && $0?.base == first.base && $0?.pending == first.pending }),
            first.pending == (entry.pending != 0)
        {
            return [
                .integer(first.version.hlc), .integer(try numbers.number(first.version.device)),
                .integer(first.base.hlc), .integer(try numbers.number(first.base.device)), .null,
            ] + tombstone + [.integer(entry.pending)]
        }
        var text = ""
        text.reserveCapacity(entry.cells.count * recordWidth)
        for cell in entry.cells {
            guard let cell else {
                text += String(repeating: "0", count: recordWidth)
                continue
            }
            text += hexDigits(cell.version.hlc, 16) + hexDigits(try numbers.number(cell.version.device), 4)
            text += hexDigits(cell.base.hlc, 16) + hexDigits(try numbers.number(cell.base.device), 4)
            text += cell.pending ? "1" : "0"
        }
        return [.integer(0), .integer(0), .integer(0), .integer(0), .text(text)] + tombstone + [.integer(entry.pending)]
    }

    /// Writes `entry` for `key` (inserting it when `exists` is false).
    static func write(
        _ db: Database, _ table: SyncedTable, key: DatabaseValue, _ entry: Entry, exists: Bool, numbers: SyncDeviceNumbers
    ) throws {
        let values = try columns(entry, numbers: numbers)
        if exists {
            try db.cachedStatement(
                """
                UPDATE OR ROLLBACK sync_rows SET hlc = ?, device = ?, base_hlc = ?, base_device = ?, cells = ?, tomb_hlc = ?,
                    tomb_device = ?, pending = ? WHERE tbl = ? AND key = ?
                """
            ).execute(StatementArguments(values + [.text(table.name), key]))
        } else {
            try db.cachedStatement(
                """
                INSERT OR ROLLBACK INTO sync_rows (hlc, device, base_hlc, base_device, cells, tomb_hlc, tomb_device, pending, tbl, key)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
            ).execute(StatementArguments(values + [.text(table.name), key]))
        }
    }

    /// Deletes everything kept of `key` (pruning).
    static func forget(_ db: Database, table: String, key: DatabaseValue) throws {
        try db.execute("DELETE FROM sync_rows WHERE tbl = ? AND key = ?", [table, key])
        try db.execute("DELETE FROM sync_values WHERE tbl = ? AND key = ?", [table, key])
        try db.execute("DELETE FROM sync_row_sources WHERE tbl = ? AND key = ?", [table, key])
    }

    /// Relabels this device's unsent edits (cells and tombstones) from `old` to `new`, and makes `new` this device's
    /// number (a database copied to another machine becomes a new device: SyncDeviceIdentity.swift).
    static func relabelUnsent(_ db: Database, from old: String, to new: String) throws {
        let numbers = try SyncDeviceNumbers(db)
        try db.execute("UPDATE sync_state SET device_number = ? WHERE singleton = 0", [try numbers.number(new)])
        for table in try SyncSchema.tables(db) {
            let keys = try db.fetch("SELECT key FROM sync_rows WHERE tbl = ? AND pending <> 0", [table.name]) { try $0.value(at: 0) }
            for key in keys {
                guard var entry = try read(db, table, key: key, numbers: numbers) else { continue }
                for index in entry.cells.indices where entry.cells[index]?.pending == true && entry.cells[index]?.version.device == old {
                    entry.cells[index]?.version.device = new
                }
                if let tombstone = entry.tombstone, tombstone.device == old { entry.tombstone = SyncVersion(hlc: tombstone.hlc, device: new) }
                try write(db, table, key: key, entry, exists: true, numbers: numbers)
            }
        }
    }

    // MARK: Upgrade

    /// Whether the database still has the clock of earlier versions (one `sync_clock` row per cell).
    static func needsUpgrade(_ db: Database) throws -> Bool {
        try db.tableExists("sync_state") && db.tableExists("sync_clock")
    }

    /// Moves a clock of earlier versions (`sync_clock`, one row per cell, device ids as text) to `sync_rows`, and
    /// replaces every synced table's capture triggers. One transaction: killed at any point, the database is as it
    /// was before (and upgrades at the next open) or as it is after. Nothing sent or unsent changes meaning: every
    /// cell keeps its version, base and unsent mark, every tombstone its version, every deleted row its values.
    /// A clock of the version that kept the bundle each version came in (`sync_clock.src`, SyncUndo.swift) keeps
    /// those of bundles not settled yet, in `sync_row_sources`: a removal read later still undoes them.
    static func upgrade(_ db: Database) throws {
        guard try needsUpgrade(db) else { return }
        let tables = try SyncSchema.tables(db)
        try db.executeScript(SyncUndo.createSQL)
        let hasSources = try db.fetch("PRAGMA table_info(sync_clock)") { try $0.string(at: 1) }.contains("src")
        let live = Set(try db.fetch("SELECT id FROM sync_sources") { try $0.int64(at: 0) })
        try db.executeScript(
            """
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
            ALTER TABLE sync_state ADD COLUMN device_number INTEGER NOT NULL DEFAULT 0;
            """)
        let numbers = try SyncDeviceNumbers(db)
        let me = try db.scalar("SELECT device FROM sync_state WHERE singleton = 0", as: String.self) ?? ""
        try db.execute("UPDATE sync_state SET device_number = ? WHERE singleton = 0", [try numbers.number(me)])
        for table in tables {
            let index = Dictionary(uniqueKeysWithValues: table.columns.enumerated().map { ($1, $0) })
            var key: DatabaseValue?
            var entry = Entry(cells: [], tombstone: nil, pending: 0)
            var sources = SyncUndo.RowSources(cells: [], tombstone: nil)
            func flush() throws {
                guard let key else { return }
                try write(db, table, key: key, entry, exists: false, numbers: numbers)
                if !sources.isEmpty { try SyncUndo.setSources(db, table, key: key, cells: sources.cells, tombstone: sources.tombstone) }
            }
            // Read whole first (a statement stepping over sync_clock while sync_rows is written is fine in SQLite,
            // but one pass per table keeps it simple to reason about): grouped by key in key order.
            try db.forEachRow(
                "SELECT key, col, hlc, device, base_hlc, base_device, pending, value, \(hasSources ? "src" : "NULL") FROM sync_clock WHERE tbl = ? ORDER BY key, col",
                [table.name]
            ) { row in
                let rowKey = try row.value(at: 0)
                if rowKey != key {
                    try flush()
                    key = rowKey
                    entry = Entry(cells: [LocalCell?](repeating: nil, count: table.columns.count), tombstone: nil, pending: 0)
                    sources = SyncUndo.RowSources(cells: [Int64?](repeating: nil, count: table.columns.count), tombstone: nil)
                }
                // (The source of a settled bundle is not kept: nothing can undo it.)
                let source = try row.isNull(at: 8) ? nil : try row.int64(at: 8)
                let kept = source.flatMap { live.contains($0) ? $0 : nil }
                let column = try row.string(at: 1)
                let version = SyncVersion(hlc: try row.int64(at: 2), device: try row.string(at: 3))
                let pending = try row.int(at: 6) == 1
                if pending { entry.pending = max(entry.pending, version.hlc, 1) }
                if column.isEmpty {
                    entry.tombstone = version
                    sources.tombstone = kept
                } else if let position = index[column] {
                    sources.cells[position] = kept
                    entry.cells[position] = LocalCell(
                        version: version, base: SyncVersion(hlc: try row.int64(at: 4), device: try row.string(at: 5)),
                        pending: pending, value: .null)
                }
            }
            try flush()
            for (position, column) in table.columns.enumerated() {
                try db.execute(
                    """
                    INSERT INTO sync_values (tbl, key, col, value)
                    SELECT c.tbl, c.key, ?, c.value FROM sync_clock c
                    WHERE c.tbl = ? AND c.col = ? AND EXISTS (SELECT 1 FROM sync_clock t WHERE t.tbl = c.tbl AND t.key = c.key AND t.col = '')
                    """, [position, table.name, column])
            }
            for kind in ["insert", "update", "delete", "key"] {
                try db.execute("DROP TRIGGER IF EXISTS \(SyncSchema.quoted("sync_\(table.name)_\(kind)"))")
            }
            let filter = table.name == "securestore_attachments" ? SyncEngine.descriptionFilter : nil
            try db.executeScript(SyncSchema.triggersSQL(table, rowFilter: filter))
        }
        // The old clock's index and pruning triggers go with it; pruning's are made again on the new one.
        try db.execute("DROP TABLE sync_clock")
        if try db.tableExists("sync_prune_marks") { try db.executeScript(SyncPruning.createSQL) }
    }
}

/// Device ids by number, for one transaction (a number added in a transaction that rolls back is forgotten with it).
final class SyncDeviceNumbers {
    private var ids: [Int64: String] = [:]
    private var numbers: [String: Int64] = [:]
    private let db: Database
    /// This device's number.
    let me: Int64

    init(_ db: Database) throws {
        self.db = db
        var ids: [Int64: String] = [:], numbers: [String: Int64] = [:]
        try db.forEachRow("SELECT number, device FROM sync_device_numbers") { row in
            let number = try row.int64(at: 0), device = try row.string(at: 1)
            ids[number] = device
            numbers[device] = number
        }
        self.ids = ids
        self.numbers = numbers
        me = try db.scalar("SELECT device_number FROM sync_state WHERE singleton = 0", as: Int64.self) ?? 0
    }

    /// The id of device `number`.
    func device(_ number: Int64) throws -> String {
        guard let id = ids[number] else {
            throw SyncError(SyncError.Code.invalidArgument, "the sync clock names a device number (\(number)) this database does not know")
        }
        return id
    }

    /// The number of `device`, given one now when it has none.
    func number(_ device: String) throws -> Int64 {
        if let number = numbers[device] { return number }
        let number = (ids.keys.max() ?? 0) + 1
        // A packed record holds a device number in 4 hex digits (and the triggers print it so).
        guard number <= 0xFFFF else {
            throw SyncError(SyncError.Code.invalidArgument, "this database has met 65 535 sync devices, the most its clock can number")
        }
        try db.execute("INSERT OR ROLLBACK INTO sync_device_numbers (number, device) VALUES (?, ?)", [number, device])
        ids[number] = device
        numbers[device] = number
        return number
    }
}
