// Restoring a backup: verify it with its key (found in the keyring, or from a recovery code), keep the
// current database aside, and install the backup as a database of its own (new id, new key).
internal import Attachments
public import EncryptedDatabase
public import Foundation
public import Keychain
internal import Synchronization

/// What ``KeyedDatabase/restore(from:paths:name:keychain:code:configuration:progress:)`` did. Never
/// contains a key.
public struct KeyedDatabaseRestoreReport: Sendable, Hashable, CustomStringConvertible {
    /// The backup file (left byte-identical, nothing added beside it).
    public let backupPath: String
    /// The database file now holding the backup's contents.
    public let path: String
    /// Where the database that was at ``path`` before was kept, or nil when there was none.
    public let asidePath: String?
    /// Which key opened the backup: the keyring account, or nil when it was the recovery code.
    public let openedWithAccount: String?
    /// The restored database's new id (a restore never takes over another database's identity).
    public let databaseID: String
    /// The user's tables and rows in the restored database.
    public let tableCount: Int
    /// The total number of rows in them.
    public let rowCount: Int
    /// How many attachments the restored database lists (each was read back in full and matched its SHA-256
    /// digest before the restore was installed).
    public let attachmentCount: Int
    /// Their total size in bytes.
    public let attachmentBytes: Int64
    /// Where the attachments file of the database that was there was kept (beside ``asidePath``), or nil when it
    /// had none.
    public let attachmentsAsidePath: String?

    /// Several lines for a person.
    public var description: String {
        var lines = [
            "restored: \(backupPath)",
            "into: \(path) (database id \(databaseID.prefix(8)), under a new key)",
            "opened with: " + (openedWithAccount.map { "the stored key '\($0)'" } ?? "the recovery code"),
            "contents: \(tableCount) tables, \(rowCount) rows, integrity check ok",
        ]
        if attachmentCount > 0 {
            lines.append(
                "attachments: \(attachmentCount) (\(AttachmentStore.formatSize(attachmentBytes))), each read back in full "
                    + "with its SHA-256 digest")
        }
        if let asidePath { lines.append("the database that was there is kept at: \(asidePath)") }
        if let attachmentsAsidePath { lines.append("its attachments are kept at: \(attachmentsAsidePath)") }
        return lines.joined(separator: "\n")
    }
}

extension KeyedDatabase {
    /// A step of a restore, reported when it is done (the crash tests die right after one).
    public enum RestoreStep: Int, Sendable, CaseIterable, CustomStringConvertible {
        /// The backup is copied into a private temporary directory (the backup itself is never opened).
        case copied = 1
        /// A key opened the copy and it passed `integrity_check`.
        case verified
        /// A new key is stored (read back) for the restored database's new id and path.
        case keyStored
        /// The copy is exported under the new key with the new id, flushed and closed.
        case exported
        /// The backup's attachments file (beside it) is copied next to the restored file, flushed, and every
        /// attachment read back in full with its digest (done, with nothing to copy, when there are none).
        case attachmentsCopied
        /// The current database's key is stored for a new name, and the file (and its attachments file)
        /// hard-linked there (the database path never lacks it).
        case keptAside
        /// The commit point: a marker file says the restore is to be finished. From here on, a restore killed
        /// before its end is finished by the next open (or restore, or recovery) of the database.
        case committed
        /// The restored attachments file is renamed over the attachments path (atomic). Until the next step the
        /// database path still holds the old database: only the marker's finishing opens it.
        case attachmentsInstalled
        /// The restored file is renamed over the database path (atomic), the directory flushed.
        case installed
        /// The set-aside database's key item for the old place is removed.
        case itemMoved
        /// The private copy is removed.
        case finished

        /// What the step did, for a person.
        public var description: String {
            switch self {
            case .copied: "copied the backup into a private file"
            case .verified: "opened and checked the copy"
            case .keyStored: "stored a new key for the restored database"
            case .exported: "wrote the restored database under the new key"
            case .attachmentsCopied: "copied and checked the backup's attachments"
            case .keptAside: "kept the current database aside"
            case .committed: "marked the restore to be finished"
            case .attachmentsInstalled: "installed the restored attachments"
            case .installed: "installed the restored database"
            case .itemMoved: "removed the set-aside database's key item for the old place"
            case .finished: "removed the private copy; restore complete"
            }
        }
    }

