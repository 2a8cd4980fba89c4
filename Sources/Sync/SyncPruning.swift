// What every device has seen: each device publishes, sealed in its own folder, the sequences it has applied of
// every device (its "seen" vector); from all of them a device drops the tombstones every known device has seen.
internal import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore

/// A device's position in every device's chain: the sequence (and that bundle's hash) it has applied of each.
struct SyncVector: Equatable, Sendable {
    struct Entry: Equatable, Sendable {
        var name: String
        var sequence: Int64
        var hash: [UInt8]
    }
    var entries: [String: Entry] = [:]

    subscript(device: String) -> Int64 { entries[device]?.sequence ?? 0 }

    /// Whether every sequence of `other` is at most this one's.
    func covers(_ other: SyncVector) -> Bool {
        other.entries.allSatisfy { self[$0.key] >= $0.value.sequence }
    }

    /// The sum of the sequences: how many bundles a device that starts from here does not need.
    var total: Int64 { entries.values.reduce(0) { $0 + $1.sequence } }

    /// `device:sequence,…` sorted: how the pruning epochs store it (no names, no hashes).
    var text: String {
        entries.keys.sorted().map { "\($0):\(entries[$0]!.sequence)" }.joined(separator: ",")
    }

    init(entries: [String: Entry] = [:]) { self.entries = entries }

    init?(text: String) {
        for part in text.split(separator: ",") {
            let pair = part.split(separator: ":")
            guard pair.count == 2, let sequence = Int64(pair[1]) else { return nil }
            entries[String(pair[0])] = Entry(name: "", sequence: sequence, hash: [])
        }
    }

    /// This device's vector as its database holds it: its own sequence and every other device's applied one.
    static func current(_ db: Database, device: String, name: String) throws -> SyncVector {
        var vector = SyncVector()
        try db.forEachRow("SELECT sequence, last_hash FROM sync_state") { row in
            vector.entries[device] = Entry(name: name, sequence: try row.int64(at: 0), hash: [UInt8](try row.data(at: 1)))
        }
        try db.forEachRow("SELECT device, name, sequence, last_hash FROM sync_devices") { row in
            vector.entries[try row.string(at: 0)] = Entry(
                name: try row.string(at: 1), sequence: try row.int64(at: 2), hash: [UInt8](try row.data(at: 3)))
        }
        return vector
    }

    // MARK: Binary form: `SSV1`, a count, then per device its id, name, sequence (varints) and 32-byte hash.

    static let magic = Array("SSV1".utf8)

    func encoded(into out: inout [UInt8]) {
        SyncVarint.put(UInt64(entries.count), &out)
        for device in entries.keys.sorted() {
            let entry = entries[device]!
            SyncVarint.putString(device, &out)
            SyncVarint.putString(entry.name, &out)
            SyncVarint.put(UInt64(max(0, entry.sequence)), &out)
            out += entry.hash.count == 32 ? entry.hash : [UInt8](repeating: 0, count: 32)
        }
    }

    static func decode(_ reader: inout SyncVarint.Reader) -> SyncVector? {
        guard let count = reader.varint(), count <= 1 << 16 else { return nil }
        var vector = SyncVector()
        for _ in 0..<count {
            guard let device = reader.string(), SyncEngine.isDeviceID(device), let name = reader.string(),
                let sequence = reader.varint(), sequence < 1 << 62, let hash = reader.bytes(32)
            else { return nil }
            vector.entries[device] = Entry(name: name, sequence: Int64(sequence), hash: hash)
        }
        return vector
    }
}

/// The varints of the snapshot and vector files (LEB128, like the bundles').
enum SyncVarint {
    static func put(_ value: UInt64, _ out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }

    static func putString(_ text: String, _ out: inout [UInt8]) {
        put(UInt64(text.utf8.count), &out)
        out += Array(text.utf8)
    }

    struct Reader {
        let bytes: [UInt8]
        var offset: Int

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 7) {
                guard offset < bytes.count else { return nil }
                let next = bytes[offset]
                offset += 1
                value |= UInt64(next & 0x7F) << UInt64(shift)
                if next & 0x80 == 0 { return value }
            }
            return nil
        }

        mutating func bytes(_ count: Int) -> [UInt8]? {
            guard count >= 0, count <= bytes.count - offset else { return nil }
            defer { offset += count }
            return Array(bytes[offset..<(offset + count)])
        }

        mutating func string() -> String? {
            guard let length = varint(), length <= UInt64(bytes.count - offset), let data = bytes(Int(length)) else { return nil }
            let ok = data.withUnsafeBytes { isValidUTF8($0) }
            return ok ? String(decoding: data, as: UTF8.self) : nil
        }

        var atEnd: Bool { offset == bytes.count }
    }
}

