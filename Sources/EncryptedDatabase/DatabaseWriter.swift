// The reader and writer protocols: what code that uses a database depends on, whatever holds the connection.
internal import Dispatch
internal import SecureStoreCore

/// A handle that reads a database in scoped transactions: ``DatabaseQueue``, or a handle that owns one
/// (SecureStore's `KeyedDatabase`, which replaces its queue when its key is rotated).
///
/// Depend on the protocol rather than on a queue, and keep the handle you were given: a component that
/// takes `some DatabaseReader` (or stores `any DatabaseWriter`) works with a plain queue in tests and with a
/// keyed database in the application, and keeps working across a key rotation.
///
/// ```swift
/// import EncryptedDatabase
///
/// func titles(in database: some DatabaseReader) throws -> [String] {
///     try database.read { db in
///         try db.fetch("SELECT title FROM item ORDER BY title") { try $0.string(at: 0) }
///     }
/// }
/// ```
///
/// The shape is GRDB's `DatabaseReader`: scoped reads, synchronous or `async`. An `async` read never runs on
/// Swift concurrency's cooperative pool (it may wait for a lock): each handle runs it on a dispatch queue of its
/// own, so `any DatabaseReader` can be awaited from any task or actor.
public protocol DatabaseReader: AnyObject, Sendable {
    /// The path of the database file.
    var path: String { get }

    /// Runs `body` in one read transaction: it sees one consistent snapshot of the database, and any attempt
    /// to write fails. Calling ``read(_:)`` or a write inside `body` throws ``DatabaseError/Code/misuse``: use
    /// the `db` given to the closure.
    func read<T>(_ body: (Database) throws -> T) throws -> T

    /// The `async` form of ``read(_:)``: the same transaction, run off the calling task's thread.
    ///
    /// ```swift
    /// let count = try await reader.read { db in try Player.fetchCount(db) }
    /// ```
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T
}

extension DatabaseReader {
    /// The `async` form of ``read(_:)`` for a reader that has none of its own: the synchronous read, run on a
    /// global dispatch queue (never on the cooperative pool).
    public func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: .global()) { try self.read(body) }
    }
}

/// A handle that also writes, in scoped transactions: ``DatabaseQueue``, or SecureStore's `KeyedDatabase`.
///
/// ```swift
/// import EncryptedDatabase
///
/// func addItem(_ title: String, to database: some DatabaseWriter) throws {
///     try database.write { db in
///         try db.execute("INSERT INTO item (title) VALUES (?)", [title])
///     }
/// }
/// ```
///
/// The shape is GRDB's `DatabaseWriter`: scoped writes, synchronous or `async`. Keep one as `any
/// DatabaseWriter`, as GRDB's `AppDatabase` does (Docs/records.md, "Async access").
public protocol DatabaseWriter: DatabaseReader {
    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`): committed when `body` returns, rolled back
    /// when it throws (the error is rethrown).
    func write<T>(_ body: (Database) throws -> T) throws -> T

    /// The `async` form of ``write(_:)``: the same transaction, run off the calling task's thread; writes of one
    /// handle run one at a time, in the order they were asked for.
    ///
    /// ```swift
    /// let saved = try await writer.write { db in try Player(id: nil, name: "Arthur", score: 0).inserted(db) }
    /// ```
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T

    /// Runs `body` with the connection outside any transaction, for statements that cannot run inside one
    /// (`VACUUM`, `ATTACH`, some pragmas). Each statement commits on its own.
    func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T
}

extension DatabaseWriter {
    /// The `async` form of ``write(_:)`` for a writer that has none of its own: the synchronous write, run on a
    /// global dispatch queue (never on the cooperative pool; the handle's own lock orders the writes).
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await runBlocking(on: .global()) { try self.write(body) }
    }
}

/// A queue is the simplest reader and writer: one connection, one file.
extension DatabaseQueue: DatabaseWriter {}
