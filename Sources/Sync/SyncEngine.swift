// The sync engine: set up, join, and one round of sync (pull, verify, apply, seal, publish).
public import EncryptedDatabase
public import Foundation
public import Keychain
public import SecureStore
internal import SecureStoreCore
#if canImport(Glibc)
internal import Glibc
#endif

/// Where a sync group's bundles travel.
public enum SyncRemote: Sendable, Equatable, CustomStringConvertible {
    /// A git remote (any URL the system `git` reaches), cloned beside the database.
    case git(String)
    /// A folder that Syncthing, Nextcloud, rclone or a shared disk replicates.
    case folder(String)

    /// `git URL` or `folder PATH`.
    public var description: String {
        switch self {
        case .git(let url): "git \(url)"
        case .folder(let path): "folder \(path)"
        }
    }

    /// The command-line option that names a remote of this kind: `--git` or `--folder`.
    public var option: String {
        switch self {
        case .git: "--git"
        case .folder: "--folder"
        }
    }

    /// How `sync_state` stores it: its kind (`git` or `folder`) and its URL or path.
    var stored: (kind: String, location: String) {
        switch self {
        case .git(let url): ("git", url)
        case .folder(let path): ("folder", path)
        }
    }

    /// The remote `sync_state` names. A kind other than `git` or `folder` (a damaged database, or one set up by a
    /// later version) is an error, never a folder by default: a git URL read as a folder path would have this device
    /// write its bundles into a directory named like the URL.
    init(storedKind kind: String, location: String) throws(SyncError) {
        switch kind {
        case "git": self = .git(location)
        case "folder": self = .folder(location)
        default:
            throw SyncError(
                SyncError.Code.damagedState,
                "the database's sync settings name a remote of an unknown kind (\(kind.count) characters, neither 'git' nor 'folder'); nothing was synced — set up by a later version, or damaged")
        }
    }
}

/// What one round of ``SyncEngine/sync()`` did.
public struct SyncReport: Sendable, Equatable {
    /// Bundles of other devices applied.
    public var appliedBundles = 0
    /// Rows inserted, changed or deleted by them.
    public var changedRows = 0
    /// Values that lost a concurrent edit and went to the conflict log.
    public var newConflicts = 0
    /// Bundles this device sealed and published.
    public var sentBundles = 0
    /// Row changes in them.
    public var sentRows = 0
    /// Bundles of this device itself that its database did not have: it was restored from a backup older than
    /// them (or a sync was interrupted after publishing). They are applied like another device's, so the device
    /// gets back what it had sent and converges with the others.
    public var reappliedOwnBundles = 0
    /// Bundles kept pending: written by a newer version (a newer bundle format, or tables or columns this
    /// database does not have yet). They are applied once this device has been upgraded.
    public var pendingBundles: [String] = []
    /// Attachments whose bytes this device sealed and wrote to the remote, and the chunks written for them (a
    /// chunk the remote already held is not written again). Docs/sync.md, "Attachments".
    public var sentAttachments = 0
    /// See ``sentAttachments``.
    public var sentAttachmentChunks = 0
    /// Attachments added on other devices whose bytes were fetched, checked and stored here.
    public var fetchedAttachments = 0
    /// Attachments described here whose bytes are not on this device after the round: lazy, or not on the remote yet.
    public var missingAttachments = 0
    /// The snapshot this device started from, relative to the remote's root; nil when none. A new device starts
    /// from one, and so does a device whose next bundle of some device is gone from the remote (removed by
    /// ``SyncEngine/clean(attachmentGrace:)`` after the snapshot held it: a device restored from an older backup).
    public var snapshot: String?
    /// This device's own bundles that had vanished from the remote (deleted, or the remote restored from an older
    /// copy), sent again from the copies it keeps; the sync then throws ``SyncError/Code-swift.struct/rolledBack``
    /// saying so.
    public var resentBundles = 0
    /// Bundles that snapshot held beyond this device's position, not applied one by one.
    public var snapshotBundles = 0
    /// Snapshots refused (tampered with, truncated, replayed), each with its reason; the bundles were used instead.
    public var refusedSnapshots: [String] = []
    /// Bundles this device needs next that are not on the remote while later ones of their device are, and that no
    /// snapshot holds (`generation-N/devices/<device>/<number>-…`): removed by ``SyncEngine/clean(attachmentGrace:)``, or not delivered
    /// yet. That device's later bundles wait. Where the bundle was certainly removed the sync also throws
    /// ``SyncError/Code-swift.struct/missingBundle``. Also the bundles of a chain the remote shows short of what this
    /// device verified (it applied them, or a verified seen vector counts them: deleted, or the remote restored from
    /// an older copy) or with a hole inside: nothing of that chain is applied while it is short (on a new device,
    /// nothing at all), and the sync throws ``SyncError/Code-swift.struct/rolledBack`` — at once where it cannot be a
    /// late delivery (files this device applied, its own chain, git), else once a folder has shown it short for an hour.
    public var missingBundles: [String] = []
    /// Deleted rows whose tombstones every known device has seen, dropped from the bookkeeping here.
    public var prunedTombstones = 0
    /// What is on the remote under a name of ours but is not what that name says, relative to the remote's root:
    /// a symbolic link, directory, FIFO, socket or device named like a bundle, a seen vector or an attachment's
    /// file; anything but a folder named like a device's folder; a device folder none of whose bundles
    /// authenticates as that device's, of a device never applied here (planted by someone who can write the
    /// remote). Each is skipped — never opened, followed or applied — and this device's own changes still go out.
    public var skippedFiles: [String] = []
}

/// A device of the sync group as this device knows it.
public struct SyncDevice: Sendable, Equatable {
    /// The device id (32 hexadecimal digits).
    public let id: String
    /// Its host name, as its last bundle said.
    public let name: String
    /// The last of its bundles applied here (0: none).
    public let sequence: Int64
    /// When that bundle was applied here (for this device itself: its last sync).
    public let appliedAt: Date?
    /// Whether this is the device itself.
    public let isThisDevice: Bool
}

/// A value that lost a concurrent edit (or a delete), kept in the encrypted conflict log.
public struct SyncConflict: Sendable, Equatable {
    /// The log entry's number (what ``SyncEngine/restoreConflict(_:)`` takes).
    public let id: Int64
    /// The table and column.
    public let table: String
    /// The column.
    public let column: String
    /// The row's key (a UUID for the task list).
    public let key: DatabaseValue
    /// The value that lost.
    public let lostValue: DatabaseValue
    /// The device that wrote it, and when (its hybrid clock's time).
    public let lostDevice: String
    /// When the losing value was written.
    public let lostAt: Date
    /// The device whose value won, and when.
    public let wonDevice: String
    /// When the winning value (or the delete) was written.
    public let wonAt: Date
    /// Whether it has been restored.
    public let restored: Bool
}

/// The state of sync on one database.
public struct SyncStatus: Sendable, Equatable {
    /// This device's id.
    public let device: String
    /// The remote.
    public let remote: SyncRemote
    /// Rows changed here and not yet sent.
    public let unsentRows: Int
    /// When this device last synced, if ever.
    public let lastSync: Date?
    /// The bundles this device has published.
    public let sequence: Int64
    /// The synced tables.
    public let tables: [String]
    /// Entries in the conflict log not restored.
    public let conflicts: Int
}

