// The keyed database: a named SQLCipher database whose random key lives in the Keychain, with its
// whole key lifecycle (create, open, rotate, recover, import, backup, verify). See Docs/key-lifecycle.md.
public import EncryptedDatabase
public import Foundation
public import Keychain
internal import SecureStoreCore
internal import Synchronization

/// A named encrypted database whose random 32-byte key is kept in the Keychain.
///
/// ```swift
/// let paths = try AppPaths(app: "myapp")
/// let database = try KeyedDatabase(paths: paths, name: "tasks", keychain: Keychain())
/// try database.write { db in try db.execute("CREATE TABLE IF NOT EXISTS note (text TEXT)") }
/// try database.rotateKey { step in print(step) }
/// let notes = try database.read { db in try db.fetch("SELECT text FROM note") { try $0.string(at: 0) } }
/// let code = try database.recoveryCode()   // a Secret: show it once, never log it
/// ```
///
/// A keyed database is a ``DatabaseWriter``: ``read(_:)``, ``write(_:)`` and
/// ``writeWithoutTransaction(_:)`` run on its current connection, so this handle (and anything that keeps
/// it as `any DatabaseWriter`, such as a task list or a ``DatabaseMigrator``) keeps working across
/// ``rotateKey(progress:)``. Keep the `KeyedDatabase`, not its ``queue``: a rotation closes the queue.
///
/// The file is `<data directory>/<name>.db`; the key is the keychain item with service
/// `<app>.database-key` and account `<id>@<path>` (`<id>` is the database's random id, also kept inside
/// the file; `<id>.pending` while a rotation is under way, `<id>.retired.<date>` for keys replaced by a
/// rotation or recovery), stored as 64 lowercase hexadecimal digits. Two databases never share an item.
///
/// Guarantees (Docs/key-lifecycle.md shows why each holds at every crash point):
/// - a key is stored before its database file is created, and a stored key is never replaced by a new
///   one while a file it may open exists;
/// - a file that fails to open is never modified;
/// - a rotation interrupted at any point leaves a file that opens with a stored key, and the next open
///   finishes or undoes it.
///
/// Processes coordinate through an advisory lock file (`.<name>.db.lock`): every handle holds it
/// shared while open, and creation, recovery of an interrupted rotation and rotation take it
/// exclusively. A handle is `Sendable`: reads, writes and rotations of one handle are serialized.
public final class KeyedDatabase: Sendable {
    /// The application's paths.
    public let paths: AppPaths
    /// The database's name (the file is `<name>.db`).
    public let name: String
    /// The database's id: 32 random hexadecimal digits kept inside the encrypted file and in the account
    /// of its key items (`<id>@<path>`, `<id>.pending`, `<id>.retired.<date>`).
    public let databaseID: String
    /// The keychain that holds the key.
    public let keychain: Keychain
    /// The options the database is opened with.
    public let configuration: DatabaseConfiguration

    let files: KeyedDatabaseFiles
    let items: KeyedDatabaseKeyItems

    private struct State: Sendable {
        /// The lock file descriptor, or -1 once closed.
        var lock: Int32
    }

    private let state: Mutex<State>
    /// Where the `async` forms run (``read(_:)``, ``write(_:)``, ``rotateKey()``).
    private let asyncQueue = DispatchQueue(label: "securestore.keyed-database")
    /// The open connection, replaced by a rotation. Guarded by `state`: read and written only while it is
    /// held (by the thread in `owner`, or in `deinit`). `nonisolated(unsafe)` so that the thread that holds
    /// the lock can hand it out without taking the lock again (see ``queue``), as `DatabaseQueue` lends its
    /// connection.
    nonisolated(unsafe) private var currentQueue: DatabaseQueue {
        // The observers of this handle hear the commits of whichever queue is open now.
        didSet { currentQueue.changeCenter.forward(to: changeCenter) }
    }
    /// Announces the commits of this handle's current queue to its observers: each queue forwards to it, so an
    /// observation started before a key rotation keeps seeing this handle's writes after it.
    package let changeCenter = DatabaseChangeCenter()
    /// The thread that holds `state` for a read, a write or a rotation, to turn a nested call (a deadlock)
    /// into an error.
    private let owner = Atomic<UInt>(0)

    /// The open connection, for what only a queue has (``DatabaseQueue/cipherInfo()``, ``DatabaseQueue/export(to:key:)``).
    /// For reading and writing, use this handle itself (``read(_:)``, ``write(_:)``): it follows rotations.
    ///
    /// After ``rotateKey(progress:)`` this is a new queue and the one before is closed: a queue kept from
    /// before then throws ``DatabaseError/Code/misuse`` saying that a key rotation replaced it. Read this
    /// property each time rather than keeping the queue. The queue is closed when this `KeyedDatabase` is
    /// released or closed: keep the handle alive while you use it.
    ///
    /// Inside ``read(_:)`` or ``write(_:)`` of this handle, use the `db` given to the closure: the queue's own
    /// `read` and `write` there throw `misuse` (a nested access would deadlock).
    public var queue: DatabaseQueue {
        // The thread inside read, write or rotateKey of this handle already holds the lock.
        if owner.load(ordering: .acquiring) == UInt(pthread_self()) { return currentQueue }
        return state.withLock { _ in currentQueue }
    }

    /// Runs `body` with the queue while no rotation of this handle can run.
    func withQueue<R>(_ body: (DatabaseQueue) throws -> R) throws -> R {
        try withState("read or write") { _ in try body(currentQueue) }
    }

    /// Runs `body` with the state locked, after refusing a nested call from the thread that holds it (`what`
    /// names the nested call in the error).
    private func withState<R>(_ what: String, _ body: (inout State) throws -> R) throws -> R {
        let thread = UInt(pthread_self())
        if owner.load(ordering: .acquiring) == thread {
            throw DatabaseError(
                .misuse,
                "\(what) was called inside read, write or rotateKey of the same database '\(files.path)'; use the db "
                    + "given to the outer closure (a nested call would deadlock)")
        }
        return try state.withLock { state in
            owner.store(thread, ordering: .releasing)
            defer { owner.store(0, ordering: .releasing) }
            return try body(&state)
        }
    }

