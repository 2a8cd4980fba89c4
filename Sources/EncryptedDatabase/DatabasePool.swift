// A writer and several readers on one WAL database: reads run in parallel with each other and with a write.
internal import CSQLCipher
internal import Dispatch
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// A `Sendable` handle on one encrypted database file with one writing connection and several reading ones:
/// reads run at the same time as each other and as a write, each in its own snapshot (SQLite's WAL mode).
///
/// ```swift
/// import EncryptedDatabase
///
/// func openPool(path: String, key: DatabaseKey) throws -> DatabasePool {
///     let pool = try DatabasePool(path: path, key: key)
///     try pool.write { db in try db.execute("CREATE TABLE IF NOT EXISTS item (title TEXT)") }
///     // From several threads at once, while a write runs: each read sees the last commit before it began.
///     _ = try pool.read { db in try db.scalar("SELECT count(*) FROM item", as: Int.self) }
///     return pool
/// }
/// ```
///
/// When it helps (Docs/database.md has the figures): reads that would wait for a long write on a
/// ``DatabaseQueue`` do not wait here, and reads from several threads use several cores. For one thread doing
/// short reads and writes, a ``DatabaseQueue`` is as fast and holds one connection instead of `1 + readerCount`.
///
/// Writes are serialized on the writing connection (a ``DatabaseQueue`` inside), `BEGIN IMMEDIATE` as ever.
/// A read never sees a write that is not committed, including the one of the thread that reads: calling
/// ``read(_:)`` or ``write(_:)`` inside either's closure throws ``DatabaseError/Code/misuse``; use the `db`
/// given to the outer closure. The readers are opened with the pool, so the key is not kept in memory after.
public final class DatabasePool: Sendable {
    /// The path of the database file.
    public let path: String
    /// The number of reading connections: at most that many reads run at once; more wait for one to be free.
    public let readerCount: Int

    /// The writing connection, with its hooks and change center.
    private let writer: DatabaseQueue
    /// The idle reading connections; `nil` once the pool is closed. Readers in use are not in the list.
    private let idle: Mutex<[ReaderConnection]?>
    /// Counts the idle readers: a read waits on it for a free one.
    private let available: DispatchSemaphore
    /// The threads inside a read or write of this pool, to turn a nested access into an error.
    private let busyThreads = Mutex<Set<UInt>>([])
    /// Where `async` reads run: concurrent, so that they use the readers in parallel (never Swift
    /// concurrency's cooperative pool: a read can wait for a free reader).
    private let readQueue = DispatchQueue(label: "securestore.database-pool.read", attributes: .concurrent)
    /// Where `async` writes run, one at a time.
    private let writeQueue = DispatchQueue(label: "securestore.database-pool.write")

    /// Opens (or creates) the database at `path` with a 32-byte key, as ``DatabaseQueue/init(path:key:configuration:)``
    /// does, and `readerCount` reading connections beside the writing one (each about 0.2 ms to open).
    ///
    /// - Throws: everything ``DatabaseQueue/init(path:key:configuration:)`` throws, and
    ///   ``DatabaseError/Code/misuse`` for a `readerCount` below 1.
    public init(
        path: String, key: DatabaseKey, readerCount: Int = 4,
        configuration: DatabaseConfiguration = DatabaseConfiguration()
    ) throws {
        guard readerCount >= 1 else {
            throw DatabaseError(.misuse, "a database pool needs at least one reader (readerCount is \(readerCount))")
        }
        self.path = path
        self.readerCount = readerCount
        writer = try DatabaseQueue(path: path, key: key, configuration: configuration)
        var readers: [ReaderConnection] = []
        do {
            for _ in 0..<readerCount {
                // The writer has validated the key and the file, and its side files are live: no preflight.
                let connection = try Opening.connect(
                    path, keying: .raw(key), configuration: configuration, fileSize: nil, preflight: false)
                let database = Database(path: path, connection: connection)
                readers.append(ReaderConnection(database))
                try database.execute("PRAGMA query_only = 1")
            }
        } catch {
            for reader in readers { try? reader.database.close() }
            try? writer.close()
            throw error
        }
        idle = Mutex(readers)
        available = DispatchSemaphore(value: readerCount)
    }

