// Checks made in a private copy before a connection touches a file: the key and format (page 1 only), and
// whether a -wal or -journal left beside the database belongs to it. Nothing here writes to the database or
// its side files: SQLite would replay side files into the database on open, and checkpoint on close even
// after a failed key check.
internal import CSQLCipher
internal import Foundation
internal import SecureStoreCore

/// A private directory (mode 0700) beside the database, removed when done. Copies made here are encrypted
/// files, as the originals are.
struct Sandbox {
    let directory: String

    /// Makes the directory beside `path`, or in the temporary directory when the database's directory may not
    /// be written (a read-only directory or file system).
    ///
    /// With `temporaryOnly`, it is made in the temporary directory alone: for a second try when the disk of the
    /// database is full.
    init(near path: String, temporaryOnly: Bool = false) throws {
        let parent = directoryPart(path).isEmpty ? "." : directoryPart(path)
        let name = namePart(path)
        // What killed processes left: `.NAME.check-PID-*` folders (and temporary files) whose process is gone.
        ScratchFiles.sweep(parent, name: name)
        var failure = Errno.noSuchFileOrDirectory
        for base in temporaryOnly ? [temporaryDirectory()] : [parent, temporaryDirectory()] {
            do {
                directory = try ScratchFiles.makeDirectory(near: base + "/" + name)
                // A signal (SIGINT, SIGTERM, SIGHUP) in the tool removes its copies and the folder.
                ScratchFiles.registerDirectory(directory)
                return
            } catch {
                failure = error
            }
        }
        throw Opening.errnoError(failure, "cannot make a private directory to check '\(path)' in")
    }

    /// Copies the file at `source` into the sandbox as `name`. With `prefix`, only that many bytes are copied
    /// and the copy is extended (sparse) to the original size, so page 1 can be read and the size still
    /// matches what the header says.
    @discardableResult
    func copy(_ source: String, as name: String, prefix: Int? = nil) throws -> String {
        let destination = directory + "/" + name
        ScratchFiles.register(destination)
        do {
            try copyFile(source, to: destination, prefix: prefix)
        } catch {
            throw Opening.errnoError(error.errno, "cannot copy '\(source)' into '\(directory)' to check it")
        }
        return destination
    }

    /// Removes the directory and everything in it.
    func remove() {
        removeDirectoryAndFiles(directory)
        ScratchFiles.unregisterDirectory(directory)
    }
}

enum Preflight {
    /// How much of a database is copied to check its key and format: page 1 in the largest page size.
    static let headerCopySize = 65_536

    /// Checks, before any connection opens the existing file `path`, that the key opens it in the pinned
    /// format and that its side files belong to it, when it has side files and nobody has it open (then they
    /// were left by a process that died, or copied in from elsewhere).
    ///
    /// Throws what opening would: wrong key, another format, or ``DatabaseError/Code/foreignSideFile`` for a
    /// `-wal` or `-journal` whose pages the key cannot authenticate. Nothing is written beside `path`.
    static func check(_ path: String, keying: Keying, configuration: DatabaseConfiguration) throws {
        let side = SideFiles(path: path)
        let existing = side.existing
        guard !existing.isEmpty, !side.isInUse() else { return }
        let format = configuration.format
        let log = try WriteAheadLog.read(side.wal)
        if let log, log.headerIsValid, log.committedFrames > 0, log.pageSize != format.pageSize {
            throw DatabaseError(
                .foreignSideFile,
                "'\(side.wal)' does not belong to '\(path)': its pages are \(log.pageSize) bytes, the database's "
                    + "\(format.pageSize); nothing was changed. Move it away to open the "
                    + "database without it")
        }
        // The copies go beside the database; when its disk is full, into the temporary directory (another file
        // system, often): a full disk must not keep a user from reading. When neither has room, the error says
        // how much to free and where.
        do {
            let sandbox = try Sandbox(near: path)
            defer { sandbox.remove() }
            try check(path, log: log, side: side, in: sandbox, keying: keying, configuration: configuration)
        } catch let error as DatabaseError where error.code == .diskFull {
            let sandbox: Sandbox
            do {
                sandbox = try Sandbox(near: path, temporaryOnly: true)
            } catch {
                throw noRoomToCheck(path, side: side)
            }
            defer { sandbox.remove() }
            do {
                try check(path, log: log, side: side, in: sandbox, keying: keying, configuration: configuration)
            } catch let error as DatabaseError where error.code == .diskFull {
                throw noRoomToCheck(path, side: side)
            }
        }
    }

