// What the keyed database tells a person: where it and its key live, backups and their verification.
internal import Attachments
public import EncryptedDatabase
public import Foundation
public import Keychain
internal import SecureStoreCore
internal import Glibc

/// Where a keyed database and its key live. Never contains the key.
public struct KeyedDatabaseInfo: Sendable, Hashable, CustomStringConvertible {
    /// The database name.
    public let name: String
    /// The database file.
    public let path: String
    /// The file's size in bytes, or nil when it does not exist.
    public let fileSize: Int?
    /// The size of its write-ahead log (`-wal`) in bytes, or nil when there is none.
    public let walSize: Int?
    /// The keychain service of the key (`<app>.database-key`).
    public let keyService: String
    /// The keychain account of the current key recorded for this path (`<id>@<path>`), or nil when the
    /// keychain has none (its value is not read).
    public let keyAccount: String?
    /// The database id in that account, or nil.
    public let databaseID: String?
    /// The keychain account of the pending key during a rotation (`<id>.pending`), or nil.
    public let pendingKeyAccount: String?
    /// The accounts of the retired keys of this database (`<id>.retired.<date>`), oldest first.
    public let retiredKeyAccounts: [String]
    /// The keychain collection (alias) the key is looked up in.
    public let keyCollection: String
    /// Whether a rotation was interrupted: a pending key or a rotation copy exists. The next open
    /// finishes or undoes it.
    public let rotationPending: Bool
    /// Temporary files and check folders that killed processes left in the database's folder and that could not
    /// be removed (every open and `info` tries). Empty normally.
    public let leftovers: [String]

    /// Whether the keychain has a current key item recorded for this path.
    public var hasKey: Bool { keyAccount != nil }

    /// Whether the database file exists.
    public var exists: Bool { fileSize != nil }