    // MARK: Access

    /// Runs `body` while this thread is marked as inside the pool, refusing a nested access.
    private func entering<T>(_ body: () throws -> T) throws -> T {
        let thread = UInt(pthread_self())
        let inserted = busyThreads.withLock { $0.insert(thread).inserted }
        guard inserted else {
            throw DatabaseError(
                .misuse,
                "read or write was called inside another read or write of the same database pool; use the db given "
                    + "to the outer closure (a nested read would not see the outer write, and could deadlock)")
        }
        defer { _ = busyThreads.withLock { $0.remove(thread) } }
        return try body()
    }

    /// Runs `body` in one read transaction on a free reading connection, waiting for one when all are busy:
    /// it sees one consistent snapshot (the last commit before its first statement), never waits for a write,
    /// and any attempt to write fails.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try entering {
            available.wait()
            defer { available.signal() }
            guard let reader = idle.withLock({ $0?.popLast() }) else { throw closedError() }
            defer {
                idle.withLock { readers in
                    if readers != nil { readers!.append(reader) } else { try? reader.database.close() }
                }
            }
            reader.database.lendingEnded = false
            defer { reader.database.lendingEnded = true }
            return try reader.database.inTransaction(immediate: false) { try body(reader.database) }
        }
    }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`) on the writing connection: committed when `body`
    /// returns, rolled back when it throws (the error is rethrown). Reads go on meanwhile, in the snapshot of the
    /// last commit.
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try entering { try writer.write(body) }
    }

    /// Runs `body` with the writing connection outside any transaction, for statements that cannot run inside
    /// one (`VACUUM`, `ATTACH`, some pragmas). Each statement commits on its own.
    public func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try entering { try writer.writeWithoutTransaction(body) }
    }

    /// The `async` form of ``read(_:)``: runs on a concurrent dispatch queue of this pool, so that several
    /// `async` reads use several readers at once, never on Swift concurrency's cooperative pool.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: readQueue) { try self.read(body) }
    }

    /// The `async` form of ``write(_:)``: runs on a serial dispatch queue of this pool.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: writeQueue) { try self.write(body) }
    }

    /// Moves everything from the write-ahead log into the database file and truncates the log (see
    /// ``DatabaseQueue/checkpoint()``). Throws ``DatabaseError/Code/busy`` while a read of this pool or another
    /// connection keeps it from finishing.
    public func checkpoint() throws {
        try entering { try writer.checkpoint() }
    }

    /// Closes every connection: the idle readers now, a reader in use when its read ends, then the writer.
    /// Later calls throw ``DatabaseError/Code/misuse``; closing twice does nothing.
    ///
    /// The corresponding C function is `sqlite3_close`.
    public func close() throws {
        let readers = idle.withLock { readers in
            defer { readers = nil }
            return readers ?? []
        }
        for reader in readers { try reader.database.close() }
        try writer.close()
    }

    private func closedError() -> DatabaseError {
        DatabaseError(.misuse, "the database pool '\(path)' is closed")
    }
}

/// A pool is a reader and a writer like a queue.
extension DatabasePool: DatabaseWriter {}

/// A pool's own commits wake its observers through the writer's hooks; other connections' commits are found
/// through the writer's `data_version` (a reader's moves with the pool's own writes as well).
extension DatabasePool: DatabaseChangeSource {
    package var changeCenter: DatabaseChangeCenter { writer.changeCenter }

    package func readWithExternalVersion<T>(_ body: (_ externalVersion: Int64, Database) throws -> T) throws -> T {
        let version = try writer.writeWithoutTransaction { db in
            try db.scalar("PRAGMA data_version", as: Int64.self) ?? 0
        }
        return try read { db in try body(version, db) }
    }
}

/// A reading connection, moved between the idle list and the thread that reads with it. `@unchecked Sendable`:
/// it is used by one thread at a time, the one that took it out of the list (under the list's mutex).
private final class ReaderConnection: @unchecked Sendable {
    let database: Database
    init(_ database: Database) { self.database = database }
}