    /// Why the queue of this handle is closed: a queue kept after ``rotateKey(progress:)`` reports it.
    static let rotatedQueueReason =
        "a key rotation of its KeyedDatabase replaced this queue with a new connection. Keep the KeyedDatabase "
        + "(a DatabaseWriter: read, write) rather than its queue, which a rotation closes"

    /// Why the queue of this handle is closed after ``close()``.
    static let closedHandleReason = "its KeyedDatabase was closed"

    /// The database file's URL.
    public var url: URL { paths.databaseURL(name: name) }

    /// The largest allowed database name, in UTF-8 bytes.
    public static let maximumNameLength = 64

    // MARK: Opening

    /// Opens the database `name`, creating it (and its key) the first time unless `createIfMissing` is
    /// false.
    ///
    /// - The first open generates a random key (system CSPRNG) and a random database id, and stores the
    ///   key in the keychain (item account `<id>@<path>`) *before* the file is created; if storing fails,
    ///   no file is made. The id is then written inside the encrypted file.
    /// - A key belongs to one database: another folder, application or name gets its own key. A moved
    ///   file finds its key again (the item follows it); a copy of a database that still exists at its
    ///   recorded place does not take over its key (``SecureStoreError/copiedDatabase``).
    /// - A stored key that does not open the file is ``SecureStoreError/keyMismatch``; an existing file
    ///   without a stored key is ``SecureStoreError/missingKey``. Neither changes the file, and no new key
    ///   is ever made over an existing file (nor over an orphaned `-wal`).
    /// - An interrupted key rotation is finished or undone, and a key item written by SecureStore 0.1
    ///   (account `<name>`) is upgraded; see Docs/key-lifecycle.md.
    ///
    /// - Parameter createIfMissing: when false and there is no database file, throws
    ///   ``SecureStoreError/notFound`` and creates nothing: no file, no directory, no keychain item.
    /// - Throws: ``SecureStoreError`` (`missingKey`, `keyMismatch`, `copiedDatabase`, `invalidArgument`,
    ///   `inUse`, `notFound`, `fileSystem`), ``KeychainError`` (for example `locked`) and `DatabaseError`
    ///   (for example `corrupt`) unchanged.
    public convenience init(
        paths: AppPaths, name: String, keychain: Keychain,
        configuration: DatabaseConfiguration = DatabaseConfiguration(), createIfMissing: Bool = true
    ) throws {
        try Self.validate(name: name, keychain: keychain)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        if !createIfMissing, !KeyedDatabaseFiles.exists(files.path), !KeyedDatabaseFiles.exists(files.restoreCommitPath) {
            throw Self.noDatabaseError(name: name, files: files)
        }
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        if !KeyedDatabaseFiles.exists(files.path) {
            // A database about to be made: the key store must answer before anything exists on disk (no folder, no
            // lock file), so a missing or locked keyring leaves nothing behind.
            _ = try items.catalogue()
        }
        try KeyedDatabaseFiles.makeDirectories(files.directory)
        let lock = try files.lock(exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        do {
            let opened: (DatabaseQueue, String)
            if let settled = try Self.openSettled(
                files: files, items: items, configuration: configuration, hint: KeyedDatabaseFiles.readIDHint(lock))
            {
                opened = settled
            } else {
                try KeyedDatabaseFiles.relock(
                    lock, exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
                opened = try Self.openResolving(
                    files: files, items: items, configuration: configuration, create: createIfMissing)
                KeyedDatabaseFiles.writeIDHint(opened.1, to: lock)
                try KeyedDatabaseFiles.relock(
                    lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
            }
            self.init(paths: paths, name: name, keychain: keychain, configuration: configuration,
                      files: files, items: items, queue: opened.0, databaseID: opened.1, lock: lock)
        } catch {
            KeyedDatabaseFiles.unlock(lock)
            throw error
        }
    }

    private init(
        paths: AppPaths, name: String, keychain: Keychain, configuration: DatabaseConfiguration,
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, queue: DatabaseQueue, databaseID: String, lock: Int32
    ) {
        self.paths = paths
        self.name = name
        self.keychain = keychain
        self.configuration = configuration
        self.files = files
        self.items = items
        self.databaseID = databaseID
        currentQueue = queue
        state = Mutex(State(lock: lock))
        queue.changeCenter.forward(to: changeCenter)
    }

    /// Closes the connection and releases the lock file, as ``close()`` does. The queue is closed too: a
    /// connection must not outlive the shared lock that keeps other processes from rotating the key
    /// under it, so keep the `KeyedDatabase` for as long as its ``queue`` is in use.
    deinit {
        state.withLock { state in
            try? currentQueue.close(reason: Self.closedHandleReason)
            KeyedDatabaseFiles.unlock(state.lock)
            state.lock = -1
        }
    }

    /// Closes the connection and releases the lock file. Later reads and writes (of this handle or of its
    /// ``queue``) throw `misuse`; closing twice does nothing.
    public func close() throws {
        try withState("close") { state in
            defer {
                KeyedDatabaseFiles.unlock(state.lock)
                state.lock = -1
            }
            try currentQueue.close(reason: Self.closedHandleReason)
        }
    }

    /// Checks the name, and that the key will not live in the session collection (gone at logout).
    static func validate(name: String, keychain: Keychain) throws(SecureStoreError) {
        try validate(name: name)
        if keychain.configuration.collection == .session {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "a database key may not live in the 'session' collection: it is gone at logout, and the database "
                    + "with it; use the default collection")
        }
    }

    /// Checks a database name: 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.` and not
    /// ending with `.pending` (the suffix of a pending key's account).
    public static func validate(name: String) throws(SecureStoreError) {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        guard !name.isEmpty, name.utf8.count <= maximumNameLength, allowed, !name.hasPrefix("."),
            !name.hasSuffix(KeyedDatabaseKeyItems.pendingSuffix)
        else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "a database name must be 1 to \(maximumNameLength) letters, digits, '.', '_' or '-', not starting "
                    + "with '.' and not ending with '\(KeyedDatabaseKeyItems.pendingSuffix)'")
        }
    }

