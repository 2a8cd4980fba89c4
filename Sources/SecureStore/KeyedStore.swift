// A keyed database without a handle: its files, its key items and its options. Opening it: the fast path under the
// shared lock, and under the exclusive lock the resolution of its key (creation, an interrupted rotation finished or
// undone, a copy refused, a 0.1 item upgraded); the database id kept inside the file.
public import Attachments
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStoreCore

/// A keyed database as it is on disk and in the keyring, whether or not a handle has it open: the application's
/// `paths`, its `files` (``KeyedDatabaseFiles``), its key `items` with the application's key catalogue
/// (``KeyedDatabaseKeyItems``) and the `configuration` it is opened with.
///
/// The steps of the key lifecycle that work under its lock file rather than through an open connection are its
/// methods: opening (creating, settling the key items), recovery, import, restore, deletion and verification.
/// ``KeyedDatabase`` is the open handle over one.
struct KeyedStore: Sendable {
    let paths: AppPaths
    let files: KeyedDatabaseFiles
    let items: KeyedDatabaseKeyItems
    let configuration: DatabaseConfiguration

    init(paths: AppPaths, name: String, keychain: Keychain, configuration: DatabaseConfiguration = DatabaseConfiguration()) {
        self.paths = paths
        files = KeyedDatabaseFiles(paths: paths, name: name)
        items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        self.configuration = configuration
    }

    /// The store of the database `name`, after ``validate()``: what every public entry point opens.
    static func validated(
        paths: AppPaths, name: String, keychain: Keychain, configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws(SecureStoreError) -> KeyedStore {
        let store = KeyedStore(paths: paths, name: name, keychain: keychain, configuration: configuration)
        try store.validate()
        return store
    }

    /// The database's name (the file is `<name>.db`).
    var name: String { items.databaseName }
    /// The keychain that holds the key.
    var keychain: Keychain { items.keychain }

    /// Checks the name (``KeyedDatabase/validate(name:)``), and that the key will not live in the session collection
    /// (gone at logout).
    func validate() throws(SecureStoreError) {
        try KeyedDatabase.validate(name: name)
        if keychain.configuration.collection == .session {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "a database key may not live in the 'session' collection: it is gone at logout, and the database "
                    + "with it; use the default collection")
        }
    }

    /// A database opened with its key, before a handle owns it: the connection, the database id and the lock file,
    /// held shared.
    struct Opened: ~Copyable {
        let queue: DatabaseQueue
        let id: String
        let lock: KeyedDatabaseLock
    }

