// How far every chain reached: a device remembers the highest bundle it has verified of every device's chain — the
// bundles it applied and the seen vectors it verified — and never lets the remote make it forget (The Update
// Framework's rule against rollback). A remote that shows less is reported; this device's own bundles that vanished
// are sent again from the copies it keeps.
internal import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore

/// A chain of which the remote shows less than this device knows it reached, or with a bundle missing between two
/// that are there.
struct SyncShortChain {
    var device: String
    /// The bundles missing: those after the remote's newest up to the known head, and the holes inside the chain.
    var missing: [UInt64]
    /// The highest bundle of the chain this device has verified: applied here, or in another device's seen vector.
    var head: Int64
    /// What this device applied of the chain.
    var applied: Int64
    /// The remote's newest bundle of the chain (0: none).
    var top: UInt64
    /// Not a late delivery: bundles this device applied are gone, a file is missing from this device's own chain,
    /// the transport is git (a commit brings a whole tree at once), or a folder has shown it short for longer than
    /// ``SyncEngine/lateDelivery``.
    var certain: Bool
}

extension SyncEngine {
    /// How long a folder may show a chain short of what a seen vector says before it is reported as an error: a
    /// replication engine delivers files in its own order (Syncthing pulls in random order), so a seen vector can
    /// arrive before the bundles it counts. One hour, counted from the first sync that saw the chain short. Files
    /// this device applied that are gone, and anything on git, are reported at once.
    static let lateDelivery: Int64 = 3_600_000_000  // microseconds

    /// `sync_heads`: per device chain of this key generation, the highest bundle a verified seen vector says some
    /// device applied (with its hash), and since when the remote has shown less (microseconds; NULL: it does not).
    /// Made at first use: a database set up by an earlier version has none.
    static let headsSQL = """
        CREATE TABLE IF NOT EXISTS sync_heads (
            device TEXT PRIMARY KEY,
            sequence INTEGER NOT NULL,
            hash BLOB NOT NULL,
            short_since INTEGER
        ) WITHOUT ROWID
        """

    /// Where this device keeps a copy of each bundle it sealed, by key generation and device id
    /// (`<data dir>/<name>.sync-sent/<N>-<device id>/`, 0700, files 0600: sealed, as on the remote): what it sends
    /// again when the remote loses them. By device id too: a database copied to another machine becomes a new device
    /// there ("A copy on another machine"), and must not send the copies of the device it was copied from as its own.
    var sentCopies: String { sentCopiesRoot + "/\(generation)-\(device)" }

    /// Keeps a copy of `sealed`, this device's bundle `name` (`<sequence>-<hash>`), replacing a copy of the same
    /// number left by a sync that was killed before the bundle reached the remote (that bundle was never recorded, so
    /// the number is sealed again). Not fsynced: a copy torn by a crash does not match its name and is not sent.
    func keepSentCopy(_ sealed: [UInt8], name: String, sequence: UInt64) throws {
        do {
            try makeDirectories(sentCopies)
            for old in (try? listDirectory(sentCopies)) ?? [] where SealedBundle.parseName(old)?.sequence == sequence {
                try? removeFileIfPresent(sentCopies + "/" + old)
            }
            let path = sentCopies + "/" + name
            let temporary = ScratchFiles.path(near: path)
            let descriptor = try FileDescriptor.open(temporary, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o600)
            do {
                try descriptor.closeAfter { () throws(Errno) in try descriptor.writeAll(sealed) }
                try renameFile(temporary, to: path)
            } catch {
                try? removeFileIfPresent(temporary)
                throw error
            }
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot keep a copy of this device's bundle in '\(sentCopies)': \(error); nothing was sent")
        }
    }

    /// Removes the copies of this device's bundles numbered up to `through` (``clean(attachmentGrace:)`` removed them from the remote:
    /// a snapshot holds them) and those of older key generations (and of the device a copied database was).
    func removeSentCopies(through: Int64) {
        for name in (try? listDirectory(sentCopiesRoot)) ?? [] where name != namePart(sentCopies) {
            removeDirectoryAndFiles(sentCopiesRoot + "/" + name)
        }
        for name in (try? listDirectory(sentCopies)) ?? [] {
            guard let parsed = SealedBundle.parseName(name), parsed.sequence <= UInt64(max(0, through)) else { continue }
            try? removeFileIfPresent(sentCopies + "/" + name)
        }
    }