    /// Restores the backup at `backup` as the database `name`.
    ///
    /// 1. The backup is copied into a private temporary directory (`$TMPDIR`, 0700) and only that copy is
    ///    opened: the backup stays byte-identical, with nothing added beside it, and a refusal leaves the
    ///    target folder as it was.
    /// 2. Its key is found among the application's stored keys (current, pending, retired, 0.1), or is the
    ///    key of `code` (its recovery code); the copy must open and pass `integrity_check`.
    /// 3. It is installed under a **new key and a new database id**: a restore never takes over another
    ///    database's key (the backup's database may still exist), and the backup's own key keeps opening
    ///    the backup.
    /// 4. The backup's attachments file (`db backup` writes it beside the backup, see
    ///    ``attachmentsBackupPath(forBackup:)``) is copied beside the restored file and every attachment is read
    ///    back in full against its SHA-256 digest. Its key is inside the backup, so the pair stays together.
    /// 5. The database that was at the path is kept aside as `<name>.before-restore-<UTC time>.db` (never
    ///    overwritten), with its key item, and opens under that name; its attachments file is kept beside it as
    ///    `<name>.before-restore-<UTC time>.attachments.db`.
    /// 6. A marker file is the commit point; then the attachments file and the database are renamed into place.
    ///
    /// A kill at any step leaves a database that opens at the path with its own attachments: the old pair before
    /// the commit point, the restored pair after it (the next open finishes the two renames before it opens
    /// anything); the backup is untouched and nothing is lost. See Docs/key-lifecycle.md.
    ///
    /// - Throws: ``SecureStoreError/Code/missingKey`` when no stored key opens the backup and no `code` was
    ///   given (ask for the recovery code and call again); ``SecureStoreError/Code/invalidRecoveryCode``;
    ///   ``SecureStoreError/Code/verificationFailed`` for a damaged backup (or damaged attachments beside it);
    ///   ``SecureStoreError/Code/notFound`` when there is no backup, or it lists attachments and their file is not
    ///   beside it; ``SecureStoreError/Code/inUse`` while the database is open elsewhere. Nothing is
    ///   changed by a refusal.
    @discardableResult
    public static func restore(
        from backup: URL, paths: AppPaths, name: String, keychain: Keychain, code: Secret? = nil,
        configuration: DatabaseConfiguration = DatabaseConfiguration(), progress: (RestoreStep) -> Void = { _ in }
    ) throws -> KeyedDatabaseRestoreReport {
        try KeyedStore(paths: paths, name: name, keychain: keychain, configuration: configuration)
            .restore(from: backup, code: code, heldLock: nil, progress: progress)
    }

    /// Restores the backup at `backup` into this open handle, which then reads and writes the restored database.
    ///
    /// The restore is the one of ``restore(from:paths:name:keychain:code:configuration:progress:)`` (verified
    /// copy, new key and id, the database that was there kept aside as `<name>.before-restore-<time>.db`, crash-safe
    /// at every step), run while this handle holds the database alone:
    ///
    /// - a read or write of this handle already running finishes first, on the database as it was; those that
    ///   start meanwhile wait, then run on the restored database: none sees a mix of the two;
    /// - the handle's connection is replaced (a ``queue`` kept from before throws `misuse` saying so), its
    ///   ``databaseID`` becomes the restored database's, and its observations fetch again;
    /// - a refusal (``SecureStoreError/Code/inUse`` while another handle or process has the database open, a damaged
    ///   backup, a missing key…) changes nothing, and the handle keeps reading and writing the database as it was.
    ///
    /// - Parameter progress: called after each step, on the caller's thread; it must not use this database.
    @discardableResult
    public func restore(
        from backup: URL, code: Secret? = nil, progress: (RestoreStep) -> Void = { _ in }
    ) throws -> KeyedDatabaseRestoreReport {
        let report = try withState("restore") { state in
            try exclusively(&state, readOnly: "a restore", changing: "changing (rotating, restoring or deleting)") { state in
                try closeConnections(&state, reason: Self.restoredQueueReason)
                do {
                    let report = try store.restore(from: backup, code: code, heldLock: state.lock, progress: progress)
                    guard let key = try items.key(account: items.currentAccount(id: report.databaseID)) else {
                        throw store.missingKeyError()
                    }
                    install(try DatabaseQueue(path: files.path, key: key, configuration: configuration), in: &state)
                    identity.withLock { $0 = report.databaseID }
                    resumeReaders(key: key)
                    return report
                } catch {
                    // Before its commit point the database is as it was; after it, the restored one is installed.
                    // Either way this handle reopens whatever is at the path now.
                    if let (queue, id) = try? store.openResolving(create: false) {
                        install(queue, in: &state)
                        identity.withLock { $0 = id }
                    }
                    resumeReaders()
                    throw error
                }
            }
        }
        // Every observation of this handle fetches again, after the lock is released.
        changeCenter.notify(.everything)
        return report
    }