/// End-to-end-encrypted sync of a keyed database's tables through a git remote or a replicated folder.
///
/// ```swift
/// let database = try KeyedDatabase(paths: paths, name: "tasks", keychain: Keychain())
/// let (engine, code) = try SyncEngine.initialize(database: database, remote: .folder("/srv/sync"), tables: ["tasks"])
/// // …on the other machine: SyncEngine.join(database: other, remote: …, tables: ["tasks"], pairingCode: code)
/// let report = try engine.sync()
/// ```
///
/// Changes are captured by triggers in the same transaction as the change (`sync_*` tables and triggers,
/// created here, never by an application's migrations). Each device appends sealed bundles to its own folder of
/// the remote; every other device verifies and merges them per column (Docs/sync.md).
public final class SyncEngine: Sendable {
    /// The database.
    public let database: any DatabaseWriter
    /// This device's id.
    public let device: String
    let key: SyncKey
    /// This device's Ed25519 signing key (SyncSigning.swift): everything it writes to the remote is signed with it.
    let signingKey: SyncSigningKey
    /// The key's generation: 1 for the group's first key, one more after each `removeDevice` rotation. The
    /// bundles of generation N > 1 live under `generation-N/` of the remote.
    let generation: Int
    let transport: any SyncTransport & Sendable
    /// The remote this device syncs through.
    public let remote: SyncRemote
    /// The file whose `flock` serializes syncs of this database across processes (two at once would number two
    /// different bundles alike): `.<name>.sync-lock` beside the database.
    let lockPath: String
    /// Where the copies of this device's sealed bundles are kept: `<name>.sync-sent` beside the database
    /// (``sentCopies``).
    let sentCopiesRoot: String
    /// Set when opening this engine found the database copied from another machine, where it synced as the
    /// device with this id: this copy has just become a new device (``device``), so the two machines never extend
    /// one chain of bundles. The device it was copied from is another device of the group now. Nil otherwise.
    public let copiedFromDevice: String?
    /// The application's merge functions (``setMerge(forTable:_:)``).
    let merges = SyncMergeFunctions()

    /// Where this generation's files are: the transport's root, or its `generation-N` folder.
    var layoutRoot: String { Self.layoutRoot(transport.root, generation: generation) }

    static func layoutRoot(_ root: String, generation: Int) -> String {
        generation == 1 ? root : root + "/generation-\(generation)"
    }

    /// The newest key generation the remote holds (the highest `generation-N` folder with a key check, else 1).
    static func newestGeneration(_ root: String) -> Int {
        let names = (try? listDirectory(root)) ?? []
        let numbers = names.compactMap { name -> Int? in
            guard name.hasPrefix("generation-"), let number = Int(name.dropFirst("generation-".count)), number > 1 else { return nil }
            return FileManager.default.fileExists(atPath: root + "/" + name + "/" + SyncLayout.keyCheck) ? number : nil
        }
        return numbers.max() ?? 1
    }

    /// The keychain service of sync keys: `<app>.sync-key` (the account is the database id).
    public static func keyService(_ paths: AppPaths) -> String { "\(paths.app).sync-key" }

