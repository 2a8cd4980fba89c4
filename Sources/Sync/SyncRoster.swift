// The roster: which devices belong to the group and with which public key; what a device signs is believed only
// when its key is on the roster. Docs/sync.md, "Signatures and the roster".
internal import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore

/// A device's statement on the roster: its public key, the first of its bundles of this generation that it signed
/// (1 for a device set up by this version; one past its chain for a device of an earlier version, whose older
/// bundles stay valid unsigned), and the devices it removed from the group, each with the last of that device's
/// bundles the group accepted and the key generation of that bundle. A statement in a new generation carries the
/// removals of the earlier ones its writer knows (Docs/sync.md, "A removal that arrives late"): a device that has not
/// read the removal in the old generation still learns it before it enters the new one. Sealed under the sync key (`roster/<device>` in the authenticated data) and signed by
/// the device itself; `roster/<device id>/<10-digit number>`, the newest that verifies is the device's statement.
struct SyncRosterEntry: Equatable {
    struct Removal: Equatable {
        var device: String
        var lastSequence: Int64
        var lastHash: [UInt8]
        /// The key generation `lastSequence` is of (the one in which the device was removed).
        var generation: Int = 0
    }

    var publicKey: [UInt8]
    var firstSigned: Int64
    var removals: [Removal]

    /// `SSR1`: every removal is of the statement's own generation; `SSR2`: each removal names its generation.
    static let magic = Array("SSR1".utf8)
    static let carryingMagic = Array("SSR2".utf8)

    /// The statement's bytes for `generation` (the first format when it carries no removal of an earlier
    /// generation, so that a device of the version before reads it).
    func encoded(generation: Int) -> [UInt8] {
        let carrying = removals.contains { $0.generation != generation }
        var out = (carrying ? Self.carryingMagic : Self.magic) + publicKey
        SyncVarint.put(UInt64(max(0, firstSigned)), &out)
        SyncVarint.put(UInt64(removals.count), &out)
        for removal in removals {
            SyncVarint.putString(removal.device, &out)
            SyncVarint.put(UInt64(max(0, removal.lastSequence)), &out)
            out += removal.lastHash
            if carrying { SyncVarint.put(UInt64(max(1, removal.generation)), &out) }
        }
        return out
    }

    static func decode(_ bytes: [UInt8], generation: Int) -> SyncRosterEntry? {
        let carrying = bytes.starts(with: carryingMagic)
        guard bytes.starts(with: magic) || carrying else { return nil }
        var reader = SyncVarint.Reader(bytes: bytes, offset: magic.count)
        guard let publicKey = reader.bytes(SyncSigningKey.publicKeySize), let first = reader.varint(), first <= UInt64(Int64.max),
            let count = reader.varint(), count <= UInt64(bytes.count)
        else { return nil }
        var removals: [Removal] = []
        for _ in 0..<count {
            guard let device = reader.string(), SyncEngine.isDeviceID(device), let last = reader.varint(), last <= UInt64(Int64.max),
                let hash = reader.bytes(32)
            else { return nil }
            var removedIn = generation
            if carrying {
                guard let number = reader.varint(), number >= 1, number <= UInt64(generation) else { return nil }
                removedIn = Int(number)
            }
            removals.append(Removal(device: device, lastSequence: Int64(last), lastHash: hash, generation: removedIn))
        }
        guard reader.atEnd else { return nil }
        return SyncRosterEntry(publicKey: publicKey, firstSigned: Int64(first), removals: removals)
    }
}

/// The roster of this generation as this device believes it after reading the remote: the admitted devices with
/// their keys, the removed ones, and the roster files it refused.
struct SyncRoster {
    struct Member {
        var publicKey: [UInt8]
        var firstSigned: Int64
    }

    var members: [String: Member] = [:]
    /// Removed devices: nothing of theirs past `lastSequence` is applied (in this generation; in a later one, nothing).
    var removed: [String: SyncRosterEntry.Removal] = [:]
    /// Roster files refused (forged, or signed by a key other than the one the device is known by), relative to the
    /// generation's root.
    var refused: [String] = []
    /// Devices removed here (by a removal this device believed first) whose own statement removes their remover: one
    /// of the two is the removed device, and a newer generation either of them signs is the person's to settle (77).
    var contestedRemoved: [String: [UInt8]] = [:]

    /// Whether `device` may write at all: on the roster and not removed before anything.
    func admits(_ device: String) -> Bool { members[device] != nil }