    /// Why the queue of this handle is closed after ``restore(from:code:progress:)``.
    static let restoredQueueReason =
        "a restore into its KeyedDatabase replaced this queue with a connection to the restored database. Keep the "
        + "KeyedDatabase (a DatabaseWriter: read, write) rather than its queue"

}

extension KeyedStore {
    /// Restores the backup at `backup` as this database: see
    /// ``KeyedDatabase/restore(from:paths:name:keychain:code:configuration:progress:)``. `heldLock` is the lock when
    /// the caller (a live handle) already holds it exclusively, nil to take it here.
    func restore(
        from backup: URL, code: Secret?, heldLock: borrowing KeyedDatabaseLock?,
        progress: (KeyedDatabase.RestoreStep) -> Void
    ) throws -> KeyedDatabaseRestoreReport {
        try validate()
        let codeKey = try code.map { try RecoveryCode.key(from: $0) }
        guard KeyedDatabaseFiles.isRegularFile(backup.path) else {
            throw SecureStoreError(SecureStoreError.Code.notFound, "there is no backup file '\(backup.path)'")
        }
        if KeyedDatabaseKeyItems.canonicalPath(backup.path) == items.path {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "'\(backup.path)' is the database itself; restore a backup of it instead")
        }
        // 1. A private copy in a private temporary directory (0700): the backup itself is never opened, and
        //    a refusal below leaves the target folder as it was.
        let scratch = try KeyedDatabaseFiles.makeScratchDirectory()
        defer { KeyedDatabaseFiles.removeScratchDirectory(scratch) }
        let copyPath = scratch + "/backup.db"
        try KeyedDatabaseFiles.copyNewFile(backup.path, to: copyPath)
        progress(.copied)

