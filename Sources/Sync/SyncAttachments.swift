// Attachments in sync (Docs/sync.md, "Attachments"): descriptions travel in bundles as rows of
// `securestore_attachments`; bytes as content-addressed chunks, each named by an HMAC of its plaintext under a key
// derived from the sync key and sealed with AES-256-GCM, written once into the writing device's own folder.
internal import CLibCrypto
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
public import SecureStore
internal import SecureStoreCore

/// When a device brings the bytes of attachments added on other devices (``SyncEngine/setAttachmentMode(_:)``).
public enum SyncAttachmentMode: String, Sendable, CaseIterable {
    /// Every ``SyncEngine/sync()`` fetches the bytes of new attachments (the default).
    case eager
    /// Bytes are fetched from the local copy of the remote when an attachment is first read, through a store made
    /// with ``SyncEngine/attachmentStoreConfiguration(database:_:)``.
    case lazy
}

/// The keys of attachment chunks, derived from the sync key with domain strings (HMAC-SHA256): one names chunks,
/// one seals them. Neither is the sync key, so a chunk's name reveals nothing that a bundle's key would open.
struct SyncAttachmentKeys {
    let naming: SecureBytes
    let sealing: SecureBytes

    init(_ key: SyncKey) {
        func derive(_ label: String) -> SecureBytes {
            SecureBytes(count: 32) { out in
                key.bytes.withUnsafeBytes { keyBytes in
                    Self.hmac(keyBytes, Array(label.utf8), into: out)
                }
            }
        }
        naming = derive("securestore sync attachment names 1")
        sealing = derive("securestore sync attachment sealing 1")
    }

    static func hmac(_ key: UnsafeRawBufferPointer, _ data: [UInt8], into out: UnsafeMutableRawBufferPointer) {
        var length: UInt32 = 32
        data.withUnsafeBytes { input in
            _ = HMAC(
                EVP_sha256(), key.baseAddress, Int32(key.count), input.baseAddress?.assumingMemoryBound(to: UInt8.self),
                input.count, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length)
        }
    }

    /// The name of a chunk: HMAC-SHA256 of its plaintext under the naming key.
    func chunkName(_ plaintext: [UInt8]) -> [UInt8] { name(Array("chunk".utf8) + [0] + plaintext) }

    /// The name of an attachment's manifest (its list of chunks): from its SHA-256 digest and size, so that the
    /// same bytes attached twice, or on two devices, share it and their chunks.
    func manifestName(_ attachment: Attachment) -> [UInt8] {
        var input = Array("manifest".utf8) + [0] + (bytes(fromHex: attachment.sha256) ?? [])
        for shift in stride(from: 56, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: attachment.size >> Int64(shift))) }
        return name(input)
    }

    private func name(_ input: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        naming.withUnsafeBytes { key in out.withUnsafeMutableBytes { Self.hmac(key, input, into: $0) } }
        return out
    }

    /// Files written before padding (read, never written).
    static let unpaddedMagic = Array("SSYNCA\u{0}\u{1}".utf8)
    /// Files whose plaintext is padded to a size bucket (``SyncPadding``): a chunk's or manifest's size no longer
    /// tells an attachment's exact size.
    static let magic = Array("SSYNCA\u{0}\u{2}".utf8)

    /// `magic ‖ kind ‖ nonce (12) ‖ ciphertext ‖ tag (16)`; the AAD binds the kind and the file's name, and the
    /// ciphertext is of the padded plaintext.
    func seal(_ unpadded: [UInt8], name: [UInt8], kind: UInt8) -> [UInt8]? {
        let plaintext = SyncPadding.pad(unpadded)
        let nonce = KeyFile.randomBytes(SealedBundle.nonceSize)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        let tag = sealing.withUnsafeBytes { key in
            ciphertext.withUnsafeMutableBytes { out in
                Sealed.gcm(encrypt: true, key: key, nonce: nonce, aad: Self.aad(name, kind), input: plaintext, output: out, tag: nil)
            }
        }
        guard let tag else { return nil }
        return Self.magic + [kind] + nonce + ciphertext + tag
    }

    /// The plaintext of a sealed chunk or manifest named `name`; nil when it does not authenticate.
    func open(_ file: [UInt8], name: [UInt8], kind: UInt8) -> [UInt8]? {
        let head = Self.magic.count + 1 + SealedBundle.nonceSize
        let version = Array(file.prefix(Self.magic.count))
        guard file.count >= head + SealedBundle.tagSize, version == Self.magic || version == Self.unpaddedMagic,
            file[Self.magic.count] == kind
        else { return nil }
        let nonce = Array(file[(Self.magic.count + 1)..<head])
        let body = Array(file[head..<(file.count - SealedBundle.tagSize)])
        let tag = Array(file[(file.count - SealedBundle.tagSize)...])
        var plaintext = [UInt8](repeating: 0, count: body.count)
        let ok = sealing.withUnsafeBytes { key in
            plaintext.withUnsafeMutableBytes { out in
                Sealed.gcm(encrypt: false, key: key, nonce: nonce, aad: Self.aad(name, kind), input: body, output: out, tag: tag) != nil
            }
        }
        guard ok else { return nil }
        return version == Self.magic ? SyncPadding.unpad(plaintext) : plaintext
    }

    static func aad(_ name: [UInt8], _ kind: UInt8) -> [UInt8] {
        Array("securestore sync attachment".utf8) + [0, kind] + name
    }

    static let chunkKind = UInt8(ascii: "c")
    static let manifestKind = UInt8(ascii: "m")
}

