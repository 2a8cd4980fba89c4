// The keyed database: a named SQLCipher database whose random key lives in the Keychain, with its
// whole key lifecycle (create, open, rotate, recover, import, backup, verify). See Docs/key-lifecycle.md.
internal import Attachments
public import EncryptedDatabase
public import Foundation
public import Keychain
internal import SecureStoreCore
internal import Synchronization

/// A named encrypted database whose random 32-byte key is kept in the Keychain.
///
/// ```swift
/// let paths = try AppPaths(app: "myapp")
/// let database = try KeyedDatabase(paths: paths, name: "tasks", keychain: Keychain())
/// try database.write { db in try db.execute("CREATE TABLE IF NOT EXISTS note (text TEXT)") }
/// try database.rotateKey { step in print(step) }
/// let notes = try database.read { db in try db.fetch("SELECT text FROM note") { try $0.string(at: 0) } }
/// let code = try database.recoveryCode()   // a Secret: show it once, never log it
/// ```
///
/// A keyed database is a ``DatabaseWriter``: ``read(_:)``, ``write(_:)`` and
/// ``writeWithoutTransaction(_:)`` run on its current connection, so this handle (and anything that keeps
/// it as `any DatabaseWriter`, such as a task list or a ``DatabaseMigrator``) keeps working across
/// ``rotateKey(progress:)``. Keep the `KeyedDatabase`, not its ``queue``: a rotation closes the queue.
///
/// The file is `<data directory>/<name>.db`; the key is the keychain item with service
/// `<app>.database-key` and account `<id>@<path>` (`<id>` is the database's random id, also kept inside
/// the file; `<id>.pending` while a rotation is under way, `<id>.retired.<date>` for keys replaced by a
/// rotation or recovery), stored as 64 lowercase hexadecimal digits. Two databases never share an item.
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
/// exclusively. A handle is `Sendable`: reads, writes and rotations of one handle are serialized.
public final class KeyedDatabase: Sendable {
    /// The database as it is on disk and in the keyring: its files, its key items and its options.
    let store: KeyedStore
    /// The application's paths.
    public var paths: AppPaths { store.paths }
    /// The database's name (the file is `<name>.db`).
    public var name: String { store.name }
    /// The database's id: 32 random hexadecimal digits kept inside the encrypted file and in the account
    /// of its key items (`<id>@<path>`, `<id>.pending`, `<id>.retired.<date>`).
    ///
    /// It changes only when ``restore(from:code:progress:)`` installs a backup into this handle (a restored
    /// database gets an id of its own).
    public var databaseID: String { identity.withLock { $0 } }
    /// The current database id (see ``databaseID``), in a lock of its own so that reading it never waits for a read.
    let identity: Mutex<String>
    /// The keychain that holds the key.
    public var keychain: Keychain { store.keychain }
    /// The options the database is opened with.
    public var configuration: DatabaseConfiguration { store.configuration }
    /// How many reading connections the handle keeps beside its writing one (`readerCount:` of
    /// ``init(paths:name:keychain:configuration:createIfMissing:readerCount:)``); 0: reads use the writing connection.
    public var readerCount: Int { readers?.count ?? 0 }
    /// The reading connections, when ``readerCount`` is above 0.
    let readers: KeyedDatabaseReaders?
    /// The online backups copying now (``backup(to:pagesPerStep:progress:)``).
    let backups = KeyedDatabaseBackups()

    var files: KeyedDatabaseFiles { store.files }
    var items: KeyedDatabaseKeyItems { store.items }

    /// What reads, writes, rotations, restores, deletions and ``close()`` of this handle take in turn.
    struct State: ~Copyable, Sendable {
        /// The lock file, held shared while the handle is open (exclusively during a rotation, a restore or a
        /// deletion); nil once the handle is closed, which released it.
        var lock: KeyedDatabaseLock?
        /// The open connection, replaced by a rotation or a restore (through ``KeyedDatabase/install(_:in:)``).
        var queue: DatabaseQueue