    /// Several `field: value` lines for a person.
    public var description: String {
        var lines = ["database: \(name)", "path: \(path)"]
        lines.append("size: " + (fileSize.map { "\($0) bytes" } ?? "no file"))
        if let walSize { lines.append("write-ahead log: \(walSize) bytes") }
        if let databaseID { lines.append("database id: \(databaseID)") }
        lines.append(
            "key: keyring service '\(keyService)', "
                + (keyAccount.map { "account '\($0)'" } ?? "no item for this path")
                + ", collection '\(keyCollection)'")
        lines.append("retired keys: \(retiredKeyAccounts.count)")
        lines.append("rotation pending: " + (rotationPending ? "yes; the next open finishes or undoes it" : "no"))
        if !leftovers.isEmpty {
            lines.append(
                "leftovers of killed processes that could not be removed (remove them by hand): "
                    + leftovers.map { "'\($0)'" }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n")
    }
}

/// The result of verifying a keyed database or a backup of it: integrity and key check passed.
/// Never contains the key.
public struct KeyedDatabaseVerification: Sendable, Hashable, CustomStringConvertible {
    /// Which stored key opened the file.
    public enum KeyRole: String, Sendable, Hashable {
        /// The current key (`<id>@<path>`).
        case current
        /// The pending key of an unfinished rotation (`<id>.pending`).
        case pending
        /// A key retired by a rotation or recovery (`<id>.retired.<date>`).
        case retired
    }

    /// The verified file.
    public let path: String
    /// Its size in bytes.
    public let size: Int
    /// The number of pages (`PRAGMA page_count`).
    public let pageCount: Int
    /// The page size (`PRAGMA cipher_page_size`).
    public let pageSize: Int
    /// The cipher (`PRAGMA cipher`), e.g. `AES-256-CBC`.
    public let cipher: String
    /// Whether each page carries an HMAC (`PRAGMA cipher_use_hmac`).
    public let hmac: Bool
    /// The SQLCipher version that checked it (`PRAGMA cipher_version`), if it answered.
    public let sqlcipherVersion: String?
    /// `PRAGMA user_version`.
    public let userVersion: Int
    /// The number of tables and their total number of rows.
    public let tableCount: Int
    /// The total number of rows in all tables.
    public let rowCount: Int
    /// Which stored key opened it.
    public let key: KeyRole
    /// The keychain account of that key.
    public let keyAccount: String
    /// The database id recorded in the file, or nil (a file written by SecureStore 0.1).
    public let databaseID: String?
    /// The whole encryption profile: format, algorithms, SQLCipher and SQLite versions.
    public let encryption: CipherInfo

    /// Several `field: value` lines for a person.
    public var description: String {
        let head = ["path: \(path)", "size: \(size) bytes (\(pageCount) pages of \(pageSize) bytes)"]
        let tail = [
            "key: opens with the stored \(key.rawValue) key (account '\(keyAccount)')", "integrity check: ok",
            "contents: \(tableCount) tables, \(rowCount) rows, user_version \(userVersion)",
        ]
        return (head + encryption.lines + tail).joined(separator: "\n")
    }
}

extension KeyedDatabase {
    // MARK: Info

    /// Where the database `name` and its key live, whether or not it exists or opens. Reads no key.
    public static func info(paths: AppPaths, name: String, keychain: Keychain) throws -> KeyedDatabaseInfo {
        try validate(name: name)
        return try KeyedStore(paths: paths, name: name, keychain: keychain).info()
    }

    /// Where this database and its key live. Reads no key.
    public func info() throws -> KeyedDatabaseInfo {
        try store.info()
    }

    // MARK: Backup and verification

    /// Writes an encrypted copy of the database, under the same key, to the new file `destination`
    /// (mode 0600; missing directories are made 0700), flushes it and verifies it.
    ///
    /// The copy is online: it is SQLite's backup API reading a separate read-only connection in steps of
    /// `pagesPerStep` pages, so reads and writes of this handle, of other handles and of other processes go on while
    /// it runs. It holds the database as it was at one moment (the last commit before the copy began): a consistent
    /// snapshot, never a torn mix. Commits made after that moment are not in it. A key rotation, restore, deletion or
    /// ``close()`` of this handle waits for the copy to end.
    ///
    /// The copy and its attachments file are built and verified under temporary names beside `destination`
    /// (`.<name>.tmp-<pid>-<random>.db`), then linked into place, the database last: a file at `destination` is
    /// always complete and verified, and nothing is replaced. Interrupted (a signal, a crash), it leaves only the
    /// temporary files, which the tool removes on a signal and the next backup into that folder sweeps. It opens
    /// with the key that is current now (the report's `keyAccount`) and carries the database id; after a key
    /// rotation that key is kept as a retired key, so the backup still opens.
    ///
    /// - Parameters:
    ///   - pagesPerStep: the pages copied between two `progress` calls.
    ///   - progress: called on the caller's thread after each step of the copy (the verification that follows is
    ///     not reported); it may read and write this database. Throwing from it stops the backup, which leaves
    ///     nothing at `destination`.
    /// - Throws: ``SecureStoreError/Code/alreadyExists`` when `destination` (or its attachments file) exists.
    public func backup(
        to destination: URL, pagesPerStep: Int = 256, progress: (DatabaseBackupProgress) throws -> Void = { _ in }
    ) throws -> KeyedDatabaseVerification {
        let attachmentsDestination = Self.attachmentsBackupPath(forBackup: destination)
        for path in [destination.path, attachmentsDestination] where KeyedDatabaseFiles.exists(path) {
            throw SecureStoreError(
                SecureStoreError.Code.alreadyExists,
                "'\(path)' already exists; a backup never replaces a file. Choose a new name")
        }
        try makeBackupDirectories(destination)
        ScratchFiles.sweep(directoryPart(destination.path))
        let staging = URL(fileURLWithPath: ScratchFiles.path(near: destination.path) + ".db")
        let stagingAttachments = Self.attachmentsBackupPath(forBackup: staging)
        for path in [staging.path, stagingAttachments] { ScratchFiles.register(path) }
        defer {
            for path in [staging.path, stagingAttachments] {
                removeDatabaseFiles(path)
                ScratchFiles.unregister(path)
            }
        }
        func exportDatabase() throws {
            // The key and a read-only connection under the handle's lock (no rotation of this handle can change the
            // key in between); the copy without it, while no rotation, restore, deletion or close can begin.
            let (source, key) = try withState("backup") { state in
                guard !state.isClosed else {
                    throw DatabaseError(.misuse, "the database '\(files.path)' is closed: \(Self.closedHandleReason)")
                }
                guard let key = try items.key(account: items.currentAccount(id: databaseID)) else {
                    throw store.missingKeyError()
                }
                var readOnly = configuration
                readOnly.readOnly = true
                let source = try DatabaseQueue(path: files.path, key: key, configuration: readOnly)
                backups.begin()
                return (source, key)
            }
            defer {
                try? source.close()
                backups.end()
            }
            try source.backup(to: staging.path, key: key, pagesPerStep: pagesPerStep, progress: progress)
        }
        do {
            try exportDatabase()
        } catch let error as DatabaseError {
            // Named as the user named it: the temporary name is ours.
            throw DatabaseError(
                error.code, error.message.replacingOccurrences(of: staging.path, with: destination.path),
                extendedResultCode: error.extendedResultCode, sql: error.sql)
        }
        // The attachments file beside it (AttachmentStore), checked against the copy just made.
        let hasAttachments = try backupAttachments(besideBackup: staging) {
            try exportDatabase()
        }
        let report: KeyedDatabaseVerification
        do {
            report = try verifyBackup(at: staging)
        } catch let error as SecureStoreError {
            // Named as the user named it: the temporary name is ours.
            throw SecureStoreError(error.code, error.message.replacingOccurrences(of: staging.path, with: destination.path))
        }
        if hasAttachments {
            try KeyedDatabaseFiles.syncFile(stagingAttachments)
            // Until the database is linked too, the attachments file at its final name is part of an unfinished
            // backup: a signal in between removes it (else it would block the next backup to that name).
            ScratchFiles.register(attachmentsDestination)
            try KeyedDatabaseFiles.publish(stagingAttachments, as: attachmentsDestination)
        }
        do {
            try KeyedDatabaseFiles.publish(staging.path, as: destination.path)
            ScratchFiles.unregister(attachmentsDestination)
        } catch {
            if hasAttachments { try? removeFile(attachmentsDestination) }
            ScratchFiles.unregister(attachmentsDestination)
            throw error
        }
        return report.at(destination.path)
    }

    /// Makes the missing directories of `destination` (0700), naming the one at fault.
    private func makeBackupDirectories(_ destination: URL) throws {
        let directory = directoryPart(destination.path)
        guard !directory.isEmpty else { return }
        do {
            try makeDirectories(directory)
        } catch {
            throw SecureStoreError(
                SecureStoreError.Code.fileSystem, "cannot make the folder '\(error.path)' for the backup: \(error.errno)")
        }
    }

    /// Checks that the file at `url` (this database or a backup of it) opens with a stored key of this
    /// database and passes `integrity_check`, and describes it. The file is opened read-only.
    ///
    /// - Throws: ``SecureStoreError/Code/verificationFailed`` with a message saying what is wrong (no stored
    ///   key opens it, damaged, not a database), ``SecureStoreError/Code/notFound`` when it does not exist.
    public func verifyBackup(at url: URL) throws -> KeyedDatabaseVerification {
        try store.verify(path: url.path, id: databaseID)
    }

    /// Checks this database: see ``verifyBackup(at:)``.
    public func verify() throws -> KeyedDatabaseVerification {
        try store.verify(path: files.path, id: databaseID)
    }
}

extension KeyedStore {
    /// Where the database and its key live, whether or not it exists or opens. Reads no key.
    func info() throws -> KeyedDatabaseInfo {
        let catalogue = try items.catalogue()
        let current = catalogue.last { $0.isCurrent(at: items.path) }
        let id = current?.databaseID
        let pending = catalogue.first { id != nil && $0.role == .pending(id: id!) }
        let retired = catalogue.filter { item in
            if case .retired(let retiredID, _) = item.role { retiredID == id } else { false }
        }
        return KeyedDatabaseInfo(
            name: name, path: files.path, fileSize: KeyedDatabaseFiles.size(files.path),
            walSize: KeyedDatabaseFiles.size(files.walPath), keyService: items.service, keyAccount: current?.account,
            databaseID: id, pendingKeyAccount: pending?.account, retiredKeyAccounts: retired.map(\.account),
            keyCollection: keychain.configuration.collection.alias,
            rotationPending: pending != nil || !files.rotationLeftovers().isEmpty,
            leftovers: ScratchFiles.sweep(files.directory))
    }

    /// Verifies the file at `path` with the keys of database `id` (current, pending, then retired, newest
    /// first).
    func verify(path: String, id: String) throws -> KeyedDatabaseVerification {
        guard let size = KeyedDatabaseFiles.size(path) else {
            throw SecureStoreError(SecureStoreError.Code.notFound, "'\(path)' does not exist")
        }
        let catalogue = try items.catalogue()
        var candidates: [(KeyedDatabaseVerification.KeyRole, String, DatabaseKey)] = []
        for item in catalogue where item.role == .current(id: id, path: items.path) {
            if let key = try items.key(account: item.account) { candidates.append((.current, item.account, key)) }
        }
        for item in catalogue where item.role == .pending(id: id) {
            if let key = try items.key(account: item.account) { candidates.append((.pending, item.account, key)) }
        }
        for item in catalogue.reversed() {
            guard case .retired(id, _) = item.role, let key = try items.key(account: item.account) else { continue }
            candidates.append((.retired, item.account, key))
        }
        var configuration = DatabaseConfiguration()
        configuration.readOnly = true
        var opened: (KeyedDatabaseVerification.KeyRole, String, DatabaseQueue)?
        for (role, account, key) in candidates {
            do {
                opened = (role, account, try DatabaseQueue(path: path, key: key, configuration: configuration))
                break
            } catch DatabaseError.Code.wrongKeyOrNotADatabase {
                continue
            } catch let error as DatabaseError {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed, "'\(path)' failed verification: \(error.message)")
            }
        }
        guard let (role, account, queue) = opened else {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                candidates.isEmpty
                    ? "there is no stored key for database '\(items.databaseName)' (\(items.location)) to check '\(path)' with"
                    : "no stored key of database '\(items.databaseName)' opens '\(path)': it is damaged, not a "
                        + "SecureStore database, a copy of another database, or made under a key replaced by a rotation")
        }
        defer { try? queue.close() }
        do {
            try queue.integrityCheck()
        } catch let error as DatabaseError {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "'\(path)' failed the integrity check (\(error.message)); do not rely on it")
        }
        let summary = try KeyedDatabase.ContentSummary(queue)
        let encryption = try queue.cipherInfo()
        let recordedID = try queue.keyedDatabaseID()
        // The id table is SecureStore's, not the user's: the counts show the user's tables.
        let userTables = summary.tables.filter { $0.key != KeyedDatabase.identityTable }
        return try queue.read { db in
            KeyedDatabaseVerification(
                path: path, size: size, pageCount: try db.scalar("PRAGMA page_count", as: Int.self) ?? 0,
                pageSize: try db.scalar("PRAGMA cipher_page_size", as: Int.self) ?? 0,
                cipher: try db.scalar("PRAGMA cipher", as: String.self) ?? "unknown",
                hmac: (try db.scalar("PRAGMA cipher_use_hmac", as: Int.self) ?? 0) != 0,
                sqlcipherVersion: try db.scalar("PRAGMA cipher_version", as: String.self),
                userVersion: summary.userVersion, tableCount: userTables.count,
                rowCount: userTables.values.reduce(0, +), key: role, keyAccount: account, databaseID: recordedID,
                encryption: encryption)
        }
    }
}