/// The plaintext of a manifest: the attachment's size, then the names of its chunks in order.
struct SyncAttachmentManifest: Equatable {
    var size: Int64
    var chunks: [[UInt8]]

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: size >> Int64(shift))) }
        for chunk in chunks { out += chunk }
        return out
    }

    static func decode(_ bytes: [UInt8]) -> SyncAttachmentManifest? {
        guard bytes.count >= 8, (bytes.count - 8) % 32 == 0 else { return nil }
        var size: Int64 = 0
        for index in 0..<8 { size = size << 8 | Int64(bytes[index]) }
        let chunks = stride(from: 8, to: bytes.count, by: 32).map { Array(bytes[$0..<($0 + 32)]) }
        guard size >= 0, size <= Int64(chunks.count) * Int64(SyncEngine.attachmentChunkSize),
            size > Int64(max(0, chunks.count - 1)) * Int64(SyncEngine.attachmentChunkSize) || (size == 0 && chunks.isEmpty)
        else { return nil }
        return SyncAttachmentManifest(size: size, chunks: chunks)
    }
}

extension SyncEngine {
    /// The size of the chunks attachments travel in: 1 MiB (the last one of an attachment is shorter).
    static let attachmentChunkSize = 1 << 20
    static let attachmentsFolder = "attachments"
    /// Descriptions sync when their owner is a row of a synced table.
    static let descriptionFilter =
        "ROW.owner_table IN (SELECT name FROM sync_tables WHERE name <> 'securestore_attachments')"

    // MARK: The mode

    /// Whether this device fetches attachments' bytes at each sync (`eager`, the default) or when they are first
    /// read (`lazy`). Stored in the database.
    public func attachmentMode() throws -> SyncAttachmentMode {
        try database.read { db in
            guard try db.tableExists("sync_attachments") else { return .eager }
            return SyncAttachmentMode(rawValue: try db.scalar("SELECT mode FROM sync_attachments", as: String.self) ?? "") ?? .eager
        }
    }

    /// Sets ``attachmentMode()`` for this database (``sync()`` honors it from its next run).
    public func setAttachmentMode(_ mode: SyncAttachmentMode) throws {
        try database.write { db in
            try db.execute(Self.modeTableSQL)
            try db.execute("INSERT OR REPLACE INTO sync_attachments (singleton, mode) VALUES (0, ?)", [mode.rawValue])
        }
    }

    static let modeTableSQL = """
        CREATE TABLE IF NOT EXISTS sync_attachments (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 0),
            mode TEXT NOT NULL CHECK (mode IN ('eager', 'lazy'))
        )
        """

    /// A store of this database's attachments whose reads fetch missing bytes (``SyncAttachmentMode/lazy``, or
    /// bytes not yet fetched) from the local copy of the remote, checked before anything is stored or returned.
    /// Use it (or pass its configuration to `TaskList.attachments(configuration:)`) on a lazy device.
    ///
    /// A read whose bytes cannot be fetched throws `SecureStoreError` `notFound` naming what is missing (not on
    /// the remote yet: sync again once the device that added it has synced), or `verificationFailed` naming a
    /// chunk that does not authenticate; nothing is stored or returned then.
    public static func attachmentStoreConfiguration(
        database: KeyedDatabase, _ base: AttachmentStoreConfiguration = AttachmentStoreConfiguration()
    ) -> AttachmentStoreConfiguration {
        var configuration = base
        configuration.fetchMissing = { attachment in
            // Not a synced database: the read reports the missing bytes itself.
            guard (try? database.read({ try $0.tableExists("sync_state") })) == true else { return }
            do {
                try SyncEngine(database: database).fetchAttachment(attachment)
            } catch let error as SyncError {
                throw SecureStoreError(
                    error.code == SyncError.Code.refusedBundle ? SecureStoreError.Code.verificationFailed : SecureStoreError.Code.notFound,
                    error.message)
            }
        }
        return configuration
    }