    /// Remembers the heads that the verified seen vectors of the other devices show (never lowers one).
    func learnHeads(skipping planted: Set<String>, roster: SyncRoster) throws {
        var learned: [String: SyncVector.Entry] = [:]
        let writers = ((try? listDirectory(layoutRoot + "/" + SyncSeenFiles.folder)) ?? []).filter(Self.isDeviceID)
        for writer in writers where writer != device && !planted.contains(writer) {
            // Believed only when signed by its writer's key on the roster (a holder of the sync key cannot speak for it).
            guard let vector = SyncSeenFiles.newest(root: layoutRoot, device: writer, key: key, accept: { bytes in
                roster.accepts(bytes, device: writer, sequence: 0, generation: self.generation)
            })?.vector else { continue }
            for (chain, entry) in vector.entries where entry.sequence > (learned[chain]?.sequence ?? 0) {
                learned[chain] = entry
            }
        }
        try database.write { db in
            try db.execute(Self.headsSQL)
            for (chain, entry) in learned {
                // No UPSERT: SQLCipher 3.4.1 (Debian 12) is SQLite 3.15.
                try db.execute("INSERT OR IGNORE INTO sync_heads (device, sequence, hash) VALUES (?, 0, ?)", [chain, Data(count: 32)])
                try db.execute(
                    "UPDATE sync_heads SET sequence = ?, hash = ? WHERE device = ? AND sequence < ?",
                    [entry.sequence, Data(entry.hash), chain, entry.sequence])
            }
        }
    }

    /// The bundles of `chain` missing from the remote up to `head`: after its newest one, and between two that are
    /// there above `applied` (a hole counts only when the bundle after it authenticates as that device's: a planted
    /// name makes none).
    private func absentBundles(of chain: String, head: Int64, applied: Int64) -> (missing: [UInt64], top: UInt64) {
        let files = SyncLayout.bundles(root: layoutRoot, device: chain)
        let present = Set(files.map(\.sequence))
        let top = files.last?.sequence ?? 0
        var missing: [UInt64] = []
        func authenticates(_ sequence: UInt64) -> Bool {
            guard let file = files.first(where: { $0.sequence == sequence }), let bytes = try? SyncLayout.read(file.path) else { return false }
            return SealedBundle.parseHeader(bytes)?.sequence == sequence && SealedBundle.open(bytes, device: chain, key: key) != nil
        }
        if let oldest = files.first?.sequence {
            var candidates: [UInt64] = []
            var next = max(oldest, UInt64(max(0, applied))) + 1
            while next < top {
                if !present.contains(next) {
                    candidates.append(next)
                } else if !candidates.isEmpty {
                    // The bundle after a hole: one that authenticates proves the hole is one.
                    if authenticates(next) { missing += candidates }
                    candidates = []
                }
                next += 1
            }
            if !candidates.isEmpty, authenticates(top) { missing += candidates }
        }
        if head > Int64(top) { missing += Array((top + 1)...UInt64(head)) }
        return (missing, top)
    }

    /// The chains of which the remote shows less than this device verified, or with a hole; notes since when each
    /// has been short (for ``lateDelivery``) and forgets that for those that are whole again.
    func shortChains(skipping planted: Set<String>) throws -> [SyncShortChain] {
        let now = microsecondsSince1970(Date())
        let position = try database.read { db in try SyncVector.current(db, device: device, name: "") }
        let heads = try database.read { db in
            try db.fetch("SELECT device, sequence, short_since FROM sync_heads") { row in
                (try row.string(at: 0), (try row.int64(at: 1), try row.isNull(at: 2) ? nil : try row.int64(at: 2)))
            }
        }
        let known = Dictionary(heads, uniquingKeysWith: { first, _ in first })
        var isGit = false
        if case .git = remote { isGit = true }
        var chains = Set(SyncLayout.deviceIDs(root: layoutRoot)).union(known.keys)
        chains.formUnion(position.entries.filter { $0.value.sequence > 0 }.keys)
        var short: [SyncShortChain] = []
        var since: [(String, Int64?)] = []
        for chain in chains.subtracting(planted).sorted() {
            let applied = position[chain]
            let head = max(applied, known[chain]?.0 ?? 0)
            let (missing, top) = absentBundles(of: chain, head: head, applied: applied)
            let noticed = known[chain]?.1
            guard !missing.isEmpty else {
                if noticed != nil { since.append((chain, nil)) }
                continue
            }
            if noticed == nil { since.append((chain, now)) }
            let certain = isGit || chain == device || applied > Int64(top) || now - (noticed ?? now) >= Self.lateDelivery
            short.append(SyncShortChain(device: chain, missing: missing, head: head, applied: applied, top: top, certain: certain))
        }
        if !since.isEmpty {
            try database.write { db in
                for (chain, time) in since {
                    try db.execute("INSERT OR IGNORE INTO sync_heads (device, sequence, hash) VALUES (?, 0, ?)", [chain, Data(count: 32)])
                    try db.execute("UPDATE sync_heads SET short_since = ? WHERE device = ?", [time, chain])
                }
            }
        }
        return short
    }