/// The "seen" files: `seen/<device id>/<10 digits>`, each written once by its device (a folder of its own, beside
/// `devices/`, so that the bundle folders hold bundles only), sealed under the sync key
/// with the device's id and the file's number in the authenticated data (a file moved to another folder or
/// renamed to another number does not open). The newest that opens is the device's vector; a deleted newest file
/// only makes the others wait longer (an older vector is lower), never prune early.
enum SyncSeenFiles {
    static let folder = "seen"

    static func aadDevice(_ device: String) -> String { "seen/" + device }

    /// The numbers of `device`'s seen files, newest first.
    static func numbers(root: String, device: String) -> [UInt64] { numbered(root: root, folder: folder, device: device) }

    static func relative(device: String, number: UInt64) -> String {
        "\(folder)/\(device)/\(SealedBundle.paddedSequence(number))"
    }

    /// The numbers of the files named by 10 digits in `root/folder/device` (seen vectors, roster statements), newest
    /// first.
    static func numbered(root: String, folder: String, device: String) -> [UInt64] {
        let names = (try? listDirectory(root + "/" + folder + "/" + device)) ?? []
        return names.compactMap { name -> UInt64? in
            guard name.utf8.count == 10, name.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return UInt64(name)
        }.sorted(by: >)
    }

    /// The newest vector of `device` that opens under `key` (and that `accept` takes: signed by that device on the
    /// roster), and its number.
    static func newest(
        root: String, device: String, key: SyncKey, accept: ([UInt8]) -> Bool = { _ in true }
    ) -> (number: UInt64, vector: SyncVector)? {
        for number in numbers(root: root, device: device) {
            guard let bytes = try? SyncLayout.read(root + "/" + relative(device: device, number: number)), accept(bytes),
                let header = SealedBundle.parseHeader(bytes), header.sequence == number,
                let plaintext = SealedBundle.open(bytes, device: aadDevice(device), key: key),
                plaintext.starts(with: SyncVector.magic)
            else { continue }
            var reader = SyncVarint.Reader(bytes: plaintext, offset: SyncVector.magic.count)
            if let vector = SyncVector.decode(&reader), reader.atEnd { return (number, vector) }
        }
        return nil
    }

    /// Writes `vector` as `device`'s next seen file when it differs from its newest one, and removes the older
    /// ones (a device only ever removes its own files). Returns the paths written or removed (relative to root).
    static func publish(
        _ vector: SyncVector, root: String, device: String, key: SyncKey, signingKey: SyncSigningKey, generation: Int
    ) throws -> Bool {
        let newest = newest(root: root, device: device, key: key) {
            SyncSignedFile.verify($0, publicKey: signingKey.publicKey, generation: generation)
        }
        if let newest, newest.vector.text == vector.text { return false }
        let number = max(newest?.number ?? 0, numbers(root: root, device: device).first ?? 0) + 1
        var plaintext = SyncVector.magic
        vector.encoded(into: &plaintext)
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: number, previousHash: [UInt8](repeating: 0, count: 32))
        guard let inner = SealedBundle.seal(plaintext, header: header, device: aadDevice(device), key: key),
            let sealed = SyncSignedFile.wrap(inner, device: device, key: signingKey, generation: generation)
        else {
            throw SyncError(SyncError.Code.remote, "libcrypto could not seal and sign this device's seen vector")
        }
        try SyncLayout.writeAtomically(sealed, root: root, relative: relative(device: device, number: number))
        for older in numbers(root: root, device: device) where older < number {
            try? removeFileIfPresent(root + "/" + relative(device: device, number: older))
        }
        return true
    }
}

/// The devices `remove-device` removed, as the remover listed them in the new generation (`removed`, sealed and
/// signed by the remover): they no longer hold back pruning. Believed only when `accept` takes the file (signed by a
/// device on the roster that was not removed); a list an earlier version wrote unsigned is not believed (the devices
/// it names then wait as if still there: pruning is delayed, never hastened).
enum SyncRemovedDevices {
    static let file = "removed"
    static let aadDevice = "removed"

    static func read(root: String, key: SyncKey, accept: ([UInt8]) -> Bool = { _ in true }) -> Set<String> {
        guard let bytes = try? SyncLayout.read(root + "/" + file), accept(bytes),
            let plaintext = SealedBundle.open(bytes, device: aadDevice, key: key)
        else { return [] }
        let ids = String(decoding: plaintext, as: UTF8.self).split(separator: "\n").map(String.init)
        return Set(ids.filter(SyncEngine.isDeviceID))
    }

