// Deleting a keyed database: its files first, under the exclusive lock and after a commit marker, its key items
// last, so that no step ever leaves a file whose key is gone (Docs/key-lifecycle.md, "9. Delete").
internal import Attachments
public import EncryptedDatabase
internal import Foundation
public import Keychain
internal import SecureStoreCore

/// What ``KeyedDatabase/delete(keys:)`` or ``KeyedDatabase/delete(paths:name:keychain:keys:configuration:)`` did.
/// Never contains a key.
public struct KeyedDatabaseDeletion: Sendable, Hashable, CustomStringConvertible {
    /// The database file that was deleted.
    public let path: String
    /// The deleted database's id.
    public let databaseID: String
    /// Every file removed (the database, its `-wal`/`-shm`, its attachments file and its side files, leftovers of
    /// interrupted rotations and restores), in the order removed.
    public let removedFiles: [String]
    /// The keychain accounts of the keys kept as retired keys (``KeyedDatabase/KeyDisposal/retire``): backups of
    /// the database still restore with them, until ``KeyedDatabase/pruneRetiredKeys(paths:keychain:before:)``.
    public let retiredAccounts: [String]
    /// The keychain accounts of the key items deleted.
    public let deletedAccounts: [String]

    /// Several lines for a person.
    public var description: String {
        var lines = ["deleted: \(path) (database id \(databaseID.prefix(8)))"]
        lines += removedFiles.map { "removed file: \($0)" }
        lines += deletedAccounts.map { "deleted key item: \($0)" }
        lines += retiredAccounts.map { "kept as a retired key (backups still open): \($0)" }
        return lines.joined(separator: "\n")
    }
}

extension KeyedDatabase {
    /// What a deletion does with the database's keys.
    public enum KeyDisposal: String, Sendable, Hashable, CaseIterable {
        /// The current key is kept as a retired key (`<id>.retired.<date>`): backups of the database, and a copy of
        /// its file, still open and restore. ``pruneRetiredKeys(paths:keychain:before:)`` deletes it when asked.
        case retire
        /// Every key of the database (current, pending and retired) is deleted: its backups then open only with a
        /// recovery code. Refused (``SecureStoreError/Code/keyStillInUse``) while one of them still opens another
        /// database file of the application.
        case delete
    }