    /// Opens the database, creating it (and its key) unless `createIfMissing` is false: see
    /// ``KeyedDatabase/init(paths:name:keychain:configuration:createIfMissing:readerCount:)``.
    func open(createIfMissing: Bool) throws -> Opened {
        if !createIfMissing, !KeyedDatabaseFiles.exists(files.path), !KeyedDatabaseFiles.exists(files.restoreCommitPath) {
            throw noDatabaseError()
        }
        if !KeyedDatabaseFiles.exists(files.path), !KeyedDatabaseFiles.exists(files.restoreCommitPath),
            keychain.configuration.store.isReadOnly
        {
            // Its key could never be stored: refused before anything exists on disk.
            throw KeychainError(
                KeychainError.Code.readOnlyStore,
                "there is no database '\(name)' at \(files.path), and \(keychain.configuration.store.description) are "
                    + "read-only: its key cannot be stored there. Make the database where keys can be stored, then give "
                    + "its key to the service as a credential ('securestore keystore credential --database \(name)', "
                    + "Docs/keystores.md)")
        }
        if !KeyedDatabaseFiles.exists(files.path) {
            // A database about to be made: the key store must answer before anything exists on disk (no folder, no
            // lock file), so a missing or locked keyring leaves nothing behind.
            _ = try items.catalogue()
        }
        try KeyedDatabaseFiles.makeDirectories(files.directory)
        // An open that fails drops `lock`, which releases it: it holds nothing.
        let lock = try files.lock(exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        if let (queue, id) = try openSettled(hint: lock.idHint) {
            return Opened(queue: queue, id: id, lock: lock)
        }
        try lock.relock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        let (queue, id) = try openResolving(create: createIfMissing)
        try lock.share(recording: id, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        return Opened(queue: queue, id: id, lock: lock)
    }

    /// The database file opened with `key`, or nil when `key` does not open it (a wrong key, or not a database).
    func queue(openedWith key: DatabaseKey) throws -> DatabaseQueue? {
        do {
            return try DatabaseQueue(path: files.path, key: key, configuration: configuration)
        } catch DatabaseError.Code.wrongKeyOrNotADatabase {
            return nil
        }
    }

    /// Under the shared lock: opens the database when nothing needs changing (the file exists, no
    /// rotation leftovers, a current item for this path whose id has no pending key, and the file holds
    /// that id). Returns nil when the exclusive path must decide.
    ///
    /// `hint` is the database id the lock file remembers from the last open: with it, the item is looked
    /// up directly (two look-ups) instead of listing every key of the application. It is only a hint:
    /// the id inside the encrypted file decides.
    func openSettled(hint: String?) throws -> (DatabaseQueue, String)? {
        guard KeyedDatabaseFiles.exists(files.path), files.rotationLeftovers().isEmpty,
            !KeyedDatabaseFiles.exists(files.restoreCommitPath), !KeyedDatabaseFiles.exists(files.deletionMarkerPath)
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
            guard let queue = try queue(openedWith: key) else { continue }
            do {
                if try queue.keyedDatabaseID() == id { return (queue, id) }
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
    func openResolving(create: Bool) throws -> (DatabaseQueue, String) {
        // A restore killed after its commit point is finished before anything is opened (Docs/key-lifecycle.md).
        try files.finishCommittedRestore()
        // So is a deletion killed after its commit point: the name then has no database.
        try files.finishInterruptedDeletion(items: items)
        // What killed commands left in the folder (a backup's or export's temporary file, a check folder).
        ScratchFiles.sweep(files.directory)
        let catalogue = try items.catalogue()
        guard KeyedDatabaseFiles.exists(files.path) else {
            guard create else { throw noDatabaseError() }
            try files.refuseOrphans()
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
                try queue.recordKeyedDatabaseID(id)
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
        let own = Set(items.ownItems(in: catalogue))
        var sawKey = false
        var sawOwnKey = false
        var tried: [DatabaseKey] = []
        for item in items.candidates(in: catalogue) {
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
            guard let queue = try queue(openedWith: key) else { continue }
            do {
                let id = try settle(queue: queue, key: key, openedWith: item, catalogue: catalogue)
                return (queue, id)
            } catch {
                try? queue.close()
                throw error
            }
        }
        if !sawKey, let undecodable { throw undecodable }
        throw sawOwnKey ? keyMismatchError() : missingKeyError()
    }

    /// The file at `items.path` opened with `key` (from `item`): makes the catalogue say so. Returns the
    /// database id. Refuses a copy of a database that exists elsewhere; never deletes a key that may
    /// open something (a replaced current key is retired first).
    func settle(
        queue: DatabaseQueue, key: DatabaseKey, openedWith item: KeyedDatabaseKeyItem, catalogue: [KeyedDatabaseKeyItem]
    ) throws -> String {
        let recorded = try queue.keyedDatabaseID()
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
        try refuseCopy(id: id, catalogue: catalogue)
        let upgrading = recorded == nil
        // When the keyring wants a person's approval to store the key as current (KeePassXC), the file stays
        // open with the key that opened it, which stays stored (a pending key too), and the next open that may
        // prompt finishes; rotateKey refuses to start another rotation meanwhile.
        let adopted = try Self.deferringApproval { try items.adopt(key, id: id, catalogue: catalogue) }
        guard adopted else { return id }
        if upgrading { UpgradeObserver.report(.itemStored) }
        if upgrading {
            try queue.recordKeyedDatabaseID(id)
            UpgradeObserver.report(.idWritten)
        }
        // The file opens under `key`: any rotation copy is a leftover, and a pending key of this database
        // either is `key` (now current) or never opened a file that stayed.
        try files.removeRotationLeftovers()
        // Removing a pending key that waits for the keyring's approval is left to the next open.
        if catalogue.contains(where: { $0.role == .pending(id: id) }) {
            try Self.deferringApproval { _ = try items.delete(account: items.pendingAccount(id: id)) }
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
    /// in the keyring (``KeychainError/Code/approvalRequired``, ``KeychainError/Code/promptDismissed``).
    @discardableResult
    static func deferringApproval(_ body: () throws -> Void) throws -> Bool {
        do {
            try body()
            return true
        } catch KeychainError.Code.approvalRequired {
            return false
        } catch KeychainError.Code.promptDismissed {
            return false
        }
    }

    /// Refuses when the database `id` is also at another recorded path whose file still holds it: the
    /// file at `items.path` is then a copy, and a copy never takes over the original's key item.
    func refuseCopy(id: String, catalogue: [KeyedDatabaseKeyItem]) throws {
        for item in catalogue {
            guard case .current(id, let other) = item.role, other != items.path else { continue }
            if try items.fileHolds(path: other, id: id, catalogue: catalogue) {
                throw failure(
                    SecureStoreError.Code.copiedDatabase,
                    "'\(files.path)' is a copy of the database at '\(other)' (database id \(id.prefix(8))); a copy never "
                        + "takes over the original's key, and nothing was changed. Move the original away first, or "
                        + "restore the copy as a database of its own")
            }
        }
    }

    /// A ``SecureStoreError`` about this database: its name and path go with the message (the tool's hints use them).
    func failure(_ code: SecureStoreError.Code, _ message: String) -> SecureStoreError {
        SecureStoreError(code, message, databaseName: name, path: files.path)
    }

    /// The error of a database that does not exist.
    func noDatabaseError() -> SecureStoreError {
        SecureStoreError(SecureStoreError.Code.notFound, "there is no database '\(name)' at '\(files.path)'")
    }

    /// The error of a database that no stored key of its own opens.
    func missingKeyError() -> SecureStoreError {
        failure(
            SecureStoreError.Code.missingKey,
            "no key for database '\(items.databaseName)' in the keyring (\(items.location)) opens the file "
                + "'\(files.path)'; a recovery code of its key, or the keyring restored from a backup, brings it "
                + "back. A new key is never created over existing data; the file was not changed")
    }

    /// The error of a database that its own stored key does not open.
    func keyMismatchError() -> SecureStoreError {
        failure(
            SecureStoreError.Code.keyMismatch,
            "the key stored for database '\(items.databaseName)' (\(items.location)) does not open '\(files.path)', "
                + "nor does any other key of application '\(items.app)' (wrong key, damaged, or not a SecureStore "
                + "database); the file was not changed. A recovery code of its key can open it")
    }
}

extension KeyedDatabase {
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
}

extension KeyedDatabaseFiles {
    /// Refuses to create a database where files of one remain: a `-wal` may hold committed data, and a
    /// rotation's copy may be the only one.
    func refuseOrphans() throws {
        if Self.exists(walPath) {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "the database file '\(path)' is missing but its write-ahead log '\(walPath)' exists and "
                    + "may hold data; restore the database file from a backup, or move the -wal away if its data is "
                    + "not wanted. No new database is created over it")
        }
        if Self.exists(rotatingPath) {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "the database file '\(path)' is missing but a key rotation's copy '\(rotatingPath)' "
                    + "exists; restore the database file from a backup, or remove the copy if it is not wanted. No "
                    + "new database is created over it")
        }
    }

    /// Runs `body` on the database file opened with `key`, or returns nil when `key` does not open it. The file is
    /// opened as every handle opens it (read-only connections would leave `-wal` and `-shm` files behind) and closed
    /// at once: reading leaves it byte-identical, with no file added. Its lock file, when there is one, is held shared
    /// meanwhile, so no rotation of it runs in between; while one runs, this throws ``SecureStoreError/Code/inUse``
    /// (callers then assume the file is still in use).
    func peek<R>(key: DatabaseKey, _ body: (DatabaseQueue) throws -> R) throws -> R? {
        try lockIfPresent().whileHeld { () throws -> R? in
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: path, key: key)
            } catch DatabaseError.Code.wrongKeyOrNotADatabase {
                return nil
            }
            defer { try? queue.close() }
            return try body(queue)
        }
    }
}

// MARK: - The database id inside the file

extension KeyedDatabase {
    /// The table that holds the database id inside the encrypted file.
    static let identityTable = "securestore_identity"
}

extension DatabaseQueue {
    /// The keyed database id recorded in the file, or nil when it has none (written by SecureStore 0.1).
    func keyedDatabaseID() throws -> String? {
        try read { db in
            guard try db.tableExists(KeyedDatabase.identityTable) else { return nil }
            return try db.scalar(
                "SELECT database_id FROM \(KeyedDatabase.identityTable) WHERE singleton = 0", as: String.self)
        }
    }

    /// Records the keyed database id `id` in the file (one transaction).
    func recordKeyedDatabaseID(_ id: String) throws {
        try write { db in
            try db.execute(
                "CREATE TABLE IF NOT EXISTS \(KeyedDatabase.identityTable) (singleton INTEGER PRIMARY KEY CHECK "
                    + "(singleton = 0), database_id TEXT NOT NULL)")
            try db.execute(
                "INSERT OR REPLACE INTO \(KeyedDatabase.identityTable) (singleton, database_id) VALUES (0, ?)", [id])
        }
    }
}