    /// Sends again this device's own bundles that the remote lost (after its newest one up to what this device
    /// verified of its own chain, and holes), from the copies it keeps. Returns their paths as published.
    func resendOwnBundles(skipping planted: Set<String>) throws -> [String] {
        guard !planted.contains(device) else { return [] }
        let recorded = try database.read { db in try db.scalar("SELECT sequence FROM sync_state", as: Int64.self) ?? 0 }
        let learned = try database.read { db in
            try db.scalar("SELECT sequence FROM sync_heads WHERE device = ?", [device], as: Int64.self) ?? 0
        }
        let (missing, _) = absentBundles(of: device, head: max(recorded, learned), applied: 0)
        guard !missing.isEmpty else { return [] }
        let wanted = Set(missing)
        var resent: [String] = []
        for name in ((try? listDirectory(sentCopies)) ?? []).sorted() {
            guard let parsed = SealedBundle.parseName(name), wanted.contains(parsed.sequence),
                let bytes = try? SyncLayout.read(sentCopies + "/" + name), hexString(SealedBundle.sha256(bytes)) == parsed.hash
            else { continue }
            let relative = SyncLayout.devices + "/" + device + "/" + name
            try SyncLayout.writeAtomically(bytes, root: layoutRoot, relative: relative)
            resent.append((generation == 1 ? "" : "generation-\(generation)/") + relative)
        }
        if !resent.isEmpty {
            try transport.publish(
                resent)
        }
        return resent
    }

    /// The error for the chains the remote shows short for certain; each short chain's bundles are named in
    /// ``SyncReport/missingBundles`` (at most 100 a chain).
    func shortChainErrors(_ short: [SyncShortChain], resent: [String], report: inout SyncReport) -> [SyncError] {
        let prefix = generation == 1 ? "" : "generation-\(generation)/"
        var errors: [SyncError] = []
        if !resent.isEmpty {
            errors.append(
                SyncError(
                    SyncError.Code.rolledBack,
                    "\(resent.count) of this device's own bundle(s) had vanished from the remote (deleted, or the remote restored "
                        + "from an older copy): \(resent.joined(separator: ", ")); they were sent again from the copies this device "
                        + "keeps, and the other devices apply them at their next sync",
                    path: layoutRoot + "/" + SyncLayout.devices + "/" + device))
        }
        for chain in short {
            let names = chain.missing.prefix(100).map {
                "\(prefix)\(SyncLayout.devices)/\(chain.device)/\(SealedBundle.paddedSequence($0))-…"
            }
            report.missingBundles += names
            guard chain.certain else { continue }
            let whose = chain.device == device ? "this device's own" : "device \(chain.device.prefix(8))'s"
            let gone = chain.missing.count == 1 ? "bundle \(chain.missing[0])" : "\(chain.missing.count) bundles (\(chain.missing.first!)–\(chain.missing.last!))"
            let known =
                chain.applied > Int64(chain.top)
                ? "this device applied its chain up to \(chain.applied)"
                : chain.head > Int64(chain.top)
                    ? "a verified seen vector says its chain reached \(chain.head)" : "later ones of the chain are there"
            let cause =
                chain.head > Int64(chain.top)
                ? "deleted, or the remote was restored from an older copy"
                : "deleted from the middle of the chain"
            let remedy =
                chain.device == device
                ? "this device keeps no copy of them to send again (Docs/sync.md, 'A remote that lies')"
                : "the device that wrote them sends them again at its next sync (it keeps a copy); nothing is forgotten"
            errors.append(
                SyncError(
                    SyncError.Code.rolledBack,
                    "the remote is missing \(whose) \(gone) (\(names.first!)…) while \(known): \(cause); nothing of that device's "
                        + "chain was applied beyond what this device had verified, and \(remedy)",
                    path: layoutRoot + "/" + SyncLayout.devices + "/" + chain.device))
        }
        return errors
    }
}
