// Scoped access, transactions, savepoints, closing, migrations.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

struct Failure: Error {}

@Suite struct TransactionTests {
    let directory: TemporaryDirectory
    let queue: DatabaseQueue

    init() throws {
        directory = try TemporaryDirectory()
        queue = try makeItemDatabase(directory.file("t.db"), key: try testKey(), titles: ["first"])
    }

    @Test func aWriteThatThrowsIsRolledBackAndItsErrorRethrown() throws {
        #expect(throws: Failure.self) {
            try queue.write { db in
                try db.execute("INSERT INTO item (title) VALUES (?)", ["lost"])
                throw Failure()
            }
        }
        #expect(try titles(queue) == ["first"])
        // The connection is usable afterwards: no transaction was left open.
        try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["second"]) }
        #expect(try titles(queue) == ["first", "second"])
    }

    @Test func aWriteIsOneTransactionWithTheWriteLock() throws {
        let inside = try queue.write { db in db.isInsideTransaction }
        #expect(inside)
        // A second connection (as another process would) cannot write while the first holds the lock.
        var configuration = DatabaseConfiguration()
        configuration.busyTimeoutMilliseconds = 50
        let other = try DatabaseQueue(path: queue.path, key: try testKey(), configuration: configuration)
        try queue.write { _ in
            let error = #expect(throws: DatabaseError.self) {
                try other.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["blocked"]) }
            }
            #expect(error?.code == .busy)
            #expect(error?.extendedResultCode.map { $0 & 0xff } == 5)
        }
        try other.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["after"]) }
        #expect(try titles(queue) == ["first", "after"])
    }

    @Test func savepointsRollBackOnlyTheirOwnChanges() throws {
        var innerError: (any Error)?
        var innermostFailed = false
        try queue.write { db in
            try db.execute("INSERT INTO item (title) VALUES (?)", ["outer"])
            do {
                try db.inSavepoint {
                    try db.execute("INSERT INTO item (title) VALUES (?)", ["inner rolled back"])
                    throw Failure()
                }
            } catch {
                innerError = error
            }
            try db.inSavepoint {
                try db.execute("INSERT INTO item (title) VALUES (?)", ["inner kept"])
                innermostFailed = (try? db.inSavepoint {
                    try db.execute("INSERT INTO item (title) VALUES (?)", ["innermost rolled back"])
                    throw Failure()
                }) == nil
            }
        }
        #expect(innerError is Failure)
        #expect(innermostFailed)
        #expect(try titles(queue) == ["first", "outer", "inner kept"])
    }

    @Test func readsCannotWrite() throws {
        let error = #expect(throws: DatabaseError.self) {
            try queue.read { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["sneaky"]) }
        }
        #expect(error?.code == .readOnly)
        #expect(try titles(queue) == ["first"])
        // The restriction ends with the read.
        try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["fine"]) }
        #expect(try titles(queue) == ["first", "fine"])
    }

    @Test func aNestedAccessIsAnErrorNotADeadlock() throws {
        let error = #expect(throws: DatabaseError.self) {
            try queue.read { _ in try queue.write { _ in } }
        }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("nested") == true)
    }

    @Test func closingEndsAccessAndIsIdempotent() throws {
        try queue.close()
        try queue.close()
        let error = #expect(throws: DatabaseError.self) { try titles(queue) }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("closed") == true)
        // After close the WAL is checkpointed away and the file reopens with every row.
        #expect(!fileExists(queue.path + "-wal"))
        #expect(try titles(DatabaseQueue(path: queue.path, key: try testKey())) == ["first"])
    }

    @Test func foreignKeysAreEnforced() throws {
        let error = #expect(throws: DatabaseError.self) {
            try queue.write { db in
                try db.execute("CREATE TABLE note (item INTEGER NOT NULL REFERENCES item(id))")
                try db.execute("INSERT INTO note (item) VALUES (?)", [999])
            }
        }
        #expect(error?.code == .constraint)
        #expect(error?.extendedResultCode == 787)  // SQLITE_CONSTRAINT_FOREIGNKEY
    }

    @Test func errorsNeverShowArgumentValuesOrKeys() throws {
        let secret = "hunter2-secret-value"
        let error = #expect(throws: DatabaseError.self) {
            try queue.write { db in
                try db.execute("CREATE UNIQUE INDEX item_title ON item (title)")
                try db.execute("INSERT INTO item (title) VALUES (?)", [secret])
                try db.execute("INSERT INTO item (title) VALUES (?)", [secret])
            }
        }
        let shown = try #require(error)
        #expect(shown.code == .constraint)
        #expect(shown.extendedResultCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
        #expect(shown.sql == "INSERT INTO item (title) VALUES (?)")
        #expect(!shown.description.contains(secret))
        #expect(!String(describing: StatementArguments([secret])).contains(secret))
        #expect(String(describing: try testKey()) == "DatabaseKey(<redacted>)")
        #expect(!String(reflecting: try testKey()).contains("42"))
    }

    @Test func integrityCheckAndCheckpoint() throws {
        try queue.integrityCheck()
        try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["in the log"]) }
        #expect(try #require(try FileManager.default.attributesOfItem(atPath: queue.path + "-wal")[.size] as? Int) > 0)
        try queue.checkpoint()
        #expect(try FileManager.default.attributesOfItem(atPath: queue.path + "-wal")[.size] as? Int == 0)
    }
}

