// The Sendable handle: one connection behind a mutex, reached through scoped read and write.
internal import CSQLCipher
internal import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// Options for opening a database. The cipher settings are not options: they are fixed by the file format
/// (see Docs/database.md).
public struct DatabaseConfiguration: Sendable {
    /// Open the file read-only: it must exist, and writes fail with ``DatabaseError/Code/readOnly``.
    public var readOnly = false
    /// How long a statement waits for another connection's lock before failing with
    /// ``DatabaseError/Code/busy``. 10 000 ms by default.
    public var busyTimeoutMilliseconds = 10_000
    /// The largest page cache of the connection, in KiB (`PRAGMA cache_size = -N`). 65 536 (64 MiB) by
    /// default: memory is taken only as pages are read, and a cache that holds a big transaction keeps
    /// SQLCipher from encrypting the same pages again and again.
    public var cacheSizeKiB = 65_536
    /// How the file journals its transactions: ``JournalMode/wal`` (the default) or ``JournalMode/rollback``.
    /// Every open of a file must use the same mode: switching it rewrites the file's first page.
    public var journalMode = JournalMode.wal

    /// How a database file journals its transactions.
    public enum JournalMode: Sendable, Hashable {
        /// A write-ahead log (`-wal`): readers and one writer run side by side; every page is written twice
        /// (log, then checkpoint). A rollback journal beside such a file is refused as foreign.
        case wal
        /// A rollback journal (`-journal`, `PRAGMA journal_mode = DELETE`): pages appended past the end of the file
        /// are written once, for files that grow by large appends (SecureStore's attachments file). A journal
        /// left by a crash is checked against the key and rolled back at the next open.
        case rollback
    }
    /// The file format: the cipher settings applied on every open and export. ``CipherFormat/secureStore``
    /// by default. A file opens only in the format it was created in: give the same format every time.
    public var format = CipherFormat.secureStore
    /// Whether a database file created by this open can give back the pages its deletes free
    /// (`PRAGMA auto_vacuum = INCREMENTAL`, set before its first table; ``Database/releaseFreePages(keeping:)`` then
    /// shrinks the file). On by default; a file that already has content keeps the mode it was made with.
    public var incrementalVacuum = true

    /// The default configuration.
    public init() {}
}

/// A `Sendable` handle on one encrypted database file: a single connection whose use is serialized by a
/// mutex and scoped by ``read(_:)`` and ``write(_:)``.
///
/// ```swift
/// let queue = try DatabaseQueue(path: path, key: key)
/// try queue.write { db in
///     try db.execute("INSERT INTO item(title) VALUES (?)", ["Pay rent"])
/// }
/// let titles = try queue.read { db in
///     try db.fetch("SELECT title FROM item ORDER BY title") { try $0.string(at: 0) }
/// }
/// ```
///
/// Opening creates the file (mode 0600, in missing directories made with mode 0700) when it does not exist,
/// keys it, applies the cipher settings and validates the key by reading the schema, so a wrong key fails
/// here. Several processes may open the same file: it is in WAL mode with `synchronous = NORMAL`, and every
/// write is a `BEGIN IMMEDIATE` transaction that waits up to the busy timeout for the lock.
///
/// A queue is a ``DatabaseWriter``. Keep the queue when you opened it yourself; when it is the `queue` of
/// SecureStore's `KeyedDatabase`, keep the keyed database instead (also a ``DatabaseWriter``): a key
/// rotation closes this queue and gives the keyed database a new one.
public final class DatabaseQueue: Sendable {
    /// The path of the database file.
    public let path: String
    /// The file format the queue was opened in (``DatabaseConfiguration/format``).
    let format: CipherFormat
    /// Whether the queue reads without a shared-memory index (`-shm`) because the disk had no room for the 32 KiB
    /// SQLite needs beside a WAL database: it was opened for reading only, whatever its configuration asked, and
    /// ``write(_:)`` throws ``DatabaseError/Code/diskFull`` saying that writes need space. Open it again once there
    /// is room. Reading this way changes neither the file nor its `-wal`.
    public let isReadOnlyForLackOfSpace: Bool
    /// Guards `database`: it is read and written only while this mutex is held.
    private let lock = Mutex<Void>(())
    /// The confined connection; `nil` once closed. `nonisolated(unsafe)` because region-based isolation
    /// cannot express "lent to the caller's closure while the lock is held"; every access is inside `lock`.
    nonisolated(unsafe) private var database: Database?
    /// Why the queue was closed, when its owner closed it on the user's behalf (a key rotation replaced it);
    /// added to the `misuse` error of later calls. Guarded by `lock`, like `database`.
    nonisolated(unsafe) private var closedReason: String?
    /// The thread inside the mutex, to turn a nested access (a deadlock) into an error.
    private let owner = Atomic<UInt>(0)
    /// Where the `async` forms of ``read(_:)`` and ``write(_:)`` run: this queue's own serial dispatch queue,
    /// never Swift concurrency's cooperative pool (a write can wait for another process's lock).
    private let asyncQueue = DispatchQueue(label: "securestore.database-queue")
    /// The connection's update, commit and rollback hooks record here what each access committed. Used only
    /// while `lock` is held (the hooks run inside it).
    nonisolated(unsafe) private let tracker = ChangeTracker()
    /// Whether `PRAGMA query_only` is on: set by a read and left on for the reads that follow, turned off by the
    /// next other access (two statements less per read in a run of reads). Guarded by `lock`.
    nonisolated(unsafe) private var queryOnly = false
    /// Announces this queue's own commits to its observers, after `lock` is released.
    package let changeCenter = DatabaseChangeCenter()