    // MARK: Hooks of a sync round

    /// Before bundles are applied: the attachment tables and file, and `securestore_attachments` among the synced
    /// tables (its rows of synced owners captured), so that descriptions from other devices apply here.
    func prepareAttachments() throws {
        let store = AttachmentStore(database: database)
        defer { try? store.close() }
        try store.prepareForSync()
        let (hasMode, syncsDescriptions) = try database.read { db in
            (try db.tableExists("sync_attachments"),
             try db.scalar("SELECT 1 FROM sync_tables WHERE name = 'securestore_attachments'", as: Int.self) != nil)
        }
        guard !hasMode || !syncsDescriptions else { return }
        try database.write { db in
            try db.execute(Self.modeTableSQL)
            try db.execute("INSERT OR IGNORE INTO sync_attachments (singleton, mode) VALUES (0, 'eager')")
            guard !syncsDescriptions else { return }
            let table = try SyncSchema.describe(db, table: "securestore_attachments")
            try db.execute(
                "INSERT INTO sync_tables (name, key_column, columns) VALUES (?, ?, ?)",
                [table.name, table.keyColumn, table.columns.joined(separator: ",")])
            try db.executeScript(SyncSchema.triggersSQL(table, rowFilter: Self.descriptionFilter))
            try SyncSchema.captureExisting(db, table, rowFilter: Self.descriptionFilter)
        }
    }

    /// After bundles are applied, before this device's are sent: deleting a synced owner row deletes its
    /// attachments here too (the owner trigger), this device's bytes that the remote lacks are sealed and written,
    /// and (eager) the bytes of attachments added elsewhere are fetched. Returns the refused chunks.
    func exchangeAttachments(_ report: inout SyncReport) throws -> [SyncError] {
        try recordDescriptionsDeletedWhileApplying()
        let store = AttachmentStore(database: database)
        defer { try? store.close() }
        let owners = try database.read { db in
            try db.fetch(
                """
                SELECT name, key_column FROM sync_tables WHERE name <> 'securestore_attachments'
                AND name IN (SELECT DISTINCT owner_table FROM securestore_attachments)
                """) { (table: try $0.string(at: 0), keyColumn: try $0.string(at: 1)) }
        }
        if !owners.isEmpty { try store.prepare(owners: owners) }
        let keys = SyncAttachmentKeys(key)
        var remote = remoteAttachmentFiles()
        let all = try store.allAttachments()
        let synced = Set(try database.read { db in try SyncSchema.tables(db).map(\.name) })
        // An attachment whose bytes cannot even be checked here (a damaged attachments file) is neither sent nor
        // fetched: the tasks still sync, and `db verify` names the damage.
        let held: [UUID: Bool] = Dictionary(uniqueKeysWithValues: all.compactMap { a in (try? store.hasBytes(a)).map { (a.id, $0) } })
        for attachment in all where synced.contains(attachment.owner.table) && held[attachment.id] == true {
            // On the remote with all its chunks: nothing to write. A chunk that another device's cleanup removed (it
            // had those bytes too, and this device wrote none of them) is written again here.
            let manifestHex = hexString(keys.manifestName(attachment))
            if let path = remote[manifestHex], chunksPresent(manifestHex, path: path, remote: remote, keys: keys) { continue }
            do {
                try upload(attachment, store: store, keys: keys, remote: &remote, report: &report)
            } catch let error as SecureStoreError where error.code == SecureStoreError.Code.verificationFailed {
                continue  // damaged here: not sent (another device may hold it); files written so far are harmless
            }
        }
        let lazy = try attachmentMode() == .lazy
        var refusals: [SyncError] = []
        for attachment in all where synced.contains(attachment.owner.table) && held[attachment.id] == false {
            if lazy {
                report.missingAttachments += 1
                continue
            }
            do {
                try fetch(attachment, store: store, keys: keys, remote: remote)
                report.fetchedAttachments += 1
            } catch let error as SyncError where error.code == SyncError.Code.refusedBundle {
                refusals.append(error)
                report.missingAttachments += 1
            } catch let error as SyncError where error.code == SyncError.Code.notFound {
                report.missingAttachments += 1  // not on the remote yet: the next sync tries again
            }
        }
        return refusals
    }

