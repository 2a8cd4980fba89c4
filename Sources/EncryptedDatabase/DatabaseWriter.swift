// The reader and writer protocols: what code that uses a database depends on, whatever holds the connection.

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
/// The shape is GRDB's `DatabaseReader`, reduced to the synchronous scoped access this module has.
public protocol DatabaseReader: AnyObject, Sendable {
    /// The path of the database file.
    var path: String { get }

    /// Runs `body` in one read transaction: it sees one consistent snapshot of the database, and any attempt
    /// to write fails. Calling ``read(_:)`` or a write inside `body` throws ``DatabaseError/Code/misuse``: use
    /// the `db` given to the closure.
    func read<T>(_ body: (Database) throws -> T) throws -> T
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
/// The shape is GRDB's `DatabaseWriter`, reduced to the synchronous scoped access this module has.
public protocol DatabaseWriter: DatabaseReader {
    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`): committed when `body` returns, rolled back
    /// when it throws (the error is rethrown).
    func write<T>(_ body: (Database) throws -> T) throws -> T

    /// Runs `body` with the connection outside any transaction, for statements that cannot run inside one
    /// (`VACUUM`, `ATTACH`, some pragmas). Each statement commits on its own.
    func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws -> T
}

/// A queue is the simplest reader and writer: one connection, one file.
extension DatabaseQueue: DatabaseWriter {}