/// The online backups of one handle that are copying now: a key rotation, restore, deletion or close of the handle
/// waits for them (it holds the handle's lock, so no new one begins meanwhile). `@unchecked Sendable`: `running` is
/// guarded by `condition`.
final class KeyedDatabaseBackups: @unchecked Sendable {
    private let condition = NSCondition()
    /// The threads copying now, one entry per copy (guarded by `condition`).
    private var threads: [UInt] = []

    /// A backup's copy begins on this thread (called holding the handle's lock).
    func begin() {
        condition.lock()
        threads.append(UInt(pthread_self()))
        condition.unlock()
    }

    /// The backup's copy on this thread ended.
    func end() {
        condition.lock()
        if let index = threads.firstIndex(of: UInt(pthread_self())) { threads.remove(at: index) }
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until no backup copies (called holding the handle's lock). Throws `misuse` when called from a backup's
    /// `progress` (it would wait for itself); `what` names the call.
    func waitUntilNoneRuns(_ what: String, path: String) throws {
        condition.lock()
        defer { condition.unlock() }
        if threads.contains(UInt(pthread_self())) {
            throw DatabaseError(
                .misuse,
                "\(what) was called inside the progress of a backup of the same database '\(path)'; it waits for the "
                    + "backup to end, so it would wait for itself")
        }
        while !threads.isEmpty { condition.wait() }
    }
}

extension KeyedDatabaseVerification {
    /// The same report for the file now at `path` (a verified temporary file linked into place).
    func at(_ path: String) -> KeyedDatabaseVerification {
        KeyedDatabaseVerification(
            path: path, size: size, pageCount: pageCount, pageSize: pageSize, cipher: cipher, hmac: hmac,
            sqlcipherVersion: sqlcipherVersion, userVersion: userVersion, tableCount: tableCount, rowCount: rowCount,
            key: key, keyAccount: keyAccount, databaseID: databaseID, encryption: encryption)
    }
}

extension CipherInfo {
    /// The profile as `field: value` lines for a person (`db info`, `db verify`).
    public var lines: [String] {
        [
            "format: \(format.name) (\(format.summary))",
            "cipher: \(cipher), \(pageSize)-byte pages, \(hmacAlgorithm), KDF \(kdfAlgorithm) (raw 256-bit key: "
                + "no key derivation at open)",
            "library: SQLCipher \(sqlcipherVersion), SQLite \(sqliteVersion)",
        ]
    }
}

/// A key that a rotation replaced: kept in the keychain as a retired item, so that backups and recovery
/// codes made before the rotation still open. Never contains the key.
public struct KeyedDatabaseRetiredKey: Sendable, Hashable {
    /// The database the key belonged to.
    public let databaseID: String
    /// The retired item's keychain account (`<id>.retired.<date>`).
    public let account: String
    /// When it was retired.
    public let date: Date
    /// Other existing databases whose current key is the same key (possible only for keys that
    /// SecureStore 0.1 shared between folders): they keep opening with their own items.
    public let alsoOpens: [String]
}