        /// Whether the handle is closed (its lock released).
        var isClosed: Bool { lock == nil }
    }

    let state: Mutex<State>
    /// `state.queue` as lent to the two callers that may not take `state`: the thread that holds it (inside read,
    /// write or rotateKey of this handle) and a thread inside a read of the reading connections (a rotation waits for
    /// those reads to end before it replaces the queue). Set only with `state.queue`, by ``install(_:in:)``.
    private let lentQueue: Mutex<DatabaseQueue>
    /// Where the `async` forms run (``read(_:)``, ``write(_:)``, ``rotateKey()``).
    private let asyncQueue = DispatchQueue(label: "securestore.keyed-database")
    /// Where `async` reads run when the handle has reading connections: concurrently, so that they use them all.
    private let asyncReadQueue = DispatchQueue(label: "securestore.keyed-database.read", attributes: .concurrent)
    /// Announces the commits of this handle's current queue to its observers: each queue forwards to it, so an
    /// observation started before a key rotation keeps seeing this handle's writes after it.
    package let changeCenter = DatabaseChangeCenter()
    /// The thread that holds `state` for a read, a write or a rotation, to turn a nested call (a deadlock)
    /// into an error.
    let owner = Atomic<UInt>(0)

    /// The open connection, for what only a queue has (``DatabaseQueue/cipherInfo()``, ``DatabaseQueue/export(to:key:)``).
    /// For reading and writing, use this handle itself (``read(_:)``, ``write(_:)``): it follows rotations.
    ///
    /// After ``rotateKey(progress:)`` this is a new queue and the one before is closed: a queue kept from
    /// before then throws ``DatabaseError/Code/misuse`` saying that a key rotation replaced it. Read this
    /// property each time rather than keeping the queue. The queue is closed when this `KeyedDatabase` is
    /// released or closed: keep the handle alive while you use it.
    ///
    /// Inside ``read(_:)`` or ``write(_:)`` of this handle, use the `db` given to the closure: the queue's own
    /// `read` and `write` there throw `misuse` (a nested access would deadlock).
    public var queue: DatabaseQueue {
        // The thread inside read, write or rotateKey of this handle already holds the lock. A thread inside a read
        // of the reading connections needs no lock: the connection is replaced only after every such read ended.
        if owner.load(ordering: .acquiring) == UInt(pthread_self()) || readers?.isReadingOnThisThread == true {
            return lentQueue.withLock { $0 }
        }
        return state.withLock { $0.queue }
    }

    /// Makes `queue` this handle's connection (the caller holds `state`): ``queue`` lends it from now on, and the
    /// observers of this handle hear its commits.
    func install(_ queue: DatabaseQueue, in state: inout State) {
        state.queue = queue
        lentQueue.withLock { $0 = queue }
        queue.changeCenter.forward(to: changeCenter)
    }

    /// Runs `body` with the queue while no rotation of this handle can run.
    func withQueue<R>(_ body: (DatabaseQueue) throws -> R) throws -> R {
        try withState("read or write") { state in try body(state.queue) }
    }

    /// Runs `body` with the state locked, after refusing a nested call from the thread that holds it (`what`
    /// names the nested call in the error).
    func withState<R>(_ what: String, _ body: (inout State) throws -> R) throws -> R {
        let thread = UInt(pthread_self())
        if owner.load(ordering: .acquiring) == thread || readers?.isReadingOnThisThread == true {
            throw DatabaseError(
                .misuse,
                "\(what) was called inside read, write or rotateKey of the same database '\(files.path)'; use the db "
                    + "given to the outer closure (a nested call would deadlock)")
        }
        return try state.withLock { state in
            owner.store(thread, ordering: .releasing)
            defer { owner.store(0, ordering: .releasing) }
            return try body(&state)
        }
    }

    /// Why the queue of this handle is closed: a queue kept after ``rotateKey(progress:)`` reports it.
    static let rotatedQueueReason =
        "a key rotation of its KeyedDatabase replaced this queue with a new connection. Keep the KeyedDatabase "
        + "(a DatabaseWriter: read, write) rather than its queue, which a rotation closes"

