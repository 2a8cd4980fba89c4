internal import Attachments
public import EncryptedDatabase
public import Foundation
public import Keychain
internal import SecureStoreCore

// Encrypting a plaintext SQLite database into a new keyed database.
extension KeyedDatabase {
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
    /// - Throws: ``SecureStoreError/Code/alreadyExists`` when the database exists (it is never replaced);
    ///   ``SecureStoreError/Code/invalidData`` when `source` is not a plaintext SQLite database;
    ///   `DatabaseError.Code.unrecognizedFormat` when `source` is not a plaintext SQLite database.
    public static func importPlaintext(
        from source: URL, paths: AppPaths, name: String, keychain: Keychain,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws -> KeyedDatabase {
        try KeyedStore.validated(paths: paths, name: name, keychain: keychain, configuration: configuration).importPlaintext(from: source)
    }
}

extension KeyedStore {
    /// Encrypts the plaintext SQLite database at `source` into this new database and opens it: see
    /// ``KeyedDatabase/importPlaintext(from:paths:name:keychain:configuration:)``.
    func importPlaintext(from source: URL) throws -> KeyedDatabase {
        guard KeyedDatabaseFiles.header(source.path) == Array("SQLite format 3\0".utf8) else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                KeyedDatabaseFiles.exists(source.path)
                    ? "'\(source.path)' is not a plaintext SQLite database, so it cannot be imported"
                    : "'\(source.path)' does not exist")
        }
        try KeyedDatabaseFiles.makeDirectories(files.directory)
        // A failure below drops `lock`, which releases it.
        let lock = try files.lock(exclusive: true, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        if KeyedDatabaseFiles.exists(files.path) {
            throw SecureStoreError(
                SecureStoreError.Code.alreadyExists,
                "the database '\(name)' already exists at '\(files.path)'; import never replaces a database. "
                    + "Choose another name")
        }
        try files.refuseOrphans()
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
            try queue.recordKeyedDatabaseID(id)
        } catch {
            try? queue.close()
            throw error
        }
        try lock.share(recording: id, timeoutMilliseconds: configuration.busyTimeoutMilliseconds)
        return KeyedDatabase(store: self, opened: Opened(queue: queue, id: id, lock: lock))
    }
}