    /// Whether the file of `device` numbered `sequence` (a bundle, or 0 for files outside its chain) is one the
    /// roster lets be believed: signed by that device's key for `generation` (or, before `firstSigned` of its chain, a
    /// file of an earlier version).
    func accepts(_ file: [UInt8], device: String, sequence: Int64, generation: Int) -> Bool {
        guard let member = members[device] else { return false }
        if let removal = removed[device], sequence > removal.lastSequence || sequence == 0 { return false }
        if SyncSignedFile.signer(file) == nil { return sequence > 0 && sequence < member.firstSigned }
        return SyncSignedFile.signer(file) == device && SyncSignedFile.verify(file, publicKey: member.publicKey, generation: generation)
    }

    /// Whether `file` (a newer generation's key check) is signed by a removed device of ``contestedRemoved``.
    func signedByContestedRemoved(_ file: [UInt8], generation: Int) -> Bool {
        guard let signer = SyncSignedFile.signer(file), let key = contestedRemoved[signer] else { return false }
        return SyncSignedFile.verify(file, publicKey: key, generation: generation)
    }

    /// Whether `file` (a key check, a list) is signed by a device on the roster that is not removed.
    func signedByMember(_ file: [UInt8], generation: Int) -> Bool {
        guard let signer = SyncSignedFile.signer(file), let member = members[signer], removed[signer] == nil else { return false }
        return SyncSignedFile.verify(file, publicKey: member.publicKey, generation: generation)
    }
}

enum SyncRosterFiles {
    static let folder = "roster"

    static func aadDevice(_ device: String) -> String { "roster/" + device }

    static func numbers(root: String, device: String) -> [UInt64] {
        SyncSeenFiles.numbered(root: root, folder: folder, device: device)
    }

    static func relative(device: String, number: UInt64) -> String { folder + "/" + device + "/" + SealedBundle.paddedSequence(number) }
}

extension SyncEngine {
    /// The roster as this device knows it, in the encrypted database: every device's key (pinned: a device id
    /// keeps the first key it was seen with, in every generation), and the removed devices.
    static let rosterSQL = """
        CREATE TABLE IF NOT EXISTS sync_roster (
            device TEXT PRIMARY KEY NOT NULL, public_key BLOB NOT NULL, generation INTEGER NOT NULL,
            first_signed INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS sync_removed (
            device TEXT PRIMARY KEY NOT NULL, generation INTEGER NOT NULL, last_sequence INTEGER NOT NULL,
            last_hash BLOB NOT NULL, removed_by TEXT NOT NULL);
        """

