// Snapshots: a sealed full copy of the synced rows with their clocks and the vector of bundles it holds, so that
// a new device starts from it and applies only the bundles after it.
internal import Foundation
internal import EncryptedDatabase
internal import SecureStoreCore

/// What ``SyncEngine/writeSnapshot()`` wrote.
public struct SyncSnapshotInfo: Sendable, Equatable {
    /// The snapshot's folder, relative to the remote's root (`snapshots/<device id>/<number>`).
    public let path: String
    /// Rows in it (deleted rows whose tombstones are still kept included).
    public let rows: Int
    /// Files it is made of, the manifest included.
    public let files: Int
    /// Bundles a device starting from it does not apply (the sum of its vector's sequences).
    public let bundlesCovered: Int64
}

/// The files of a snapshot: `snapshots/<device id>/<10 digits>/manifest` and `part-<10 digits>` (at most
/// ``SyncEngine/rowsPerSnapshotPart`` rows each, so neither writing nor reading holds more in memory). All are
/// sealed under the sync key; the manifest's authenticated data names the device and its header the snapshot's
/// number, each part's names the device and snapshot number and its header the part's index, and the manifest
/// holds every part's SHA-256: a part swapped, truncated, moved from another snapshot or device, or a snapshot
/// renamed to a newer number (replayed), does not open.
enum SyncSnapshotFiles {
    static let directory = "snapshots"
    static let manifest = "manifest"
    static let magic = Array("SSS1".utf8)

    static func folder(device: String, number: UInt64) -> String {
        "\(directory)/\(device)/\(SealedBundle.paddedSequence(number))"
    }

    static func part(_ index: Int) -> String { "part-" + SealedBundle.paddedSequence(UInt64(index)) }

    static func manifestAAD(_ device: String) -> String { "snapshot/" + device }
    static func partAAD(_ device: String, _ number: UInt64) -> String { "snapshot/\(device)/\(number)" }

    /// `device`'s snapshot numbers, newest first (folders only: a symbolic link named like a snapshot is never
    /// followed, read or cleaned through).
    static func numbers(root: String, device: String) -> [UInt64] {
        let folder = root + "/" + directory + "/" + device
        guard SyncLayout.isDirectory(folder) else { return [] }
        let names = (try? listDirectory(folder)) ?? []
        return names.compactMap { name -> UInt64? in
            guard name.utf8.count == 10, name.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                SyncLayout.isDirectory(folder + "/" + name)
            else { return nil }
            return UInt64(name)
        }.sorted(by: >)
    }

    static func seal(_ plaintext: [UInt8], sequence: UInt64, aad: String, key: SyncKey) throws -> [UInt8] {
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: sequence, previousHash: [UInt8](repeating: 0, count: 32))
        guard let sealed = SealedBundle.seal(plaintext, header: header, device: aad, key: key) else {
            throw SyncError(SyncError.Code.remote, "libcrypto could not seal a snapshot; nothing was written")
        }
        return sealed
    }

    static func open(_ bytes: [UInt8], sequence: UInt64, aad: String, key: SyncKey) -> [UInt8]? {
        guard let header = SealedBundle.parseHeader(bytes), header.sequence == sequence, header.format <= SealedBundle.format
        else { return nil }
        return SealedBundle.open(bytes, device: aad, key: key)
    }

    struct Manifest {
        var vector: SyncVector
        var parts: [(hash: [UInt8], rows: Int)]

        func encoded() -> [UInt8] {
            var out = magic
            vector.encoded(into: &out)
            SyncVarint.put(UInt64(parts.count), &out)
            for part in parts {
                out += part.hash
                SyncVarint.put(UInt64(part.rows), &out)
            }
            return out
        }

        static func decode(_ bytes: [UInt8]) -> Manifest? {
            guard bytes.starts(with: magic) else { return nil }
            var reader = SyncVarint.Reader(bytes: bytes, offset: magic.count)
            guard let vector = SyncVector.decode(&reader), let count = reader.varint(), count <= 1 << 24 else { return nil }
            var parts: [(hash: [UInt8], rows: Int)] = []
            for _ in 0..<count {
                guard let hash = reader.bytes(32), let rows = reader.varint(), rows <= 1 << 24 else { return nil }
                parts.append((hash, Int(rows)))
            }
            return reader.atEnd ? Manifest(vector: vector, parts: parts) : nil
        }
    }
}

