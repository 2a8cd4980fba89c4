// The online backup: SQLite's backup API in steps, from a read transaction of the source, into a new encrypted file.
// Every C call of the backup goes through this file.
internal import CSQLCipher
internal import Foundation
internal import SecureStoreCore

/// How far a backup is: reported after each step of ``DatabaseQueue/backup(to:key:pagesPerStep:progress:)``.
///
/// The names are GRDB's (`DatabaseBackupProgress`).
public struct DatabaseBackupProgress: Sendable, Hashable {
    /// The pages still to copy. The corresponding C function is `sqlite3_backup_remaining`.
    public let remainingPageCount: Int
    /// The pages of the database being copied. The corresponding C function is `sqlite3_backup_pagecount`.
    public let totalPageCount: Int

    /// The pages copied so far.
    public var completedPageCount: Int { totalPageCount - remainingPageCount }

    /// Whether every page is copied (the last report of a backup).
    public var isCompleted: Bool { remainingPageCount == 0 }
}

extension DatabaseQueue {
    /// Copies this database, as it is when the copy starts, into the new file `destination`, encrypted under `key` in
    /// the same format (``DatabaseConfiguration/format``), `pagesPerStep` pages at a time, calling `progress` after
    /// each step.
    ///
    /// The copy is SQLite's online backup, read in one read transaction of this queue: it is a consistent snapshot
    /// of the last commit before the call, whatever other connections (other queues, pools, processes) commit in the
    /// meantime, and in WAL mode they go on writing while it runs. This queue itself is busy until the copy ends: to
    /// back up a database that this queue writes, call this on a second, read-only queue of the file.
    ///
    /// `destination` must not exist: the copy is built under a temporary name next to it (mode 0600) and linked into
    /// place when complete, so it is never half written and nothing is replaced. The key is given to SQLCipher in its
    /// raw-key form, never in SQL text. `user_version` and `application_id` are copied with the pages. The copy uses
    /// a rollback journal (no `-wal` beside it). Verify it (open it, ``integrityCheck()``) before relying on it.
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// func backUp(_ path: String, key: DatabaseKey, to destination: String) throws {
    ///     var configuration = DatabaseConfiguration()
    ///     configuration.readOnly = true
    ///     let source = try DatabaseQueue(path: path, key: key, configuration: configuration)
    ///     defer { try? source.close() }
    ///     try source.backup(to: destination, key: key) { progress in
    ///         print("\(progress.completedPageCount) of \(progress.totalPageCount) pages")
    ///     }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - pagesPerStep: the pages copied between two `progress` calls (at least 1).
    ///   - progress: called on the caller's thread after each step; throwing from it stops the backup (the
    ///     temporary file is removed) and rethrows. It must not use this queue.
    ///
    /// The corresponding C functions are `sqlite3_backup_init`, `sqlite3_backup_step`, `sqlite3_backup_remaining`,
    /// `sqlite3_backup_pagecount` and `sqlite3_backup_finish`.
    public func backup(
        to destination: String, key: DatabaseKey, pagesPerStep: Int = 256,
        progress: (DatabaseBackupProgress) throws -> Void = { _ in }
    ) throws {
        let format = format
        try read { db in
            guard let connection = db.connection else { throw DatabaseError(.misuse, "the database is closed") }
            // The read transaction starts at its first read: from here every step copies this snapshot, and no
            // commit of another connection restarts the copy.
            try Opening.exec(connection, "SELECT count(*) FROM sqlite_master")
            try OnlineBackup.copy(
                from: connection, to: destination, key: key, format: format, pagesPerStep: max(1, pagesPerStep),
                progress: progress)
        }
    }
}