    /// Deletes the database `name` and its keys; the database must not be open anywhere.
    ///
    /// Removes the database file, its `-wal` and `-shm`, its attachments file (with its side files) and what
    /// interrupted rotations or restores left, then the key items of the database (current and pending; retired ones
    /// too with ``KeyDisposal/delete``). Under the database's exclusive lock: it fails with
    /// ``SecureStoreError/Code/inUse`` while any handle (in this or another process) has it open, and nothing is
    /// changed. The lock file `.<name>.db.lock` stays (emptied): a process may be waiting on it. Sets kept aside by a
    /// restore (`<name>.before-restore-<time>.db`) are databases of their own and stay; so does the database's sync
    /// state (`<name>.sync`), which a replicating folder may share with other devices.
    ///
    /// Crash-safe: the database is opened (which finishes an interrupted rotation or restore), checkpointed and
    /// closed; with ``KeyDisposal/retire`` the current key is stored as a retired key first; then a marker file
    /// (`.<name>.db.deleting`) is the commit point; files go, then key items, then the marker. A kill before the
    /// marker changes nothing but that retired copy; after it, the next open, delete or restore of the name
    /// finishes the deletion. No step leaves a file whose key is deleted.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when there is no such database (nothing is created);
    ///   ``SecureStoreError/Code/inUse``; ``SecureStoreError/Code/keyStillInUse``; what opening throws
    ///   (`missingKey`, `keyMismatch`: a database that no stored key opens is not deleted).
    @discardableResult
    public static func delete(
        paths: AppPaths, name: String, keychain: Keychain, keys: KeyDisposal = .retire,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabaseDeletion {
        try KeyedStore.validated(paths: paths, name: name, keychain: keychain, configuration: configuration).delete(keys: keys)
    }

    /// Deletes this database and its keys as ``delete(paths:name:keychain:keys:configuration:)`` does, and closes
    /// this handle (later reads and writes throw `misuse`).
    ///
    /// The database must be open in this handle alone: while another handle or process has it open this throws
    /// ``SecureStoreError/Code/inUse``, nothing is changed and this handle stays open. Reads and writes of this handle
    /// on other threads wait for the deletion and then throw `misuse`.
    @discardableResult
    public func delete(keys: KeyDisposal = .retire) throws -> KeyedDatabaseDeletion {
        try withState("delete") { state in
            try exclusively(&state, readOnly: "a deletion", changing: "changing (rotating or deleting)") { state in
                try closeConnections(&state, reason: Self.deletedHandleReason)
                do {
                    let report = try store.deleteLocked(queue: nil, id: databaseID, keys: keys, lock: state.lock)
                    readers?.close(reason: Self.deletedHandleReason)
                    return report
                } catch {
                    // Refused before its commit point: the database is as it was; this handle keeps working.
                    if !KeyedDatabaseFiles.exists(files.deletionMarkerPath), KeyedDatabaseFiles.exists(files.path),
                        let (queue, _) = try? store.openResolving(create: false)
                    {
                        install(queue, in: &state)
                        resumeReaders()
                    } else {
                        readers?.close(reason: Self.deletedHandleReason)
                    }
                    throw error
                }
            }
        } then: { state in
            state.lock = nil
        }
    }

    /// Closes this handle's connections before its file is replaced or removed (the caller holds the state and the
    /// exclusive lock): the reading ones once their reads ended, then the writing one, checkpointed first. When the
    /// checkpoint fails, nothing is closed.
    func closeConnections(_ state: inout State, reason: String) throws {
        readers?.pause()
        do {
            try state.queue.checkpoint()
        } catch {
            resumeReaders()
            throw error
        }
        try state.queue.close(reason: reason)
    }

    /// Why the queue of this handle is closed after ``delete(keys:)``.
    static let deletedHandleReason = "its KeyedDatabase deleted the database"

    /// Runs `body` holding this handle's lock exclusively (another handle or process that has the database open makes
    /// it throw ``SecureStoreError/Code/inUse`` before `body` runs), then makes the lock shared again. `readOnly` names
    /// the change in the error on a read-only file system, `changing` what another handle doing the same is doing.
    func exclusively<R>(
        _ state: inout State, readOnly: String = "it", changing: String = "changing", _ body: (inout State) throws -> R
    ) throws -> R {
        if state.lock?.isNoLockFile == true || isOnReadOnlyFileSystem(files.path) {
            throw DatabaseError(.readOnly, "'\(files.path)' is on a read-only file system; \(readOnly) rewrites it, so nothing was changed")
        }
        guard !state.isClosed else {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "the database '\(files.path)' is closed")
        }
        // An online backup reads the file through a connection of its own: it ends before the file is replaced.
        try backups.waitUntilNoneRuns(readOnly, path: files.path)
        // The mark keeps a rotation (or a deletion) from slipping into the gap of flock's conversion.
        guard try state.lock?.beginRotation() == true else {
            throw store.failure(
                SecureStoreError.Code.inUse,
                "another SecureStore process (or handle) is \(changing) '\(files.path)'; nothing was changed; wait for it to finish")
        }
        defer { state.lock?.endRotation() }
        let sharedTimeout = configuration.busyTimeoutMilliseconds
        do {
            try state.lock?.relock(exclusive: true, timeoutMilliseconds: min(1_000, configuration.busyTimeoutMilliseconds))
        } catch {
            // A failed conversion drops the shared lock: take it back.
            try? state.lock?.relock(exclusive: false, timeoutMilliseconds: sharedTimeout)
            throw error
        }
        defer { try? state.lock?.relock(exclusive: false, timeoutMilliseconds: sharedTimeout) }
        return try body(&state)
    }

    /// Runs ``withState(_:_:)`` with `body`, then `after` on the state when `body` returned (not when it threw).
    func withState<R>(_ what: String, _ body: (inout State) throws -> R, then after: (inout State) -> Void) throws -> R {
        try withState(what) { state in
            let result = try body(&state)
            after(&state)
            return result
        }
    }
}

extension KeyedStore {
    /// Deletes the database and its keys: see ``KeyedDatabase/delete(paths:name:keychain:keys:configuration:)``.
    func delete(keys: KeyedDatabase.KeyDisposal) throws -> KeyedDatabaseDeletion {
        let exists = { KeyedDatabaseFiles.exists(files.path) || KeyedDatabaseFiles.exists(files.restoreCommitPath) }
        guard exists() || KeyedDatabaseFiles.exists(files.deletionMarkerPath) else {
            throw noDatabaseError()
        }
        // Held until the end: the deletion's steps run under it.
        let lock: KeyedDatabaseLock? =
            try files.lock(exclusive: true, timeoutMilliseconds: min(1_000, configuration.busyTimeoutMilliseconds))
        let finished = try files.finishInterruptedDeletion(items: items)
        guard exists() else {
            lock?.clearIDHint()
            if let finished { return finished }
            throw noDatabaseError()
        }
        let (queue, id) = try openResolving(create: false)
        return try deleteLocked(queue: queue, id: id, keys: keys, lock: lock)
    }