    /// Why the queue of this handle is closed after ``close()``.
    static let closedHandleReason = "its KeyedDatabase was closed"

    /// The database file's URL.
    public var url: URL { paths.databaseURL(name: name) }

    /// The largest allowed database name, in UTF-8 bytes.
    public static let maximumNameLength = 64

    // MARK: Opening

    /// Opens the database `name`, creating it (and its key) the first time unless `createIfMissing` is
    /// false.
    ///
    /// - The first open generates a random key (system CSPRNG) and a random database id, and stores the
    ///   key in the keychain (item account `<id>@<path>`) *before* the file is created; if storing fails,
    ///   no file is made. The id is then written inside the encrypted file.
    /// - A key belongs to one database: another folder, application or name gets its own key. A moved
    ///   file finds its key again (the item follows it); a copy of a database that still exists at its
    ///   recorded place does not take over its key (``SecureStoreError/Code/copiedDatabase``).
    /// - A stored key that does not open the file is ``SecureStoreError/Code/keyMismatch``; an existing file
    ///   without a stored key is ``SecureStoreError/Code/missingKey``. Neither changes the file, and no new key
    ///   is ever made over an existing file (nor over an orphaned `-wal`).
    /// - An interrupted key rotation is finished or undone, and a key item written by SecureStore 0.1
    ///   (account `<name>`) is upgraded; see Docs/key-lifecycle.md.
    ///
    /// - Parameter readerCount: how many reading connections to keep beside the writing one (0, the default: reads
    ///   run on the writing connection, one at a time with writes). With 1 or more, ``read(_:)`` runs on a free
    ///   reading connection, in parallel with other reads and with a write, and reads go on while a key rotation or
    ///   a backup runs (they see the database as it was until the rotation swaps the file). Each connection is a file
    ///   descriptor and up to ``DatabaseConfiguration/cacheSizeKiB`` of page cache.
    /// - Parameter createIfMissing: when false and there is no database file, throws
    ///   ``SecureStoreError/Code/notFound`` and creates nothing: no file, no directory, no keychain item.
    /// - Throws: ``SecureStoreError`` (`missingKey`, `keyMismatch`, `copiedDatabase`, `invalidArgument`,
    ///   `inUse`, `notFound`, `fileSystem`), ``KeychainError`` (for example `locked`) and `DatabaseError`
    ///   (for example `corrupt`) unchanged.
    public convenience init(
        paths: AppPaths, name: String, keychain: Keychain,
        configuration: DatabaseConfiguration = DatabaseConfiguration(), createIfMissing: Bool = true, readerCount: Int = 0
    ) throws {
        let store = try KeyedStore.validated(paths: paths, name: name, keychain: keychain, configuration: configuration)
        guard (0...64).contains(readerCount) else {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "readerCount must be 0 to 64 (it is \(readerCount))")
        }
        let opened = try store.open(createIfMissing: createIfMissing)
        var readers: KeyedDatabaseReaders?
        if readerCount > 0 {
            do {
                let key = try store.readerKey(id: opened.id)
                readers = KeyedDatabaseReaders(
                    try KeyedDatabaseReaders.open(count: readerCount, path: store.files.path, key: key, configuration: configuration),
                    path: store.files.path)
            } catch {
                try? opened.queue.close()
                throw error  // drops `opened`, which releases its lock
            }
        }
        self.init(store: store, opened: opened, readers: readers)
    }

    /// A handle over `opened`, which it owns from now on (its lock is released when the handle closes).
    init(store: KeyedStore, opened: consuming KeyedStore.Opened, readers: KeyedDatabaseReaders? = nil) {
        self.readers = readers
        self.store = store
        let queue = opened.queue
        identity = Mutex(opened.id)
        lentQueue = Mutex(queue)
        state = Mutex(State(lock: opened.lock, queue: queue))
        queue.changeCenter.forward(to: changeCenter)
    }

    /// Closes the connection and releases the lock file, as ``close()`` does. The queue is closed too: a
    /// connection must not outlive the shared lock that keeps other processes from rotating the key
    /// under it, so keep the `KeyedDatabase` for as long as its ``queue`` is in use.
    deinit {
        readers?.close(reason: Self.closedHandleReason)
        state.withLock { state in
            try? state.queue.close(reason: Self.closedHandleReason)
            state.lock = nil
        }
    }

    /// Closes the connection and releases the lock file. Later reads and writes (of this handle or of its
    /// ``queue``) throw `misuse`; closing twice does nothing.
    public func close() throws {
        try withState("close") { state in
            try backups.waitUntilNoneRuns("close", path: files.path)
            readers?.close(reason: Self.closedHandleReason)
            defer { state.lock = nil }
            try state.queue.close(reason: Self.closedHandleReason)
        }
    }
}

