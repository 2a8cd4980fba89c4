// Opening a connection: files and modes, keying, cipher settings, validation, connection settings.
// Every C call that opening needs goes through this file.
internal import CSQLCipher
internal import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// The settings every connection uses besides the file format (``CipherFormat/secureStore``).
enum CipherSettings {
    /// The page size of the pinned format.
    static var pageSize: Int { CipherFormat.secureStore.pageSize }
}

/// How a connection is keyed.
enum Keying {
    /// A 32-byte key in SQLCipher's raw-key form: no key derivation.
    case raw(DatabaseKey)
    /// A passphrase stretched with PBKDF2 (slow, by design).
    case passphrase(String)
}

enum Opening {
    // MARK: Process checks

    /// Whether the plain `libsqlite3` is mapped into this process (it must never be: its symbols would
    /// silently shadow or be shadowed by SQLCipher's).
    static func plainSQLiteIsLoaded() -> Bool {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return false }
        return maps.contains("/libsqlite3.so")
    }

    static func checkLibrary(_ connection: OpaquePointer?, path: String) throws {
        if plainSQLiteIsLoaded() {
            throw DatabaseError(
                .sqlcipherUnavailable,
                "the plain libsqlite3 is loaded into this process beside libsqlcipher; link only libsqlcipher")
        }
        guard let connection else { return }
        var version: String?
        _ = try? step(connection, "PRAGMA cipher_version", row: { statement in
            if let text = sqlite3_column_text(statement, 0) { version = String(cString: text) }
        })
        guard let version, !version.isEmpty else {
            throw DatabaseError(
                .sqlcipherUnavailable,
                "PRAGMA cipher_version does not answer: this process uses SQLite without SQLCipher, so '\(path)' "
                    + "would not be encrypted")
        }
        let library = SQLCipherLibrary(version: version, sqliteVersion: String(cString: sqlite3_libversion()))
        let first = SQLCipherLibrary.current.withLock { current in
            defer { current = library }
            return current == nil
        }
        if first, library.major >= 4, SQLCipherLogging.policy == .silenced {
            // SQLCipher 4 logs every failed page authentication to stderr, process-wide; this module reports
            // failures as errors instead (Docs/database.md, "SQLCipher's own log").
            _ = try? exec(connection, "PRAGMA cipher_log_level = NONE")
        }
    }

    /// The library of this process, learned from the first keyed connection.
    static var library: SQLCipherLibrary {
        SQLCipherLibrary.current.withLock { $0 }
            ?? SQLCipherLibrary(version: "unknown", sqliteVersion: String(cString: sqlite3_libversion()))
    }

    // MARK: Files

    /// Creates the missing directories of `directory`, each with mode 0700.
    static func makeDirectories(_ directory: String) throws {
        do {
            try SecureStoreCore.makeDirectories(directory)
        } catch {
            if error.errno == .notDirectory {
                throw DatabaseError(.permissionDenied, "'\(error.path)' exists and is not a directory")
            }
            throw errnoError(error.errno, "cannot create the directory '\(error.path)'")
        }
    }

    /// Creates `path` as a new empty file with mode 0600 whatever the umask; fails if it exists.
    static func createExclusive(_ path: String) throws {
        do {
            let descriptor = try FileDescriptor.open(path, [.writeOnly, .create, .exclusive, .noFollow])
            try descriptor.closeAfter { () throws(Errno) in try descriptor.setMode(0o600) }
        } catch {
            throw errnoError(error, "cannot create the file '\(path)'")
        }
    }

    /// A path for a temporary file next to `path`: `.<name>.tmp-<pid>-<random>`, so that a later run can tell
    /// the leftovers of a process that was killed from those of one still at work.
    static func temporaryPath(near path: String) -> String { ScratchFiles.path(near: path) }

    /// Removes what killed processes left in the folder of `path`: temporary files (`.<name>.tmp-<pid>-…`, with
    /// their side files) and check folders whose process no longer runs. They never hold anything but an
    /// unfinished copy.
    static func removeStaleTemporaries(near path: String) {
        ScratchFiles.sweep(directoryPart(path))
    }

    /// Removes a database file and its `-wal`, `-shm` and `-journal` companions, ignoring errors.
    static func removeDatabaseFiles(_ path: String) { SecureStoreCore.removeDatabaseFiles(path) }

    /// Links the finished file `temporary` to `path` (failing if `path` exists, so nothing is ever replaced),
    /// removes the temporary name and syncs the directory.
    static func publish(_ temporary: String, as path: String) throws {
        do {
            try linkFile(temporary, to: path)
        } catch {
            if error == .fileExists {
                throw DatabaseError(.misuse, "'\(path)' already exists; it was not replaced")
            }
            throw errnoError(error, "cannot create '\(path)'")
        }
        try? removeFile(temporary)
        syncDirectory(of: path)
    }

    /// fsyncs the directory of `path`, best effort: the link is made either way.
    static func syncDirectory(of path: String) {
        try? SecureStoreCore.syncDirectory(directoryPart(path))
    }

    /// The size of the file and its first 16 bytes, or nil when it does not exist. Never blocks on a FIFO and
    /// never follows a symbolic link in place of the file.
    ///
    /// A database a connection of this process has open (``OpenFiles``) is not opened here, only looked at
    /// (`stat`), and its header is given as empty (it is open as an encrypted database already): closing any
    /// descriptor of a file drops every POSIX lock the process holds on it, SQLite's locks of those connections
    /// included. Another process could then take the database for its last user, checkpoint the whole -wal into
    /// the file and drop it while a read transaction here still needs the pages it overwrote (an online backup
    /// copied rows without their index entries so).
    static func inspect(_ path: String) throws -> (size: Int, header: [UInt8])? {
        if let identity = FileIdentity(path), OpenFiles.contains(identity) {
            do {
                let status = try fileStatus(path)
                guard status.isRegularFile else {
                    throw DatabaseError(.unrecognizedFormat, "'\(path)' is not a regular file")
                }
                return (status.size, [])
            } catch let error as Errno {
                if error == .noSuchFileOrDirectory { return nil }
                throw errnoError(error, "cannot open the database '\(path)'")
            }
        }
        do {
            // A symbolic link in place of the database is followed, as SQLite follows it.
            switch try FileDescriptor.openRegularFile(path, followingLinks: true) {
            case .missing:
                return nil
            case .notRegular:
                throw DatabaseError(.unrecognizedFormat, "'\(path)' is not a regular file")
            case .opened(let descriptor, let status):
                let header = try descriptor.closeAfter { () throws(Errno) in try descriptor.read(upTo: 16) }
                return (Int(status.st_size), header)
            }
        } catch let error as Errno {
            throw errnoError(error, "cannot open the database '\(path)'")
        }
    }

    static let plaintextHeader = Array("SQLite format 3\0".utf8)

    static func errnoError(_ error: Errno, _ what: String) -> DatabaseError {
        let reason = error.description
        switch error {
        case _ where error.isPermission:
            return DatabaseError(.permissionDenied, "\(what): \(reason); check the permissions")
        case .readOnlyFileSystem:
            return DatabaseError(.readOnly, "\(what): \(reason)")
        case _ where error.isDiskFull:
            return DatabaseError(.diskFull, "\(what): \(reason); free some space and try again")
        case .noSuchFileOrDirectory:
            return DatabaseError(.notFound, "\(what): \(reason)")
        default:
            return DatabaseError(.io, "\(what): \(reason)")
        }
    }

    // MARK: Connections

    /// Opens, keys, configures and validates a connection to the existing file `path`, in the format of
    /// `configuration` (``CipherFormat/secureStore`` unless told). With `preflight`, the key, the format and any side files left by a
    /// process that is gone are first checked in a private copy (`Preflight`).
    /// On any failure the handle is closed before the error is thrown, and nothing was written to the file or
    /// its side files.
    static func connect(
        _ path: String, keying: Keying, configuration: DatabaseConfiguration, fileSize: Int?,
        preflight: Bool = true
    ) throws -> OpaquePointer {
        // A read-only file system: nothing can change the file, and SQLite cannot make the -shm a WAL database
        // needs (SQLite 3.15.2 cannot read one without it), so it is opened as immutable. Committed frames in a
        // -wal would then be ignored: that is refused instead of showing an older state.
        let immutable = preflight && (fileSize ?? 0) > 0 && isOnReadOnlyFileSystem(path)
        if immutable, let log = try WriteAheadLog.read(SideFiles(path: path).wal), log.committedFrames > 0 {
            throw DatabaseError(
                .readOnly,
                "'\(path)' is on a read-only file system and its -wal holds \(log.committedFrames) frames not yet in the "
                    + "file; open it once where it can be written (or copy the file and its -wal elsewhere); nothing "
                    + "was changed")
        }
        if preflight, (fileSize ?? 1) > 0, !immutable {
            try Preflight.check(path, keying: keying, configuration: configuration)
        }
        // Side files that were there before this open are not this connection's to checkpoint or remove if it
        // fails (the ones it makes itself are removed by SQLite's close as usual).
        let hadSideFiles = !SideFiles(path: path).existing.isEmpty
        var connection: OpaquePointer?
        var configuration = configuration
        if immutable { configuration.readOnly = true }
        let flags =
            (configuration.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX
            | (immutable ? SQLITE_OPEN_URI : 0)
        let result = sqlite3_open_v2(immutable ? fileURI(path, readOnly: false) + "?immutable=1" : path, &connection, flags, nil)
        guard result == SQLITE_OK, let connection else {
            let error = DatabaseError.sqlite(result, connection: connection, path: path)
            sqlite3_close_v2(connection)
            throw error
        }
        do {
            try configure(connection, path: path, keying: keying, configuration: configuration,
                          fileSize: fileSize, diagnose: preflight, guardClose: hadSideFiles)
            return connection
        } catch let error as DatabaseError where preflight && !immutable && sharedMemoryCannotBeMade(error, path: path) {
            sqlite3_close_v2(connection)
            return try connectWithoutSharedMemory(path, keying: keying, configuration: configuration, fileSize: fileSize)
        } catch {
            sqlite3_close_v2(connection)
            throw error
        }
    }

    /// Whether opening failed only because the disk has no room for the shared-memory index (`-shm`), and no other
    /// connection uses one: every connection of a WAL database maps at least 32 KiB of it, so a missing or shorter
    /// `-shm` means none is open.
    private static func sharedMemoryCannotBeMade(_ error: DatabaseError, path: String) -> Bool {
        // SQLITE_IOERR_SHMOPEN, _SHMSIZE, _SHMMAP (macros).
        let shm = [Int32(18 << 8 | 10), Int32(19 << 8 | 10), Int32(21 << 8 | 10)]
        guard error.code == .diskFull, let code = error.extendedResultCode, shm.contains(code) else { return false }
        // A stat, not an open: closing a descriptor of the `-shm` would drop this process's SQLite locks on it.
        guard let status = try? fileStatus(path + "-shm") else { return true }
        return status.size < 32_768
    }

    /// Opens `path` for reading only without a `-shm`, when the disk has no room for one: exclusive locking mode,
    /// set before the first read, keeps the WAL index in this connection's memory (SQLite 3.15.2 and later). The
    /// connection takes no file locks (the `unix-none` VFS: an exclusive lock needs a writable descriptor) and is
    /// read-only, so it can neither write nor checkpoint: closing it leaves the file and its `-wal` as they were.
    /// No other connection can use the file meanwhile: none can make the `-shm` either.
    private static func connectWithoutSharedMemory(
        _ path: String, keying: Keying, configuration: DatabaseConfiguration, fileSize: Int?
    ) throws -> OpaquePointer {
        var readOnly = configuration
        readOnly.readOnly = true
        var connection: OpaquePointer?
        let result = sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, withoutSharedMemoryVFS)
        guard result == SQLITE_OK, let connection else {
            let error = DatabaseError.sqlite(result, connection: connection, path: path)
            sqlite3_close_v2(connection)
            throw error
        }
        do {
            try configure(connection, path: path, keying: keying, configuration: readOnly, fileSize: fileSize,
                          diagnose: true, guardClose: false, exclusiveLocking: true)
            return connection
        } catch {
            sqlite3_close_v2(connection)
            throw error
        }
    }

    /// The VFS of a connection opened by ``connectWithoutSharedMemory(_:keying:configuration:fileSize:)``.
    static let withoutSharedMemoryVFS = "unix-none"

    /// Whether `connection` reads without a `-shm` because the disk had no room for one (read-only).
    ///
    /// The corresponding C function is `sqlite3_file_control` (`SQLITE_FCNTL_VFSNAME`).
    static func readsWithoutSharedMemory(_ connection: OpaquePointer) -> Bool {
        var name: UnsafeMutablePointer<CChar>?
        guard sqlite3_file_control(connection, "main", SQLITE_FCNTL_VFSNAME, &name) == SQLITE_OK, let name else {
            return false
        }
        defer { sqlite3_free(name) }
        return String(cString: name) == withoutSharedMemoryVFS
    }

    /// Applies `format` (the pinned one unless told) to the schema `schema` of a keyed connection.
    static func applyFormat(
        _ connection: OpaquePointer, schema: String = "main", path: String? = nil, format: CipherFormat = .secureStore
    ) throws {
        for pragma in format.pragmas(schema: schema, library: library) {
            try exec(connection, pragma, path: path)
        }
    }

    private static func configure(
        _ connection: OpaquePointer, path: String, keying: Keying, configuration: DatabaseConfiguration,
        fileSize: Int?, diagnose: Bool, guardClose: Bool, exclusiveLocking: Bool = false
    ) throws {
        sqlite3_extended_result_codes(connection, 1)
        sqlite3_busy_timeout(connection, Int32(clamping: configuration.busyTimeoutMilliseconds))
        // From SQLite 3.29 an unknown "identifier" in SQL is an error and never a string (GRDB does the same); the
        // schema already stored is still read as it was written. On older engines the library qualifies every
        // column it writes instead (Docs/records.md, "A misspelled column is an error").
        allowStringIdentifiers(connection, false)
        try key(connection, keying)
        // SQLCipher 3.4 answers `cipher_version` only on a keyed connection.
        try checkLibrary(connection, path: path)
        // Until the key is validated, closing must not checkpoint side files that were already there: SQLite
        // would copy whatever the -wal holds into the file even after a failed key check. SQLite 3.16+ can be
        // told so (a second guard behind the preflight, which is the only one on SQLCipher 3.4's 3.15.2).
        let guardsClose = guardClose && library.hasNoCheckpointOnClose
        if guardsClose {
            _ = securestore_db_config_flag(connection, SECURESTORE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        }
        // The format comes after the key and before the first read, on every open.
        try applyFormat(connection, path: path, format: configuration.format)

        // Before the first read, so that a WAL index is kept in memory (connectWithoutSharedMemory).
        if exclusiveLocking { try exec(connection, "PRAGMA locking_mode = EXCLUSIVE", path: path) }
        // Validate now: a wrong key fails here, not at the tenth query.
        do {
            try exec(connection, "SELECT count(*) FROM sqlite_master", path: path)
        } catch let error as DatabaseError where error.code == .wrongKeyOrNotADatabase {
            guard diagnose else { throw error }
            throw Preflight.diagnose(path, keying: keying, fileSize: fileSize, format: configuration.format)
        }
        if let fileSize, fileSize % configuration.format.pageSize != 0 {
            throw DatabaseError(
                .corrupt,
                "'\(path)' is truncated or damaged: its size (\(fileSize) bytes) is not a whole number of "
                    + "\(configuration.format.pageSize)-byte pages; restore it from a backup")
        }

        // cache_size reads the schema, so it comes after the validation.
        try exec(connection, "PRAGMA cache_size = -\(configuration.cacheSizeKiB)", path: path)
        if !configuration.readOnly && configuration.incrementalVacuum {
            // Only a file with no page yet (new): SQLite fixes the mode with the first table; an existing file keeps its own.
            var pages: Int64 = -1
            try step(connection, "PRAGMA page_count", row: { pages = sqlite3_column_int64($0, 0) })
            if pages == 0 { try exec(connection, "PRAGMA auto_vacuum = INCREMENTAL", path: path) }
        }
        if !configuration.readOnly {
            // Set on every open to the configured mode, which is the file's mode already: no write then.
            let mode = configuration.journalMode == .wal ? "WAL" : "DELETE"
            try exec(connection, "PRAGMA journal_mode = \(mode)", path: path)
        }
        try exec(connection, "PRAGMA synchronous = NORMAL", path: path)
        try exec(connection, "PRAGMA foreign_keys = ON", path: path)
        if guardsClose {
            _ = securestore_db_config_flag(connection, SECURESTORE_DBCONFIG_NO_CKPT_ON_CLOSE, 0)
        }
    }

    /// Turns SQLite's reading of an unknown `"identifier"` as a string literal on or off for the connection's SQL
    /// (`SQLITE_DBCONFIG_DQS_DML` and `_DQS_DDL`, SQLite 3.29+); older engines cannot turn it off, and are left alone.
    ///
    /// The corresponding C function is `sqlite3_db_config`.
    static func allowStringIdentifiers(_ connection: OpaquePointer, _ allowed: Bool) {
        guard sqlite3_libversion_number() >= 3_029_000 else { return }
        _ = securestore_db_config_flag(connection, SECURESTORE_DBCONFIG_DQS_DML, allowed ? 1 : 0)
        _ = securestore_db_config_flag(connection, SECURESTORE_DBCONFIG_DQS_DDL, allowed ? 1 : 0)
    }

    /// Keys the connection. The raw-key form is built in a buffer that is wiped when this returns; the key
    /// never appears in SQL text.
    ///
    /// The corresponding C function is `sqlite3_key`.
    static func key(_ connection: OpaquePointer, _ keying: Keying) throws {
        let result: Int32
        switch keying {
        case .raw(let key):
            result = key.withRawKeyForm { sqlite3_key(connection, $0.baseAddress, Int32($0.count)) }
        case .passphrase(let passphrase):
            var bytes = Array(passphrase.utf8)
            defer { bytes.withUnsafeMutableBytes { secureZero($0.baseAddress, $0.count) } }
            guard !bytes.isEmpty else {
                throw DatabaseError(.misuse, "an empty passphrase would leave the database unencrypted")
            }
            result = bytes.withUnsafeBytes { sqlite3_key(connection, $0.baseAddress, Int32($0.count)) }
        }
        guard result == SQLITE_OK else {
            throw DatabaseError.sqlite(result, connection: connection)
        }
    }

    /// Runs SQL without arguments on a raw connection.
    static func exec(_ connection: OpaquePointer, _ sql: String, path: String? = nil) throws {
        let result = sqlite3_exec(connection, sql, nil, nil, nil)
        guard result == SQLITE_OK else {
            throw DatabaseError.sqlite(result, connection: connection, sql: sql, path: path)
        }
    }

    /// Prepares `sql`, calls `bind` to bind it, steps it to the end calling `row` for each row, finalizes it.
    @discardableResult
    static func step(
        _ connection: OpaquePointer, _ sql: String, bind: (OpaquePointer) -> Void = { _ in },
        row: (OpaquePointer) -> Void = { _ in }
    ) throws -> Int {
        var statement: OpaquePointer?
        var result = sqlite3_prepare_v2(connection, sql, -1, &statement, nil)
        guard result == SQLITE_OK, let statement else {
            throw DatabaseError.sqlite(result, connection: connection, sql: sql)
        }
        defer { sqlite3_finalize(statement) }
        bind(statement)
        var rows = 0
        while true {
            result = sqlite3_step(statement)
            if result == SQLITE_ROW {
                rows += 1
                row(statement)
            } else if result == SQLITE_DONE {
                sqlite3_clear_bindings(statement)
                return rows
            } else {
                let error = DatabaseError.sqlite(result, connection: connection, sql: sql)
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
                throw error
            }
        }
    }

    // MARK: Creating

    /// Creates a new encrypted database at `path`: it is built under a temporary name (mode 0600, keyed,
    /// cipher settings, WAL) and then linked into place, so a file at `path` is never empty or half made.
    /// Returns false when another process created `path` first.
    static func createDatabase(
        _ path: String, keying: Keying, configuration: DatabaseConfiguration
    ) throws -> Bool {
        let temporary = temporaryPath(near: path)
        // Registered before it exists: a signal between the two would leave it.
        ScratchFiles.register(temporary)
        defer { ScratchFiles.unregister(temporary) }
        try createExclusive(temporary)
        do {
            let connection = try connect(
                temporary, keying: keying, configuration: configuration, fileSize: 0, preflight: false)
            // Switching to WAL wrote page 1 (header, cipher salt); a checkpoint on close empties the log. A file with a
            // rollback journal has no page 1 yet: one write transaction makes it, so the file linked into place is
            // never empty.
            if configuration.journalMode == .rollback {
                do {
                    try exec(connection, "PRAGMA user_version = 0", path: temporary)
                } catch {
                    sqlite3_close(connection)
                    throw error
                }
            }
            sqlite3_close(connection)
            do {
                try publish(temporary, as: path)
            } catch let error as DatabaseError where error.code == .misuse {
                removeDatabaseFiles(temporary)
                return false
            }
            return true
        } catch {
            removeDatabaseFiles(temporary)
            throw error
        }
    }

    // MARK: Export

    /// A `file:` URI for `path`, with the characters URIs reserve percent-encoded.
    static func fileURI(_ path: String, readOnly: Bool) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var encoded = ""
        for byte in absolute.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "-"),
                UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += "%" + hexString([byte]).uppercased()
            }
        }
        return "file:" + encoded + (readOnly ? "?mode=ro" : "")
    }

    /// Writes everything in the database `source` (schema `main`) into a new encrypted file `destination`
    /// under `key`, then copies `user_version` and `application_id`. The new file is built under a temporary
    /// name and linked into place: `destination` must not exist, and is never left half written.
    ///
    /// Uses `ATTACH DATABASE ? AS … KEY ?` with bound parameters (no key in SQL text) and
    /// `sqlcipher_export`.
    static func export(
        from source: OpaquePointer, to destination: String, key: DatabaseKey, format: CipherFormat = .secureStore
    ) throws {
        if fileExists(destination, followingLinks: true) {
            throw DatabaseError(.misuse, "'\(destination)' already exists; export writes only a new file")
        }
        try makeDirectories((destination as NSString).deletingLastPathComponent)
        var userVersion: Int64 = 0
        var applicationID: Int64 = 0
        try step(source, "PRAGMA main.user_version", row: { userVersion = sqlite3_column_int64($0, 0) })
        try step(source, "PRAGMA main.application_id", row: { applicationID = sqlite3_column_int64($0, 0) })

        var pageCount: Int64 = 0
        var pageSize: Int64 = 0
        var autoVacuum: Int64 = 0
        try step(source, "PRAGMA main.page_count", row: { pageCount = sqlite3_column_int64($0, 0) })
        try step(source, "PRAGMA main.auto_vacuum", row: { autoVacuum = sqlite3_column_int64($0, 0) })
        try step(source, "PRAGMA main.page_size", row: { pageSize = sqlite3_column_int64($0, 0) })

        removeStaleTemporaries(near: destination)
        let temporary = temporaryPath(near: destination)
        ScratchFiles.register(temporary)
        defer { ScratchFiles.unregister(temporary) }
        try createExclusive(temporary)
        var attached = false
        do {
            _ = try key.withRawKeyForm { rawKey in
                try step(source, "ATTACH DATABASE ? AS securestore_export KEY ?") { statement in
                    sqlite3_bind_text(statement, 1, temporary, -1, securestore_sqlite_transient())
                    // Bound without a copy; the binding is cleared before the buffer is wiped.
                    sqlite3_bind_text(
                        statement, 2, rawKey.baseAddress?.assumingMemoryBound(to: CChar.self),
                        Int32(rawKey.count), nil)
                }
            }
            attached = true
            // The attached file is keyed: SQLCipher 3.4 now answers cipher_version even when `source` is a
            // plaintext connection, so the library (and the format pragmas it takes) is known.
            try checkLibrary(source, path: destination)
            try applyFormat(source, schema: "securestore_export", format: format)
            // The copy re-runs the stored schema as it was written, maybe under an engine that read "x" as a string.
            allowStringIdentifiers(source, true)
            defer { allowStringIdentifiers(source, false) }
            // sqlcipher_export copies no auto_vacuum mode: the copy keeps the source's (Docs/database.md, "Free pages"),
            // set before its first table as a backup's page copy would carry it.
            try exec(source, "PRAGMA securestore_export.auto_vacuum = \(autoVacuum)")
            try step(source, "SELECT sqlcipher_export('securestore_export')")
            try exec(source, "PRAGMA securestore_export.user_version = \(Int32(truncatingIfNeeded: userVersion))")
            try exec(
                source, "PRAGMA securestore_export.application_id = \(Int32(truncatingIfNeeded: applicationID))")
            try exec(source, "DETACH DATABASE securestore_export")
            attached = false
            try publish(temporary, as: destination)
        } catch {
            if attached { try? exec(source, "DETACH DATABASE securestore_export") }
            removeDatabaseFiles(temporary)
            throw exportError(error, destination: destination, needed: pageCount * pageSize)
        }
    }

    /// `sqlcipher_export` reports a full disk or an I/O error of the file it writes as a plain `SQLITE_ERROR`
    /// holding only SQLite's bare message ("database or disk is full"); this gives such an error its code, the
    /// file, and what the copy needs against what is free.
    static func exportError(_ error: any Error, destination: String, needed: Int64) -> any Error {
        guard let error = error as? DatabaseError, error.code == .sqlite || error.code == .diskFull || error.code == .io
        else { return error }
        let full = String(cString: sqlite3_errstr(SQLITE_FULL))
        let io = String(cString: sqlite3_errstr(SQLITE_IOERR))
        if error.code == .diskFull || error.message.contains(full) {
            var space = ""
            if needed > 0 {
                space = " (the copy needs about \(byteCount(needed))"
                if let free = availableBytes(onFileSystemOf: directoryPart(destination)) {
                    space += "; \(byteCount(free)) is free there"
                }
                space += ")"
            }
            return DatabaseError(
                .diskFull,
                "the disk is full: cannot write '\(destination)'\(space); the partial copy was removed; free some "
                    + "space and try again",
                extendedResultCode: SQLITE_FULL)
        }
        if error.code == .io || error.message.contains(io) {
            return DatabaseError(
                .io, "an input/output error writing '\(destination)' (\(error.message)); the partial copy was removed",
                extendedResultCode: error.extendedResultCode ?? SQLITE_IOERR)
        }
        return error
    }
    /// `bytes` for a person (the core's one rule: "640 KiB", "12.5 MiB").
    static func byteCount(_ bytes: Int64) -> String { byteCountText(bytes) }

    /// Encrypts the plaintext SQLite database `source` into the new file `destination` under `key`.
    /// `source` is opened read-only and never modified.
    static func importPlaintext(from source: String, to destination: String, key: DatabaseKey) throws {
        guard let info = try inspect(source) else {
            throw DatabaseError(.notFound, "'\(source)' does not exist")
        }
        guard info.size > 0, info.header == plaintextHeader else {
            throw DatabaseError(
                .unrecognizedFormat, "'\(source)' is not a plaintext SQLite database, so it cannot be imported")
        }
        // The source is opened read-only through a URI (`mode=ro`) while the connection keeps read-write
        // flags, which the attached destination inherits.
        var connection: OpaquePointer?
        let result = sqlite3_open_v2(
            fileURI(source, readOnly: true), &connection,
            SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nil)
        guard result == SQLITE_OK, let connection else {
            let error = DatabaseError.sqlite(result, connection: connection, path: source)
            sqlite3_close_v2(connection)
            throw error
        }
        defer { sqlite3_close_v2(connection) }
        sqlite3_extended_result_codes(connection, 1)
        sqlite3_busy_timeout(connection, 10_000)
        // A plaintext connection does not answer cipher_version; the keyed destination is checked when opened.
        try checkLibrary(nil, path: source)
        try exec(connection, "SELECT count(*) FROM sqlite_master", path: source)
        try export(from: connection, to: destination, key: key)
    }
}