    /// Reads this generation's roster files, checks each against the keys this device already knows and its own
    /// signature, records what it learned, and returns the roster. A device is admitted to a generation by its own
    /// signed statement sealed under the generation's key (a holder of the pairing code); never once a member of
    /// the generation has removed a device in it (the removed device holds that key). Refused files are listed.
    func readRoster() throws -> SyncRoster {
        let root = layoutRoot
        let prefix = generation == 1 ? "" : "generation-\(generation)/"
        let (pinned, removedKnown) = try database.read { db in
            (
                Dictionary(
                    uniqueKeysWithValues: try db.fetch("SELECT device, public_key, generation, first_signed FROM sync_roster") { row in
                        (try row.string(at: 0), ([UInt8](try row.data(at: 1)), try row.int(at: 2), try row.int64(at: 3)))
                    }),
                try db.fetch("SELECT device, generation, last_sequence, last_hash, removed_by FROM sync_removed") { row in
                    (try row.string(at: 0), try row.int(at: 1), SyncRosterEntry.Removal(
                        device: try row.string(at: 0), lastSequence: try row.int64(at: 2), lastHash: [UInt8](try row.data(at: 3)),
                        generation: try row.int(at: 1)), try row.string(at: 4))
                }
            )
        }
        var roster = SyncRoster()
        var statements: [String: SyncRosterEntry] = [:]
        let writers = ((try? listDirectory(root + "/" + SyncRosterFiles.folder)) ?? []).sorted()
        for writer in writers {
            guard Self.isDeviceID(writer) else {
                roster.refused.append(prefix + SyncRosterFiles.folder + "/" + writer)
                continue
            }
            for number in SyncRosterFiles.numbers(root: root, device: writer) {
                let relative = SyncRosterFiles.relative(device: writer, number: number)
                guard let bytes = try? SyncLayout.read(root + "/" + relative), SyncSignedFile.signer(bytes) == writer,
                    SealedBundle.parseHeader(bytes)?.sequence == number,
                    let plaintext = SealedBundle.open(bytes, device: SyncRosterFiles.aadDevice(writer), key: key),
                    let entry = SyncRosterEntry.decode(plaintext, generation: generation),
                    SyncSignedFile.verify(bytes, publicKey: pinned[writer]?.0 ?? entry.publicKey, generation: generation),
                    entry.publicKey == pinned[writer]?.0 ?? entry.publicKey
                else {
                    roster.refused.append(prefix + relative)
                    continue
                }
                statements[writer] = entry
                break
            }
        }
        // Two devices that remove each other in this generation, both read now (one of them is the removed device, which
        // holds this generation's key and its own signing key, and nothing here tells which): no removal by either is
        // believed, whichever was read first — not even of a third device, or the removed one could remove anyone by
        // first removing its remover. The generation is closed all the same (a removal happened). A removal this device
        // believed before stands, and the statements of the device it removed stay unread. The new generation settles
        // it: a device with a statement there holds the new key, which a removed device never gets (below).
        let removes = statements.mapValues { Set($0.removals.filter { $0.generation == generation }.map(\.device)) }
        let contested = Set(removes.flatMap { writer, targets in targets.filter { removes[$0]?.contains(writer) ?? false } })
        // A device with a statement in this generation (sealed under its key, signed by its pinned key) holds this
        // generation's key: a removal of it in an older generation — told by a removed device that removed its remover
        // first, or by the remote hiding the rightful removal — is void from here on.
        let voided = removedKnown.filter { device, removedIn, _, _ in removedIn < generation && statements[device] != nil && device != self.device }
            .map(\.0)
        // Removals known from before stand; removals stated now by a device known in this generation are added.
        for (device, removedIn, removal, _) in removedKnown where !voided.contains(device) {
            roster.removed[device] = removedIn == generation ? removal : SyncRosterEntry.Removal(device: device, lastSequence: 0, lastHash: [])
        }
        for (device, removedIn, _, by) in removedKnown where removedIn == generation && (removes[device]?.contains(by) ?? false) {
            if let key = pinned[device]?.0 { roster.contestedRemoved[device] = key }
        }
        let knownHere = { (device: String) in pinned[device].map { $0.1 == self.generation } ?? false }
        var newRemovals: [(SyncRosterEntry.Removal, String)] = []
        for (writer, entry) in statements where (knownHere(writer) || writer == device) && roster.removed[writer] == nil && !contested.contains(writer) {
            for removal in entry.removals where removal.generation == generation && roster.removed[removal.device] == nil && removal.device != writer {
                roster.removed[removal.device] = removal
                newRemovals.append((removal, writer))
            }
        }
        // Removals of earlier generations carried in a statement of this one, by a device this device knew before (its
        // key pinned): nothing of the removed device is believed here, and before this device enters this generation
        // it undoes what that device's later bundles brought it in the old one (SyncUndo.swift).
        var carried: [(SyncRosterEntry.Removal, String)] = []
        for (writer, entry) in statements.sorted(by: { $0.key < $1.key })
        where pinned[writer] != nil && writer != device && roster.removed[writer] == nil {
            for removal in entry.removals where removal.generation < generation && removal.device != writer && removal.device != device {
                if roster.removed[removal.device] == nil {
                    roster.removed[removal.device] = SyncRosterEntry.Removal(device: removal.device, lastSequence: 0, lastHash: [])
                }
                let known = removedKnown.first { $0.0 == removal.device }.map { ($0.0, $0.1, $0.2) }
                if known.map({ $0.1 == removal.generation && $0.2.lastSequence > removal.lastSequence }) ?? true,
                    !carried.contains(where: { $0.0.device == removal.device && $0.0.lastSequence <= removal.lastSequence })
                {
                    carried.removeAll { $0.0.device == removal.device }
                    carried.append((removal, writer))
                }
            }
        }
        // A generation in which a device was removed admits nobody new: the removed device holds its key.
        let closed = !contested.isEmpty || roster.removed.values.contains { removal in
            removedKnown.contains { $0.0 == removal.device && $0.1 == generation } || newRemovals.contains { $0.0.device == removal.device }
        }
        for (writer, entry) in statements {
            if closed && !knownHere(writer) && writer != device {
                roster.refused.append(prefix + SyncRosterFiles.folder + "/" + writer)
                continue
            }
            roster.members[writer] = SyncRoster.Member(publicKey: entry.publicKey, firstSigned: entry.firstSigned)
        }
        // A device known in this generation whose statements are gone from the remote (deleted by someone who can write
        // it) is still a member, by the key it is pinned with: removing its statement must not take it off the roster —
        // its bundles and key checks would stop counting, and the removals it made with them.
        for (known, pin) in pinned where pin.1 == generation && roster.members[known] == nil && statements[known] == nil {
            roster.members[known] = SyncRoster.Member(publicKey: pin.0, firstSigned: pin.2)
        }
        let changed = roster.members.filter { writer, member in
            pinned[writer].map { $0.0 != member.publicKey || $0.1 != generation || $0.2 != member.firstSigned } ?? true
        }
        // Nothing is written when nothing is new (a sync that applies nothing leaves the database's bytes as they were).
        guard !changed.isEmpty || !newRemovals.isEmpty || !carried.isEmpty || !voided.isEmpty else { return roster }
        try database.write { db in
            for (writer, member) in changed {
                try db.execute(
                    "INSERT OR REPLACE INTO sync_roster (device, public_key, generation, first_signed) VALUES (?, ?, ?, ?)",
                    [writer, Data(member.publicKey), generation, member.firstSigned])
            }
            for device in voided {
                try db.execute("DELETE FROM sync_removed WHERE device = ? AND generation < ?", [device, generation])
            }
            for (removal, by) in newRemovals {
                try db.execute(
                    "INSERT OR IGNORE INTO sync_removed (device, generation, last_sequence, last_hash, removed_by) VALUES (?, ?, ?, ?, ?)",
                    [removal.device, generation, removal.lastSequence, Data(removal.lastHash), by])
            }
            // A carried removal stands for its generation; of two, the one that accepted less.
            for (removal, by) in carried {
                try db.execute("DELETE FROM sync_removed WHERE device = ? AND (generation != ? OR last_sequence > ?)",
                    [removal.device, removal.generation, removal.lastSequence])
                try db.execute(
                    "INSERT OR IGNORE INTO sync_removed (device, generation, last_sequence, last_hash, removed_by) VALUES (?, ?, ?, ?, ?)",
                    [removal.device, removal.generation, removal.lastSequence, Data(removal.lastHash), by])
            }
        }
        return roster
    }

