// Named, ordered migrations, each in its own transaction, recorded in a table.
internal import Foundation

/// Named schema migrations, applied in the order they were registered, each in its own write transaction.
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("v1: items") { db in
///     try db.execute("CREATE TABLE item(id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL)")
/// }
/// try migrator.migrate(queue)
/// ```
///
/// The database is any ``DatabaseWriter``: a ``DatabaseQueue``, or SecureStore's `KeyedDatabase` (each
/// migration is then one write of its current connection, so migrating and a key rotation of the same
/// handle never meet half-way).
///
/// The identifiers of applied migrations are recorded in the table `securestore_migrations` (not in
/// `user_version`, which stays the application's). Rules:
/// - A migration, once shipped, is never edited or removed: add a new one.
/// - If the database holds an applied migration that is not registered here, it was migrated by a newer
///   version of the program: ``migrate(_:)`` throws ``DatabaseError/Code/unknownMigration`` and changes
///   nothing.
/// - A migration that throws is rolled back; the ones before it stay applied.
public struct DatabaseMigrator: Sendable {
    private var migrations: [(id: String, body: @Sendable (Database) throws -> Void)] = []

    /// The table that records applied migrations.
    public static let tableName = "securestore_migrations"

    /// Creates a migrator with no migrations.
    public init() {}

    /// Decides which applied migrations that are not registered here belong to *another component* that
    /// shares the database (they are left alone) rather than to a newer version of this program (refused
    /// with ``DatabaseError/Code/unknownMigration``). By default every unregistered migration is refused.
    ///
    /// ```swift
    /// var migrator = DatabaseMigrator()
    /// migrator.registerMigration("notes v1") { db in … }
    /// migrator.isOtherComponentsMigration = { !$0.hasPrefix("notes ") }   // the rest is not ours
    /// ```
    public var isOtherComponentsMigration: @Sendable (String) -> Bool = { _ in false }

    /// An identifier registered more than once, reported by ``migrate(_:)``.
    private var duplicateID: String?

    /// Registers a migration after the ones already registered. Identifiers must be unique: registering
    /// one twice is a mistake in the program's own code, which ``migrate(_:)`` reports as
    /// ``DatabaseError/Code/misuse`` before touching the database.
    public mutating func registerMigration(
        _ id: String, _ body: @escaping @Sendable (Database) throws -> Void
    ) {
        if duplicateID == nil, migrations.contains(where: { $0.id == id }) { duplicateID = id }
        migrations.append((id, body))
    }

    /// The identifiers of the registered migrations, in order.
    public var migrationIDs: [String] { migrations.map(\.id) }

    /// The identifiers of the migrations applied to the database, in the order they were applied.
    public func appliedMigrations(_ database: some DatabaseReader) throws -> [String] {
        try database.read { db in try Self.applied(db) }
    }

    /// Applies every registered migration the database does not have yet, in order, each in its own
    /// `BEGIN IMMEDIATE` transaction together with its record.
    ///
    /// - Throws: ``DatabaseError/Code/unknownMigration`` (and changes nothing) when the database has a migration
    ///   this program does not know; otherwise the error of the failing migration, after rolling it back.
    public func migrate(_ database: some DatabaseWriter) throws {
        if let duplicateID {
            throw DatabaseError(
                .misuse, "the migration '\(duplicateID)' is registered twice; nothing was applied")
        }
        for (id, body) in migrations {
            // As in GRDB, a migration runs with foreign keys off (a table rebuild drops a table that others refer
            // to) and the whole database is checked for foreign-key violations before it commits.
            let applied = try database.writeWithoutTransaction { db -> Bool in
                let foreignKeys = try db.scalar("PRAGMA foreign_keys", as: Int.self) == 1
                if foreignKeys { try db.execute("PRAGMA foreign_keys = OFF") }
                defer { if foreignKeys { try? db.execute("PRAGMA foreign_keys = ON") } }
                return try db.inTransaction(immediate: true) {
                    let done = try Self.applied(db)
                    try checkKnown(done, path: db.path)
                    if done.contains(id) { return false }
                    if done.isEmpty, try !db.tableExists(Self.tableName) {
                        try db.execute(
                            "CREATE TABLE \(Self.tableName) (id TEXT PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)")
                    }
                    try body(db)
                    if foreignKeys {
                        let violations = try db.fetch("PRAGMA foreign_key_check") { try $0.string(at: 0) }
                        if let table = violations.first {
                            throw DatabaseError(
                                .constraint,
                                "the migration '\(id)' leaves \(violations.count) rows whose foreign key refers to no row "
                                    + "(first in table '\(table)'); it was rolled back")
                        }
                    }
                    try db.execute("INSERT INTO \(Self.tableName) (id, applied_at) VALUES (?, ?)", [id, Date()])
                    return true
                }
            }
            _ = applied
        }
        if migrations.isEmpty {
            try database.read { db in try checkKnown(try Self.applied(db), path: db.path) }
        }
    }

    private func checkKnown(_ applied: [String], path: String) throws {
        let known = Set(migrations.map(\.id))
        let unknown = applied.filter { !known.contains($0) && !isOtherComponentsMigration($0) }
        if !unknown.isEmpty {
            throw DatabaseError(
                .unknownMigration,
                "the database '\(path)' was migrated by a newer version of this program (unknown migration "
                    + unknown.map { "'\($0)'" }.joined(separator: ", ")
                    + "); it was left unchanged. Use the newer version, or restore a backup")
        }
    }

    static func applied(_ db: Database) throws -> [String] {
        guard try db.tableExists(tableName) else { return [] }
        return try db.fetch("SELECT id FROM \(tableName) ORDER BY rowid") { try $0.string(at: 0) }
    }
}
