// The one error type of the module.
internal import CSQLCipher
internal import Glibc

/// An error from an encrypted database: a code to match on and a message a person can act on.
///
/// ```swift
/// do {
///     let queue = try DatabaseQueue(path: path, key: key)
/// } catch DatabaseError.Code.wrongKeyOrNotADatabase {
///     // the key does not open this file
/// }
/// ```
///
/// Messages and descriptions never contain a key or the values bound to a statement; they may contain the
/// SQL text of the statement (with `?` placeholders) and the path of the file.
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value that can be matched in `catch` clauses and `switch` statements.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name of the code, e.g. `"wrongKeyOrNotADatabase"`.
        public let name: String
        /// A code named `name`.
        public init(_ name: String) { self.name = name }
        /// The stable name of the code.
        public var description: String { name }

        /// Matches an error against a code, so that `catch DatabaseError.Code.busy { … }` works.
        public static func ~= (pattern: Code, value: any Error) -> Bool {
            (value as? DatabaseError)?.code == pattern
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for a person: what failed and, where one helps, what to do.
    public let message: String
    /// The SQLite extended result code, when the error came from SQLite (e.g. 26 for `SQLITE_NOTADB`,
    /// 2067 for `SQLITE_CONSTRAINT_UNIQUE`).
    public let extendedResultCode: Int32?
    /// The SQL text of the statement that failed, without argument values.
    public let sql: String?

    /// Creates an error.
    public init(_ code: Code, _ message: String, extendedResultCode: Int32? = nil, sql: String? = nil) {
        self.code = code
        self.message = message
        self.extendedResultCode = extendedResultCode
        self.sql = sql
    }

    /// `code: message`, followed by the SQL text and SQLite result code when there are some.
    public var description: String {
        var text = "\(code.name): \(message)"
        if let extendedResultCode { text += " (SQLite code \(extendedResultCode))" }
        if let sql { text += " [SQL: \(sql)]" }
        return text
    }
}

extension DatabaseError.Code {
    /// The key does not decrypt the file, or the file is not a database (SQLite's `SQLITE_NOTADB`,
    /// "file is encrypted or is not a database"). A file of random bytes whose size is a whole number of
    /// pages cannot be told apart from a database under another key.
    public static let wrongKeyOrNotADatabase = Self("wrongKeyOrNotADatabase")
    /// The file is a plaintext (unencrypted) SQLite database. Import it instead of opening it.
    public static let notEncrypted = Self("notEncrypted")
    /// The file exists but is empty (0 bytes). This module never leaves such a file behind.
    public static let emptyFile = Self("emptyFile")
    /// The file is not a database of any kind: its size is not a whole number of pages and no page
    /// decrypts.
    public static let unrecognizedFormat = Self("unrecognizedFormat")
    /// The file is a SQLCipher database that the key opens in another format than SecureStore's
    /// (``CipherFormat/secureStore``): for example SQLCipher 4's default format, written by another program.
    /// The message names the format found. Nothing was written while finding out.
    public static let otherFormat = Self("otherFormat")
    /// A `-wal` or `-journal` beside the database does not belong to it (its pages do not authenticate under
    /// the database's key, or its page size differs): SQLite would have copied it into the database. It is
    /// left in place and nothing was changed; the message names the file.
    public static let foreignSideFile = Self("foreignSideFile")
    /// The file is a database under this key but is damaged or truncated (`SQLITE_CORRUPT`, or an
    /// `integrity_check` that fails).
    public static let corrupt = Self("corrupt")
    /// The file does not exist and the database was opened read-only.
    public static let notFound = Self("notFound")
    /// The database or its directory may not be written (`SQLITE_READONLY`).
    public static let readOnly = Self("readOnly")
    /// The file or its directory may not be opened (`EACCES`, `SQLITE_PERM`, `SQLITE_CANTOPEN`).
    public static let permissionDenied = Self("permissionDenied")
    /// The disk or quota is full (`SQLITE_FULL`, `ENOSPC`).
    public static let diskFull = Self("diskFull")
    /// Another connection held the lock longer than the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`).
    public static let busy = Self("busy")
    /// A `UNIQUE`, `NOT NULL`, `CHECK` or foreign-key constraint failed (`SQLITE_CONSTRAINT`).
    public static let constraint = Self("constraint")
    /// The database has a migration applied that this version of the program does not know: it was
    /// written by a newer version. It is left untouched.
    public static let unknownMigration = Self("unknownMigration")
    /// The API was used wrongly: a closed database, a wrong number of arguments, a nested access, a
    /// statement used after its row moved on (`SQLITE_MISUSE`, `SQLITE_RANGE`).
    public static let misuse = Self("misuse")
    /// A column could not be read as the requested type (a `NULL` where a value was expected, a blob of
    /// the wrong size for a UUID).
    public static let typeMismatch = Self("typeMismatch")
    /// The process does not use SQLCipher: `PRAGMA cipher_version` does not answer, or the plain
    /// `libsqlite3` is loaded beside it.
    public static let sqlcipherUnavailable = Self("sqlcipherUnavailable")
    /// An input/output error from the operating system (`SQLITE_IOERR`).
    public static let io = Self("io")
    /// Any other SQLite error (for example a syntax error in SQL text); see the message and
    /// ``DatabaseError/extendedResultCode``.
    public static let sqlite = Self("sqlite")
}