@Suite struct MigrationTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    func migrator(_ count: Int) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("1 items") { db in
            try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        }
        if count >= 2 {
            migrator.registerMigration("2 done flag") { db in
                try db.execute("ALTER TABLE item ADD COLUMN done INTEGER NOT NULL DEFAULT 0")
            }
        }
        if count >= 3 {
            migrator.registerMigration("3 tags") { db in try db.execute("CREATE TABLE tag (name TEXT)") }
        }
        return migrator
    }

    @Test func aFreshDatabaseGetsEveryMigrationInOrder() throws {
        let queue = try DatabaseQueue(path: directory.file("m.db"), key: try testKey())
        try migrator(3).migrate(queue)
        #expect(try migrator(3).appliedMigrations(queue) == ["1 items", "2 done flag", "3 tags"])
        try queue.write { db in try db.execute("INSERT INTO item (title, done) VALUES (?, ?)", ["x", true]) }
        #expect(try queue.read { db in try db.userVersion() } == 0)  // user_version is left to the app
    }

    @Test func laterMigrationsApplyOnceOnTopOfEarlierOnes() throws {
        let queue = try DatabaseQueue(path: directory.file("m.db"), key: try testKey())
        try migrator(1).migrate(queue)
        try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["kept"]) }
        try migrator(2).migrate(queue)
        try migrator(2).migrate(queue)  // nothing left to do
        #expect(try migrator(2).appliedMigrations(queue) == ["1 items", "2 done flag"])
        let row = try queue.read { db in
            try db.fetchOne("SELECT title, done FROM item") { (try $0.string(at: 0), try $0.bool(at: 1)) }
        }
        #expect(row?.0 == "kept")
        #expect(row?.1 == false)
    }

    @Test func aMigrationRegisteredTwiceIsAnErrorNotACrashAndAppliesNothing() throws {
        let queue = try DatabaseQueue(path: directory.file("m.db"), key: try testKey())
        var twice = migrator(1)
        twice.registerMigration("1 items") { db in try db.execute("CREATE TABLE other (x)") }
        let error = expectError(DatabaseError.Code.misuse) { try twice.migrate(queue) }
        #expect(error?.message == "the migration '1 items' is registered twice; nothing was applied")
        #expect(try queue.read { db in try db.tableExists("item") } == false)
    }

    @Test func aFailingMigrationIsRolledBackAndTheEarlierOnesStay() throws {
        let queue = try DatabaseQueue(path: directory.file("m.db"), key: try testKey())
        var failing = migrator(1)
        failing.registerMigration("2 broken") { db in
            try db.execute("CREATE TABLE half (x)")
            throw Failure()
        }
        #expect(throws: Failure.self) { try failing.migrate(queue) }
        #expect(try failing.appliedMigrations(queue) == ["1 items"])
        #expect(try queue.read { db in try db.tableExists("half") } == false)
    }

    @Test func aDatabaseFromANewerVersionIsRefusedAndLeftByteIdentical() throws {
        let path = directory.file("m.db")
        let newer = try DatabaseQueue(path: path, key: try testKey())
        try migrator(3).migrate(newer)
        try newer.close()
        let before = try #require(contents(path))

        let older = try DatabaseQueue(path: path, key: try testKey())
        let error = #expect(throws: DatabaseError.self) { try migrator(2).migrate(older) }
        #expect(error?.code == .unknownMigration)
        #expect(error?.message.contains("'3 tags'") == true)
        #expect(error?.message.contains("newer version") == true)
        expectError(DatabaseError.Code.unknownMigration) { try DatabaseMigrator().migrate(older) }
        try older.close()
        #expect(contents(path) == before)
        #expect(try migrator(3).appliedMigrations(DatabaseQueue(path: path, key: try testKey())).count == 3)
    }
}