        // 2. Its key, and a check.
        let (copy, oldKeyAccount) = try items.openBackupCopy(path: copyPath, codeKey: codeKey)
        defer { try? copy.close() }
        let summary: KeyedDatabase.ContentSummary
        do {
            do {
                try copy.integrityCheck()
            } catch let error as DatabaseError {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "the backup '\(backup.path)' failed the integrity check (\(error.message)); nothing was restored")
            }
            summary = try KeyedDatabase.ContentSummary(copy)
        }
        // Its attachments: the file `db backup` wrote beside it, opened by the attachments key inside the backup.
        let attachmentsBackup = KeyedDatabase.attachmentsBackupPath(forBackup: backup)
        let listed = try Self.listedAttachments(copy)
        let withAttachments = listed.hasKey && KeyedDatabaseFiles.isRegularFile(attachmentsBackup)
        if listed.count > 0 && !withAttachments {
            throw SecureStoreError(
                SecureStoreError.Code.notFound,
                "the backup '\(backup.path)' lists \(listed.count) attachment" + (listed.count == 1 ? "" : "s")
                    + " kept in an attachments file, but that file '\(attachmentsBackup)' is not beside it (db backup writes it there); put it back "
                    + "and try again. Nothing was restored")
        }
        progress(.verified)

        try KeyedDatabaseFiles.makeDirectories(files.directory)
        // The lock taken here (when the caller holds none) is released when `ownLock` is dropped, at the end.
        let ownLock: KeyedDatabaseLock? =
            heldLock == nil
            ? try files.lock(exclusive: true, timeoutMilliseconds: min(1_000, configuration.busyTimeoutMilliseconds)) : nil
        // A restore killed after its commit point is finished first (it is a restore the user asked for).
        try files.finishCommittedRestore()
        try files.finishInterruptedDeletion(items: items)
        try files.removeRestoreLeftovers()
        try foldCurrentLog()
        try foldCurrentAttachmentsJournal()
        // Until the commit point, a failure leaves nothing behind: no restored file, no new key item.
        defer { if !KeyedDatabaseFiles.exists(files.restoreCommitPath) { try? files.removeRestoreLeftovers() } }

        // 3. A new key and id, stored before any file depends on them.
        let id = KeyedDatabaseKeyItems.newDatabaseID()
        let key = DatabaseKey.random()
        try items.storeCurrent(key, id: id)
        // A refusal from here to the commit point removes it again: nothing else ever used it.
        var committed = false
        defer {
            if !committed, !KeyedDatabaseFiles.exists(files.restoreCommitPath) {
                _ = try? items.delete(account: items.currentAccount(id: id))
            }
        }
        progress(.keyStored)

        // 4. The restored file under the new key, with the new id.
        try copy.export(to: files.restoredPath, key: key)
        try copy.close()
        let restored = try DatabaseQueue(path: files.restoredPath, key: key, configuration: configuration)
        do {
            try restored.recordKeyedDatabaseID(id)
            guard try KeyedDatabase.ContentSummary(restored).tables.filter({ $0.key != KeyedDatabase.identityTable })
                == summary.tables.filter({ $0.key != KeyedDatabase.identityTable })
            else {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "the restored copy does not match the backup '\(backup.path)'; nothing was restored")
            }
            try restored.checkpoint()
            try restored.close()
        } catch {
            try? restored.close()
            throw error
        }
        try KeyedDatabaseFiles.syncFile(files.restoredPath)
        progress(.exported)

        // 4b. The backup's attachments file beside the restored file (the name the restored file's attachments
        //     file has), flushed, and every attachment read back in full against its digest.
        var attachments = (count: 0, bytes: Int64(0))
        if withAttachments {
            try KeyedDatabaseFiles.copyNewFile(attachmentsBackup, to: files.restoredAttachmentsPath)
            attachments = try checkRestoredAttachments(key: key, backup: attachmentsBackup, withFile: true)
            try KeyedDatabaseFiles.syncFile(files.restoredAttachmentsPath)
            try KeyedDatabaseFiles.syncFile(files.restoredPath)
        } else if listed.hasKey {
            // Only attachments kept inside the database (or none): read back by digest all the same.
            attachments = try checkRestoredAttachments(key: key, backup: backup.path, withFile: false)
        }
        progress(.attachmentsCopied)

        // 5. The current database kept aside: its key item is stored for the new name first, then the file
        //    is hard-linked there, so neither the path nor the new name ever lacks a database or its key. Its
        //    attachments file (whose key is inside it) is linked beside it under the matching name.
        var aside: String?
        var attachmentsAside: String?
        var staleAccounts: [String] = []
        if KeyedDatabaseFiles.exists(files.path) || KeyedDatabaseFiles.exists(files.attachmentsPath) {
            let asidePath = try files.asidePath(name: name)
            if KeyedDatabaseFiles.exists(files.path) {
                let asideItems = KeyedDatabaseKeyItems(
                    paths: paths, name: ((asidePath as NSString).lastPathComponent as NSString).deletingPathExtension,
                    keychain: keychain)
                for item in try items.catalogue() where item.isCurrent(at: items.path) && item.databaseID != id {
                    guard let itemID = item.databaseID, let itemKey = try items.key(account: item.account) else { continue }
                    try asideItems.storeCurrent(itemKey, id: itemID)
                    staleAccounts.append(item.account)
                }
                try KeyedDatabaseFiles.link(files.path, to: asidePath)
                aside = asidePath
            }
            if KeyedDatabaseFiles.exists(files.attachmentsPath) {
                let path = AttachmentStore.filePath(forDatabase: asidePath)
                try KeyedDatabaseFiles.link(files.attachmentsPath, to: path)
                attachmentsAside = path
            }
            KeyedDatabaseFiles.syncDirectory(files.directory)
        }
        progress(.keptAside)

        // 6. The commit point, then the two renames (attachments first); a kill in between is finished by the
        //    next open, which sees the marker before it opens anything.
        try files.writeRestoreCommit(withAttachments: withAttachments)
        committed = true
        progress(.committed)
        try files.finishCommittedRestore { step in
            if step == .installed {
                heldLock?.recordIDHint(id)
                ownLock?.recordIDHint(id)
            }
            progress(step)
        }

        // 7. The set-aside database's items for the old place go: the path holds the restored database now.
        for account in staleAccounts { try items.delete(account: account) }
        progress(.itemMoved)

        try files.removeRestoreLeftovers()
        KeyedDatabaseFiles.removeScratchDirectory(scratch)
        progress(.finished)
        let userTables = summary.tables.filter { $0.key != KeyedDatabase.identityTable }
        return KeyedDatabaseRestoreReport(
            backupPath: backup.path, path: files.path, asidePath: aside, openedWithAccount: oldKeyAccount,
            databaseID: id, tableCount: userTables.count, rowCount: userTables.values.reduce(0, +),
            attachmentCount: attachments.count, attachmentBytes: attachments.bytes, attachmentsAsidePath: attachmentsAside)
    }

    /// The current database must not have a write-ahead log when it is set aside (its frames would be lost
    /// with the log left beside the restored file): open it with its key and checkpoint. A log that no
    /// stored key can fold is refused.
    private func foldCurrentLog() throws {
        guard KeyedDatabaseFiles.exists(files.path), KeyedDatabaseFiles.exists(files.walPath) else { return }
        if let (queue, _) = try? openResolving(create: false) {
            try? queue.checkpoint()
            try? queue.close()
        }
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.Code.inUse,
                "the current database '\(files.path)' has a write-ahead log that could not be folded into it (open "
                    + "elsewhere, or no stored key opens it); nothing was restored")
        }
    }

    /// Whether the database `copy` has an attachments key (it has had attachments), and how many of the attachments
    /// it lists are kept as chunks in an attachments file (inline ones are inside the database).
    private static func listedAttachments(_ copy: DatabaseQueue) throws -> (hasKey: Bool, count: Int) {
        try copy.read { db in
            guard try db.tableExists("securestore_attachment_key"), try db.tableExists("securestore_attachments") else {
                return (false, 0)
            }
            let keys = try db.scalar("SELECT count(*) FROM securestore_attachment_key", as: Int.self) ?? 0
            // Inline attachments are inside the backup itself: only chunked ones need the file beside it.
            return (keys > 0, try db.scalar("SELECT count(*) FROM securestore_attachments WHERE chunk_count > 0", as: Int.self) ?? 0)
        }
    }

    /// Checks the restored attachments against the restored database (opened with `key`): the attachments file
    /// (`withFile`) opens with the attachments key inside that database and passes `integrity_check`, and every
    /// attachment it lists — in that file or inline in the database — reads back in full with its SHA-256 digest.
    /// Leftover chunks of uploads that were in flight when the backup was made are collected. Returns the number
    /// of attachments and their total size. `backup` is the file named in errors.
    private func checkRestoredAttachments(key: DatabaseKey, backup: String, withFile: Bool) throws -> (count: Int, bytes: Int64) {
        let restored = try DatabaseQueue(path: files.restoredPath, key: key, configuration: configuration)
        defer { try? restored.close() }
        let store = AttachmentStore(database: restored)
        defer { try? store.close() }
        guard let attachmentsKey = try restored.read({ db in try store.attachmentsKey(db) }) else { return (0, 0) }
        let what = withFile ? "the attachments file beside the backup, '\(backup)'," : "the backup '\(backup)'"
        if withFile {
            do {
                // In the attachments file's own format (or SecureStore's, for a file made before that format).
                var readOnly = AttachmentStoreConfiguration().database
                readOnly.readOnly = true
                try AttachmentStore.openQueue(files.restoredAttachmentsPath, key: attachmentsKey, configuration: readOnly).close()
            } catch let error as DatabaseError where error.code == .wrongKeyOrNotADatabase {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "\(what) does not open with the attachments key inside the backup: it belongs to another backup or "
                        + "is damaged. Nothing was restored")
            }
        }
        let verification: AttachmentStore.Verification
        do {
            verification = try store.verify()
        } catch let error as DatabaseError {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed, "\(what) cannot be read (\(error.message)); nothing was restored")
        }
        if let problem = verification.problems.first {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed, "\(what) is damaged: \(problem). Nothing was restored")
        }
        return (verification.attachmentCount, verification.totalSize)
    }

    /// The current attachments file must not have a hot journal (or a write-ahead log) when it is set aside and
    /// replaced: SQLite would roll the restored file back with the old file's pages. Open it through its
    /// database so that SQLite rolls the journal back, then check; a journal that cannot be folded is refused.
    private func foldCurrentAttachmentsJournal() throws {
        let journals = [files.attachmentsPath + "-journal", files.attachmentsPath + "-wal"]
        guard KeyedDatabaseFiles.exists(files.attachmentsPath), journals.contains(where: KeyedDatabaseFiles.exists) else {
            return
        }
        if KeyedDatabaseFiles.exists(files.path),
            let (queue, _) = try? openResolving(create: false)
        {
            let store = AttachmentStore(database: queue)
            _ = try? store.openFile(create: false)
            try? store.close()
            try? queue.close()
        }
        // An empty journal holds nothing to roll back.
        if KeyedDatabaseFiles.size(journals[0]) == 0 { try files.removeEmptyFile(journals[0]) }
        if let left = journals.first(where: KeyedDatabaseFiles.exists) {
            throw SecureStoreError(
                SecureStoreError.Code.inUse,
                "the current attachments file '\(files.attachmentsPath)' has a journal ('\(left)') that could not be "
                    + "rolled back (open elsewhere, or no stored key opens its database); nothing was restored")
        }
    }

}