// MARK: - Reading and writing

/// The keyed database reads and writes on its current connection, under the lock that rotations take: a
/// handle kept as `any DatabaseWriter` keeps working across ``KeyedDatabase/rotateKey(progress:)``.
extension KeyedDatabase: DatabaseWriter {
    /// The path of the database file (``url``'s path).
    public var path: String { files.path }

    /// Runs `body` in one read transaction of the current connection (see ``DatabaseQueue/read(_:)``).
    ///
    /// Use this rather than `queue.read`: it waits for a key rotation of this handle under way and then
    /// reads with the new key, where a queue kept from before the rotation is closed. Calling ``read(_:)``,
    /// ``write(_:)``, ``rotateKey(progress:)`` or ``close()`` of this handle inside `body` throws
    /// `DatabaseError.Code.misuse`.
    ///
    /// With reading connections (``readerCount`` above 0) it runs on a free one instead, in parallel with other
    /// reads and with a write, in a snapshot of the last commit before it began; during a key rotation or a backup it
    /// does not wait (it reads the database as it was), except for the moment the rotation swaps the file.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        if let readers {
            if owner.load(ordering: .acquiring) == UInt(pthread_self()) {
                throw DatabaseError(
                    .misuse,
                    "read was called inside read, write or rotateKey of the same database '\(files.path)'; use the db "
                        + "given to the outer closure (a nested call would deadlock)")
            }
            return try readers.read(body)
        }
        return try withQueue { queue in try queue.read(body) }
    }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`) of the current connection: committed when
    /// `body` returns, rolled back when it throws (see ``DatabaseQueue/write(_:)``).
    ///
    /// Use this rather than `queue.write`: it waits for a key rotation of this handle under way and then
    /// writes with the new key, where a queue kept from before the rotation is closed.
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.write(body) }
    }

    /// Runs `body` with the current connection outside any transaction (see
    /// ``DatabaseQueue/writeWithoutTransaction(_:)``); like ``write(_:)``, it follows key rotations.
    public func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.writeWithoutTransaction(body) }
    }

    /// The `async` form of ``read(_:)``: runs on a dispatch queue of this handle, never on Swift concurrency's
    /// cooperative pool (it may wait for a rotation or for another process's lock).
    public func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: readers == nil ? asyncQueue : asyncReadQueue) { try self.read(body) }
    }

    /// The `async` form of ``write(_:)``, on a dispatch queue of this handle.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue) { try self.write(body) }
    }

    /// The `async` form of ``rotateKey(progress:)``, on a dispatch queue of this handle (a rotation copies the
    /// whole database).
    @discardableResult
    public func rotateKey() async throws -> KeyedDatabaseRetiredKey {
        try await runBlocking(on: asyncQueue) { try self.rotateKey() }
    }
}

/// Observers of a keyed database wake at once for its own commits, before and after key rotations (each new
/// queue forwards its commits to the handle's change center).
extension KeyedDatabase: DatabaseChangeSource {
    package func readWithExternalVersion<T>(_ body: (_ externalVersion: Int64, Database) throws -> T) throws -> T {
        try withQueue { queue in try queue.readWithExternalVersion(body) }
    }
}