    static func write(_ ids: Set<String>, root: String, key: SyncKey, signer: String, signingKey: SyncSigningKey, generation: Int) throws {
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: 0, previousHash: [UInt8](repeating: 0, count: 32))
        guard let sealed = SealedBundle.seal(Array(ids.sorted().joined(separator: "\n").utf8), header: header, device: aadDevice, key: key),
            let signed = SyncSignedFile.wrap(sealed, device: signer, key: signingKey, generation: generation)
        else { throw SyncError(SyncError.Code.remote, "libcrypto could not seal and sign the list of removed devices") }
        try SyncLayout.writeAtomically(signed, root: root, relative: file)
    }
}

/// Pruning: the tombstones (and the cells `sync_rows` and `sync_values` keep under them) of rows every known device has seen
/// deleted. A deleted row is marked with the *epoch* (this device's vector) at which its state last changed here
/// (a trigger forgets the mark when the row's clock changes); it is dropped once, for every known device E, E's
/// published vector covers that epoch and this device has applied E's bundles up to E's own position in it (the
/// bundles E sent before it had seen the delete). Then every bundle still to come about that row carries all of
/// what is dropped, tombstone included, so no old edit can bring it back.
enum SyncPruning {
    static let createSQL = """
        CREATE TABLE IF NOT EXISTS sync_prune_epochs (epoch INTEGER PRIMARY KEY, vector TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS sync_prune_marks (tbl TEXT NOT NULL, key NOT NULL, epoch INTEGER NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS sync_rows_tombstones ON sync_rows (tbl) WHERE tomb_hlc IS NOT NULL;
        CREATE TRIGGER IF NOT EXISTS sync_prune_forget_insert AFTER INSERT ON sync_rows WHEN NEW.tomb_hlc IS NOT NULL BEGIN
            DELETE FROM sync_prune_marks WHERE tbl = NEW.tbl AND key = NEW.key;
        END;
        CREATE TRIGGER IF NOT EXISTS sync_prune_forget_update AFTER UPDATE ON sync_rows WHEN NEW.tomb_hlc IS NOT NULL BEGIN
            DELETE FROM sync_prune_marks WHERE tbl = NEW.tbl AND key = NEW.key;
        END;
        """

    /// What a pruning pass found: rows dropped, and the devices that hold back the rest (none published a vector
    /// that covers them yet).
    struct Result: Sendable, Equatable {
        var prunedRows = 0
        var waitingFor: [String] = []
    }

    /// Marks this device's deleted rows and drops those every known device has seen deleted. `published` is every
    /// known device's newest published vector (nil: it has published none); in the caller's write transaction.
    static func prune(_ db: Database, device: String, published: [String: SyncVector?]) throws -> Result {
        try db.executeScript(createSQL)
        let vector = try SyncVector.current(db, device: device, name: "")
        let latest = try db.fetchOne("SELECT epoch, vector FROM sync_prune_epochs ORDER BY epoch DESC LIMIT 1") {
            (try $0.int64(at: 0), try $0.string(at: 1))
        }
        var epoch = latest?.0 ?? 0
        if latest?.1 != vector.text {
            epoch += 1
            try db.execute("INSERT INTO sync_prune_epochs (epoch, vector) VALUES (?, ?)", [epoch, vector.text])
        }
        for table in try SyncSchema.tables(db) {
            // Deleted here (no row in the table) and nothing of it unsent.
            try db.execute(
                """
                INSERT OR IGNORE INTO sync_prune_marks (tbl, key, epoch)
                SELECT c.tbl, c.key, ? FROM sync_rows c INDEXED BY sync_rows_tombstones
                WHERE c.tomb_hlc IS NOT NULL AND c.tbl = ? AND c.pending = 0
                  AND NOT EXISTS (SELECT 1 FROM \(SyncSchema.quoted(table.name)) t WHERE t.\(SyncSchema.quoted(table.keyColumn)) = c.key)
                """, [epoch, table.name])
        }
        // The newest epoch every known device has seen.
        var result = Result()
        var newestSeen: Int64 = 0
        let epochs = try db.fetch("SELECT epoch, vector FROM sync_prune_epochs ORDER BY epoch") { (try $0.int64(at: 0), try $0.string(at: 1)) }
        for (number, text) in epochs {
            guard let needed = SyncVector(text: text) else { continue }
            let behind = published.keys.sorted().filter { other in
                guard let theirs = published[other] ?? nil else { return true }
                return !theirs.covers(needed) || vector[other] < theirs[other]
            }
            if behind.isEmpty { newestSeen = number } else {
                result.waitingFor = behind
                break
            }
        }
        while newestSeen > 0 {
            let batch = try db.fetch("SELECT tbl, key FROM sync_prune_marks WHERE epoch <= ? LIMIT 2000", [newestSeen]) {
                (try $0.string(at: 0), try $0.value(at: 1))
            }
            if batch.isEmpty { break }
            for (table, key) in batch {
                try SyncClock.forget(db, table: table, key: key)
                try db.execute("DELETE FROM sync_delete_views WHERE tbl = ? AND key = ?", [table, key])
                try db.execute("DELETE FROM sync_prune_marks WHERE tbl = ? AND key = ?", [table, key])
                result.prunedRows += 1
            }
        }
        // Epochs no mark refers to any more (the newest stays: it is what the next pass compares with).
        try db.execute(
            "DELETE FROM sync_prune_epochs WHERE epoch < ? AND epoch NOT IN (SELECT DISTINCT epoch FROM sync_prune_marks)", [epoch])
        return result
    }
}