    /// A description deleted while bundles were applied — another device deleted its owner row, whose trigger
    /// deleted it here with capture off — while this device holds it as alive in `sync_rows` (it added it and had
    /// not sent it, or received it in the same round): its delete is recorded now as this device's own, as the
    /// delete trigger would have, so that it reaches the others. Without this, the next bundle would carry the
    /// attachment's cells without the row and without a tombstone, which no device can insert.
    func recordDescriptionsDeletedWhileApplying() throws {
        let find = """
            SELECT c.key FROM sync_rows c
            WHERE c.tbl = 'securestore_attachments'
            AND NOT EXISTS (SELECT 1 FROM securestore_attachments a WHERE a.id = c.key)
            """
        // Candidates in SQL (no row in the table), then those whose newest cell is later than their tombstone.
        func alive(_ db: Database) throws -> [DatabaseValue] {
            guard let table = try SyncSchema.tables(db).first(where: { $0.name == "securestore_attachments" }) else { return [] }
            let numbers = try SyncDeviceNumbers(db)
            return try db.fetch(find, .none) { try $0.value(at: 0) }.filter { key in
                guard let entry = try SyncClock.read(db, table, key: key, numbers: numbers),
                    let newest = entry.cells.compactMap({ $0?.version }).max()
                else { return false }
                return entry.tombstone.map { !(newest < $0) } ?? true
            }
        }
        guard try !database.read({ db in try alive(db) }).isEmpty else { return }
        try database.write { db in
            for key in try alive(db) {
                try db.execute(SyncSchema.tickSQL)
                try db.execute(
                    """
                    UPDATE sync_rows SET tomb_hlc = (SELECT hlc FROM sync_state WHERE singleton = 0),
                        tomb_device = (SELECT device_number FROM sync_state WHERE singleton = 0),
                        pending = (SELECT hlc FROM sync_state WHERE singleton = 0)
                    WHERE tbl = 'securestore_attachments' AND key = ?
                    """, [key])
            }
        }
    }

    // MARK: Bytes

