public import Attachments
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStoreCore

// Opening a keyed database: the fast path under the shared lock, and under the exclusive lock the resolution of
// its key (creation, an interrupted rotation finished or undone, a copy refused, a 0.1 item upgraded); the
// database id kept inside the file.
extension KeyedDatabase {
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
    static func openSettled(
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, configuration: DatabaseConfiguration, hint: String?
    ) throws -> (DatabaseQueue, String)? {
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
        // So is a deletion killed after its commit point: the name then has no database.
        try files.finishInterruptedDeletion(items: items)
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
    static func settle(
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
    /// one runs, this throws ``SecureStoreError/Code/inUse`` (callers then assume the file is still in use).
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
    static func refuseOrphans(files: KeyedDatabaseFiles) throws {
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
}