extension SyncEngine {
    /// Rows in one file of a snapshot.
    static let rowsPerSnapshotPart = 2_000

    /// Syncs, then writes a snapshot of every synced row (with its cells' clocks and tombstone) and the vector of
    /// bundles it holds into this device's folder of the remote, and removes this device's older snapshots. A
    /// device that joins later starts from the newest snapshot that verifies and applies only the bundles after
    /// it (Docs/sync.md, "Snapshots").
    ///
    /// ```swift
    /// let info = try engine.writeSnapshot()
    /// print("\(info.rows) rows in \(info.path)")
    /// ```
    ///
    /// - Throws: what ``sync()`` throws (nothing is written then), or ``SyncError/Code-swift.struct/remote``.
    @discardableResult
    public func writeSnapshot() throws -> SyncSnapshotInfo {
        try withSyncLock {
            _ = try syncLocked()
            return try writeSnapshotLocked()
        }
    }

    private func writeSnapshotLocked() throws -> SyncSnapshotInfo {
        let root = layoutRoot
        let number = (SyncSnapshotFiles.numbers(root: root, device: device).first ?? 0) + 1
        let folder = SyncSnapshotFiles.folder(device: device, number: number)
        let host = Self.hostName
        let partAAD = SyncSnapshotFiles.partAAD(device, number)
        // One read transaction: every part is of the same state, the vector's.
        let manifest = try database.read { db -> SyncSnapshotFiles.Manifest in
            let vector = try SyncVector.current(db, device: device, name: host)
            let tables = try SyncSchema.tables(db)
            let columns = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0.columns) })
            var parts: [(hash: [UInt8], rows: Int)] = []
            var rows: [SyncRowChange] = []
            func flush() throws {
                guard !rows.isEmpty else { return }
                let plaintext = try SyncPayload(deviceName: host, tables: columns, rows: rows).encoded()
                let sealed = try SyncSnapshotFiles.seal(plaintext, sequence: UInt64(parts.count + 1), aad: partAAD, key: key)
                try SyncLayout.writeAtomically(sealed, root: root, relative: folder + "/" + SyncSnapshotFiles.part(parts.count + 1))
                parts.append((SealedBundle.sha256(sealed), rows.count))
                rows.removeAll(keepingCapacity: true)
            }
            for table in tables {
                var last: DatabaseValue?
                while true {
                    let keys = try db.fetch(
                        last == nil
                            ? "SELECT key FROM sync_rows WHERE tbl = ? ORDER BY key LIMIT \(Self.rowsPerSnapshotPart)"
                            : "SELECT key FROM sync_rows WHERE tbl = ? AND key > ? ORDER BY key LIMIT \(Self.rowsPerSnapshotPart)",
                        last == nil ? [table.name] : [table.name, last!]
                    ) { try $0.value(at: 0) }
                    guard let final = keys.last else { break }
                    let numbers = try SyncDeviceNumbers(db)
                    for key in keys {
                        rows.append(try SyncMerge.outgoing(db, table, key: SyncValue(key), numbers: numbers))
                        if rows.count == Self.rowsPerSnapshotPart { try flush() }
                    }
                    last = final
                }
            }
            try flush()
            return SyncSnapshotFiles.Manifest(vector: vector, parts: parts)
        }
        // The manifest last: a snapshot without one is not complete and is not read.
        // Signed by this device (the manifest holds every part's hash): a snapshot is believed only when its folder's
        // device on the roster signed it.
        let sealed = try SyncSnapshotFiles.seal(
            manifest.encoded(), sequence: number, aad: SyncSnapshotFiles.manifestAAD(device), key: key)
        guard let signed = SyncSignedFile.wrap(sealed, device: device, key: signingKey, generation: generation) else {
            throw SyncError(SyncError.Code.remote, "libcrypto could not sign the snapshot's manifest; nothing was published")
        }
        try SyncLayout.writeAtomically(signed, root: root, relative: folder + "/" + SyncSnapshotFiles.manifest)
        // This device's older snapshots go (its own files only; in git the history keeps them, sealed).
        for older in SyncSnapshotFiles.numbers(root: root, device: device) where older < number {
            removeDirectoryAndFiles(root + "/" + SyncSnapshotFiles.folder(device: device, number: older))
        }
        let published = generation == 1 ? folder : "generation-\(generation)/" + folder
        try transport.publish([published])
        return SyncSnapshotInfo(
            path: published, rows: manifest.parts.reduce(0) { $0 + $1.rows }, files: manifest.parts.count + 1,
            bundlesCovered: manifest.vector.total)
    }

    /// A snapshot on the remote whose manifest opened under the sync key (its parts are not checked yet).
    struct SnapshotCandidate {
        var writer: String
        var number: UInt64
        var manifest: SyncSnapshotFiles.Manifest
        /// Its folder relative to ``layoutRoot``.
        var folder: String
        /// Its folder as the person sees it (relative to the remote's root).
        var shown: String
    }

    /// The newest complete snapshot of every writer whose manifest opens; each that does not is described in
    /// `refused`. One whose manifest opens but is not signed by its folder's device with its key on `roster` (written
    /// by a holder of the sync key, or by an earlier version, or by a removed device) is skipped and its folder listed
    /// in `skipped`; nothing of it is read further.
    func snapshotCandidates(refused: inout [String], skipped: inout [String], roster: SyncRoster) -> [SnapshotCandidate] {
        let root = layoutRoot
        let prefix = generation == 1 ? "" : "generation-\(generation)/"
        var candidates: [SnapshotCandidate] = []
        let writers = ((try? listDirectory(root + "/" + SyncSnapshotFiles.directory)) ?? []).filter(Self.isDeviceID).sorted()
        for writer in writers {
            // The newest of each device; an older one is only there while the newest is being replaced.
            guard let number = SyncSnapshotFiles.numbers(root: root, device: writer).first else { continue }
            let folder = SyncSnapshotFiles.folder(device: writer, number: number)
            let path = root + "/" + folder + "/" + SyncSnapshotFiles.manifest
            guard FileManager.default.fileExists(atPath: path) else { continue }  // not complete (yet)
            guard let bytes = try? SyncLayout.read(path),
                let plaintext = SyncSnapshotFiles.open(bytes, sequence: number, aad: SyncSnapshotFiles.manifestAAD(writer), key: key),
                let manifest = SyncSnapshotFiles.Manifest.decode(plaintext)
            else {
                refused.append(
                    "refused the snapshot '\(prefix)\(folder)': its manifest does not authenticate under the sync key as this "
                        + "snapshot of this device (forged, tampered with, truncated, renamed or replayed); nothing of it was applied")
                continue
            }
            guard roster.accepts(bytes, device: writer, sequence: 0, generation: generation) else {
                skipped.append(prefix + folder)
                continue
            }
            // A snapshot that holds a removed device's bundles past the last one accepted (written before its writer
            // read the removal) would bring back what the removal undoes: refused. (A removed device's own snapshot is
            // not accepted above.)
            if let (removed, removal) = roster.removed.sorted(by: { $0.key < $1.key }).first(where: { device, removal in
                removal.generation == generation && manifest.vector[device] > removal.lastSequence
            }) {
                refused.append(
                    "refused the snapshot '\(prefix)\(folder)': it holds bundle \(manifest.vector[removed]) of device "
                        + "\(removed.prefix(8)), which was removed after its bundle \(removal.lastSequence); nothing of it was applied")
                continue
            }
            candidates.append(SnapshotCandidate(writer: writer, number: number, manifest: manifest, folder: folder, shown: prefix + folder))
        }
        return candidates
    }

    /// Part `index` (from 0) of `candidate`, checked against its manifest's hash and authenticated; nil otherwise.
    func snapshotPart(_ candidate: SnapshotCandidate, _ index: Int) -> SyncPayload? {
        guard let bytes = try? SyncLayout.read(layoutRoot + "/" + candidate.folder + "/" + SyncSnapshotFiles.part(index + 1)),
            SealedBundle.sha256(bytes) == candidate.manifest.parts[index].hash,
            let plaintext = SyncSnapshotFiles.open(
                bytes, sequence: UInt64(index + 1), aad: SyncSnapshotFiles.partAAD(candidate.writer, candidate.number), key: key),
            let payload = SyncPayload.decode(plaintext), payload.rows.count == candidate.manifest.parts[index].rows
        else { return nil }
        return payload
    }

    /// A chain whose bundles up to the next one this device needs are all gone from the remote while later ones are
    /// there: they were removed after a snapshot held them (``clean(attachmentGrace:)``: a writer removes the oldest of its
    /// bundles, never the newest), or have not been delivered yet.
    struct ChainGap {
        var device: String
        /// The bundle this device needs next.
        var needed: Int64
        /// The oldest bundle of the chain on the remote.
        var resumesAt: UInt64
        /// That bundle's file.
        var path: String
    }

    /// The chains with a gap at `position` (what this device has applied of each device, itself included).
    func chainGaps(_ position: SyncVector, skipping planted: Set<String>) -> [ChainGap] {
        SyncLayout.deviceIDs(root: layoutRoot).compactMap { other in
            guard !planted.contains(other), let oldest = SyncLayout.bundles(root: layoutRoot, device: other).first,
                oldest.sequence > UInt64(position[other] + 1)
            else { return nil }
            return ChainGap(device: other, needed: position[other] + 1, resumesAt: oldest.sequence, path: oldest.path)
        }
    }

    /// A device starts from a snapshot when it is new (nothing applied yet, nothing sent), or when the next bundle it
    /// needs of some device is gone from the remote (a device restored from a backup older than the snapshot, and
    /// older than the bundles ``clean(attachmentGrace:)`` removed). The snapshot's rows are merged by clock (rows this device already
    /// has are merged, not overwritten; its unsent edits are kept and still sent) and its vector becomes this
    /// device's position, so ``applyIncoming`` applies only the bundles after it.
    ///
    /// In the gap case the snapshot must hold every gap and everything this device has applied (its vector covers
    /// this device's), its own chain included: then a row here that is not in the snapshot and has nothing unsent
    /// was deleted everywhere and its tombstone pruned, and it is deleted here too; this device's own position
    /// becomes the snapshot's (sequence and hash), so it goes on numbering after its bundles the snapshot holds and
    /// never forks its chain. A snapshot that does not verify is named in ``SyncReport/refusedSnapshots`` and nothing
    /// of it is applied; the next one, or the bundles, are used instead. A gap that no snapshot holds is reported by
    /// ``missingBundles()``.
    func startFromSnapshot(_ report: inout SyncReport, skipping planted: Set<String>, roster: SyncRoster) throws {
        let root = layoutRoot
        let position = try database.read { db in try SyncVector.current(db, device: device, name: "") }
        let gaps = chainGaps(position, skipping: planted)
        let fresh = try database.read { db in
            try db.scalar("SELECT sequence FROM sync_state", as: Int64.self) == 0
                && db.scalar("SELECT count(*) FROM sync_devices", as: Int.self) == 0
        } && SyncLayout.bundles(root: root, device: device).isEmpty
        guard fresh || !gaps.isEmpty else {
            // Left by a start from a snapshot that was killed (the next gap would clear it too).
            if try database.read({ try $0.tableExists("sync_gap_keys") }) {
                try database.write { db in try db.execute("DROP TABLE IF EXISTS sync_gap_keys") }
            }
            return
        }
        let tables = try database.read { try SyncSchema.tables($0) }
        let byName = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0) })
        func holdsGaps(_ candidate: SnapshotCandidate) -> Bool {
            gaps.allSatisfy { candidate.manifest.vector[$0.device] >= Int64($0.resumesAt) - 1 }
        }
        var candidates = snapshotCandidates(refused: &report.refusedSnapshots, skipped: &report.skippedFiles, roster: roster)
        if fresh {
            candidates = candidates.filter { $0.writer != device && $0.manifest.vector[device] == 0 }
            candidates.sort {
                (holdsGaps($0) ? 1 : 0, $0.manifest.vector.total, $0.writer) > (holdsGaps($1) ? 1 : 0, $1.manifest.vector.total, $1.writer)
            }
        } else {
            // This device's own snapshots too: a state it had before it was restored.
            candidates = candidates.filter { holdsGaps($0) && $0.manifest.vector.covers(position) }
            candidates.sort { ($0.manifest.vector.total, $0.writer) > ($1.manifest.vector.total, $1.writer) }
        }
        for candidate in candidates {
            let shown = candidate.shown
            // Every part is checked before anything is applied.
            var refusal: String?
            var snapshotTables: Set<String> = []
            for index in candidate.manifest.parts.indices {
                guard let payload = snapshotPart(candidate, index) else {
                    refusal = "its part \(index + 1) is missing, or does not match the manifest or authenticate (damaged, truncated, tampered with or replayed)"
                    break
                }
                guard payload.rows.allSatisfy({ row in byName[row.table].map { t in row.cells.allSatisfy { t.columns.contains($0.column) } } ?? false })
                else {
                    refusal = "it holds tables or columns this device does not sync (a newer version wrote it)"
                    break
                }
                snapshotTables.formUnion(payload.tables.keys)
            }
            if let refusal {
                report.refusedSnapshots.append("refused the snapshot '\(shown)': \(refusal); nothing of it was applied")
                continue
            }
            let now = microsecondsSince1970(Date())
            let horizon = settledHorizon(roster)
            // In the gap case the snapshot's keys are noted, to find the rows it no longer holds.
            if !fresh {
                try database.write { db in
                    try db.execute(
                        "CREATE TABLE IF NOT EXISTS sync_gap_keys (tbl TEXT NOT NULL, key NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID")
                    try db.execute("DELETE FROM sync_gap_keys")
                }
            }
            // Parts are applied as they are read (one part's rows in memory at a time), up to `rowsPerTransaction`
            // rows to a transaction, as bundles are: fewer commits, and the deferred full-text indexing runs once
            // per transaction.
            var index = candidate.manifest.parts.startIndex
            while index < candidate.manifest.parts.endIndex {
                let changed = try database.write { db -> Int in
                    try db.execute("UPDATE sync_state SET applying = 1 WHERE singleton = 0")
                    let clock = ContinuousClock()
                    let started = clock.now
                    var rows = 0
                    let (changed, conflicts) = try SyncMerge.apply(
                        db, tables: byName, deferringIndexing: true, now: now, merges: merges
                    ) { () throws -> (rows: [SyncRowChange], source: Int64?, sender: String?)? in
                        guard index < candidate.manifest.parts.endIndex, rows == 0
                            || (rows < Self.rowsPerTransaction && clock.now - started < Self.transactionDuration)
                        else { return nil }
                        guard let payload = snapshotPart(candidate, index) else {
                            throw SyncError(SyncError.Code.remote, "the snapshot '\(shown)' changed while it was read; run the sync again")
                        }
                        if !fresh {
                            for row in payload.rows {
                                try db.execute(
                                    "INSERT OR IGNORE INTO sync_gap_keys (tbl, key) VALUES (?, ?)", [row.table, row.key.databaseValue])
                            }
                        }
                        index += 1
                        rows += payload.rows.count
                        // Marked as coming after the writer's own position in it (SyncUndo.swift): a removal of the writer
                        // that does not name a later bundle undoes what it brought (its snapshot could hold its later edits).
                        // A new device marks them all at once (SyncUndo.createSQL).
                        // The source is kept too, with the snapshot's vector, while the snapshot holds some other device's
                        // bundle that a removal could still undo (its writer read it before the removal reached it): at a
                        // new device's join and at a restored device's start across a gap alike.
                        let own = candidate.manifest.vector[candidate.writer]
                        let heldBack = candidate.manifest.vector.entries.contains { chain, entry in
                            chain != device && chain != candidate.writer && horizon.through(chain) < entry.sequence
                        }
                        let source =
                            heldBack
                            ? try SyncUndo.source(db, device: candidate.writer, sequence: own + 1)
                            : try Self.undoSource(db, writer: candidate.writer, sequence: own + 1, thisDevice: device, horizon: horizon)
                        if let source { try SyncUndo.recordVector(db, source: source, vector: candidate.manifest.vector) }
                        if fresh, let source, try SyncUndo.snapshotSource(db) != source { try SyncUndo.markSnapshot(db, source: source) }
                        return (payload.rows, source, nil)
                    }
                    report.newConflicts += conflicts
                    try db.execute("UPDATE sync_state SET applying = 0 WHERE singleton = 0")
                    return changed
                }
                report.changedRows += changed
            }
            // Its position becomes this device's where it is further: the bundles it holds are not applied again.
            let vector = candidate.manifest.vector
            let removed = try database.write { db -> Int in
                for (other, entry) in vector.entries where other != device && entry.sequence > position[other] {
                    try db.execute(
                        "INSERT OR REPLACE INTO sync_devices (device, name, sequence, last_hash, applied_at) VALUES (?, ?, ?, ?, ?)",
                        [other, entry.name, entry.sequence, Data(entry.hash), now])
                }
                guard !fresh else { return 0 }
                if let own = vector.entries[device], own.sequence > position[device] {
                    try db.execute(
                        "UPDATE sync_state SET sequence = ?, last_hash = ? WHERE singleton = 0", [own.sequence, Data(own.hash)])
                }
                let removed = try Self.removeRowsNotIn(
                    db, tables: byName, snapshotTables: snapshotTables, now: now, merges: merges)
                try db.execute("DROP TABLE sync_gap_keys")
                return removed
            }
            report.changedRows += removed
            report.snapshot = shown
            report.snapshotBundles = Int(vector.entries.reduce(Int64(0)) { $0 + max(0, $1.value.sequence - position[$1.key]) })
            return
        }
    }

    /// The gap case of ``startFromSnapshot(_:)``: deletes the rows of `snapshotTables` that the snapshot (its keys in
    /// `sync_gap_keys`) does not hold and of which nothing is unsent here: the snapshot's writer had applied every
    /// change this device had, so such a row was deleted everywhere and its tombstone pruned. Each goes through the
    /// ordinary merge as a tombstone newer than its cells (so an application's triggers and the search index see
    /// an ordinary delete), then its bookkeeping is dropped as pruning drops it. Returns how many rows were deleted.
    static func removeRowsNotIn(
        _ db: Database, tables: [String: SyncedTable], snapshotTables: Set<String>, now: Int64, merges: SyncMergeFunctions
    ) throws -> Int {
        var removed = 0
        let hasMarks = try db.tableExists("sync_prune_marks")
        try db.execute("UPDATE sync_state SET applying = 1 WHERE singleton = 0")
        for name in snapshotTables.sorted() {
            guard let table = tables[name] else { continue }
            let keys = try db.fetch(
                """
                SELECT c.key FROM sync_rows c
                WHERE c.tbl = ? AND c.pending = 0
                  AND NOT EXISTS (SELECT 1 FROM sync_gap_keys g WHERE g.tbl = c.tbl AND g.key = c.key)
                """, [name]
            ) { SyncValue(try $0.value(at: 0)) }
            for key in keys {
                let local = try SyncMerge.localRow(db, table, key: key)
                let newest = (local.cells.values.map(\.version) + [local.tombstone].compactMap { $0 }).max() ?? .zero
                let tombstone = SyncVersion(hlc: newest.hlc + 1, device: newest.device)
                _ = try SyncMerge.apply(
                    db, [SyncRowChange(table: name, key: key, tombstone: tombstone, cells: [])], tables: tables, now: now, merges: merges)
                try SyncClock.forget(db, table: name, key: key.databaseValue)
                if hasMarks { try db.execute("DELETE FROM sync_prune_marks WHERE tbl = ? AND key = ?", [name, key.databaseValue]) }
                if local.alive { removed += 1 }
            }
        }
        try db.execute("UPDATE sync_state SET applying = 0 WHERE singleton = 0")
        return removed
    }

    /// The gaps no snapshot filled (``startFromSnapshot(_:)`` ran first), each named in
    /// ``SyncReport/missingBundles``; that device's later bundles wait and nothing of them is applied. Returned as
    /// errors (the sync then exits 65 after doing the rest of its work) where the bundle was certainly removed rather
    /// than late: this device had applied some of that chain already (the bundle before the missing one, which it
    /// applied, is gone too: a cleanup removed a prefix), or a snapshot was refused. A chain this device has none of
    /// whose first files are missing is what a replication engine delivering in its own order looks like (Syncthing
    /// pulls in random order), and is only waited for, as before.
    func missingBundles(_ report: inout SyncReport, skipping planted: Set<String>) throws -> [SyncError] {
        let position = try database.read { db in try SyncVector.current(db, device: device, name: "") }
        let prefix = generation == 1 ? "" : "generation-\(generation)/"
        var errors: [SyncError] = []
        for gap in chainGaps(position, skipping: planted) {
            let whose = gap.device == device ? "this device's own" : "device \(gap.device.prefix(8))'s"
            let bundle = "\(prefix)\(SyncLayout.devices)/\(gap.device)/\(SealedBundle.paddedSequence(UInt64(gap.needed)))-…"
            report.missingBundles.append(bundle)
            guard gap.needed > 1 || !report.refusedSnapshots.isEmpty else { continue }
            errors.append(
                SyncError(
                    SyncError.Code.missingBundle,
                    "\(whose) bundle \(gap.needed) ('\(bundle)') "
                        + "is not on the remote — removed after a snapshot held it ('sync clean'), or not delivered yet — and no snapshot "
                        + "on the remote holds it and everything this device has applied; nothing of that device's bundles from "
                        + "\(gap.resumesAt) on was applied and this device's changes are kept. If the next sync does not bring it, run "
                        + "'securestore sync snapshot' on a device that is up to date, then sync here again",
                    path: gap.path))
        }
        return errors
    }
}