extension DatabaseError {
    /// Builds the error of a failed `sqlite3_step`. A plain `SQLITE_ERROR` with no message of its own there is the
    /// pager's error state, which SQLCipher sets when a page fails its authentication (its HMAC check): it is
    /// named as damage, not as "SQL logic error".
    static func step(_ result: Int32, connection: OpaquePointer?, path: String, sql: String) -> DatabaseError {
        if result == SQLITE_ERROR, let connection, sqlite3_extended_errcode(connection) == SQLITE_ERROR,
            let text = sqlite3_errmsg(connection), String(cString: text) == String(cString: sqlite3_errstr(SQLITE_ERROR))
        {
            return DatabaseError(
                .corrupt,
                "a page of the database '\(path)' failed its authentication (SQLCipher's HMAC check): the file was "
                    + "changed or damaged on disk; nothing read from that page was returned; restore it from a backup",
                extendedResultCode: SQLITE_ERROR, sql: sql)
        }
        return sqlite(result, connection: connection, sql: sql)
    }

    /// Builds an error from a SQLite result code and the connection's current message.
    ///
    /// SQLite's own messages name tables, columns and constraints but never bound values.
    static func sqlite(
        _ result: Int32, connection: OpaquePointer?, sql: String? = nil, path: String? = nil
    ) -> DatabaseError {
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? result
        let primary = extended & 0xff
        let sqliteMessage: String
        if let connection, let text = sqlite3_errmsg(connection) {
            sqliteMessage = String(cString: text)
        } else {
            sqliteMessage = String(cString: sqlite3_errstr(result))
        }
        let file = path.map { " '\($0)'" } ?? ""
        let (code, message): (Code, String)
        switch primary {
        case SQLITE_NOTADB:
            code = .wrongKeyOrNotADatabase
            message = "the key does not open the database\(file), or it is not a database (\(sqliteMessage))"
        case SQLITE_CORRUPT:
            code = .corrupt
            message = "the database\(file) is damaged (\(sqliteMessage)); restore it from a backup"
        case SQLITE_READONLY:
            code = .readOnly
            message = "the database\(file) cannot be written (\(sqliteMessage)); check the permissions of "
                + "the file and its directory"
        case SQLITE_PERM, SQLITE_AUTH, SQLITE_CANTOPEN:
            code = .permissionDenied
            message = "the database\(file) cannot be opened (\(sqliteMessage)); check that the directory "
                + "exists and that this user may read and write it"
        case SQLITE_FULL:
            code = .diskFull
            message = "the disk is full (\(sqliteMessage)); free some space and try again"
        case SQLITE_BUSY, SQLITE_LOCKED:
            code = .busy
            message = "the database\(file) stayed locked by another connection longer than the busy "
                + "timeout (\(sqliteMessage)); try again"
        case SQLITE_CONSTRAINT:
            code = .constraint
            message = sqliteMessage
        case SQLITE_MISUSE, SQLITE_RANGE:
            code = .misuse
            message = sqliteMessage
        case SQLITE_IOERR where connection.map({ [ENOSPC, EDQUOT].contains(sqlite3_system_errno($0)) }) == true:
            // SQLite names a full disk met while it makes its shared-memory index or writes its log "disk I/O error".
            code = .diskFull
            let shm = [Int32(18 << 8 | 10), Int32(19 << 8 | 10), Int32(21 << 8 | 10)].contains(extended)  // SQLITE_IOERR_SHMOPEN, _SHMSIZE, _SHMMAP (macros)
            message = shm
                ? "the disk holding the database\(file) is full: SQLite needs 32 KiB beside it for its shared-memory "
                    + "index (-shm) to open it, even to read; free some space there and try again; nothing was changed"
                : "the disk holding the database\(file) is full (\(sqliteMessage)); free some space and try again"
        case SQLITE_IOERR:
            code = .io
            message = "an input/output error on the database\(file) (\(sqliteMessage))"
        default:
            code = .sqlite
            message = sqliteMessage
        }
        return DatabaseError(code, message, extendedResultCode: extended, sql: sql)
    }
}