extension KeyedDatabaseKeyItems {
    /// Opens the private copy of a backup at `path` with the first key that opens it: `codeKey`, else the
    /// application's stored keys (current, pending, retired newest first, 0.1). Returns the queue and the key's
    /// account.
    fileprivate func openBackupCopy(path: String, codeKey: DatabaseKey?) throws -> (DatabaseQueue, String?) {
        func open(_ key: DatabaseKey) throws -> DatabaseQueue? {
            do {
                return try DatabaseQueue(path: path, key: key)
            } catch DatabaseError.Code.wrongKeyOrNotADatabase {
                return nil
            } catch let error as DatabaseError {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed, "the backup failed verification: \(error.message); nothing was restored")
            }
        }
        if let codeKey {
            guard let queue = try open(codeKey) else {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidRecoveryCode,
                    "the recovery code is well formed but does not open the backup: it belongs to another database or "
                        + "another key. Nothing was restored")
            }
            return (queue, nil)
        }
        let catalogue = try self.catalogue()
        var ordered = catalogue.filter { if case .current = $0.role { true } else { false } }
        ordered += catalogue.filter { if case .pending = $0.role { true } else { false } }
        ordered += catalogue.filter { if case .retired = $0.role { true } else { false } }.reversed()
        ordered += catalogue.filter { $0.databaseID == nil }
        var tried: [DatabaseKey] = []
        for item in ordered {
            guard let key = try? self.key(account: item.account), !tried.contains(where: { $0 == key }) else { continue }
            tried.append(key)
            if let queue = try open(key) { return (queue, item.account) }
        }
        throw SecureStoreError(
            SecureStoreError.Code.missingKey,
            "no key in the keyring (\(location)) opens the backup; give the recovery code of the key it "
                + "was made under. Nothing was restored")
    }
}
