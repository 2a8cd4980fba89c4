// The keyed database: a named SQLCipher database whose random key lives in the Keychain, with its
// whole key lifecycle (create, open, rotate, recover, import, backup, verify). See Docs/key-lifecycle.md.
public import EncryptedDatabase
public import Foundation
public import Keychain
internal import Synchronization

/// A named encrypted database whose random 32-byte key is kept in the Keychain.
///
/// ```swift
/// let paths = try AppPaths(app: "myapp")
/// let database = try KeyedDatabase(paths: paths, name: "tasks", keychain: Keychain())
/// try database.queue.write { db in try db.execute("CREATE TABLE IF NOT EXISTS note (text TEXT)") }
/// try database.rotateKey { step in print(step) }
/// let code = try database.recoveryCode()   // a Secret: show it once, never log it
/// ```
///
/// The file is `<data directory>/<name>.db`; the key is the keychain item with service
/// `<app>.database-key` and account `<name>` (and `<name>.pending` while a rotation is under way),
/// stored as 64 lowercase hexadecimal digits.
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
/// exclusively. A handle is `Sendable`; ``queue`` serializes access to the connection.
public final class KeyedDatabase: Sendable {
    /// The application's paths.
    public let paths: AppPaths
    /// The database's name (the file is `<name>.db`, the keychain account is `<name>`).
    public let name: String
    /// The keychain that holds the key.
    public let keychain: Keychain
    /// The options the database is opened with.
    public let configuration: DatabaseConfiguration

    let files: KeyedDatabaseFiles
    let items: KeyedDatabaseKeyItems

    private struct State: Sendable {
        var queue: DatabaseQueue
        /// The lock file descriptor, or -1 once closed.
        var lock: Int32
    }

    private let state: Mutex<State>

    /// The open database. After ``rotateKey(progress:)`` this is a new queue (the one before is closed),
    /// so read this property each time rather than keeping the queue. The queue is closed when this
    /// `KeyedDatabase` is released: keep the handle alive while you use it.
    public var queue: DatabaseQueue { state.withLock { $0.queue } }

    /// Runs `body` with the queue while no rotation of this handle can run.
    func withQueue<R>(_ body: (DatabaseQueue) throws -> R) throws -> R {
        try state.withLock { state in try body(state.queue) }
    }

    /// The database file's URL.
    public var url: URL { paths.databaseURL(name: name) }

    /// The largest allowed database name, in UTF-8 bytes.
    public static let maximumNameLength = 64

    // MARK: Opening