    /// The deletion proper, under the exclusive lock `lock`: `queue` (the database open with its key, or nil when the
    /// caller closed its own) is checkpointed and closed; the keys are retired (or checked, to be deleted); the
    /// marker is written; then files, key items and the marker go.
    func deleteLocked(
        queue: DatabaseQueue?, id: String, keys: KeyedDatabase.KeyDisposal, lock: borrowing KeyedDatabaseLock?
    ) throws -> KeyedDatabaseDeletion {
        if let queue {
            do {
                try queue.checkpoint()
                try queue.close()
            } catch {
                try? queue.close()
                throw error
            }
        }
        // The last connection closed deletes the -wal: one that remains is another program's open connection.
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw failure(
                SecureStoreError.Code.inUse,
                "the database '\(files.path)' is open in another program (its -wal remains after closing); close it "
                    + "there and delete again; nothing was deleted")
        }
        var catalogue = try items.catalogue()
        let own = catalogue.filter { $0.databaseID == id }
        var retired: [String] = []
        switch keys {
        case .retire:
            // Kept (stored and read back) before any file goes: backups and copies keep opening.
            for item in own {
                switch item.role {
                case .current, .pending:
                    guard let key = try items.key(account: item.account) else { continue }
                    let account = try items.retire(key, id: id, catalogue: catalogue)
                    if !retired.contains(account) { retired.append(account) }
                    catalogue = try items.catalogue()
                default: continue
                }
            }
        case .delete:
            try items.refuseKeysOpeningOtherDatabases(own, catalogue: catalogue, except: items.path)
        }
        try files.writeDeletionMarker(id: id, keys: keys)
        let (removed, deleted) = try files.completeDeletion(id: id, keys: keys, items: items)
        lock?.clearIDHint()
        return KeyedDatabaseDeletion(
            path: files.path, databaseID: id, removedFiles: removed,
            retiredAccounts: retired.filter { !deleted.contains($0) }, deletedAccounts: deleted)
    }
}

// MARK: - Files

extension KeyedDatabaseFiles {
    /// The commit marker of a deletion: `.<name>.db.deleting`, holding the database id and what happens to its keys.
    var deletionMarkerPath: String { directory + "/." + (path as NSString).lastPathComponent + ".deleting" }

    /// Writes the deletion's commit marker (flushed, renamed into place, the directory flushed): from then on the
    /// deletion is finished, never undone.
    func writeDeletionMarker(id: String, keys: KeyedDatabase.KeyDisposal) throws {
        try Self.writeMarker(deletionMarkerPath, "\(id) \(keys.rawValue)\n", what: "the deletion's marker")
    }

    /// Finishes a deletion that reached its commit point (``deletionMarkerPath`` exists), under the exclusive lock.
    /// Returns what it did, or nil when there was none (or the marker is not one: it is then left alone).
    @discardableResult
    func finishInterruptedDeletion(items: KeyedDatabaseKeyItems) throws -> KeyedDatabaseDeletion? {
        guard Self.exists(deletionMarkerPath),
            let text = try? readFile(deletionMarkerPath, maximumSize: 128)
        else { return nil }
        let parts = String(decoding: text, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard parts.count == 2, KeyedDatabaseKeyItem.isID(parts[0]),
            let keys = KeyedDatabase.KeyDisposal(rawValue: String(parts[1]))
        else { return nil }
        let id = String(parts[0])
        let (removed, deleted) = try completeDeletion(id: id, keys: keys, items: items)
        return KeyedDatabaseDeletion(path: path, databaseID: id, removedFiles: removed, retiredAccounts: [], deletedAccounts: deleted)
    }

    /// After the marker: removes the files the database owns (the database first), then the key items of `id`
    /// (current and pending; retired too for ``KeyedDatabase/KeyDisposal/delete``), then the marker. Each step is
    /// idempotent. Returns the files removed and the accounts deleted.
    func completeDeletion(
        id: String, keys: KeyedDatabase.KeyDisposal, items: KeyedDatabaseKeyItems
    ) throws -> (files: [String], accounts: [String]) {
        var removed: [String] = []
        for file in ownedFiles() where Self.exists(file) {
            try Self.removeIfPresent(file, "cannot remove '\(file)' to delete the database")
            removed.append(file)
        }
        Self.syncDirectory(directory)
        var deleted: [String] = []
        for item in try items.catalogue() where item.databaseID == id {
            switch item.role {
            case .retired where keys == .retire: continue
            default:
                if try items.delete(account: item.account) { deleted.append(item.account) }
            }
        }
        try Self.removeIfPresent(deletionMarkerPath, "cannot remove the deletion's marker '\(deletionMarkerPath)'")
        Self.syncDirectory(directory)
        return (removed, deleted)
    }

    /// Every file the database owns, the database first: it, its SQLite side files, its attachments file and its side
    /// files, and what interrupted rotations, restores and creations left.
    func ownedFiles() -> [String] {
        let sides = ["", "-wal", "-shm", "-journal"]
        var owned = sides.map { path + $0 } + sides.map { attachmentsPath + $0 }
        owned += rotationLeftovers()
        owned += [restoredPath, restoredAttachmentsPath].flatMap { base in sides.map { base + $0 } }
        owned.append(restoreCommitPath)
        let prefixes = [path, restoredPath].map { "." + ($0 as NSString).lastPathComponent + ".tmp-" }
        for name in (try? listDirectory(directory)) ?? [] where prefixes.contains(where: name.hasPrefix) {
            owned.append(directory + "/" + name)
        }
        return owned
    }
}