    /// Publishes this device's statement on the roster of this generation when the remote lacks it or it changed
    /// (a removal added): its public key, the first bundle it signs, the devices it removed here. Returns whether it
    /// wrote one. The first signed bundle of a device set up by an earlier version is the one after its chain.
    @discardableResult
    func publishRosterEntry(adding removal: SyncRosterEntry.Removal? = nil) throws -> Bool {
        let root = layoutRoot
        let numbers = SyncRosterFiles.numbers(root: root, device: device)
        var current: SyncRosterEntry?
        for number in numbers {
            guard let bytes = try? SyncLayout.read(root + "/" + SyncRosterFiles.relative(device: device, number: number)),
                SyncSignedFile.verify(bytes, publicKey: signingKey.publicKey, generation: generation),
                let plaintext = SealedBundle.open(bytes, device: SyncRosterFiles.aadDevice(device), key: key),
                let entry = SyncRosterEntry.decode(plaintext, generation: generation)
            else { continue }
            current = entry
            break
        }
        // Bundles of this device already on the remote, sealed by an earlier version, stay valid unsigned; in a
        // generation the database has not entered yet (a re-key) every bundle is signed.
        let (sequence, entered) = try database.read { db in
            try db.fetchOne("SELECT sequence, generation FROM sync_state") { (try $0.int64(at: 0), try $0.int(at: 1)) } ?? (0, 0)
        }
        let firstSigned = entered == generation ? sequence + 1 : 1
        var entry = current ?? SyncRosterEntry(publicKey: signingKey.publicKey, firstSigned: firstSigned, removals: [])
        // The removals of earlier generations this device knows are carried into this one's statement.
        let carried = try database.read { db in
            try db.fetch(
                "SELECT device, generation, last_sequence, last_hash FROM sync_removed WHERE generation < ? ORDER BY device", [generation]
            ) { row in
                SyncRosterEntry.Removal(
                    device: try row.string(at: 0), lastSequence: try row.int64(at: 2), lastHash: [UInt8](try row.data(at: 3)),
                    generation: try row.int(at: 1))
            }
        }
        for removal in ([removal].compactMap { $0 } + carried) where !entry.removals.contains(where: { $0.device == removal.device }) {
            entry.removals.append(removal)
        }
        if let current, current == entry { return false }
        let number = (numbers.first ?? 0) + 1
        let header = SealedBundle.Header(format: SealedBundle.format, sequence: number, previousHash: [UInt8](repeating: 0, count: 32))
        guard let sealed = SealedBundle.seal(entry.encoded(generation: generation), header: header, device: SyncRosterFiles.aadDevice(device), key: key),
            let signed = SyncSignedFile.wrap(sealed, device: device, key: signingKey, generation: generation)
        else { throw SyncError(SyncError.Code.remote, "libcrypto could not seal and sign this device's roster entry") }
        try SyncLayout.writeAtomically(signed, root: root, relative: SyncRosterFiles.relative(device: device, number: number))
        return true
    }
}