    /// The error for side files that cannot be checked for want of space: what they are, how much room the
    /// check needs and where.
    static func noRoomToCheck(_ path: String, side: SideFiles) -> DatabaseError {
        let files = [path] + side.existing
        let bytes = files.reduce(0) { $0 + ((try? Opening.inspect($1)?.size) ?? 0) }
        let megabytes = max(1, (bytes + (1 << 20) - 1) >> 20)
        let parent = directoryPart(path).isEmpty ? "." : directoryPart(path)
        return DatabaseError(
            .diskFull,
            "the disk is full: '\(path)' has \(side.existing.map { "'\($0)'" }.joined(separator: " and ")) beside it, "
                + "left by a process that stopped before closing it, and checking that it belongs to the database "
                + "before it is replayed needs a copy of \(megabytes) MiB; free \(megabytes) MiB in '\(parent)' or in "
                + "the temporary directory '\(temporaryDirectory())' (TMPDIR) and try again; nothing was changed")
    }

    /// The checks of ``check(_:keying:configuration:)``, with their copies in `sandbox`.
    private static func check(
        _ path: String, log: WriteAheadLog?, side: SideFiles, in sandbox: Sandbox, keying: Keying,
        configuration: DatabaseConfiguration
    ) throws {
        let format = configuration.format
        // 1. The key and the format, on page 1 of the database file alone.
        let header = try sandbox.copy(path, as: "key-check.db", prefix: headerCopySize)
        if try !probe(header, keying: keying, format: format) {
            throw diagnosis(path, keying: keying, copy: header, fileSize: try Opening.inspect(path)?.size, format: format)
        }

        // 2. A hot rollback journal beside a file in WAL mode was written by something else: SQLite replays a
        //    hot journal before it looks at the log, and this module's files are in WAL mode from their
        //    creation (which happens under a temporary name), so it never leaves one there.
        //    A file opened with a rollback journal (DatabaseConfiguration.journalMode) writes one, and a crash leaves
        //    it hot: step 3 checks it.
        let journals = side.journalSize > 0 ? [side.journal] : []
        if !journals.isEmpty, configuration.journalMode == .wal,
            try journalMode(header, keying: keying, format: format) == "wal"
        {
            throw DatabaseError(
                .foreignSideFile,
                "'\(side.journal)' beside '\(path)' does not belong to it: the database is in WAL mode and never "
                    + "writes a rollback journal; nothing was changed. Move it away to open the database without it")
        }

        // 3. The frames and journal pages SQLite would apply, in a full copy: every page the copy reaches must
        //    authenticate under the key, and a replayed journal must leave the file as long as its header says.
        let replayed = (log?.committedFrames ?? 0) > 0 ? [side.wal] : []
        guard !(replayed + journals).isEmpty else { return }
        let copy = try sandbox.copy(path, as: "copy.db")
        for file in replayed + journals {
            try sandbox.copy(file, as: "copy.db" + String(file.dropFirst(path.count)))
        }
        let named = (replayed + journals).map { "'\($0)'" }.joined(separator: " and ")
        do {
            // A small page cache: the check reads every page once and keeps none.
            var small = DatabaseConfiguration()
            small.cacheSizeKiB = 2048
            small.format = format
            let connection = try Opening.connect(
                copy, keying: keying, configuration: small, fileSize: nil, preflight: false)
            defer { sqlite3_close_v2(connection) }
            var result = ""
            try Opening.step(connection, "PRAGMA quick_check(1)", row: { statement in
                if let text = sqlite3_column_text(statement, 0) { result = String(cString: text) }
            })
            guard result == "ok" else { throw DatabaseError(.corrupt, result) }
            var pages = 0
            try Opening.step(connection, "PRAGMA page_count", row: { pages = Int(sqlite3_column_int64($0, 0)) })
            if !journals.isEmpty, let size = try Opening.inspect(copy)?.size,
                size != pages * format.pageSize
            {
                throw DatabaseError(.corrupt, "the replayed journal left \(size) bytes for \(pages) pages")
            }
        } catch let error as DatabaseError
            where [.wrongKeyOrNotADatabase, .otherFormat, .corrupt, .unrecognizedFormat].contains(error.code)
        {
            throw DatabaseError(
                .foreignSideFile,
                "\(named) beside '\(path)' does not belong to it: its pages do not authenticate under the "
                    + "database's key; nothing was changed. Move it away to open the database without it",
                extendedResultCode: error.extendedResultCode)
        }
    }