    /// The attachment files on the remote (this key generation): name (64 hex digits) → path. Other names (a
    /// replication engine's temporaries and conflict copies, our own temporaries) are ignored.
    func remoteAttachmentFiles() -> [String: String] {
        let folder = layoutRoot + "/" + Self.attachmentsFolder
        var files: [String: String] = [:]
        for device in ((try? listDirectory(folder)) ?? []).filter(Self.isDeviceID).sorted() {
            for name in (try? listDirectory(folder + "/" + device)) ?? []
            where name.utf8.count == 64 && name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) {
                if files[name] == nil, SyncLayout.isRegularFile(folder + "/" + device + "/" + name) {
                    files[name] = folder + "/" + device + "/" + name
                }
            }
        }
        return files
    }

    /// Seals the bytes of `attachment` in chunks, writes those the remote lacks into this device's folder, then its
    /// manifest (last: a manifest on the remote means all its chunks are there).
    func upload(
        _ attachment: Attachment, store: AttachmentStore, keys: SyncAttachmentKeys, remote: inout [String: String],
        report: inout SyncReport
    ) throws {
        let folder = Self.attachmentsFolder + "/" + device
        var names: [[UInt8]] = []
        var buffer: [UInt8] = []
        var written = 0
        func send(_ piece: [UInt8]) throws {
            let name = keys.chunkName(piece)
            names.append(name)
            let hex = hexString(name)
            guard remote[hex] == nil else { return }
            guard let sealed = keys.seal(piece, name: name, kind: SyncAttachmentKeys.chunkKind) else {
                throw SyncError(SyncError.Code.remote, "libcrypto could not seal an attachment chunk; nothing was sent")
            }
            try SyncLayout.writeAtomically(sealed, root: layoutRoot, relative: folder + "/" + hex)
            remote[hex] = layoutRoot + "/" + folder + "/" + hex
            written += 1
        }
        try store.read(attachment) { bytes in
            buffer.append(contentsOf: bytes)
            while buffer.count >= Self.attachmentChunkSize {
                try send(Array(buffer[0..<Self.attachmentChunkSize]))
                buffer.removeFirst(Self.attachmentChunkSize)
            }
        }
        if !buffer.isEmpty { try send(buffer) }
        let manifestName = keys.manifestName(attachment)
        guard let sealed = keys.seal(
            SyncAttachmentManifest(size: attachment.size, chunks: names).encoded(), name: manifestName, kind: SyncAttachmentKeys.manifestKind)
        else { throw SyncError(SyncError.Code.remote, "libcrypto could not seal an attachment manifest; nothing was sent") }
        let hex = hexString(manifestName)
        try SyncLayout.writeAtomically(sealed, root: layoutRoot, relative: folder + "/" + hex)
        remote[hex] = layoutRoot + "/" + folder + "/" + hex
        report.sentAttachments += 1
        report.sentAttachmentChunks += written
    }

    /// The bytes of `attachment` (described here, bytes not here) from the local copy of the remote: it is not
    /// pulled first. Each chunk is authenticated under the sync key with its name, its plaintext's HMAC must be
    /// its name, and the whole must have the attachment's size and SHA-256 digest; only then is it stored.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/notFound`` naming what is not on the remote (the device that added
    ///   it has not synced it yet; sync again later), ``SyncError/Code-swift.struct/refusedBundle`` naming a chunk
    ///   or manifest that fails a check. Nothing is stored then.
    public func fetchAttachment(_ attachment: Attachment) throws {
        let store = AttachmentStore(database: database)
        defer { try? store.close() }
        guard try !store.hasBytes(attachment) else { return }
        try fetch(attachment, store: store, keys: SyncAttachmentKeys(key), remote: remoteAttachmentFiles())
    }

    func fetch(_ attachment: Attachment, store: AttachmentStore, keys: SyncAttachmentKeys, remote: [String: String]) throws {
        let what = "the attachment '\(escapedForTerminal(attachment.name, limit: 200))' (\(attachment.id.uuidString.lowercased()))"
        let root = transport.root + "/"
        func shown(_ path: String) -> String { path.hasPrefix(root) ? String(path.dropFirst(root.count)) : path }
        func refused(_ path: String, _ why: String) -> SyncError {
            SyncError(
                SyncError.Code.refusedBundle,
                "refused '\(shown(path))', part of \(what): \(why); nothing of the attachment was stored", path: path)
        }
        let missing = "its bytes are not on this device, and the copy of the remote at '\(transport.root)' does not hold"
        let manifestHex = hexString(keys.manifestName(attachment))
        guard let manifestPath = remote[manifestHex] else {
            throw SyncError(
                SyncError.Code.notFound,
                "\(what): \(missing) them yet (no manifest '\(manifestHex.prefix(16))…'): the device that added it has not "
                    + "synced its bytes; run 'securestore sync now' later; nothing was written")
        }
        guard let opened = keys.open(try SyncLayout.read(manifestPath), name: keys.manifestName(attachment), kind: SyncAttachmentKeys.manifestKind),
            let manifest = SyncAttachmentManifest.decode(opened), manifest.size == attachment.size
        else {
            throw refused(manifestPath, "it does not authenticate under the sync key as this attachment's manifest (tampered with, truncated or forged)")
        }
        let paths = try manifest.chunks.enumerated().map { index, name -> String in
            guard let path = remote[hexString(name)] else {
                throw SyncError(
                    SyncError.Code.notFound,
                    "\(what): \(missing) its chunk \(index + 1) of \(manifest.chunks.count) ('\(hexString(name).prefix(16))…'); "
                        + "run 'securestore sync now' later; nothing was written")
            }
            return path
        }
        do {
            try store.storeBytes(of: attachment) { write in
                for (index, path) in paths.enumerated() {
                    let name = manifest.chunks[index]
                    guard let plaintext = keys.open(try SyncLayout.read(path), name: name, kind: SyncAttachmentKeys.chunkKind),
                        keys.chunkName(plaintext) == name
                    else {
                        throw refused(
                            path, "chunk \(index + 1) of \(manifest.chunks.count) does not authenticate under the sync key "
                                + "(tampered with, truncated or forged)")
                    }
                    try plaintext.withUnsafeBytes { try write($0) }
                }
            }
        } catch let error as SecureStoreError where error.code == SecureStoreError.Code.verificationFailed {
            throw refused(manifestPath, error.message)
        }
    }
}