extension SyncEngine {
    /// Every device that can still send bundles of this generation: the device folders of this and every earlier
    /// generation (a device there may still re-key into this one and send what it knows) and the devices
    /// ``sync_devices`` knows, less those `remove-device` removed (on the roster, or in the signed list of removed
    /// devices) and this generation's planted folders.
    func knownDevices(roster: SyncRoster) throws -> Set<String> {
        var known = Set(try database.read { db in try db.fetch("SELECT device FROM sync_devices") { try $0.string(at: 0) } })
        for number in 1...max(1, generation) {
            known.formUnion(SyncLayout.deviceIDs(root: Self.layoutRoot(transport.root, generation: number)))
        }
        // A planted folder of this generation is no device's (see ``plantedDeviceFolders()``).
        known.subtract(try plantedDeviceFolders())
        known.insert(device)
        return known.subtracting(try removedDeviceIDs(roster: roster))
    }

    /// The devices `remove-device` removed: on the roster, in this database, and in the signed list of removed devices.
    func removedDeviceIDs(roster: SyncRoster) throws -> Set<String> {
        let removed = try database.read { db in
            try db.tableExists("sync_removed") ? try db.fetch("SELECT device FROM sync_removed") { try $0.string(at: 0) } : []
        }
        return Set(removed).union(roster.removed.keys)
            .union(SyncRemovedDevices.read(root: layoutRoot, key: key, accept: { roster.signedByMember($0, generation: self.generation) }))
    }

    /// Writes this device's seen vector when it changed (before this sync's bundles are published, so it travels
    /// in the same commit). The vector is what this device has applied before sealing its next bundles: those
    /// bundles already reflect all of it. Nothing is written while this device's own chain is broken (it sends
    /// nothing then either).
    /// Returns whether it wrote one.
    @discardableResult
    func publishSeenVector() throws -> Bool {
        let recorded = try database.read { db in try db.scalar("SELECT sequence FROM sync_state", as: Int64.self) ?? 0 }
        if SyncLayout.bundles(root: layoutRoot, device: device).contains(where: { $0.sequence > UInt64(recorded) }) { return false }
        let vector = try database.read { db in try SyncVector.current(db, device: device, name: Self.hostName) }
        return try SyncSeenFiles.publish(
            vector, root: layoutRoot, device: device, key: key, signingKey: signingKey, generation: generation)
    }

    /// Drops the tombstones every known device has seen (``SyncPruning``). Returns what it did. A seen vector is
    /// believed only when signed by its device's key on the roster (a forged one cannot hasten pruning).
    @discardableResult
    func pruneTombstones(roster: SyncRoster) throws -> SyncPruning.Result {
        let known = try knownDevices(roster: roster)
        var published: [String: SyncVector?] = [:]
        for other in known where other != device {
            // `.some(nil)`: a device that has published no vector stays in the list, and holds pruning back
            // (assigning a plain nil would drop it from the dictionary).
            published[other] = .some(SyncSeenFiles.newest(root: layoutRoot, device: other, key: key, accept: { bytes in
                roster.accepts(bytes, device: other, sequence: 0, generation: self.generation)
            })?.vector)
        }
        let result = try database.write { db in try SyncPruning.prune(db, device: device, published: published) }
        return result
    }

    /// After `remove-device`: lists the removed device (with those removed before) in the new generation, so that
    /// it no longer holds back pruning there.
    static func recordRemoval(_ removed: String, previous: Set<String>, engine: SyncEngine) throws {
        try SyncRemovedDevices.write(
            previous.union([removed]), root: engine.layoutRoot, key: engine.key, signer: engine.device, signingKey: engine.signingKey,
            generation: engine.generation)
        try engine.transport.publish([SyncRemovedDevices.file])
    }
}