    /// Whether page 1 of `copy` decrypts and authenticates under `keying` in `format`. The copy may be changed
    /// (SQLite may make side files beside it); it is a sandbox copy.
    static func probe(_ copy: String, keying: Keying, format: CipherFormat) throws -> Bool {
        var connection: OpaquePointer?
        let opened = sqlite3_open_v2(copy, &connection, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        defer { sqlite3_close_v2(connection) }
        guard opened == SQLITE_OK, let connection else {
            throw DatabaseError.sqlite(opened, connection: connection, path: copy)
        }
        sqlite3_extended_result_codes(connection, 1)
        try Opening.key(connection, keying)
        try Opening.checkLibrary(connection, path: copy)
        for pragma in format.pragmas(schema: "main", library: Opening.library) {
            try Opening.exec(connection, pragma)
        }
        // user_version is read from page 1's header: one page, authenticated as a whole.
        let result = sqlite3_exec(connection, "PRAGMA user_version", nil, nil, nil)
        return result & 0xff != SQLITE_NOTADB
    }

    /// The journal mode recorded in page 1 of `copy` (`wal`, or `delete` for a rollback-journal file), read in
    /// the sandbox.
    static func journalMode(_ copy: String, keying: Keying, format: CipherFormat) throws -> String {
        var connection: OpaquePointer?
        let opened = sqlite3_open_v2(copy, &connection, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        defer { sqlite3_close_v2(connection) }
        guard opened == SQLITE_OK, let connection else {
            throw DatabaseError.sqlite(opened, connection: connection, path: copy)
        }
        try Opening.key(connection, keying)
        for pragma in format.pragmas(schema: "main", library: Opening.library) {
            try Opening.exec(connection, pragma)
        }
        var mode = ""
        try Opening.step(connection, "PRAGMA journal_mode", row: { statement in
            if let text = sqlite3_column_text(statement, 0) { mode = String(cString: text).lowercased() }
        })
        return mode
    }

    /// The error for a file that the key does not open in the pinned format: the format it is in, when the key
    /// opens it in another (tried read-only on `copy`, a sandbox copy of its first page), or a wrong key.
    static func diagnosis(
        _ path: String, keying: Keying, copy: String, fileSize: Int?, format pinned: CipherFormat
    ) -> DatabaseError {
        let library = Opening.library
        for format in CipherFormat.candidates(for: library) where format != pinned {
            if (try? probe(copy, keying: keying, format: format)) == true {
                return DatabaseError(
                    .otherFormat,
                    "'\(path)' is in another SQLCipher format, \(format.name) (\(format.summary): "
                        + "\(format.pageSize)-byte pages, \(format.hmacAlgorithm), \(format.kdfAlgorithm)), not "
                        + "SecureStore's \(pinned.name); the key is right and nothing was "
                        + "changed. It was written by another program, or by SecureStore before 0.2 on "
                        + "SQLCipher 4")
            }
        }
        let pageSize = pinned.pageSize
        if let fileSize, fileSize % pageSize != 0 {
            return DatabaseError(
                .unrecognizedFormat,
                "'\(path)' is not a SecureStore database: no page decrypts in any SQLCipher format and its size "
                    + "(\(fileSize) bytes) is not a whole number of \(pageSize)-byte pages; nothing was changed",
                extendedResultCode: SQLITE_NOTADB)
        }
        if library.major < 4 {
            return DatabaseError(
                .wrongKeyOrNotADatabase,
                "the key does not open '\(path)', or it is not a SecureStore database, or it is in a format "
                    + "SQLCipher \(library.version) cannot read (such as SQLCipher 4's default format, which "
                    + "SQLCipher 4 can identify); nothing was changed",
                extendedResultCode: SQLITE_NOTADB)
        }
        return DatabaseError(
            .wrongKeyOrNotADatabase,
            "the key does not open '\(path)' in any SQLCipher format (file is encrypted or is not a database); "
                + "nothing was changed",
            extendedResultCode: SQLITE_NOTADB)
    }

    /// The diagnosis for `path` made from a fresh sandbox copy of its first page.
    static func diagnose(_ path: String, keying: Keying, fileSize: Int?, format: CipherFormat) -> DatabaseError {
        let fallback = DatabaseError(
            .wrongKeyOrNotADatabase,
            "the key does not open '\(path)', or it is not a SecureStore database (file is encrypted or is not "
                + "a database); nothing was changed",
            extendedResultCode: SQLITE_NOTADB)
        guard let sandbox = try? Sandbox(near: path) else { return fallback }
        defer { sandbox.remove() }
        guard let copy = try? sandbox.copy(path, as: "key-check.db", prefix: headerCopySize) else { return fallback }
        return diagnosis(path, keying: keying, copy: copy, fileSize: fileSize, format: format)
    }
}