/// The backup's steps on C connections.
enum OnlineBackup {
    /// Copies the schema `main` of `source` (inside a read transaction) into the new file `destination` under `key`.
    static func copy(
        from source: OpaquePointer, to destination: String, key: DatabaseKey, format: CipherFormat, pagesPerStep: Int,
        progress: (DatabaseBackupProgress) throws -> Void
    ) throws {
        if fileExists(destination, followingLinks: true) {
            throw DatabaseError(.misuse, "'\(destination)' already exists; a backup writes only a new file")
        }
        try makeDirectories(directoryPart(destination))
        var pageCount: Int64 = 0
        try Opening.step(source, "PRAGMA main.page_count", row: { pageCount = sqlite3_column_int64($0, 0) })
        Opening.removeStaleTemporaries(near: destination)
        let temporary = Opening.temporaryPath(near: destination)
        ScratchFiles.register(temporary)
        defer { ScratchFiles.unregister(temporary) }
        do {
            try Opening.createExclusive(temporary)
            try write(from: source, to: temporary, key: key, format: format, pagesPerStep: pagesPerStep, progress: progress)
            try sync(temporary)
            try Opening.publish(temporary, as: destination)
        } catch {
            Opening.removeDatabaseFiles(temporary)
            throw Opening.exportError(error, destination: destination, needed: pageCount * Int64(format.pageSize))
        }
    }

    /// fsyncs the finished copy before it is linked into place.
    private static func sync(_ path: String) throws {
        do {
            let descriptor = try FileDescriptor.open(path, .readOnly)
            try descriptor.closeAfter { () throws(Errno) in try descriptor.sync() }
        } catch {
            throw Opening.errnoError(error, "cannot flush '\(path)' to the disk")
        }
    }

    /// The copy into the empty file `temporary`, closed when this returns.
    private static func write(
        from source: OpaquePointer, to temporary: String, key: DatabaseKey, format: CipherFormat, pagesPerStep: Int,
        progress: (DatabaseBackupProgress) throws -> Void
    ) throws {
        var opened: OpaquePointer?
        let result = sqlite3_open_v2(temporary, &opened, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard result == SQLITE_OK, let destination = opened else {
            let error = DatabaseError.sqlite(result, connection: opened, path: temporary)
            sqlite3_close_v2(opened)
            throw error
        }
        defer { sqlite3_close_v2(destination) }
        sqlite3_extended_result_codes(destination, 1)
        try Opening.key(destination, .raw(key))
        // The same page size and reserve as the source, or SQLCipher refuses the copy (SQLITE_READONLY).
        try Opening.applyFormat(destination, path: temporary, format: format)
        // A new temporary file, synced and verified before it is linked into place: nothing to journal.
        try Opening.exec(destination, "PRAGMA journal_mode = OFF", path: temporary)
        try Opening.exec(destination, "PRAGMA synchronous = OFF", path: temporary)
        guard let backup = sqlite3_backup_init(destination, "main", source, "main") else {
            throw DatabaseError.sqlite(sqlite3_errcode(destination), connection: destination, path: temporary)
        }
        var finished = false
        defer { if !finished { sqlite3_backup_finish(backup) } }
        while true {
            let step = sqlite3_backup_step(backup, Int32(clamping: pagesPerStep))
            guard step == SQLITE_OK || step == SQLITE_DONE || step == SQLITE_BUSY || step == SQLITE_LOCKED else {
                finished = true
                sqlite3_backup_finish(backup)
                throw DatabaseError.sqlite(step, connection: destination, path: temporary)
            }
            try progress(
                DatabaseBackupProgress(
                    remainingPageCount: Int(sqlite3_backup_remaining(backup)),
                    totalPageCount: Int(sqlite3_backup_pagecount(backup))))
            if step == SQLITE_DONE { break }
            // Between steps the processor goes to writers for a moment (a busy or locked step waits longer for the
            // connection of this process that holds the lock it needs).
            usleep(step == SQLITE_OK ? 200 : 1000)
        }
        finished = true
        let end = sqlite3_backup_finish(backup)
        guard end == SQLITE_OK else { throw DatabaseError.sqlite(end, connection: destination, path: temporary) }
        // The pages carry the source's WAL marks; a backup is one file with a rollback journal.
        try Opening.exec(destination, "PRAGMA journal_mode = DELETE", path: temporary)
    }
}