    /// Opens (or creates) the database at `path` with a 32-byte key, in SQLCipher's raw-key form. This is the
    /// fast path: no key derivation, well under a millisecond once the library is loaded.
    ///
    /// - Throws: ``DatabaseError``: ``DatabaseError/Code/wrongKeyOrNotADatabase``,
    ///   ``DatabaseError/Code/notEncrypted``, ``DatabaseError/Code/emptyFile``,
    ///   ``DatabaseError/Code/unrecognizedFormat``, ``DatabaseError/Code/corrupt``,
    ///   ``DatabaseError/Code/permissionDenied``, ``DatabaseError/Code/notFound`` (read-only),
    ///   ``DatabaseError/Code/sqlcipherUnavailable``… A file that fails to open is never modified.
    public convenience init(
        path: String, key: DatabaseKey, configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws {
        try self.init(path: path, keying: .raw(key), configuration: configuration)
    }

    /// Opens (or creates) the database at `path` with a passphrase, stretched by PBKDF2-SHA1 with 64 000
    /// iterations on every open.
    ///
    /// This is the slow path (about 30 ms per open on purpose): use it only for files keyed by a person's
    /// passphrase, such as the reference fixtures. The passphrase's UTF-8 copy made here is wiped; the
    /// `String` itself cannot be.
    public convenience init(
        path: String, passphrase: String, configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws {
        try self.init(path: path, keying: .passphrase(passphrase), configuration: configuration)
    }

    init(path: String, keying: Keying, configuration: DatabaseConfiguration) throws {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        var info = try Opening.inspect(path)
        if info == nil {
            guard !configuration.readOnly else {
                throw DatabaseError(.notFound, "the database '\(path)' does not exist")
            }
            if !directory.isEmpty { try Opening.makeDirectories(directory) }
            _ = try Opening.createDatabase(path, keying: keying, configuration: configuration)
            info = try Opening.inspect(path)
        }
        guard let info else {
            throw DatabaseError(.notFound, "the database '\(path)' disappeared while it was being opened")
        }
        if info.size == 0 {
            throw DatabaseError(
                .emptyFile,
                "'\(path)' is empty (0 bytes): it holds no database. SecureStore never leaves an empty file; "
                    + "if nothing should be there, delete it and open again")
        }
        if info.header == Opening.plaintextHeader {
            throw DatabaseError(
                .notEncrypted,
                "'\(path)' is a plaintext SQLite database, not an encrypted one; import it to encrypt it")
        }
        let connection = try Opening.connect(
            path, keying: keying, configuration: configuration, fileSize: info.size)
        tracker.install(on: connection)
        let database = Database(path: path, connection: connection)
        database.authorizer.preventsTruncation = true
        isReadOnlyForLackOfSpace = Opening.readsWithoutSharedMemory(connection)
        database.readOnlyForLackOfSpace = isReadOnlyForLackOfSpace
        self.database = database
        format = configuration.format
    }

    deinit {
        // The hooks point at the tracker, which goes with this queue: take them off before the connection closes.
        if let connection = database?.connection { tracker.uninstall(from: connection) }
    }

    // MARK: Access

    private func withDatabase<T>(readOnly: Bool = false, _ body: (Database) throws -> T) throws -> T {
        let thread = UInt(pthread_self())
        if owner.load(ordering: .acquiring) == thread {
            throw DatabaseError(
                .misuse,
                "read or write was called inside another read or write of the same database; use the db given "
                    + "to the outer closure (a nested call would deadlock)")
        }
        // What the access committed, announced once the lock is released, so that a woken observer can read.
        var committed: DatabaseChanges?
        defer { if let committed { changeCenter.notify(committed) } }
        return try lock.withLock { _ in
            guard let database, let connection = database.connection else { throw closedError() }
            owner.store(thread, ordering: .releasing)
            tracker.begin(connection, observed: changeCenter.isObserved)
            database.lendingEnded = false
            defer {
                database.lendingEnded = true
                committed = tracker.end(connection, observed: changeCenter.isObserved)
                owner.store(0, ordering: .releasing)
            }
            if queryOnly != readOnly {
                try database.execute(readOnly ? "PRAGMA query_only = 1" : "PRAGMA query_only = 0")
                queryOnly = readOnly
            }
            return try body(database)
        }
    }

    /// Runs `body` in one read transaction: it sees one consistent snapshot of the database, and any attempt
    /// to write fails (`PRAGMA query_only`).
    ///
    /// Calls to ``read(_:)`` and ``write(_:)`` of one queue are serialized; calling either inside the other's
    /// closure throws ``DatabaseError/Code/misuse``. On a queue taken from a `KeyedDatabase`, call the keyed
    /// database's `read` instead: it follows key rotations, which close this queue.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try withDatabase(readOnly: true) { db in
            try db.inTransaction(immediate: false) { try body(db) }
        }
    }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`): committed when `body` returns, rolled back
    /// when it throws (the error is rethrown).
    ///
    /// `BEGIN IMMEDIATE` takes the write lock at the start, waiting up to the busy timeout for other
    /// connections and processes, so a write never fails half-way because another one started first.
    ///
    /// On a queue taken from a `KeyedDatabase`, call the keyed database's `write` instead: it follows key
    /// rotations, which close this queue.
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try withDatabase { db in
            try db.inTransaction(immediate: true) { try body(db) }
        }
    }

    /// The `async` form of ``read(_:)``: runs on this queue's own dispatch queue, so an `async` caller never
    /// blocks a thread of Swift concurrency's cooperative pool.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue) { try self.read(body) }
    }

    /// The `async` form of ``write(_:)``: runs on this queue's own dispatch queue.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue) { try self.write(body) }
    }

    /// Runs `body` with the connection outside any transaction, for statements that cannot run inside one
    /// (`VACUUM`, `ATTACH`, some pragmas). Each statement commits on its own.
    public func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try withDatabase { db in try body(db) }
    }

    // MARK: Maintenance

    /// Checks the whole database; throws ``DatabaseError/Code/corrupt`` when it fails.
    ///
    /// The corresponding pragma is `integrity_check`.
    public func integrityCheck() throws {
        try read { db in try db.integrityCheck() }
    }

    /// Moves everything from the write-ahead log into the database file and truncates the log, so the main
    /// file alone can be copied or renamed. Throws ``DatabaseError/Code/busy`` when readers in other
    /// connections keep it from finishing.
    ///
    /// The corresponding pragma is `wal_checkpoint(TRUNCATE)`.
    public func checkpoint() throws {
        try writeWithoutTransaction { db in try db.checkpoint() }
    }

    /// Writes the whole database into the new file `destination`, encrypted under `key` in the same format
    /// (``DatabaseConfiguration/format``), and copies `user_version` and `application_id` (which `sqlcipher_export` does not).
    ///
    /// `destination` must not exist: the copy is built under a temporary name next to it (mode 0600) and linked
    /// into place when complete, so it is never half written and nothing is replaced. The key is passed as a
    /// bound parameter of `ATTACH`, never in SQL text. This database is left unchanged. Verify the copy
    /// (open it, ``integrityCheck()``) before relying on it.
    public func export(to destination: String, key: DatabaseKey) throws {
        try writeWithoutTransaction { db in
            guard let connection = db.connection else { throw closedError() }
            try Opening.export(from: connection, to: destination, key: key, format: format)
        }
    }

    /// The encryption of the open database: its format, the cipher settings SQLCipher reports, and the versions
    /// of SQLCipher and SQLite in use.
    ///
    /// The corresponding pragmas are `cipher`, `cipher_page_size`, `cipher_hmac_algorithm` and
    /// `cipher_kdf_algorithm` (the last two exist only in SQLCipher 4; SQLCipher 3 has SHA-1 only).
    public func cipherInfo() throws -> CipherInfo {
        try withDatabase { db in
            let library = Opening.library
            let fixed = library.major < 4
            return CipherInfo(
                format: format,
                cipher: try db.scalar("PRAGMA cipher", as: String.self) ?? format.cipher,
                pageSize: try db.scalar("PRAGMA cipher_page_size", as: Int.self) ?? 0,
                hmacAlgorithm: fixed
                    ? "HMAC_SHA1" : try db.scalar("PRAGMA cipher_hmac_algorithm", as: String.self) ?? "unknown",
                kdfAlgorithm: fixed
                    ? "PBKDF2_HMAC_SHA1"
                    : try db.scalar("PRAGMA cipher_kdf_algorithm", as: String.self) ?? "unknown",
                sqlcipherVersion: library.version, sqliteVersion: library.sqliteVersion)
        }
    }

    /// Encrypts the plaintext SQLite database `source` into the new file `destination` under `key`, keeping
    /// every table, index, row, `user_version` and `application_id`. `source` is opened read-only and left
    /// as it was; `destination` must not exist and is linked into place only when complete.
    public static func importPlaintext(from source: String, to destination: String, key: DatabaseKey) throws {
        try Opening.importPlaintext(from: source, to: destination, key: key)
    }

    /// Finalizes every statement and closes the connection. Later calls to ``read(_:)`` and ``write(_:)``
    /// throw ``DatabaseError/Code/misuse``; closing twice does nothing. If you do not call it, the connection
    /// closes when the queue is released.
    ///
    /// The corresponding C function is `sqlite3_close`.
    public func close() throws {
        try close(reason: nil)
    }

    /// Closes the queue as ``close()`` does, and makes later calls say why: `reason` completes the sentence
    /// "the database '<path>' is closed: …". For the owner of a queue that closes it on the user's behalf
    /// (SecureStore's `KeyedDatabase`, when a key rotation replaces it). The first reason given is kept.
    package func close(reason: String?) throws {
        let thread = UInt(pthread_self())
        if owner.load(ordering: .acquiring) == thread {
            throw DatabaseError(.misuse, "close was called inside read or write of the same database")
        }
        try lock.withLock { _ in
            if database != nil, closedReason == nil { closedReason = reason }
            defer { database = nil }
            if let connection = database?.connection { tracker.uninstall(from: connection) }
            try database?.close()
        }
    }

    /// The error of a call on the closed queue. Called with `lock` held.
    private func closedError() -> DatabaseError {
        DatabaseError(.misuse, "the database '\(path)' is closed" + (closedReason.map { ": " + $0 } ?? ""))
    }
}

/// A queue announces its own commits through its hooks; its observers poll only for other connections'.
extension DatabaseQueue: DatabaseChangeSource {
    package func readWithExternalVersion<T>(_ body: (_ externalVersion: Int64, Database) throws -> T) throws -> T {
        try read { db in try body(try db.scalar("PRAGMA data_version", as: Int64.self) ?? 0, db) }
    }
}