    /// Under the shared lock: opens the database when nothing needs changing (the file exists, no
    /// rotation leftovers, a current item for this path whose id has no pending key, and the file holds
    /// that id). Returns nil when the exclusive path must decide.
    ///
    /// `hint` is the database id the lock file remembers from the last open: with it, the item is looked
    /// up directly (two look-ups) instead of listing every key of the application. It is only a hint:
    /// the id inside the encrypted file decides.
    private static func openSettled(
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, configuration: DatabaseConfiguration, hint: String?
    ) throws -> (DatabaseQueue, String)? {
        guard KeyedDatabaseFiles.exists(files.path), files.rotationLeftovers().isEmpty,
            !KeyedDatabaseFiles.exists(files.restoreCommitPath)
        else { return nil }
        let candidates: [(id: String, account: String)]
        if let hint, try !items.keychain.exists(service: items.service, account: items.pendingAccount(id: hint)) {
            candidates = [(hint, items.currentAccount(id: hint))]
        } else {
            // Usually one item; more only after a creation was killed before its file existed. A 0.1 pending
            // item of this name may be a leftover of an upgrade killed before its end: the exclusive path decides.
            let catalogue = try items.catalogue()
            if catalogue.contains(where: { $0.role == .legacyPending(name: items.databaseName) }) { return nil }
            candidates = catalogue.compactMap { item in
                guard item.isCurrent(at: items.path), let id = item.databaseID,
                    !catalogue.contains(where: { $0.role == .pending(id: id) })
                else { return nil }
                return (id, item.account)
            }
        }
        for (id, account) in candidates {
            guard let key = try? items.key(account: account) else { continue }
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            } catch DatabaseError.Code.wrongKeyOrNotADatabase {
                continue
            }
            do {
                if try databaseID(in: queue) == id { return (queue, id) }
                try queue.close()
            } catch {
                try? queue.close()
                throw error
            }
        }
        return nil
    }

    /// Under the exclusive lock: creates the database, or finds the key that opens the file and settles
    /// the catalogue (finishes or undoes an interrupted rotation, upgrades a 0.1 item, follows a moved
    /// file, refuses a copy), and opens it.
    static func openResolving(
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, configuration: DatabaseConfiguration, create: Bool
    ) throws -> (DatabaseQueue, String) {
        // A restore killed after its commit point is finished before anything is opened (Docs/key-lifecycle.md).
        try files.finishCommittedRestore()
        // What killed commands left in the folder (a backup's or export's temporary file, a check folder).
        ScratchFiles.sweep(files.directory)
        let catalogue = try items.catalogue()
        guard KeyedDatabaseFiles.exists(files.path) else {
            guard create else { throw noDatabaseError(name: items.databaseName, files: files) }
            try refuseOrphans(files: files)
            // A creation killed before its link leaves a temporary file of its own; it holds no data.
            try files.removeCreationLeftovers()
            // Create, always with a new id and key: a stored key without a file may belong to a database
            // that moved away or to a backup, so it is never reused for another file.
            let id = KeyedDatabaseKeyItems.newDatabaseID()
            let key = DatabaseKey.random()
            try items.storeCurrent(key, id: id)
            // The key is stored: only now may the file exist. DatabaseQueue builds it under a temporary
            // name and links it into place, so it is never half made; then the id is written inside it
            // (a crash in between leaves a file without an id that this path's item opens: the next open
            // writes the item's id).
            let queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            do {
                try recordDatabaseID(id, in: queue)
            } catch {
                try? queue.close()
                throw error
            }
            return (queue, id)
        }
        var undecodable: (any Error)?
        // A key of this database (its current or pending item, or its 0.1 item) that does not open the file is a
        // mismatch; keys of the application's other databases that do not open it say nothing about this one: its
        // key is missing, as in an application that has no other database (exit 66 with the recovery hint).
        let own = Set(ownItems(catalogue, items: items))
        var sawKey = false
        var sawOwnKey = false
        var tried: [DatabaseKey] = []
        for item in candidates(catalogue, items: items) {
            let key: DatabaseKey
            do {
                guard let found = try items.key(account: item.account) else { continue }
                key = found
            } catch let error as SecureStoreError {
                undecodable = undecodable ?? error
                continue
            }
            sawKey = true
            if own.contains(item) { sawOwnKey = true }
            if tried.contains(where: { $0 == key }) { continue }
            tried.append(key)
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            } catch DatabaseError.Code.wrongKeyOrNotADatabase {
                continue
            }
            do {
                let id = try settle(
                    queue: queue, key: key, openedWith: item, catalogue: catalogue, files: files, items: items)
                return (queue, id)
            } catch {
                try? queue.close()
                throw error
            }
        }
        if !sawKey, let undecodable { throw undecodable }
        throw sawOwnKey ? keyMismatchError(files: files, items: items) : missingKeyError(files: files, items: items)
    }

    /// The key items that may open the file at `items.path`, most likely first: the current items of this
    /// path and their pending keys, this name's 0.1 items, then every other database key of the
    /// application (a moved file, a copy, an older version of the file under a retired key).
    static func candidates(_ catalogue: [KeyedDatabaseKeyItem], items: KeyedDatabaseKeyItems) -> [KeyedDatabaseKeyItem] {
        var ordered = ownItems(catalogue, items: items)
        let rest = catalogue.filter { item in !ordered.contains(item) }
        ordered += rest.filter { if case .current = $0.role { true } else { false } }
        ordered += rest.filter { if case .pending = $0.role { true } else { false } }
        ordered += rest.filter { if case .retired = $0.role { true } else { false } }.reversed()
        ordered += rest.filter { $0.databaseID == nil }  // 0.1 items of other names: a renamed 0.1 file
        return ordered
    }

    /// The key items of the database at `items.path` itself, most likely first: its current items and their pending
    /// keys, then this name's 0.1 items.
    static func ownItems(_ catalogue: [KeyedDatabaseKeyItem], items: KeyedDatabaseKeyItems) -> [KeyedDatabaseKeyItem] {
        let here = catalogue.filter { $0.isCurrent(at: items.path) }
        let hereIDs = Set(here.compactMap(\.databaseID))
        var own = here
        own += catalogue.filter { if case .pending(let id) = $0.role { hereIDs.contains(id) } else { false } }
        own += catalogue.filter { $0.role == .legacy(name: items.databaseName) }
        own += catalogue.filter { $0.role == .legacyPending(name: items.databaseName) }
        return own
    }

    /// The file at `items.path` opened with `key` (from `item`): makes the catalogue say so. Returns the
    /// database id. Refuses a copy of a database that exists elsewhere; never deletes a key that may
    /// open something (a replaced current key is retired first).
    private static func settle(
        queue: DatabaseQueue, key: DatabaseKey, openedWith item: KeyedDatabaseKeyItem,
        catalogue: [KeyedDatabaseKeyItem], files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems
    ) throws -> String {
        let recorded = try databaseID(in: queue)
        let id: String
        if let recorded {
            id = recorded
        } else if case .current(let itemID, let path) = item.role, path == items.path {
            id = itemID  // created or upgraded, killed before the id was written
        } else if case .pending(let itemID) = item.role {
            id = itemID
        } else {
            id = KeyedDatabaseKeyItems.newDatabaseID()  // a 0.1 file: it gets its id now
        }
        try refuseCopy(id: id, key: key, catalogue: catalogue, files: files, items: items)
        let upgrading = recorded == nil
        // When the keyring wants a person's approval to store the key as current (KeePassXC), the file stays
        // open with the key that opened it, which stays stored (a pending key too), and the next open that may
        // prompt finishes; rotateKey refuses to start another rotation meanwhile.
        let adopted = try deferringApproval { try adopt(key, id: id, catalogue: catalogue, items: items) }
        guard adopted else { return id }
        if upgrading { UpgradeObserver.report(.itemStored) }
        if upgrading {
            try recordDatabaseID(id, in: queue)
            UpgradeObserver.report(.idWritten)
        }
        // The file opens under `key`: any rotation copy is a leftover, and a pending key of this database
        // either is `key` (now current) or never opened a file that stayed.
        try files.removeRotationLeftovers()
        // Removing a pending key that waits for the keyring's approval is left to the next open.
        if catalogue.contains(where: { $0.role == .pending(id: id) }) {
            try deferringApproval { _ = try items.delete(account: items.pendingAccount(id: id)) }
        }
        // A 0.1 pending key is deleted only when it is the key of this file (now stored under the id) — also
        // when an upgrade killed before this point left the file opening with the new item: with a shared
        // 0.1 key, a pending key that is not this file's may belong to the same name in another folder.
        if catalogue.contains(where: { $0.role == .legacyPending(name: items.databaseName) }),
            let legacyPending = try? items.key(account: items.legacyPendingAccount), legacyPending == key
        {
            try items.delete(account: items.legacyPendingAccount)
        }
        if upgrading { UpgradeObserver.report(.finished) }
        return id
    }

    /// Runs `body`; returns false instead of throwing when it failed only for want of a person's approval
    /// in the keyring (``KeychainError/approvalRequired``, ``KeychainError/promptDismissed``).
    @discardableResult
    private static func deferringApproval(_ body: () throws -> Void) throws -> Bool {
        do {
            try body()
            return true
        } catch KeychainError.Code.approvalRequired {
            return false
        } catch KeychainError.Code.promptDismissed {
            return false
        }
    }

    /// What stays true while promoting the pending key waits for the keyring's approval.
    static func promotionState(files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, id: String) -> String {
        "until then the database opens with the pending key (keyring service '\(items.service)' account "
            + "'\(items.pendingAccount(id: id))'), and the next open that may ask for the keyring's approval "
            + "finishes the rotation"
    }

    /// Refuses when the database `id` is also at another recorded path whose file still holds it: the
    /// file at `items.path` is then a copy, and a copy never takes over the original's key item.
    static func refuseCopy(
        id: String, key: DatabaseKey, catalogue: [KeyedDatabaseKeyItem], files: KeyedDatabaseFiles,
        items: KeyedDatabaseKeyItems
    ) throws {
        for item in catalogue {
            guard case .current(id, let other) = item.role, other != items.path else { continue }
            if try fileHolds(path: other, id: id, catalogue: catalogue, items: items) {
                throw SecureStoreError(
                    SecureStoreError.Code.copiedDatabase,
                    "'\(files.path)' is a copy of the database at '\(other)' (database id \(id.prefix(8))); a copy never "
                        + "takes over the original's key, and nothing was changed. Move the original away first, or "
                        + "restore the copy as a database of its own",
                    databaseName: items.databaseName, path: files.path)
            }
        }
    }

    /// Whether the file at `path` exists and is the database `id` (opens read-only with one of its keys
    /// and holds its id). A file that exists but cannot be checked (damaged, locked) counts as holding it:
    /// a key is never taken from a database that might still need it.
    static func fileHolds(
        path: String, id: String, catalogue: [KeyedDatabaseKeyItem], items: KeyedDatabaseKeyItems
    ) throws -> Bool {
        guard KeyedDatabaseFiles.exists(path) else { return false }
        for item in catalogue where item.databaseID == id {
            guard let key = try? items.key(account: item.account) else { continue }
            do {
                guard let recorded = try peek(path: path, key: key, { try databaseID(in: $0) }) else { continue }
                return recorded == nil || recorded == id
            } catch {
                return true
            }
        }
        return false
    }

    /// Runs `body` on the database file at `path` opened with `key`, or returns nil when `key` does not
    /// open it. The file is opened as every handle opens it (read-only connections would leave `-wal` and
    /// `-shm` files behind) and closed at once: reading leaves it byte-identical, with no file added. Its
    /// lock file, when there is one, is held shared meanwhile, so no rotation of it runs in between; while
    /// one runs, this throws ``SecureStoreError/inUse`` (callers then assume the file is still in use).
    static func peek<R>(path: String, key: DatabaseKey, _ body: (DatabaseQueue) throws -> R) throws -> R? {
        let lock = try KeyedDatabaseFiles.lockIfPresent(forDatabase: path)
        defer { KeyedDatabaseFiles.unlock(lock) }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, key: key)
        } catch DatabaseError.Code.wrongKeyOrNotADatabase {
            return nil
        }
        defer { try? queue.close() }
        return try body(queue)
    }

    /// Makes `key` the current key of database `id` at `items.path`: a different current key of `id` is
    /// retired first, then `key` is stored (read back), then current items of `id` at other paths (a
    /// moved file's old place, already retired or equal) are removed. Crash-safe at every step: each
    /// intermediate state still has `key` stored and the replaced key retired.
    static func adopt(_ key: DatabaseKey, id: String, catalogue: [KeyedDatabaseKeyItem], items: KeyedDatabaseKeyItems) throws {
        let currents = catalogue.filter { if case .current(id, _) = $0.role { true } else { false } }
        var alreadyHere = false
        for item in currents {
            guard let stored = try items.key(account: item.account) else { continue }
            if stored != key {
                try items.retire(stored, id: id, catalogue: catalogue)
            } else if item.account == items.currentAccount(id: id) {
                alreadyHere = true
            }
        }
        if !alreadyHere { try items.storeCurrent(key, id: id) }
        for item in currents where item.account != items.currentAccount(id: id) {
            try items.delete(account: item.account)
        }
    }

    /// Refuses to create a database where files of one remain: a `-wal` may hold committed data, and a
    /// rotation's copy may be the only one.
    private static func refuseOrphans(files: KeyedDatabaseFiles) throws {
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "the database file '\(files.path)' is missing but its write-ahead log '\(files.walPath)' exists and "
                    + "may hold data; restore the database file from a backup, or move the -wal away if its data is "
                    + "not wanted. No new database is created over it")
        }
        if KeyedDatabaseFiles.exists(files.rotatingPath) {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "the database file '\(files.path)' is missing but a key rotation's copy '\(files.rotatingPath)' "
                    + "exists; restore the database file from a backup, or remove the copy if it is not wanted. No "
                    + "new database is created over it")
        }
    }

    static func noDatabaseError(name: String, files: KeyedDatabaseFiles) -> SecureStoreError {
        SecureStoreError(SecureStoreError.Code.notFound, "there is no database '\(name)' at '\(files.path)'")
    }

    static func missingKeyError(files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.missingKey,
            "no key for database '\(items.databaseName)' in the keyring (\(items.location)) opens the file "
                + "'\(files.path)'; a recovery code of its key, or the keyring restored from a backup, brings it "
                + "back. A new key is never created over existing data; the file was not changed",
            databaseName: items.databaseName, path: files.path)
    }

    static func keyMismatchError(files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.keyMismatch,
            "the key stored for database '\(items.databaseName)' (\(items.location)) does not open '\(files.path)', "
                + "nor does any other key of application '\(items.app)' (wrong key, damaged, or not a SecureStore "
                + "database); the file was not changed. A recovery code of its key can open it",
            databaseName: items.databaseName, path: files.path)
    }

    // MARK: The database id inside the file

    /// The table that holds the database id inside the encrypted file.
    static let identityTable = "securestore_identity"

    /// The database id recorded in the file, or nil when it has none (written by SecureStore 0.1).
    static func databaseID(in queue: DatabaseQueue) throws -> String? {
        try queue.read { db in
            guard try db.tableExists(identityTable) else { return nil }
            return try db.scalar("SELECT database_id FROM \(identityTable) WHERE singleton = 0", as: String.self)
        }
    }

    /// Records `id` in the file (one transaction).
    static func recordDatabaseID(_ id: String, in queue: DatabaseQueue) throws {
        try queue.write { db in
            try db.execute(
                "CREATE TABLE IF NOT EXISTS \(identityTable) (singleton INTEGER PRIMARY KEY CHECK (singleton = 0), "
                    + "database_id TEXT NOT NULL)")
            try db.execute("INSERT OR REPLACE INTO \(identityTable) (singleton, database_id) VALUES (0, ?)", [id])
        }
    }

    // MARK: Rotation

    /// A step of ``rotateKey(progress:)``, reported when it is done.
    public enum RotationStep: Int, Sendable, CaseIterable, CustomStringConvertible {
        /// The new key is stored in the keychain as the pending key (`<id>.pending`).
        case pendingKeyStored = 1
        /// The database is copied under the new key into `.<name>.db.rotating` (`sqlcipher_export`).
        case exported
        /// The copy opens with the new key, passes `integrity_check` and has the same tables, row counts,
        /// `user_version` and `application_id`.
        case verified
        /// The copy is flushed to disk, and the old connection checkpointed and closed.
        case flushed
        /// The copy is renamed over the database file (atomic).
        case replaced
        /// The directory is flushed, so the rename survives a power loss.
        case directoryFlushed
        /// The old key is kept as a retired key (`<id>.retired.<date>`), so backups made under it still
        /// restore.
        case retired
        /// The new key is stored as the current key.
        case promoted
        /// The pending key is removed; the rotation is complete.
        case finished

        /// What the step did, for a person.
        public var description: String {
            switch self {
            case .pendingKeyStored: "stored the new key as pending in the keyring"
            case .exported: "copied the database under the new key"
            case .verified: "verified the copy (integrity check, tables and row counts)"
            case .flushed: "flushed the copy to disk and closed the database"
            case .replaced: "replaced the database file with the copy"
            case .directoryFlushed: "flushed the directory"
            case .retired: "kept the old key as a retired key"
            case .promoted: "stored the new key as the current key"
            case .finished: "removed the pending key; rotation complete"
            }
        }
    }

    /// Replaces the database's key with a new random key, without `PRAGMA rekey`: the database is
    /// copied under the new key, the copy verified and renamed over the file, and only then is the new
    /// key made current. A crash at any point leaves a file that a stored key opens (the next open
    /// finishes or undoes the rotation).
    ///
    /// The rotation needs the database alone: it fails with ``SecureStoreError/inUse`` while another
    /// handle or process has it open. Reads and writes of this handle (from any thread, and through
    /// anything that keeps it as a ``DatabaseWriter``) wait for the rotation and then use the new
    /// connection. ``queue`` is closed and replaced by a new queue: a queue kept from before throws
    /// `misuse` saying so. Recovery codes and backups made before the rotation need the old key.
    ///
    /// - Parameter progress: called after each step, on the caller's thread. It must not use this
    ///   database (a read or write there throws `misuse`).
    @discardableResult
    public func rotateKey(progress: (RotationStep) -> Void = { _ in }) throws -> KeyedDatabaseRetiredKey {
        try withState("rotateKey") { state in
            if state.lock == KeyedDatabaseFiles.noLockFile || isOnReadOnlyFileSystem(files.path) {
                throw DatabaseError(
                    .readOnly, "'\(files.path)' is on a read-only file system; a key rotation rewrites it, so nothing was changed")
            }
            guard state.lock >= 0 else {
                throw SecureStoreError(SecureStoreError.Code.invalidArgument, "the database '\(files.path)' is closed")
            }
            guard try KeyedDatabaseFiles.beginRotation(state.lock, path: files.path) else {
                throw SecureStoreError(
                    SecureStoreError.Code.inUse,
                    "another SecureStore process (or handle) is rotating the key of '\(files.path)'; nothing was "
                        + "changed; wait for it to finish",
                    databaseName: items.databaseName, path: files.path)
            }
            defer { KeyedDatabaseFiles.endRotation(state.lock) }
            do {
                // Wait a little for another process's open to finish, not for a handle that stays open.
                try KeyedDatabaseFiles.relock(
                    state.lock, exclusive: true, timeoutMilliseconds: min(1_000, configuration.busyTimeoutMilliseconds),
                    path: files.path)
            } catch {
                // A failed conversion drops the shared lock; take it back.
                try? KeyedDatabaseFiles.relock(
                    state.lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds,
                    path: files.path)
                throw error
            }
            defer {
                try? KeyedDatabaseFiles.relock(
                    state.lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds,
                    path: files.path)
            }
            // Left by a rotation whose promotion waits for the keyring's approval: the file may be under the
            // pending key, so a new pending key must never be stored over it.
            if try items.key(account: items.pendingAccount(id: databaseID)) != nil {
                throw SecureStoreError(
                    SecureStoreError.Code.approvalPending,
                    "the previous key rotation of '\(files.path)' is not finished: its new key is stored as the "
                        + "pending key and making it the current key needs the keyring's approval; "
                        + Self.promotionState(files: files, items: items, id: databaseID)
                        + "; nothing was changed",
                    databaseName: items.databaseName, path: files.path)
            }
            guard let oldKey = try items.key(account: items.currentAccount(id: databaseID)) else {
                throw Self.missingKeyError(files: files, items: items)
            }
            try currentQueue.checkpoint()
            try currentQueue.close(reason: Self.rotatedQueueReason)
            var replaced = false
            do {
                let (newKey, retired) = try rotate(from: oldKey, progress: progress, replaced: &replaced)
                currentQueue = try DatabaseQueue(path: files.path, key: newKey, configuration: configuration)
                return retired
            } catch {
                if !replaced {
                    // Undo: the file is still under the old key. Remove the copy, then the pending key.
                    try? files.removeRotationLeftovers()
                    _ = try? items.delete(account: items.pendingAccount(id: databaseID))
                }
                // Reopen with whichever stored key opens the file now.
                if let (queue, _) = try? Self.openResolving(
                    files: files, items: items, configuration: configuration, create: false)
                {
                    currentQueue = queue
                }
                throw error
            }
        }
    }

    private func rotate(from oldKey: DatabaseKey, progress: (RotationStep) -> Void, replaced: inout Bool) throws
        -> (DatabaseKey, KeyedDatabaseRetiredKey)
    {
        // The old connection is closed; its -wal is gone unless another connection holds the file open.
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.Code.inUse,
                "the database '\(files.path)' is open in another program (its -wal remains after closing); close it "
                    + "there and rotate again")
        }
        try files.removeRotationLeftovers()

        let newKey = DatabaseKey.random()
        try items.storePending(newKey, id: databaseID)
        progress(.pendingKeyStored)

        let source = try DatabaseQueue(path: files.path, key: oldKey, configuration: configuration)
        let expected = try Self.contentSummary(source)
        try source.export(to: files.rotatingPath, key: newKey)
        progress(.exported)

        let copy = try DatabaseQueue(path: files.rotatingPath, key: newKey, configuration: configuration)
        do {
            try copy.integrityCheck()
            let actual = try Self.contentSummary(copy)
            try copy.close()
            guard actual == expected else {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "the copy under the new key does not match the database (\(expected.differences(from: actual))); "
                        + "the rotation was undone and the database is unchanged")
            }
        } catch {
            try? copy.close()
            throw error
        }
        if KeyedDatabaseFiles.exists(files.rotatingPath + "-wal") {
            throw SecureStoreError(
                SecureStoreError.Code.inUse, "the rotation's copy '\(files.rotatingPath)' is open in another program")
        }
        progress(.verified)

        try KeyedDatabaseFiles.syncFile(files.rotatingPath)
        try source.checkpoint()
        try source.close()
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.Code.inUse,
                "the database '\(files.path)' was opened by another program during the rotation; close it there and "
                    + "rotate again")
        }
        progress(.flushed)

        try KeyedDatabaseFiles.rename(files.rotatingPath, over: files.path)
        replaced = true
        progress(.replaced)
        KeyedDatabaseFiles.syncDirectory(files.directory)
        progress(.directoryFlushed)

        let retired: KeyedDatabaseRetiredKey
        do {
            let catalogue = try items.catalogue()
            let account = try items.retire(oldKey, id: databaseID, catalogue: catalogue)
            progress(.retired)
            try items.storeCurrent(newKey, id: databaseID)
            progress(.promoted)
            try items.delete(account: items.pendingAccount(id: databaseID))
            progress(.finished)
            retired = KeyedDatabaseRetiredKey(
                databaseID: databaseID, account: account,
                date: KeyedDatabaseKeyItem(account: account, label: "").retiredDate ?? Date(),
                alsoOpens: Self.databases(openedBy: oldKey, except: items.path, catalogue: catalogue))
        } catch let error as KeychainError
            where error.code == KeychainError.Code.approvalRequired || error.code == KeychainError.Code.promptDismissed
        {
            throw SecureStoreError(
                SecureStoreError.Code.approvalPending,
                "the database is now under the new key, stored as the pending key, but making it the current key "
                    + "needs the keyring's approval (\(error.message)); "
                    + Self.promotionState(files: files, items: items, id: databaseID),
                databaseName: items.databaseName, path: files.path)
        } catch {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the database is now under the new key, which is stored as the pending key, but storing it as the "
                    + "current key failed (\(error)); the next open finishes the rotation")
        }
        return (newKey, retired)
    }

    /// The paths of the existing databases (current items of the application other than `except`) that `key`
    /// opens: keys shared by SecureStore 0.1 between folders. Each file is tried with `key`; no key item of
    /// another database is read (a keyring that asks for approval per item, such as KeePassXC, would ask
    /// once per database, and a refusal there has nothing to do with this rotation). A file that cannot be
    /// tried now (damaged, or being rotated) is left out.
    static func databases(openedBy key: DatabaseKey, except path: String, catalogue: [KeyedDatabaseKeyItem]) -> [String] {
        var paths: [String] = []
        for item in catalogue {
            guard case .current(_, let other) = item.role, other != path, !paths.contains(other),
                KeyedDatabaseFiles.exists(other)
            else { continue }
            if (try? peek(path: other, key: key, { _ in true })) == .some(.some(true)) { paths.append(other) }
        }
        return paths
    }

    /// Tables with their row counts, `user_version` and `application_id`: what a rotation must keep.
    struct ContentSummary: Equatable {
        var tables: [String: Int]
        var userVersion: Int
        var applicationID: Int32

        func differences(from other: ContentSummary) -> String {
            var parts: [String] = []
            for name in Set(tables.keys).union(other.tables.keys).sorted() where tables[name] != other.tables[name] {
                parts.append("table '\(name)': \(tables[name].map(String.init) ?? "missing") rows before, "
                    + "\(other.tables[name].map(String.init) ?? "missing") after")
            }
            if userVersion != other.userVersion { parts.append("user_version \(userVersion) before, \(other.userVersion) after") }
            if applicationID != other.applicationID { parts.append("application_id differs") }
            return parts.joined(separator: "; ")
        }
    }

    static func contentSummary(_ queue: DatabaseQueue) throws -> ContentSummary {
        try queue.read { db in
            let names = try db.fetch("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") {
                try $0.string(at: 0)
            }
            var tables: [String: Int] = [:]
            for name in names {
                let quoted = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
                tables[name] = try db.scalar("SELECT count(*) FROM \(quoted)", as: Int.self) ?? 0
            }
            return ContentSummary(tables: tables, userVersion: try db.userVersion(), applicationID: try db.applicationID())
        }
    }

    // MARK: Recovery codes

    /// The recovery code of the current key: 14 groups of 4 characters a person can write down (see
    /// ``RecoveryCode``). It *is* the key: show it once, never log or store it in plain text. A key
    /// rotation makes it obsolete.
    public func recoveryCode() throws -> Secret {
        guard let key = try items.key(account: items.currentAccount(id: databaseID)) else {
            throw Self.missingKeyError(files: files, items: items)
        }
        return RecoveryCode.code(for: key)
    }

    /// Stores the key written in a recovery code as the current key of the existing database `name`,
    /// after checking that it opens the database, and opens it. Use it when the keyring item is lost.
    ///
    /// Nothing is stored unless the code is well formed *and* opens the file. A key is never replaced
    /// or deleted: a different current key of the same database is kept as a retired key first.
    ///
    /// - Throws: ``SecureStoreError/invalidRecoveryCode`` for a mistyped code or one that does not open
    ///   the database; ``SecureStoreError/notFound`` when there is no database file;
    ///   ``SecureStoreError/copiedDatabase`` (nothing stored) when the file is a copy of a database that
    ///   still exists at its recorded place: the code would otherwise take over that database's key.
    public static func recover(
        paths: AppPaths, name: String, keychain: Keychain, code: Secret,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabase {
        try validate(name: name, keychain: keychain)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        let key = try RecoveryCode.key(from: code)
        guard KeyedDatabaseFiles.exists(files.path) || KeyedDatabaseFiles.exists(files.restoreCommitPath) else {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "there is no database '\(name)' at '\(files.path)'; a recovery code restores the key of an existing "
                    + "database file")
        }
        let lock = try files.lock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        do {
            try files.finishCommittedRestore()
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            } catch DatabaseError.Code.wrongKeyOrNotADatabase {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidRecoveryCode,
                    "the recovery code is well formed but does not open '\(files.path)': it belongs to another "
                        + "database, or to a key replaced by a rotation. Nothing was stored")
            }
            let id: String
            do {
                id = try settle(
                    queue: queue, key: key, openedWith: KeyedDatabaseKeyItem(account: "", label: ""),
                    catalogue: try items.catalogue(), files: files, items: items)
            } catch {
                try? queue.close()
                throw error
            }
            KeyedDatabaseFiles.writeIDHint(id, to: lock)
            try KeyedDatabaseFiles.relock(
                lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
            return KeyedDatabase(
                paths: paths, name: name, keychain: keychain, configuration: configuration, files: files,
                items: items, queue: queue, databaseID: id, lock: lock)
        } catch {
            KeyedDatabaseFiles.unlock(lock)
            throw error
        }
    }

    // MARK: Import

    /// Encrypts the plaintext SQLite database at `source` into the new keyed database `name` and opens
    /// it. Every table, index, row, `user_version` and `application_id` is kept. `source` is left
    /// byte-identical with nothing added beside it: SQLite reads a private copy (with the source's `-wal`,
    /// if it has one) in a temporary directory (`$TMPDIR`, 0700) that is removed at once. The plaintext
    /// source still exists afterwards: delete it when the import is checked. Do not import a database
    /// another program is writing.
    ///
    /// The key is stored before the file is made (a key already stored for `name` with no file is reused).
    /// The new file is checked (it opens, `integrity_check`) before this returns.
    ///
    /// - Throws: ``SecureStoreError/alreadyExists`` when the database exists (it is never replaced);
    ///   ``SecureStoreError/invalidData`` when `source` is not a plaintext SQLite database;
    ///   `DatabaseError.Code.unrecognizedFormat` when `source` is not a plaintext SQLite database.
    public static func importPlaintext(
        from source: URL, paths: AppPaths, name: String, keychain: Keychain,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabase {
        try validate(name: name, keychain: keychain)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        guard KeyedDatabaseFiles.header(source.path) == Array("SQLite format 3\0".utf8) else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                KeyedDatabaseFiles.exists(source.path)
                    ? "'\(source.path)' is not a plaintext SQLite database, so it cannot be imported"
                    : "'\(source.path)' does not exist")
        }
        try KeyedDatabaseFiles.makeDirectories(files.directory)
        let lock = try files.lock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        do {
            if KeyedDatabaseFiles.exists(files.path) {
                throw SecureStoreError(
                    SecureStoreError.Code.alreadyExists,
                    "the database '\(name)' already exists at '\(files.path)'; import never replaces a database. "
                        + "Choose another name")
            }
            try refuseOrphans(files: files)
            // A new id and key, stored before the file exists (as for a creation).
            let id = KeyedDatabaseKeyItems.newDatabaseID()
            let key = DatabaseKey.random()
            try items.storeCurrent(key, id: id)
            // SQLite opens the source only as a private copy (with its -wal, if it has one): a read-only
            // connection would leave -wal and -shm files beside a WAL-mode source.
            let scratch = try KeyedDatabaseFiles.makeScratchDirectory()
            defer { KeyedDatabaseFiles.removeScratchDirectory(scratch) }
            let copy = scratch + "/source.db"
            // A plaintext copy: a signal must not leave it in the temporary directory (the folder itself is swept
            // by the next import).
            ScratchFiles.register(copy)
            defer { ScratchFiles.unregister(copy) }
            try KeyedDatabaseFiles.copyNewFile(source.path, to: copy)
            if (KeyedDatabaseFiles.size(source.path + "-wal") ?? 0) > 0 {
                try KeyedDatabaseFiles.copyNewFile(source.path + "-wal", to: copy + "-wal")
            }
            try DatabaseQueue.importPlaintext(from: copy, to: files.path, key: key)
            KeyedDatabaseFiles.removeScratchDirectory(scratch)
            let queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            do {
                try queue.integrityCheck()
                try recordDatabaseID(id, in: queue)
            } catch {
                try? queue.close()
                throw error
            }
            KeyedDatabaseFiles.writeIDHint(id, to: lock)
            try KeyedDatabaseFiles.relock(
                lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
            return KeyedDatabase(
                paths: paths, name: name, keychain: keychain, configuration: configuration, files: files,
                items: items, queue: queue, databaseID: id, lock: lock)
        } catch {
            KeyedDatabaseFiles.unlock(lock)
            throw error
        }
    }
}