    /// This machine's name (gethostname(2): no name lookup that could hang), sent inside bundles.
    static var hostName: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "" }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func isDeviceID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    static func transport(_ remote: SyncRemote, clone: String, device: String? = nil) -> any SyncTransport & Sendable {
        switch remote {
        case .git(let url): GitTransport(url: url, root: clone, device: device)
        case .folder(let path): FolderTransport(root: path)
        }
    }

    static func clonePath(_ database: KeyedDatabase) -> String {
        database.paths.dataDirectory.appendingPathComponent("\(database.name).sync", isDirectory: true).path
    }

    init(
        database: any DatabaseWriter, key: SyncKey, generation: Int = 1, clone: String,
        signingKey: (_ device: String) throws -> SyncSigningKey
    ) throws {
        // A database synced by an earlier version: its clock becomes one entry a row (one transaction).
        if try database.read({ try SyncClock.needsUpgrade($0) }) { try database.write { try SyncClock.upgrade($0) } }
        self.copiedFromDevice = try Self.adoptMachine(database)
        let state = try database.read { db -> (String, String, String)? in
            guard try db.tableExists("sync_state") else { return nil }
            return try db.fetchOne("SELECT device, remote_kind, remote_location FROM sync_state") { row in
                (try row.string(at: 0), try row.string(at: 1), try row.string(at: 2))
            }
        }
        guard let state else {
            throw SyncError(SyncError.Code.notEnabled, "sync is not set up on the database '\(database.path)'")
        }
        self.database = database
        self.device = state.0
        self.key = key
        self.signingKey = try signingKey(state.0)
        self.generation = generation
        self.remote = try SyncRemote(storedKind: state.1, location: state.2)
        self.transport = Self.transport(remote, clone: clone, device: state.0)
        self.lockPath = directoryPart(clone) + "/." + namePart(clone) + "-lock"
        self.sentCopiesRoot = clone + "-sent"
    }

    /// Runs `body` holding this database's sync lock (waiting for another process's sync to end).
    func withSyncLock<T>(_ body: () throws -> T) throws -> T {
        let lock: FileLock
        do {
            lock = try FileLock.open(lockPath)
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot open the sync lock '\(lockPath)': \(error)")
        }
        defer { lock.close() }
        do {
            try lock.lock(.exclusive)
        } catch {
            throw SyncError(SyncError.Code.remote, "cannot lock '\(lockPath)': \(error)")
        }
        return try body()
    }

    /// The engine of a database on which sync is set up, with its key from the database's key store.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/notEnabled``, ``SyncError/Code-swift.struct/missingKey``, or the
    ///   key store's error.
    public convenience init(database: KeyedDatabase) throws {
        guard let secret = try database.keychain.secret(service: Self.keyService(database.paths), account: database.databaseID)
            ?? Self.keyOfRestoredDatabase(database)
        else {
            if try database.read({ try $0.tableExists("sync_state") }) {
                throw SyncError(
                    SyncError.Code.missingKey,
                    "the sync key of database '\(database.name)' is not in the key store; nothing was synced")
            }
            throw SyncError(SyncError.Code.notEnabled, "sync is not set up on database '\(database.name)'")
        }
        let (generation, key) = try Self.storedKey(secret)
        try self.init(database: database, key: key, generation: generation, clone: Self.clonePath(database)) { device in
            try Self.signingKey(database: database, device: device)
        }
    }

    // MARK: Setting up

    /// Sets sync up on `database` as the first device of a new sync group at `remote`: makes a random sync key,
    /// stores it in the database's key store, adds the capture triggers for `tables`, and writes the remote's
    /// marker and key check. Returns the engine and the pairing code other devices join with.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/alreadyEnabled`` when the database syncs already or the remote
    ///   holds a sync group (join it instead); ``SyncError/Code-swift.struct/invalidArgument`` for a table that
    ///   cannot sync (a rowid table). Nothing is changed then.
    public static func initialize(database: KeyedDatabase, remote: SyncRemote, tables: [String]) throws -> (SyncEngine, pairingCode: Secret) {
        try refuseIfEnabled(database)
        let transport = Self.transport(remote, clone: clonePath(database))
        if case .folder(let path) = remote, !FileManager.default.fileExists(atPath: path) {
            do {
                try makeDirectories(path)
            } catch {
                throw SyncError(SyncError.Code.remote, "cannot create the sync folder '\(path)': \(error)")
            }
        }
        try transport.pull()
        if FileManager.default.fileExists(atPath: transport.root + "/" + SyncLayout.keyCheck) {
            throw SyncError(
                SyncError.Code.alreadyEnabled,
                "the remote \(remote) already holds a sync group; join it with its pairing code instead; nothing was changed")
        }
        let key = SyncKey.random()
        try enable(database, remote: remote, tables: tables, key: key)
        let engine = try SyncEngine(database: database)  // makes and stores this device's signing key
        try SyncLayout.writeAtomically(SyncLayout.markerText, root: transport.root, relative: SyncLayout.marker)
        try SyncLayout.writeAtomically(try engine.signedKeyCheck(), root: transport.root, relative: SyncLayout.keyCheck)
        try transport.publish([SyncLayout.marker, SyncLayout.keyCheck])
        return (engine, try pairingCode(key))
    }

    /// Joins the sync group at `remote` with the pairing code another device printed: checks the code against
    /// the remote's key check, stores the key, and adds the capture triggers for `tables`. Rows already in the
    /// database are sent with the first sync and merged like any change. Call ``sync()`` next.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/invalidPairingCode`` when the code is malformed or is not the
    ///   group's; ``SyncError/Code-swift.struct/remote`` when the remote holds no sync group. Nothing is
    ///   changed then.
    public static func join(database: KeyedDatabase, remote: SyncRemote, tables: [String], pairingCode: Secret) throws -> SyncEngine {
        let key = try key(fromPairingCode: pairingCode)
        try refuseIfEnabled(database)
        let transport = Self.transport(remote, clone: clonePath(database))
        try transport.pull()
        // The newest generation whose key check this code opens: a planted newer one does not stop a join.
        let generation = generationOpening(transport.root, key: key) ?? newestGeneration(transport.root)
        let checkPath = layoutRoot(transport.root, generation: generation) + "/" + SyncLayout.keyCheck
        guard FileManager.default.fileExists(atPath: checkPath) else {
            throw SyncError(
                SyncError.Code.remote,
                "the remote \(remote) holds no sync group (no key-check file); run 'sync init' on the first device; nothing was changed")
        }
        guard SealedBundle.checks(try SyncLayout.read(checkPath), key: key) else {
            throw SyncError(
                SyncError.Code.invalidPairingCode,
                "the pairing code is well formed but is not the key of the sync group at \(remote); nothing was changed")
        }
        try enable(database, remote: remote, tables: tables, key: key, generation: generation)
        return try SyncEngine(database: database)  // makes and stores this device's signing key
    }

    /// The highest key generation on the remote whose key check opens under `key`, or nil.
    static func generationOpening(_ root: String, key: SyncKey) -> Int? {
        let names = (try? listDirectory(root)) ?? []
        let numbers = names.compactMap { name -> Int? in
            guard name.hasPrefix("generation-"), let number = Int(name.dropFirst("generation-".count)), number > 1 else { return nil }
            return number
        }
        for number in numbers.sorted(by: >) + [1] {
            guard let check = try? SyncLayout.read(layoutRoot(root, generation: number) + "/" + SyncLayout.keyCheck),
                SealedBundle.checks(check, key: key)
            else { continue }
            return number
        }
        return nil
    }

    /// This generation's key check, signed by this device (a new generation is believed only when a device on the
    /// roster signed its key check).
    func signedKeyCheck() throws -> [UInt8] {
        guard let check = SealedBundle.keyCheck(key: key),
            let signed = SyncSignedFile.wrap(check, device: device, key: signingKey, generation: generation)
        else { throw SyncError(SyncError.Code.remote, "libcrypto could not seal and sign the key check") }
        return signed
    }

    /// Refuses to set sync up again on a database that syncs, before anything is fetched, cloned or stored: the
    /// clone beside the database, its key and its state are those of the group it is in.
    static func refuseIfEnabled(_ database: KeyedDatabase) throws {
        let already = try database.read { try $0.tableExists("sync_state") }
        if already {
            throw SyncError(
                SyncError.Code.alreadyEnabled,
                "sync is already set up on database '\(database.name)' (this device is in a sync group); nothing was changed. "
                    + "To move it to another group, use another database ('--name') or delete this one's sync set-up first")
        }
    }

    static func enable(
        _ database: KeyedDatabase, remote: SyncRemote, tables: [String], key: SyncKey, generation: Int = 1
    ) throws {
        try refuseIfEnabled(database)
        // Check the tables before anything is stored.
        _ = try database.read { db in try tables.map { try SyncSchema.describe(db, table: $0) } }
        let service = keyService(database.paths)
        try database.keychain.set(
            storedSecret(key, generation: generation), service: service, account: database.databaseID,
            label: "SecureStore sync key of \(database.name)")
        do {
            try database.write { db in
                try enableSchema(db, remote: remote, tables: tables)
                try db.execute("UPDATE sync_state SET generation = ? WHERE singleton = 0", [generation])
            }
        } catch {
            _ = try? database.keychain.delete(service: service, account: database.databaseID)
            throw error
        }
    }

    static func enableSchema(_ db: Database, remote: SyncRemote, tables: [String]) throws {
        try db.executeScript(SyncSchema.createSQL)
        let (kind, location) = remote.stored
        try db.execute(
            """
            INSERT INTO sync_state (singleton, device, hlc, applying, remote_kind, remote_location, sequence, last_hash)
            VALUES (0, ?, 0, 0, ?, ?, 0, ?)
            """, [hexString(KeyFile.randomBytes(16)), kind, location, Data(count: 32)])
        let numbers = try SyncDeviceNumbers(db)
        let device = try db.scalar("SELECT device FROM sync_state WHERE singleton = 0", as: String.self) ?? ""
        try db.execute("UPDATE sync_state SET device_number = ? WHERE singleton = 0", [try numbers.number(device)])
        for table in tables { _ = try SyncSchema.add(db, table: table) }
        try SyncUndo.upgrade(db)
        try SyncDeleteLog.upgrade(db)
    }

    /// Adds tables to sync on this device (an application's new version that syncs more): their capture
    /// triggers, and their existing rows as changes to send. Bundles that were kept pending because they carry
    /// these tables apply at the next ``sync()``.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/invalidArgument`` for a table that cannot sync; nothing is changed.
    public func addTables(_ names: [String]) throws {
        try database.write { db in
            for name in names { _ = try SyncSchema.add(db, table: name) }
        }
    }

    // MARK: Syncing

    /// The largest number of row changes in one bundle.
    static let rowsPerBundle = 2_000
    /// The rows after which no further bundle joins a transaction (bundles are applied as they are read: one
    /// bundle's rows are in memory at a time). 100 000 rows: a 1 000 000-task join made 10 commits instead of 50
    /// (the deferred search indexing and the commit each cost per transaction): Docs/performance.md, "Sync".
    static let rowsPerTransaction = 100_000
    /// The time after which no further bundle joins a transaction: the write lock is not held for long (another
    /// process's write waits for it up to its busy timeout, 10 s by default) on a machine slower than this one,
    /// where 100 000 rows take 1.7–2.7 s.
    static let transactionDuration = Duration.seconds(2)

    /// One round: pulls the remote, verifies and applies every other device's new bundles (each in one
    /// transaction), then seals this device's unsent changes into new bundles and publishes them.
    ///
    /// A bundle that fails any check — its name's hash, its sequence, its link to the previous bundle, its
    /// authentication tag — is refused whole: nothing of it is applied, later bundles of that device wait, and
    /// the error names it (after this device's own changes are published). A bundle from a newer version is
    /// kept pending (``SyncReport/pendingBundles``).
    ///
    /// - Throws: ``SyncError/Code-swift.struct/refusedBundle`` (``SyncError/path`` names the file),
    ///   ``SyncError/Code-swift.struct/remote``, or a database error.
    @discardableResult
    public func sync() throws -> SyncReport {
        try withSyncLock { try syncLocked() }
    }

    func syncLocked() throws -> SyncReport {
        let (report, failure) = try syncRound()
        if var failure {
            failure.report = report
            throw failure
        }
        return report
    }

    /// One round of ``sync()``: everything it can do is done, and what it refused or could not send is returned
    /// with its report rather than thrown (``clean(attachmentGrace:)`` goes on around it).
    func syncRound() throws -> (SyncReport, SyncError?) {
        var report = SyncReport()
        try transport.pull()
        // SyncRoster.swift: who is in the group, with which key; this device's own statement published first.
        try database.write { db in
            try db.executeScript(Self.rosterSQL)
            try SyncUndo.upgrade(db)
            try SyncDeleteLog.upgrade(db)
        }
        try publishRosterEntry()
        let roster = try readRoster()
        // SyncUndo.swift: a removal read now (of this generation, or carried by a newer one's roster) undoes what the
        // removed device's later bundles brought, before anything is sent or a new generation entered.
        try undoRemovedDevices()
        let ignoredGenerations = try adoptGeneration(roster)
        try prepareAttachments()
        let planted = try plantedDeviceFolders(roster)
        let prefix = generation == 1 ? "" : "generation-\(generation)/"
        report.skippedFiles = ignoredGenerations + roster.refused
            + (SyncLayout.plantedEntries(root: layoutRoot) + planted.sorted().map { SyncLayout.devices + "/" + $0 }).map { prefix + $0 }
        // SyncChainHeads.swift: how far every chain reached, this device's own lost bundles sent again, and the chains
        // the remote shows short (none of their bundles is applied while they are; a new device applies nothing).
        try learnHeads(skipping: planted, roster: roster)
        let resent = try resendOwnBundles(skipping: planted)
        report.resentBundles = resent.count
        let short = try shortChains(skipping: planted)
        var refusals = shortChainErrors(short, resent: resent, report: &report)
        let stale = Set(short.map(\.device))
        let fresh = try database.read { db in
            try db.scalar("SELECT sequence FROM sync_state", as: Int64.self) == 0
                && db.scalar("SELECT count(*) FROM sync_devices", as: Int.self) == 0
        }
        if !(fresh && !stale.isEmpty) {
            try startFromSnapshot(&report, skipping: planted, roster: roster)  // SyncSnapshot.swift
            refusals += try missingBundles(&report, skipping: planted.union(stale))
            refusals += try applyIncoming(&report, skipping: planted.union(stale), roster: roster)
            try settleSources(roster)  // SyncUndo.swift
        }
        refusals += try exchangeAttachments(&report)
        let seenChanged = try publishSeenVector()  // SyncPruning.swift: goes out with this sync's bundles
        let unsent = try sendOutgoing(&report, ownChainShort: stale.contains(device), seenChanged: seenChanged, roster: roster)
        report.prunedTombstones = try pruneTombstones(roster: roster).prunedRows
        if let first = refusals.first {
            // A snapshot refused while it was needed for a gap is part of why the gap stays.
            let refusedSnapshots = refusals.contains { $0.code == SyncError.Code.missingBundle } ? report.refusedSnapshots : []
            return (
                report,
                SyncError(
                    first.code,
                    (refusedSnapshots + refusals.map(\.message)).joined(separator: "; ")
                        + (unsent == nil ? "; this device's own changes, if any, were sent" : "; \(unsent!.message)"), path: first.path)
            )
        }
        if let unsent { return (report, unsent) }
        // The last sync is the last one that refused nothing (a refusal applies nothing; the database may only have
        // learned how far chains reached).
        let now = microsecondsSince1970(Date())
        try database.write { db in try db.execute("UPDATE sync_state SET last_sync = ? WHERE singleton = 0", [now]) }
        return (report, nil)
    }

    /// Device folders of this generation (ids, not this device's) that hold bundles of which none authenticates as
    /// that device's, of a device never applied here and without a seen vector that opens: planted by someone who can
    /// write the remote, not a device of the group. They are skipped and listed (``SyncReport/skippedFiles``), and
    /// hold back neither pruning nor cleaning. A device folder with no bundle in it yet (a device whose first bundle
    /// a replication engine has not delivered) is not one. Reads at most one bundle of each such folder that opens.
    /// With a roster, a folder of a device that is not on it (or was removed before anything) is skipped as well.
    func plantedDeviceFolders(_ roster: SyncRoster? = nil) throws -> Set<String> {
        let applied = Set(try database.read { db in try db.fetch("SELECT device FROM sync_devices") { try $0.string(at: 0) } })
        return Set(
            SyncLayout.deviceIDs(root: layoutRoot).filter { other in
                if let roster, other != device, !roster.admits(other) { return true }
                guard other != device, !applied.contains(other) else { return false }
                let bundles = SyncLayout.bundles(root: layoutRoot, device: other)
                guard !bundles.isEmpty, SyncSeenFiles.newest(root: layoutRoot, device: other, key: key) == nil else { return false }
                return !bundles.contains { bundle in
                    (try? SyncLayout.read(bundle.path)).flatMap { SealedBundle.open($0, device: other, key: key) } != nil
                }
            })
    }

    /// The same as ``sync()``, off the caller's task.
    @discardableResult
    public func sync() async throws -> SyncReport {
        try await Task.detached { try self.sync() }.value
    }

    /// A bundle read and verified, waiting to be applied.
    private struct VerifiedBundle {
        var rows: [SyncRowChange]
        var lost: [SyncLostEdit] = []
        var deviceName: String
        var sequence: Int64
        var hash: [UInt8]
    }

    private func applyIncoming(_ report: inout SyncReport, skipping planted: Set<String>, roster: SyncRoster) throws -> [SyncError] {
        let horizon = settledHorizon(roster)
        var refusals: [SyncError] = []
        let root = layoutRoot
        let known = try database.read { db in
            try db.fetch("SELECT device, sequence, last_hash FROM sync_devices") { row in
                (try row.string(at: 0), (try row.int64(at: 1), [UInt8](try row.data(at: 2))))
            }
        }
        var devices = Dictionary(uniqueKeysWithValues: known)
        let tables = try database.read { try SyncSchema.tables($0) }
        let byName = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0) })
        // This device's own bundles too: those beyond the sequence its database recorded were written by this
        // device after the backup it was restored from (or just before a crash); the others have applied them.
        devices[self.device] = try database.read { db in
            try db.fetchOne("SELECT sequence, last_hash FROM sync_state") { (try $0.int64(at: 0), [UInt8](try $0.data(at: 1))) }
        }
        for device in SyncLayout.deviceIDs(root: root) where !planted.contains(device) {
            let isThisDevice = device == self.device
            var (sequence, lastHash) = devices[device] ?? (0, [UInt8](repeating: 0, count: 32))
            let files = SyncLayout.bundles(root: root, device: device).filter { $0.sequence > UInt64(sequence) }
            var position = files.startIndex
            var stopped = false
            /// The device's next bundle, read and verified, or nil (none left, one not delivered yet, one refused —
            /// in `refusals` — or one from a newer version, in `report.pendingBundles`: the device's later
            /// bundles wait). Advances `sequence` and `lastHash` past the bundle it returns.
            func nextVerified() throws -> VerifiedBundle? {
                guard !stopped, position < files.endIndex else { return nil }
                func shown(_ file: (sequence: UInt64, hash: String, path: String)) -> String {
                    (generation == 1 ? "" : "generation-\(generation)/")
                        + "devices/\(device)/\(SealedBundle.paddedSequence(file.sequence))-\(file.hash)"
                }
                guard files[position].sequence == UInt64(sequence) + 1 else {  // not delivered yet: wait for it
                    stopped = true
                    return nil
                }
                // Every file of that number: one the roster does not let be believed (not signed by that device's key,
                // or past the last bundle of a removed device) is skipped and listed, never applied; of the others
                // there must be one.
                let candidates = files[position...].prefix { $0.sequence == files[position].sequence }
                var believed: [((sequence: UInt64, hash: String, path: String), [UInt8])] = []
                for candidate in candidates {
                    // Replaced since it was listed (a symbolic link, a FIFO): skipped and listed like one found listing.
                    guard let bytes = try? SyncLayout.read(candidate.path) else {
                        report.skippedFiles.append(shown(candidate))
                        continue
                    }
                    guard roster.accepts(bytes, device: device, sequence: Int64(candidate.sequence), generation: generation) else {
                        report.skippedFiles.append(shown(candidate))
                        continue
                    }
                    believed.append((candidate, bytes))
                }
                func refuse(_ why: String) -> VerifiedBundle? {
                    let file = believed.first?.0 ?? candidates.first!
                    refusals.append(
                        SyncError(SyncError.Code.refusedBundle, "refused the bundle '\(shown(file))': \(why); nothing of it was applied", path: file.path))
                    stopped = true
                    return nil
                }
                guard let (file, bytes) = believed.first else {
                    // Only files the roster does not let be believed at this number: the chain stops here, and says so
                    // (a removed device's later bundles stop it without an error: they are expected).
                    if !isThisDevice, roster.removed[device] == nil, let first = candidates.first, report.skippedFiles.contains(shown(first)),
                        (try? SyncLayout.read(first.path)) != nil
                    {
                        return refuse(
                            "it is not signed by the key of device \(device.prefix(8)) on the roster (written by a holder of the sync key "
                                + "without that device's signing key, or tampered with); it is skipped")
                    }
                    stopped = true
                    return nil
                }
                if believed.count > 1 {
                    return refuse("device \(device.prefix(8)) has two bundles numbered \(file.sequence) (a restored or copied device)")
                }
                guard hexString(SealedBundle.sha256(bytes)) == file.hash else {
                    return refuse("its contents do not match the hash in its name (damaged, truncated or tampered with)")
                }
                guard let header = SealedBundle.parseHeader(bytes) else {
                    return refuse("it is not a sealed bundle (truncated or foreign)")
                }
                guard header.sequence == file.sequence else {
                    return refuse("its header says it is bundle \(header.sequence) (renamed or reordered)")
                }
                guard header.previousHash == lastHash else {
                    return refuse("it does not follow the device's bundle \(sequence) (reordered, replayed or forged)")
                }
                guard let plaintext = SealedBundle.open(bytes, device: device, key: key) else {
                    return refuse("it does not authenticate under the sync key (forged, tampered with, truncated, or moved from another device's folder)")
                }
                guard header.format <= SealedBundle.newestFormat,
                    let payload = SyncPayload.decode(plaintext),
                    payload.rows.allSatisfy({ row in
                        byName[row.table].map { table in row.cells.allSatisfy { table.columns.contains($0.column) } } ?? false
                    }),
                    payload.lost.allSatisfy({ byName[$0.table]?.columns.contains($0.column) ?? false })
                else {
                    // Authenticated but written by a newer version: kept, applied after an upgrade.
                    report.pendingBundles.append(shown(file))
                    stopped = true
                    return nil
                }
                // A bundle carries at most as many lost edits as rows (this version sends at most that many): more is
                // a member flooding every device's conflict log.
                guard payload.lost.count <= Self.rowsPerBundle else {
                    return refuse("it carries \(payload.lost.count) lost edits, more than a bundle may (\(Self.rowsPerBundle))")
                }
                position += candidates.count
                sequence = Int64(file.sequence)
                lastHash = SealedBundle.sha256(bytes)
                return VerifiedBundle(rows: payload.rows, lost: payload.lost, deviceName: payload.deviceName, sequence: sequence, hash: lastHash)
            }
            // The verified bundles are applied as they are read, up to `rowsPerTransaction` rows to a transaction
            // (fewer commits, and the deferred full-text indexing runs once per transaction), each bundle whole or
            // not at all (a failure rolls the transaction back; the next sync starts again after the last bundle
            // applied). One bundle's rows are in memory at a time.
            var next = try nextVerified()
            while let first = next {
                let deferIndexing = first.rows.count >= 64 || position < files.endIndex
                let now = microsecondsSince1970(Date())
                var last = first
                var bundles = 0
                var lostLogged = 0
                let (changed, conflicts) = try database.write { db -> (Int, Int) in
                    try db.execute("UPDATE sync_state SET applying = 1 WHERE singleton = 0")
                    let clock = ContinuousClock()
                    let started = clock.now
                    var rows = 0
                    let result = try SyncMerge.apply(
                        db, tables: byName, deferringIndexing: deferIndexing, now: now, merges: merges
                    ) { () throws -> (rows: [SyncRowChange], source: Int64?, sender: String?)? in
                        let bundle: VerifiedBundle
                        if bundles == 0 {
                            bundle = first
                        } else {
                            guard rows < Self.rowsPerTransaction, clock.now - started < Self.transactionDuration,
                                let following = try nextVerified()
                            else { return nil }
                            bundle = following
                        }
                        bundles += 1
                        rows += bundle.rows.count
                        last = VerifiedBundle(rows: [], deviceName: bundle.deviceName, sequence: bundle.sequence, hash: bundle.hash)
                        // Another device's bundle is recorded as the source of what it sets (SyncUndo.swift) unless
                        // already settled; this device's own bundles applied again are its own edits.
                        let source = try Self.undoSource(db, writer: device, sequence: bundle.sequence, thisDevice: self.device, horizon: horizon)
                        // Its writer's values that lost before they were ever sent: logged here too (SyncDeleteLog.swift).
                        // This device's own bundle applied again (after a crash or a restore): what it carried is sent.
                        if !bundle.lost.isEmpty {
                            if isThisDevice {
                                try SyncDeleteLog.sentLostUnsent(db, bundle.lost)
                            } else {
                                lostLogged += try SyncDeleteLog.logLost(db, bundle.lost, sender: device, tables: byName, source: source, now: now)
                            }
                        }
                        return (bundle.rows, source, device)
                    }
                    if isThisDevice {
                        try db.execute(
                            "UPDATE sync_state SET sequence = ?, last_hash = ? WHERE singleton = 0", [last.sequence, Data(last.hash)])
                    } else {
                        try db.execute(
                            "INSERT OR REPLACE INTO sync_devices (device, name, sequence, last_hash, applied_at) VALUES (?, ?, ?, ?, ?)",
                            [device, last.deviceName, last.sequence, Data(last.hash), now])
                    }
                    try db.execute("UPDATE sync_state SET applying = 0 WHERE singleton = 0")
                    return result
                }
                devices[device] = (last.sequence, last.hash)
                if isThisDevice { report.reappliedOwnBundles += bundles } else { report.appliedBundles += bundles }
                report.changedRows += changed
                report.newConflicts += conflicts + lostLogged
                next = try nextVerified()
            }
        }
        return refusals
    }

    /// Seals and publishes this device's unsent changes. Returns the reason when they cannot be sent without
    /// forking this device's chain of bundles (nothing is sent then).
    private func sendOutgoing(
        _ report: inout SyncReport, ownChainShort: Bool, seenChanged: Bool, roster: SyncRoster
    ) throws -> SyncError? {
        let root = layoutRoot
        if ownChainShort {
            if seenChanged {
                try transport.publish([])
            }
            return SyncError(
                SyncError.Code.rolledBack,
                "this device's changes were not sent and are kept: its own chain on the remote is not whole (sending would "
                    + "leave a hole in it)")
        }
        // This device's bundles beyond what the database recorded were applied by `applyIncoming` (which moved the
        // recorded sequence past them); one it refused (damaged) is not followed: the chain would fork at it.
        var (sequence, lastHash) = try database.read { db in
            try db.fetchOne("SELECT sequence, last_hash FROM sync_state") { (try $0.int64(at: 0), [UInt8](try $0.data(at: 1))) }!
        }
        // A file in this device's folder that it did not sign (planted by a holder of the sync key) is not part of its chain.
        if let file = SyncLayout.bundles(root: root, device: device).first(where: { file in
            file.sequence > UInt64(sequence)
                && (try? SyncLayout.read(file.path)).map { roster.accepts($0, device: device, sequence: Int64(file.sequence), generation: generation) } ?? true
        }) {
            return SyncError(
                SyncError.Code.refusedBundle,
                "this device's own bundle \(sequence + 1) \(file.sequence == UInt64(sequence) + 1 ? "was refused" : "is missing from the remote while later ones are there") ('\(file.path)') "
                    + "(the remote was damaged or restored from an older copy); this device's changes were not sent and are kept "
                    + "(see Docs/sync.md, 'A broken chain')",
                path: file.path)
        }
        let host = Self.hostName
        var written: [String] = []
        while true {
            let (payload, keys) = try database.read { db -> (SyncPayload, [(String, SyncValue, Int64)]) in
                let tables = try SyncSchema.tables(db)
                let byName = Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0) })
                // In the order of the unsent rows' index (the clock of their change, table, key): the bundle then holds
                // every unsent row up to its last one, which is what lets the write below mark them sent by range.
                let keys = try db.fetch(
                    """
                    SELECT tbl, key, pending FROM sync_rows INDEXED BY sync_rows_pending WHERE pending <> 0
                    ORDER BY pending, tbl, key LIMIT \(Self.rowsPerBundle)
                    """
                ) { (try $0.string(at: 0), SyncValue(try $0.value(at: 1)), try $0.int64(at: 2)) }
                let numbers = try SyncDeviceNumbers(db)
                let rows = try keys.map { try SyncMerge.outgoing(db, byName[$0.0]!, key: $0.1, numbers: numbers) }
                // This device's values that lost before they were sent go with it (SyncDeleteLog.swift).
                let lost = try SyncDeleteLog.lostUnsent(db, tables: byName, limit: Self.rowsPerBundle)
                return (
                    SyncPayload(
                        deviceName: host, tables: Dictionary(uniqueKeysWithValues: tables.map { ($0.name, $0.columns) }), rows: rows, lost: lost),
                    keys)
            }
            // A device that has never sent anything (in this key generation) still sends one empty bundle: the
            // others then know it (`sync devices`, `remove-device`).
            if keys.isEmpty && payload.lost.isEmpty && sequence > 0 { break }
            let plaintext = try payload.encoded()
            let header = SealedBundle.Header(format: SealedBundle.paddedFormat, sequence: UInt64(sequence + 1), previousHash: lastHash)
            guard let inner = SealedBundle.seal(plaintext, header: header, device: device, key: key),
                let sealed = SyncSignedFile.wrap(inner, device: device, key: signingKey, generation: generation)
            else {
                throw SyncError(SyncError.Code.remote, "libcrypto could not seal and sign a bundle; nothing was sent")
            }
            let name = SealedBundle.name(sequence: UInt64(sequence + 1), file: sealed)
            let relative = "\(SyncLayout.devices)/\(device)/\(name)"
            // The copy first: a bundle on the remote always has one here (SyncChainHeads.swift sends it again if lost).
            try keepSentCopy(sealed, name: name, sequence: UInt64(sequence + 1))
            try SyncLayout.writeAtomically(sealed, root: root, relative: relative)
            let published = generation == 1 ? relative : "generation-\(generation)/" + relative
            sequence += 1
            lastHash = SealedBundle.sha256(sealed)
            try database.write { db in
                // The bundle holds every row that was unsent, in index order, up to its last (clock, table, key): those
                // are marked sent. By range, one statement a table, rather than one a row (a 200 000-task `sync init`
                // spent 1.9 s of its 4.8 s marking rows one by one). A row changed since has a later clock (every
                // change ticks past the clock read with the bundle) and stays unsent.
                if let (lastTable, lastKey, lastClock) = keys.last {
                    let byName = Dictionary(uniqueKeysWithValues: try SyncSchema.tables(db).map { ($0.name, $0) })
                    // Sent: the row's unsent mark and its packed cells' marks (SyncClock.swift) are cleared. By the
                    // unsent rows' index: SQLite 3.15's planner would take the primary key and walk every row.
                    func sent(_ table: String, _ range: String) -> String {
                        "UPDATE OR ROLLBACK sync_rows INDEXED BY sync_rows_pending SET pending = 0, cells = CASE WHEN cells IS NULL THEN NULL ELSE "
                            + (byName[table]?.clearPendingSQL ?? "cells") + " END WHERE pending <> 0 AND tbl = ? AND " + range
                    }
                    // Two ranges of the index a table: the rows of an earlier clock (all in this bundle), then those of
                    // the last row's clock up to the last row. One range with a filter (or an OR) would walk every unsent
                    // row with that clock, and `sync init` gives all of a table's rows one clock: a million-task init
                    // walked the rest of the index once per bundle.
                    for table in Set(keys.map(\.0)).sorted() {
                        try db.execute(sent(table, "pending < ?"), [table, lastClock])
                        if table < lastTable {
                            try db.execute(sent(table, "pending = ?"), [table, lastClock])
                        } else if table == lastTable {
                            try db.execute(sent(table, "pending = ? AND key <= ?"), [table, lastClock, lastKey.databaseValue])
                        }
                    }
                }
                try db.execute(
                    "UPDATE sync_state SET sequence = ?, last_hash = ? WHERE singleton = 0", [sequence, Data(lastHash)])
                try SyncDeleteLog.sentLostUnsent(db, payload.lost)
                // This device's deletes in it: what it had of each row is what every device will read as what the delete
                // had seen (SyncDeleteLog.swift).
                let now = microsecondsSince1970(Date())
                for row in payload.rows where row.tombstone?.device == device {
                    guard let tombstone = row.tombstone, let table = try SyncSchema.tables(db).first(where: { $0.name == row.table }) else { continue }
                    try SyncDeleteLog.recordView(db, table: row.table, key: row.key, tombstone: tombstone, cells: row.cells)
                    try SyncDeleteLog.update(db, table, key: row.key, now: now)
                }
            }
            written.append(published)
            report.sentBundles += 1
            report.sentRows += keys.count
        }
        // Rows marked sent leave the unsent rows' index: after a large send (`sync init`, an import) its emptied pages
        // go back to the file system (a 100 000-task `sync init` left 1 017 free pages, 4 MiB). Best effort: the
        // pages stay for later growth when it cannot run (another process's write in the way past the busy timeout).
        if report.sentRows > 0 {
            _ = try? database.writeWithoutTransaction { db in try db.releaseFreePages() }
        }
        // Each commit titled by what it publishes (before, a seen vector alone went out as "bundles of an interrupted
        // sync").
        if !written.isEmpty {
            try transport.publish(written)
        } else if seenChanged {
            try transport.publish([])
        } else if try transport.hasUnpublished() {
            try transport.publish([])
        }
        return nil
    }

    // MARK: Key generations

    /// Brings the database and the remote in step with the stored key's generation (finishing a rotation that a
    /// crash interrupted), and refuses to go on when the remote holds a newer generation than this device's key.
    ///
    /// A newer generation, or a key check of this generation that does not open under this device's key, is believed
    /// only when a device on the roster that was not removed signed it (`roster`; without one, as `remove-device` and
    /// `rekey` call it, every newer key check counts): then the key was replaced (77). Otherwise it was planted by
    /// someone who can write the remote: it is returned, to be listed as skipped, and the sync goes on.
    @discardableResult
    func adoptGeneration(_ roster: SyncRoster? = nil) throws -> [String] {
        var ignored: [String] = []
        let names = (try? listDirectory(transport.root)) ?? []
        let newer = names.compactMap { name -> Int? in
            guard name.hasPrefix("generation-"), let number = Int(name.dropFirst("generation-".count)), number > generation else { return nil }
            return number
        }.sorted(by: >)
        for number in newer {
            let relative = "generation-\(number)/" + SyncLayout.keyCheck
            guard let check = try? SyncLayout.read(transport.root + "/" + relative) else {
                if FileManager.default.fileExists(atPath: transport.root + "/" + relative) { ignored.append(relative) }
                continue
            }
            // Signed by a member — or by a device removed here whose statement removes its remover (SyncRoster.swift):
            // which of the two was removed is the person's to say, with the new generation's code.
            guard let roster, !roster.signedByMember(check, generation: number), !roster.signedByContestedRemoved(check, generation: number)
            else {
                throw SyncError(
                    SyncError.Code.keyRotated,
                    "the sync key was replaced on another device (a device was removed from the group); this device's key "
                        + "no longer reads what comes next, and nothing was synced")
            }
            ignored.append(relative)
        }
        let checkPath = layoutRoot + "/" + SyncLayout.keyCheck
        if FileManager.default.fileExists(atPath: checkPath) {
            let check = (try? SyncLayout.read(checkPath)) ?? []
            guard SealedBundle.checks(check, key: key) else {
                guard let roster, !roster.signedByMember(check, generation: generation) else {
                    throw SyncError(
                        SyncError.Code.keyRotated,
                        "the remote's key check for generation \(generation) does not match this device's sync key (two devices "
                            + "replaced the key at once?); nothing was synced")
                }
                return ignored + [(generation == 1 ? "" : "generation-\(generation)/") + SyncLayout.keyCheck]
            }
        } else {
            // Generation 1's key check is written by `initialize`; a remote that lost it (or an initialize whose
            // publish failed) gets it again from a device that has the key.
            try SyncLayout.writeAtomically(SyncLayout.markerText, root: layoutRoot, relative: SyncLayout.marker)
            try SyncLayout.writeAtomically(try signedKeyCheck(), root: layoutRoot, relative: SyncLayout.keyCheck)
            try transport.publish(
                ["generation-\(generation)"])
        }
        try database.write { db in
            let current = try db.scalar("SELECT generation FROM sync_state", as: Int.self) ?? 1
            guard current < generation else { return }
            // A new generation starts a new chain for every device, and this device sends everything it knows
            // (merging is idempotent, so the others lose nothing and gain nothing twice).
            try db.execute(
                "UPDATE sync_state SET generation = ?, sequence = 0, last_hash = ? WHERE singleton = 0",
                [generation, Data(count: 32)])
            try db.execute("DELETE FROM sync_devices")
            try db.execute(Self.headsSQL)
            try db.execute("DELETE FROM sync_heads")
            try db.execute("UPDATE sync_rows SET pending = max(1, (SELECT hlc FROM sync_state WHERE singleton = 0))")
            try SyncUndo.forgetAll(db)
        }
        return ignored
    }

    /// Removes a device from the group: replaces the sync key with a new random one (a new generation under
    /// `generation-N/` of the remote, to which this device sends everything it knows) and returns its pairing
    /// code. Every device that stays enters it with ``rekey(database:pairingCode:)``; the removed device keeps
    /// what it already had and reads nothing that comes after.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/notFound`` when no known device has the id (or prefix), or it is
    ///   this device; ``SyncError/Code-swift.struct/keyRotated`` when another device replaced the key first.
    public static func removeDevice(_ id: String, database: KeyedDatabase) throws -> (removed: String, pairingCode: Secret) {
        let engine = try SyncEngine(database: database)
        try engine.transport.pull()
        try engine.adoptGeneration()
        let known = try database.read { db in try db.fetch("SELECT device FROM sync_devices") { try $0.string(at: 0) } }
        let matches = known.filter { $0.hasPrefix(id.lowercased()) }
        if !id.isEmpty, matches.isEmpty,
            let planted = try engine.plantedDeviceFolders().sorted().first(where: { $0.hasPrefix(id.lowercased()) })
        {
            let prefix = engine.generation == 1 ? "" : "generation-\(engine.generation)/"
            throw SyncError(
                SyncError.Code.notFound,
                "'\(id)' is not a device of the group: the folder '\(prefix)\(SyncLayout.devices)/\(planted)' on the remote holds no "
                    + "bundle that authenticates under the sync key (planted by someone who can write the remote); sync skips it, and "
                    + "there is no key to replace. Delete that folder from the remote (in git, a commit that removes it); nothing was changed")
        }
        guard !id.isEmpty, matches.count == 1, let removed = matches.first, removed != engine.device else {
            throw SyncError(
                SyncError.Code.notFound,
                id.lowercased() == engine.device.prefix(id.count) && !id.isEmpty
                    ? "'\(id)' is this device; remove it from another device; nothing was changed"
                    : "no other device of the group has the id '\(id)'\(matches.count > 1 ? " alone" : "") (see the devices list); nothing was changed")
        }
        try database.write { db in try db.executeScript(Self.rosterSQL) }
        let roster = try engine.readRoster()
        let removedBefore = SyncRemovedDevices.read(
            root: engine.layoutRoot, key: engine.key, accept: { roster.signedByMember($0, generation: engine.generation) })
        // A signed roster change in the generation the removed device still holds the key of: nothing of it past the
        // last bundle accepted here is applied by any device (one offline now included), and nobody new is admitted
        // to that generation.
        let (lastSequence, lastHash) = try database.read { db in
            try db.fetchOne("SELECT sequence, last_hash FROM sync_devices WHERE device = ?", [removed]) {
                (try $0.int64(at: 0), [UInt8](try $0.data(at: 1)))
            } ?? (0, [UInt8](repeating: 0, count: 32))
        }
        let removal = SyncRosterEntry.Removal(device: removed, lastSequence: lastSequence, lastHash: lastHash, generation: engine.generation)
        try database.write { db in
            try db.executeScript(Self.rosterSQL)
            // Recorded here at once: the new generation's statement of this device carries it (a device that misses the
            // statement below, delivered late by a replication engine, still reads it before it enters the new one).
            try db.execute(
                "INSERT OR IGNORE INTO sync_removed (device, generation, last_sequence, last_hash, removed_by) VALUES (?, ?, ?, ?, ?)",
                [removed, engine.generation, lastSequence, Data(lastHash), engine.device])
        }
        try engine.publishRosterEntry(adding: removal)
        try engine.transport.publish(
            [(engine.generation == 1 ? "" : "generation-\(engine.generation)/") + SyncRosterFiles.folder])
        let key = SyncKey.random()
        let generation = engine.generation + 1
        // The key first: a crash after this leaves a device that finishes the rotation at its next sync.
        try database.keychain.set(
            storedSecret(key, generation: generation), service: keyService(database.paths), account: database.databaseID,
            label: "SecureStore sync key of \(database.name)")
        let rotated = try SyncEngine(database: database)
        try rotated.sync()
        try recordRemoval(removed, previous: removedBefore, engine: rotated)  // SyncPruning.swift
        return (removed, try pairingCode(key))
    }

    /// Takes the new key that ``removeDevice(_:database:)`` made on another device (its pairing code), checked
    /// against the remote's newest key generation, then syncs.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/invalidPairingCode`` when the code is malformed or not the newest
    ///   key; nothing is changed then.
    @discardableResult
    public static func rekey(database: KeyedDatabase, pairingCode: Secret) throws -> SyncReport {
        let key = try key(fromPairingCode: pairingCode)
        let engine = try SyncEngine(database: database)
        try engine.transport.pull()
        let newest = generationOpening(engine.transport.root, key: key) ?? newestGeneration(engine.transport.root)
        let checkPath = layoutRoot(engine.transport.root, generation: newest) + "/" + SyncLayout.keyCheck
        guard newest > engine.generation, FileManager.default.fileExists(atPath: checkPath) else {
            throw SyncError(
                SyncError.Code.invalidPairingCode,
                "the sync key of this device is the newest one on the remote; there is nothing to re-key; nothing was changed")
        }
        let check = try SyncLayout.read(checkPath)
        guard SealedBundle.checks(check, key: key) else {
            throw SyncError(
                SyncError.Code.invalidPairingCode,
                "the pairing code is well formed but is not the group's new key; nothing was changed")
        }
        try database.keychain.set(
            storedSecret(key, generation: newest), service: keyService(database.paths), account: database.databaseID,
            label: "SecureStore sync key of \(database.name)")
        return try SyncEngine(database: database).sync()
    }

    // MARK: Reading the state

    /// Rows changed here and not yet sent, when this device last synced, and the rest of its state.
    public func status() throws -> SyncStatus {
        try database.read { db in
            let state = try db.fetchOne("SELECT sequence, last_sync FROM sync_state") { row in
                (try row.int64(at: 0), try row.isNull(at: 1) ? nil : try row.int64(at: 1))
            }!
            return SyncStatus(
                device: device, remote: remote,
                unsentRows: try db.scalar("SELECT count(*) FROM sync_rows WHERE pending <> 0", as: Int.self) ?? 0,
                lastSync: state.1.map(dateFromMicroseconds), sequence: state.0,
                tables: try SyncSchema.tables(db).map(\.name),
                conflicts: try db.scalar("SELECT count(*) FROM sync_conflicts WHERE restored = 0", as: Int.self) ?? 0)
        }
    }

    /// This device and every device whose bundles were applied here.
    public func devices() throws -> [SyncDevice] {
        try database.read { db in
            let me = try db.fetchOne("SELECT sequence, last_sync FROM sync_state") { row in
                SyncDevice(
                    id: device, name: Self.hostName, sequence: try row.int64(at: 0),
                    appliedAt: try row.isNull(at: 1) ? nil : dateFromMicroseconds(try row.int64(at: 1)), isThisDevice: true)
            }!
            let others = try db.fetch("SELECT device, name, sequence, applied_at FROM sync_devices ORDER BY device") { row in
                SyncDevice(
                    id: try row.string(at: 0), name: try row.string(at: 1), sequence: try row.int64(at: 2),
                    appliedAt: dateFromMicroseconds(try row.int64(at: 3)), isThisDevice: false)
            }
            return [me] + others
        }
    }

    /// The conflict log, oldest first.
    public func conflicts(includingRestored: Bool = false) throws -> [SyncConflict] {
        try database.read { db in
            try db.fetch(
                """
                SELECT id, tbl, col, key, lost_value, lost_device, lost_hlc, won_device, won_hlc, restored
                FROM sync_conflicts \(includingRestored ? "" : "WHERE restored = 0") ORDER BY id
                """
            ) { row in
                SyncConflict(
                    id: try row.int64(at: 0), table: try row.string(at: 1), column: try row.string(at: 2),
                    key: try row.value(at: 3), lostValue: try row.value(at: 4), lostDevice: try row.string(at: 5),
                    lostAt: Self.date(hlc: try row.int64(at: 6)), wonDevice: try row.string(at: 7),
                    wonAt: Self.date(hlc: try row.int64(at: 8)), restored: try row.int(at: 9) == 1)
            }
        }
    }

    /// The wall-clock part of a hybrid logical clock.
    static func date(hlc: Int64) -> Date { Date(timeIntervalSince1970: Double(hlc >> 16) / 1000) }

    /// Puts a conflict's losing value back, as a new local edit (it syncs like any change and now wins).
    ///
    /// - Throws: ``SyncError/Code-swift.struct/notFound`` when there is no such entry, or its row no longer
    ///   exists here.
    public func restoreConflict(_ id: Int64) throws {
        try database.write { db in
            guard let (table, column, key, value) = try db.fetchOne(
                "SELECT tbl, col, key, lost_value FROM sync_conflicts WHERE id = ?", [id], { row in
                    (try row.string(at: 0), try row.string(at: 1), try row.value(at: 2), try row.value(at: 3))
                })
            else { throw SyncError(SyncError.Code.notFound, "there is no conflict \(id) in the log") }
            guard let synced = try SyncSchema.tables(db).first(where: { $0.name == table }), synced.columns.contains(column) else {
                throw SyncError(SyncError.Code.notFound, "the conflict \(id) is about a table that no longer syncs")
            }
            try db.execute(
                "UPDATE \(SyncSchema.quoted(table)) SET \(SyncSchema.quoted(column)) = ? WHERE \(SyncSchema.quoted(synced.keyColumn)) = ?",
                [value, key])
            guard db.changes == 1 else {
                throw SyncError(SyncError.Code.notFound, "the row of conflict \(id) has been deleted; nothing was changed")
            }
            try db.execute("UPDATE sync_conflicts SET restored = 1 WHERE id = ?", [id])
        }
    }
}
