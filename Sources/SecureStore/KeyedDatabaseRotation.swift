internal import Attachments
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStoreCore

// Key rotation without `PRAGMA rekey`: export under a new key, verify, rename, then promote the key
// (Docs/key-lifecycle.md shows every crash point).
extension KeyedDatabase {
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
    /// The rotation needs the database alone: it fails with ``SecureStoreError/Code/inUse`` while another
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
            try exclusively(&state, readOnly: "a key rotation", changing: "rotating the key of") { state in
                try rotateExclusively(&state, progress: progress)
            }
        }
    }

    /// The rotation proper, holding the lock exclusively.
    private func rotateExclusively(_ state: inout State, progress: (RotationStep) -> Void) throws -> KeyedDatabaseRetiredKey {
        // Left by a rotation whose promotion waits for the keyring's approval: the file may be under the
        // pending key, so a new pending key must never be stored over it.
        if try items.key(account: items.pendingAccount(id: databaseID)) != nil {
            throw store.failure(
                SecureStoreError.Code.approvalPending,
                "the previous key rotation of '\(files.path)' is not finished: its new key is stored as the "
                    + "pending key and making it the current key needs the keyring's approval; "
                    + items.promotionState(id: databaseID)
                    + "; nothing was changed")
        }
        guard let oldKey = try items.key(account: items.currentAccount(id: databaseID)) else {
            throw store.missingKeyError()
        }
        // With reading connections, reads go on during the export and the check: the connections stay open on the
        // file as it is (no write can run: this rotation holds the handle) until just before the swap.
        let keepsReading = readers != nil
        if !keepsReading {
            try state.queue.checkpoint()
            try state.queue.close(reason: Self.rotatedQueueReason)
        }
        var replaced = false
        var closed = !keepsReading
        do {
            let (newKey, retired) = try store.rotate(
                id: databaseID, from: oldKey, progress: progress, replaced: &replaced, connectionsOpen: keepsReading
            ) {
                readers?.pause()
                closed = true
                try state.queue.close(reason: Self.rotatedQueueReason)
            }
            install(try DatabaseQueue(path: files.path, key: newKey, configuration: configuration), in: &state)
            resumeReaders(key: newKey)
            return retired
        } catch {
            if !replaced {
                // Undo: the file is still under the old key. Remove the copy, then the pending key.
                try? files.removeRotationLeftovers()
                _ = try? items.delete(account: items.pendingAccount(id: databaseID))
            }
            // Stopped before the connections were closed: they still read and write the unchanged file.
            guard closed else { throw error }
            // Reopen with whichever stored key opens the file now.
            if let (queue, _) = try? store.openResolving(create: false) {
                install(queue, in: &state)
            }
            resumeReaders()
            throw error
        }
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
}

extension KeyedDatabase.ContentSummary {
    /// The summary of the database open as `queue`.
    init(_ queue: DatabaseQueue) throws {
        self = try queue.read { db in
            let names = try db.fetch("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") {
                try $0.string(at: 0)
            }
            var tables: [String: Int] = [:]
            for name in names {
                let quoted = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
                tables[name] = try db.scalar("SELECT count(*) FROM \(quoted)", as: Int.self) ?? 0
            }
            return Self(tables: tables, userVersion: try db.userVersion(), applicationID: try db.applicationID())
        }
    }
}

extension KeyedStore {
    /// The rotation's steps, for the database `databaseID` whose current key is `oldKey`. `connectionsOpen`: the
    /// handle's connections are still open on the file (then its -wal is expected) and `closeConnections` closes them
    /// before the swap.
    func rotate(
        id databaseID: String, from oldKey: DatabaseKey, progress: (KeyedDatabase.RotationStep) -> Void,
        replaced: inout Bool, connectionsOpen: Bool = false, closeConnections: () throws -> Void = {}
    ) throws -> (DatabaseKey, KeyedDatabaseRetiredKey) {
        // The old connection is closed; its -wal is gone unless another connection holds the file open.
        if !connectionsOpen, KeyedDatabaseFiles.exists(files.walPath) {
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
        let expected = try KeyedDatabase.ContentSummary(source)
        try source.export(to: files.rotatingPath, key: newKey)
        progress(.exported)

        let copy = try DatabaseQueue(path: files.rotatingPath, key: newKey, configuration: configuration)
        do {
            try copy.integrityCheck()
            let actual = try KeyedDatabase.ContentSummary(copy)
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
        try closeConnections()
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
                alsoOpens: items.databases(openedBy: oldKey, except: items.path, catalogue: catalogue))
        } catch let error as KeychainError
            where error.code == KeychainError.Code.approvalRequired || error.code == KeychainError.Code.promptDismissed
        {
            throw failure(
                SecureStoreError.Code.approvalPending,
                "the database is now under the new key, stored as the pending key, but making it the current key "
                    + "needs the keyring's approval (\(error.message)); "
                    + items.promotionState(id: databaseID))
        } catch {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the database is now under the new key, which is stored as the pending key, but storing it as the "
                    + "current key failed (\(error)); the next open finishes the rotation")
        }
        return (newKey, retired)
    }
}