// MARK: - Reading and writing

/// The keyed database reads and writes on its current connection, under the lock that rotations take: a
/// handle kept as `any DatabaseWriter` keeps working across ``KeyedDatabase/rotateKey(progress:)``.
extension KeyedDatabase: DatabaseWriter {
    /// The path of the database file (``url``'s path).
    public var path: String { files.path }

    /// Runs `body` in one read transaction of the current connection (see ``DatabaseQueue/read(_:)``).
    ///
    /// Use this rather than `queue.read`: it waits for a key rotation of this handle under way and then
    /// reads with the new key, where a queue kept from before the rotation is closed. Calling ``read(_:)``,
    /// ``write(_:)``, ``rotateKey(progress:)`` or ``close()`` of this handle inside `body` throws
    /// `DatabaseError.Code.misuse`.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.read(body) }
    }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`) of the current connection: committed when
    /// `body` returns, rolled back when it throws (see ``DatabaseQueue/write(_:)``).
    ///
    /// Use this rather than `queue.write`: it waits for a key rotation of this handle under way and then
    /// writes with the new key, where a queue kept from before the rotation is closed.
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.write(body) }
    }

    /// Runs `body` with the current connection outside any transaction (see
    /// ``DatabaseQueue/writeWithoutTransaction(_:)``); like ``write(_:)``, it follows key rotations.
    public func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.writeWithoutTransaction(body) }
    }

    /// The `async` form of ``read(_:)``: runs on a dispatch queue of this handle, never on Swift concurrency's
    /// cooperative pool (it may wait for a rotation or for another process's lock).
    public func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue) { try self.read(body) }
    }

    /// The `async` form of ``write(_:)``, on a dispatch queue of this handle.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue) { try self.write(body) }
    }

    /// The `async` form of ``rotateKey(progress:)``, on a dispatch queue of this handle (a rotation copies the
    /// whole database).
    @discardableResult
    public func rotateKey() async throws -> KeyedDatabaseRetiredKey {
        try await runBlocking(on: asyncQueue) { try self.rotateKey() }
    }
}

/// Observers of a keyed database wake at once for its own commits, before and after key rotations (each new
/// queue forwards its commits to the handle's change center).
extension KeyedDatabase: DatabaseChangeSource {
    package func readWithExternalVersion<T>(_ body: (_ externalVersion: Int64, Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.readWithExternalVersion(body) }
    }
}