    /// Opens the database `name`, creating it (and its key) the first time.
    ///
    /// - The first open generates a random key (system CSPRNG) and stores it in the keychain *before*
    ///   the file is created; if storing fails, no file is made.
    /// - A stored key that does not open the file is ``SecureStoreError/keyMismatch``; an existing file
    ///   without a stored key is ``SecureStoreError/missingKey``. Neither changes the file, and no new key
    ///   is ever made over an existing file (nor over an orphaned `-wal`).
    /// - An interrupted key rotation is finished (the file opens with the pending key: it becomes
    ///   current) or undone (the file opens with the current key: the pending key and the half-made copy
    ///   are removed).
    ///
    /// - Throws: ``SecureStoreError`` (`missingKey`, `keyMismatch`, `invalidArgument`, `inUse`,
    ///   `notFound`, `fileSystem`), ``KeychainError`` (for example `locked`) and `DatabaseError` (for
    ///   example `corrupt`) unchanged.
    public convenience init(
        paths: AppPaths, name: String, keychain: Keychain,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws {
        try Self.validate(name: name, keychain: keychain)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        try KeyedDatabaseFiles.makeDirectories(files.directory)
        let lock = try files.lock(exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        do {
            let queue: DatabaseQueue
            if let settled = try Self.openSettled(files: files, items: items, configuration: configuration) {
                queue = settled
            } else {
                try KeyedDatabaseFiles.relock(
                    lock, exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
                queue = try Self.openResolving(files: files, items: items, configuration: configuration)
                try KeyedDatabaseFiles.relock(
                    lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
            }
            self.init(paths: paths, name: name, keychain: keychain, configuration: configuration,
                      files: files, items: items, queue: queue, lock: lock)
        } catch {
            KeyedDatabaseFiles.unlock(lock)
            throw error
        }
    }

    private init(
        paths: AppPaths, name: String, keychain: Keychain, configuration: DatabaseConfiguration,
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, queue: DatabaseQueue, lock: Int32
    ) {
        self.paths = paths
        self.name = name
        self.keychain = keychain
        self.configuration = configuration
        self.files = files
        self.items = items
        state = Mutex(State(queue: queue, lock: lock))
    }

    /// Closes the connection and releases the lock file, as ``close()`` does. The queue is closed too: a
    /// connection must not outlive the shared lock that keeps other processes from rotating the key
    /// under it, so keep the `KeyedDatabase` for as long as its ``queue`` is in use.
    deinit {
        state.withLock { state in
            try? state.queue.close()
            KeyedDatabaseFiles.unlock(state.lock)
            state.lock = -1
        }
    }

    /// Closes the connection and releases the lock file. Later uses of ``queue`` throw `misuse`;
    /// closing twice does nothing.
    public func close() throws {
        try state.withLock { state in
            defer {
                KeyedDatabaseFiles.unlock(state.lock)
                state.lock = -1
            }
            try state.queue.close()
        }
    }

    /// Checks the name, and that the key will not live in the session collection (gone at logout).
    static func validate(name: String, keychain: Keychain) throws(SecureStoreError) {
        try validate(name: name)
        if keychain.configuration.collection == .session {
            throw SecureStoreError(
                SecureStoreError.invalidArgument,
                "a database key may not live in the 'session' collection: it is gone at logout, and the database "
                    + "with it; use the default collection")
        }
    }

    /// Checks a database name: 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.` and not
    /// ending with `.pending` (the suffix of the pending key's account).
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
                SecureStoreError.invalidArgument,
                "a database name must be 1 to \(maximumNameLength) letters, digits, '.', '_' or '-', not starting "
                    + "with '.' and not ending with '\(KeyedDatabaseKeyItems.pendingSuffix)'")
        }
    }

    /// Under the shared lock: opens the database when nothing needs changing (the file exists, no
    /// rotation leftovers, no pending key). Returns nil when the exclusive path must decide.
    private static func openSettled(
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, configuration: DatabaseConfiguration
    ) throws -> DatabaseQueue? {
        guard KeyedDatabaseFiles.exists(files.path), files.rotationLeftovers().isEmpty,
            try !items.keychain.exists(service: items.service, account: items.pendingAccount)
        else { return nil }
        guard let current = try items.current() else { throw missingKeyError(files: files, items: items) }
        do {
            return try DatabaseQueue(path: files.path, key: current, configuration: configuration)
        } catch DatabaseError.wrongKeyOrNotADatabase {
            throw keyMismatchError(files: files, items: items)
        }
    }

    /// Under the exclusive lock: creates the database, or finishes or undoes an interrupted rotation,
    /// and opens it.
    private static func openResolving(
        files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems, configuration: DatabaseConfiguration
    ) throws -> DatabaseQueue {
        let current = try items.current()
        let pending = try items.pending()
        guard KeyedDatabaseFiles.exists(files.path) else {
            try refuseOrphans(files: files)
            // A creation killed before its link leaves a temporary file of its own; it holds no data.
            try files.removeCreationLeftovers()
            // Create. A stored key without a file is reused, never replaced: it may open a backup.
            let key: DatabaseKey
            if let current {
                key = current
            } else {
                key = DatabaseKey.random()
                try items.storeCurrent(key)
            }
            // The key is stored: only now may the file exist. DatabaseQueue builds it under a temporary
            // name and links it into place, so it is never half made.
            return try DatabaseQueue(path: files.path, key: key, configuration: configuration)
        }
        if let current {
            do {
                let queue = try DatabaseQueue(path: files.path, key: current, configuration: configuration)
                // The file is under the current key: a rotation stopped before its rename. Undo it.
                try files.removeRotationLeftovers()
                // A pending key that does not open the file is harmless; when removing it waits for the
                // keyring's approval (KeePassXC), the next open removes it.
                if pending != nil { try deferringApproval { _ = try items.deletePending() } }
                return queue
            } catch DatabaseError.wrongKeyOrNotADatabase {
                guard let pending, pending != current else { throw keyMismatchError(files: files, items: items) }
                do {
                    return try openPromoting(pending, files: files, items: items, configuration: configuration)
                } catch DatabaseError.wrongKeyOrNotADatabase {
                    throw keyMismatchError(files: files, items: items)
                }
            }
        }
        guard let pending else { throw missingKeyError(files: files, items: items) }
        do {
            return try openPromoting(pending, files: files, items: items, configuration: configuration)
        } catch DatabaseError.wrongKeyOrNotADatabase {
            throw missingKeyError(files: files, items: items)
        }
    }

    /// Opens the file with the pending key; when it opens, the rotation had replaced the file: the pending
    /// key becomes current (stored as current first, then the pending item removed).
    private static func openPromoting(
        _ pending: DatabaseKey, files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems,
        configuration: DatabaseConfiguration
    ) throws -> DatabaseQueue {
        let queue = try DatabaseQueue(path: files.path, key: pending, configuration: configuration)
        // When the keyring wants a person's approval to replace the current key (KeePassXC), the rotation
        // stays unfinished: the file opens with the pending key, which stays stored, and the next open that
        // may prompt finishes it. rotateKey refuses to start another rotation meanwhile.
        if try deferringApproval({ try items.storeCurrent(pending) }) { try items.deletePending() }
        try files.removeRotationLeftovers()
        return queue
    }

    /// Runs `body`; returns false instead of throwing when it failed only for want of a person's approval
    /// in the keyring (``KeychainError/approvalRequired``, ``KeychainError/promptDismissed``).
    @discardableResult
    private static func deferringApproval(_ body: () throws -> Void) throws -> Bool {
        do {
            try body()
            return true
        } catch KeychainError.approvalRequired {
            return false
        } catch KeychainError.promptDismissed {
            return false
        }
    }

    /// What a person must do when promoting the pending key waits for the keyring's approval.
    static func promotionHint(files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems) -> String {
        "until then the database opens with the pending key (keyring service '\(items.service)' account '\(items.pendingAccount)'); "
            + "to finish, open it where the keyring can ask you (run a securestore command on a terminal, or with "
            + "SECURESTORE_PROMPT=always) and approve the keyring's access request"
    }

    /// Refuses to create a database where files of one remain: a `-wal` may hold committed data, and a
    /// rotation's copy may be the only one.
    private static func refuseOrphans(files: KeyedDatabaseFiles) throws {
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.notFound,
                "the database file '\(files.path)' is missing but its write-ahead log '\(files.walPath)' exists and "
                    + "may hold data; restore the database file from a backup, or move the -wal away if its data is "
                    + "not wanted. No new database is created over it")
        }
        if KeyedDatabaseFiles.exists(files.rotatingPath) {
            throw SecureStoreError(
                SecureStoreError.notFound,
                "the database file '\(files.path)' is missing but a key rotation's copy '\(files.rotatingPath)' "
                    + "exists; restore the database file from a backup, or remove the copy if it is not wanted. No "
                    + "new database is created over it")
        }
    }

    static func missingKeyError(files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.missingKey,
            "no key for database '\(items.databaseName)' in the keyring (\(items.location)), but the file "
                + "'\(files.path)' exists; if you kept a recovery code, run `securestore db recover --name "
                + "\(items.databaseName)`, or restore the keyring from a backup. A new key is never created over "
                + "existing data; the file was not changed")
    }

    static func keyMismatchError(files: KeyedDatabaseFiles, items: KeyedDatabaseKeyItems) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.keyMismatch,
            "the key stored for database '\(items.databaseName)' (\(items.location)) does not open '\(files.path)' "
                + "(wrong key, or not a SecureStore database); the file was not changed. If you kept a recovery "
                + "code, run `securestore db recover --name \(items.databaseName)`")
    }

    // MARK: Rotation

    /// A step of ``rotateKey(progress:)``, reported when it is done.
    public enum RotationStep: Int, Sendable, CaseIterable, CustomStringConvertible {
        /// The new key is stored in the keychain as the pending key (`<name>.pending`).
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
    /// handle or process has it open. ``queue`` is closed and replaced by a new queue; recovery codes
    /// and backups made before it need the old key.
    ///
    /// - Parameter progress: called after each step, on the caller's thread. It must not use this
    ///   database.
    public func rotateKey(progress: (RotationStep) -> Void = { _ in }) throws {
        try state.withLock { state in
            guard state.lock >= 0 else {
                throw SecureStoreError(SecureStoreError.invalidArgument, "the database '\(files.path)' is closed")
            }
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
            guard let oldKey = try items.current() else { throw Self.missingKeyError(files: files, items: items) }
            // Left by a rotation whose promotion waits for the keyring's approval: the file may be under
            // the pending key, so a new pending key must never be stored over it.
            if try items.pending() != nil {
                throw SecureStoreError(
                    SecureStoreError.inUse,
                    "the previous key rotation of '\(files.path)' is not finished: its new key is stored as the pending key "
                        + "and making it the current key needs the keyring's approval; "
                        + Self.promotionHint(files: files, items: items) + ", then rotate again")
            }
            try state.queue.checkpoint()
            try state.queue.close()
            var replaced = false
            do {
                let newKey = try rotate(from: oldKey, progress: progress, replaced: &replaced)
                state.queue = try DatabaseQueue(path: files.path, key: newKey, configuration: configuration)
            } catch {
                if !replaced {
                    // Undo: the file is still under the old key. Remove the copy, then the pending key.
                    try? files.removeRotationLeftovers()
                    _ = try? items.deletePending()
                }
                // Reopen with whichever stored key opens the file now.
                if let queue = try? Self.openResolving(files: files, items: items, configuration: configuration) {
                    state.queue = queue
                }
                throw error
            }
        }
    }

    private func rotate(from oldKey: DatabaseKey, progress: (RotationStep) -> Void, replaced: inout Bool) throws
        -> DatabaseKey
    {
        // The old connection is closed; its -wal is gone unless another connection holds the file open.
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.inUse,
                "the database '\(files.path)' is open in another program (its -wal remains after closing); close it "
                    + "there and rotate again")
        }
        try files.removeRotationLeftovers()

        let newKey = DatabaseKey.random()
        try items.storePending(newKey)
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
                    SecureStoreError.verificationFailed,
                    "the copy under the new key does not match the database (\(expected.differences(from: actual))); "
                        + "the rotation was undone and the database is unchanged")
            }
        } catch {
            try? copy.close()
            throw error
        }
        if KeyedDatabaseFiles.exists(files.rotatingPath + "-wal") {
            throw SecureStoreError(
                SecureStoreError.inUse, "the rotation's copy '\(files.rotatingPath)' is open in another program")
        }
        progress(.verified)

        try KeyedDatabaseFiles.syncFile(files.rotatingPath)
        try source.checkpoint()
        try source.close()
        if KeyedDatabaseFiles.exists(files.walPath) {
            throw SecureStoreError(
                SecureStoreError.inUse,
                "the database '\(files.path)' was opened by another program during the rotation; close it there and "
                    + "rotate again")
        }
        progress(.flushed)

        try KeyedDatabaseFiles.rename(files.rotatingPath, over: files.path)
        replaced = true
        progress(.replaced)
        KeyedDatabaseFiles.syncDirectory(files.directory)
        progress(.directoryFlushed)

        do {
            try items.storeCurrent(newKey)
            progress(.promoted)
            try items.deletePending()
            progress(.finished)
        } catch let error as KeychainError
            where error.code == KeychainError.approvalRequired || error.code == KeychainError.promptDismissed
        {
            throw SecureStoreError(
                SecureStoreError.verificationFailed,
                "the database is now under the new key, stored as the pending key, but making it the current key needs "
                    + "the keyring's approval (\(error.message)); " + Self.promotionHint(files: files, items: items))
        } catch {
            throw SecureStoreError(
                SecureStoreError.verificationFailed,
                "the database is now under the new key, which is stored as the pending key, but storing it as the "
                    + "current key failed (\(error)); the next open finishes the rotation")
        }
        return newKey
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
        guard let key = try items.current() else { throw Self.missingKeyError(files: files, items: items) }
        return RecoveryCode.code(for: key)
    }

    /// Stores the key written in a recovery code as the current key of the existing database `name`,
    /// after checking that it opens the database, and opens it. Use it when the keyring item is lost.
    ///
    /// Nothing is stored unless the code is well formed *and* opens the file.
    ///
    /// - Throws: ``SecureStoreError/invalidRecoveryCode`` for a mistyped code or one that does not open
    ///   the database; ``SecureStoreError/notFound`` when there is no database file.
    public static func recover(
        paths: AppPaths, name: String, keychain: Keychain, code: Secret,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabase {
        try validate(name: name, keychain: keychain)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        let key = try RecoveryCode.key(from: code)
        guard KeyedDatabaseFiles.exists(files.path) else {
            throw SecureStoreError(
                SecureStoreError.notFound,
                "there is no database '\(name)' at '\(files.path)'; a recovery code restores the key of an existing "
                    + "database file")
        }
        let lock = try files.lock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        do {
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            } catch DatabaseError.wrongKeyOrNotADatabase {
                throw SecureStoreError(
                    SecureStoreError.invalidRecoveryCode,
                    "the recovery code is well formed but does not open '\(files.path)': it belongs to another "
                        + "database, or to a key replaced by a rotation. Nothing was stored")
            }
            try items.storeCurrent(key)
            try items.deletePending()
            try files.removeRotationLeftovers()
            try KeyedDatabaseFiles.relock(
                lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
            return KeyedDatabase(
                paths: paths, name: name, keychain: keychain, configuration: configuration, files: files,
                items: items, queue: queue, lock: lock)
        } catch {
            KeyedDatabaseFiles.unlock(lock)
            throw error
        }
    }

    // MARK: Import

    /// Encrypts the plaintext SQLite database at `source` into the new keyed database `name` and opens
    /// it. Every table, index, row, `user_version` and `application_id` is kept; `source` is opened
    /// read-only and left as it was.
    ///
    /// The key is stored before the file is made (a key already stored for `name` with no file is reused).
    /// The new file is checked (it opens, `integrity_check`) before this returns.
    ///
    /// - Throws: ``SecureStoreError/alreadyExists`` when the database exists (it is never replaced);
    ///   ``SecureStoreError/invalidData`` when `source` is not a plaintext SQLite database;
    ///   `DatabaseError.unrecognizedFormat` when `source` is not a plaintext SQLite database.
    public static func importPlaintext(
        from source: URL, paths: AppPaths, name: String, keychain: Keychain,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabase {
        try validate(name: name, keychain: keychain)
        let files = KeyedDatabaseFiles(paths: paths, name: name)
        let items = KeyedDatabaseKeyItems(paths: paths, name: name, keychain: keychain)
        guard KeyedDatabaseFiles.header(source.path) == Array("SQLite format 3\0".utf8) else {
            throw SecureStoreError(
                SecureStoreError.invalidData,
                KeyedDatabaseFiles.exists(source.path)
                    ? "'\(source.path)' is not a plaintext SQLite database, so it cannot be imported"
                    : "'\(source.path)' does not exist")
        }
        try KeyedDatabaseFiles.makeDirectories(files.directory)
        let lock = try files.lock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        do {
            if KeyedDatabaseFiles.exists(files.path) {
                throw SecureStoreError(
                    SecureStoreError.alreadyExists,
                    "the database '\(name)' already exists at '\(files.path)'; import never replaces a database. "
                        + "Choose another name")
            }
            try refuseOrphans(files: files)
            let key: DatabaseKey
            if let current = try items.current() {
                key = current
            } else {
                key = DatabaseKey.random()
                try items.storeCurrent(key)
            }
            try DatabaseQueue.importPlaintext(from: source.path, to: files.path, key: key)
            let queue = try DatabaseQueue(path: files.path, key: key, configuration: configuration)
            try queue.integrityCheck()
            try KeyedDatabaseFiles.relock(
                lock, exclusive: false, timeoutMilliseconds: configuration.busyTimeoutMilliseconds, path: files.path)
            return KeyedDatabase(
                paths: paths, name: name, keychain: keychain, configuration: configuration, files: files,
                items: items, queue: queue, lock: lock)
        } catch {
            KeyedDatabaseFiles.unlock(lock)
            throw error
        }
    }
}
