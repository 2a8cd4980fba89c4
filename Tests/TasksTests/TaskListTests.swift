// The task list: creating, reading, changing and deleting tasks, titles, migrations, counts.
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import TestSupport
import Testing

@Suite("TaskList: tasks")
struct TaskListTests {
    @Test func createdTasksReadBackAfterReopeningTheFile() throws {
        let store = try TLStore()
        let rent = try store.tasks.create(title: "Pay rent", createdAt: TLDate(1))
        let milk = try store.tasks.create(title: "Buy milk", done: true, createdAt: TLDate(2.000_001))
        #expect(rent.title == "Pay rent" && !rent.done)
        #expect(milk.done)

        let reopened = try store.reopen()
        #expect(try reopened.task(id: rent.id) == rent)
        #expect(try reopened.task(id: milk.id) == milk)
        #expect(try reopened.task(id: milk.id)?.createdAt == TLDate(2.000_001))
        #expect(try reopened.task(id: UUID()) == nil)
        #expect(try reopened.list().map(\.title) == ["Buy milk", "Pay rent"])
    }

    @Test func renameToggleSetDoneAndDeleteAreKeptInTheFile() throws {
        let store = try TLStore()
        let rent = try store.tasks.create(title: "Pay rent", createdAt: TLDate(1))
        let milk = try store.tasks.create(title: "Buy milk", createdAt: TLDate(2))
        let call = try store.tasks.create(title: "Call mum", createdAt: TLDate(3))

        let renamed = try store.tasks.rename(id: rent.id, to: "  Pay the rent\t ")
        #expect(renamed.title == "Pay the rent")
        #expect(renamed.createdAt == rent.createdAt && renamed.id == rent.id)
        #expect(try store.tasks.toggle(id: milk.id).done)
        #expect(try store.tasks.setDone(true, id: call.id).done)
        #expect(try store.tasks.setDone(true, id: call.id).done)  // already done: still found, still done
        #expect(try store.tasks.delete(id: call.id).title == "Call mum")

        let reopened = try store.reopen()
        #expect(try reopened.list(order: .oldestFirst).map(\.title) == ["Pay the rent", "Buy milk"])
        #expect(try reopened.task(id: milk.id)?.done == true)
        #expect(try reopened.task(id: call.id) == nil)
        #expect(try reopened.counts() == TaskList.Counts(total: 2, done: 1))

        #expect(try !reopened.toggle(id: milk.id).done)
        #expect(try store.reopen().task(id: milk.id)?.done == false)
    }

    @Test func changingAMissingTaskSaysNotFound() throws {
        let store = try TLStore()
        try store.tasks.create(title: "Keep me")
        let missing = UUID(uuidString: "0123ABCD-0000-4000-8000-000000000000")!
        for change in [
            { _ = try store.tasks.toggle(id: missing) },
            { _ = try store.tasks.setDone(true, id: missing) },
            { _ = try store.tasks.rename(id: missing, to: "x") },
            { _ = try store.tasks.delete(id: missing) },
        ] as [() throws -> Void] {
            let error = expectError(SecureStoreError.Code.notFound, change)
            #expect(error?.message == "no task has the ID 0123abcd-0000-4000-8000-000000000000")
        }
        #expect(try store.tasks.count() == 1)
    }

    @Test func createdValueEqualsTheStoredOneToTheMicrosecond() throws {
        let store = try TLStore()
        let date = Date(timeIntervalSince1970: 1_717_171_717.123_456_789)
        let item = try store.tasks.create(title: "  padded  ", createdAt: date)
        #expect(item.title == "padded")
        #expect(abs(item.createdAt.timeIntervalSince(date)) < 0.000_001)
        #expect(try store.reopen().task(id: item.id) == item)
        let far = try store.tasks.create(title: "far future", createdAt: .distantFuture)
        let past = try store.tasks.create(title: "far past", createdAt: .distantPast)
        #expect(try store.tasks.task(id: far.id) == far)
        #expect(try store.tasks.list(order: .oldestFirst).map(\.title) == ["far past", "padded", "far future"])
        #expect(try store.tasks.task(id: past.id) == past)
    }

    @Test func invalidTitlesAreRefusedWithClearMessagesAndNothingChanges() throws {
        let store = try TLStore()
        let kept = try store.tasks.create(title: "Kept", createdAt: TLDate(0))
        let cases: [(String, String)] = [
            ("", "a task title cannot be empty"),
            (" \t\n ", "a task title cannot be only white space"),
            ("a\u{0}b", "a task title cannot contain a NUL character"),
            ("first\nsecond", "a task title must be one line: it contains a line break"),
            ("first\u{2028}second", "a task title must be one line: it contains a line break"),
            ("red \u{1B}[31m", "a task title cannot contain control characters (found U+001B)"),
            (String(repeating: "x", count: 1001), "a task title can be at most 1000 characters long; this one has 1001"),
            (String(repeating: "👩‍👩‍👧", count: 1001), "a task title can be at most 1000 characters long; this one has 1001"),
        ]
        for (title, message) in cases {
            let created = expectError(SecureStoreError.Code.invalidArgument) { try store.tasks.create(title: title) }
            #expect(created?.message == message)
            let renamed = expectError(SecureStoreError.Code.invalidArgument) { try store.tasks.rename(id: kept.id, to: title) }
            #expect(renamed?.message == message)
        }
        let batch = expectError(SecureStoreError.Code.invalidArgument) {
            try store.tasks.insert([TaskItem(title: "ok 1"), TaskItem(title: "ok 2"), TaskItem(title: "bad\u{0}")])
        }
        #expect(batch?.message == "task 3 of the batch: a task title cannot contain a NUL character")

        let reopened = try store.reopen()
        #expect(try reopened.list() == [kept])
        #expect(try reopened.counts() == TaskList.Counts(total: 1, done: 0))

        // The limits themselves are accepted: 1000 characters (even of many bytes each), tabs inside.
        let long = try reopened.create(title: String(repeating: "👩‍👩‍👧", count: 1000))
        #expect(long.title.count == 1000)
        #expect(try reopened.create(title: "tab\tinside").title == "tab\tinside")
        #expect(try reopened.count() == 3)
    }

    @Test func aTakenIDIsRefusedAndNothingIsAdded() throws {
        let store = try TLStore()
        let first = try store.tasks.create(title: "First")
        let error = expectError(SecureStoreError.Code.invalidArgument) { try store.tasks.create(title: "Again", id: first.id) }
        #expect(error?.message == "a task with the ID \(first.id.uuidString.lowercased()) already exists; nothing was added")
        let twice = TaskItem(title: "Twice")
        expectError(SecureStoreError.Code.invalidArgument) { try store.tasks.insert([TaskItem(title: "new"), twice, twice]) }
        #expect(try store.tasks.list().map(\.title) == ["First"])
        #expect(try store.tasks.count() == 1)
    }

    @Test func theMigrationIsRecordedAndNotRunAgainOnReopen() throws {
        let store = try TLStore()
        try store.tasks.create(title: "Survives reopening")
        let applied = try DatabaseMigrator().appliedMigrations(store.queue)
        #expect(applied == ["create tasks", "tasks search index"])
        #expect(TaskList.migrationIDs == ["create tasks", "tasks search index"])
        let appliedAt = try store.queue.read { db in
            try db.scalar("SELECT applied_at FROM securestore_migrations WHERE id = 'create tasks'", as: Int64.self)
        }

        let reopened = try store.reopen()
        #expect(try reopened.list().map(\.title) == ["Survives reopening"])
        let after = try store.queue.read { db in
            try db.fetch("SELECT id, applied_at FROM securestore_migrations") {
                (try $0.string(at: 0), try $0.int64(at: 1))
            }
        }
        #expect(after.map(\.0) == TaskList.migrationIDs)
        #expect(after.first?.0 == "create tasks" && after.first?.1 == appliedAt)
    }

    @Test func aReadOnlyOpenOfAMigratedDatabaseListsTasks() throws {
        let store = try TLStore()
        let item = try store.tasks.create(title: "Read me")
        var configuration = DatabaseConfiguration()
        configuration.readOnly = true
        let queue = try DatabaseQueue(path: store.path, key: store.key, configuration: configuration)
        defer { try? queue.close() }
        let tasks = try TaskList(queue: queue)
        #expect(try tasks.page() == TaskList.Page(items: [item], total: 1))
        #expect(throws: DatabaseError.self) { try tasks.create(title: "Cannot write") }
        #expect(try store.tasks.count() == 1)
    }

    @Test func theMigrationsCanBeRegisteredWithAnotherComponents() throws {
        let store = try TLStore()
        let path = store.directory + "/shared.db"
        let queue = try DatabaseQueue(path: path, key: DatabaseKey.random())
        defer { try? queue.close() }
        var migrator = DatabaseMigrator()
        migrator.registerMigration("other component") { db in try db.execute("CREATE TABLE other (x INTEGER)") }
        TaskList.registerMigrations(in: &migrator)
        try migrator.migrate(queue)
        let tasks = TaskList(migratedQueue: queue)
        try tasks.create(title: "Shared database")
        #expect(try tasks.count() == 1)
        #expect(try migrator.appliedMigrations(queue) == ["other component"] + TaskList.migrationIDs)
        // The task list alone leaves the other component's migration alone (it is not the task list's).
        #expect(try TaskList(queue: queue).count() == 1)
        #expect(try migrator.appliedMigrations(queue) == ["other component"] + TaskList.migrationIDs)
    }

    /// An app's own migrations first, the task list added later by `TaskList(queue:)`: both live side by
    /// side, each migrator applies its own and leaves the other's alone; a newer task list is still refused.
    @Test func anAppsOwnMigrationsAndTheTaskListLiveSideBySide() throws {
        let store = try TLStore()
        let queue = try DatabaseQueue(path: store.directory + "/app.db", key: DatabaseKey.random())
        defer { try? queue.close() }
        var app = DatabaseMigrator()
        app.registerMigration("notes v1") { db in try db.execute("CREATE TABLE notes (text TEXT NOT NULL)") }
        app.isOtherComponentsMigration = { !$0.hasPrefix("notes ") }
        try app.migrate(queue)
        try queue.write { db in try db.execute("INSERT INTO notes (text) VALUES (?)", ["kept"]) }

        let tasks = try TaskList(queue: queue)
        try tasks.create(title: "beside the notes")
        #expect(try app.appliedMigrations(queue) == ["notes v1"] + TaskList.migrationIDs)
        app.registerMigration("notes v2") { db in try db.execute("ALTER TABLE notes ADD COLUMN done INTEGER") }
        try app.migrate(queue)
        #expect(try TaskList(queue: queue).count() == 1)
        #expect(try queue.read { try $0.scalar("SELECT text FROM notes", as: String.self) } == "kept")

        try queue.write { db in
            try db.execute("INSERT INTO securestore_migrations (id, applied_at) VALUES ('tasks v99 from the future', 0)")
        }
        let error = try #require(throws: DatabaseError.self) { try TaskList(queue: queue) }
        #expect(error.message.contains("'tasks v99 from the future'"))
        #expect(!error.message.contains("notes v"), "the app's migrations are not called unknown")
    }

    /// A database with tables of its own and no migrations (an imported one) never gets the task tables.
    @Test func aDatabaseThatIsNotATaskListIsRefusedAndLeftAlone() throws {
        let store = try TLStore()
        let path = store.directory + "/imported.db"
        let queue = try DatabaseQueue(path: path, key: DatabaseKey.random())
        defer { try? queue.close() }
        try queue.write { db in try db.execute("CREATE TABLE recipes (name TEXT)") }
        try queue.checkpoint()
        let before = FileManager.default.contents(atPath: path)
        let error = try #require(throws: SecureStoreError.self) { try TaskList(queue: queue) }
        #expect(error.code == SecureStoreError.Code.notATaskList)
        #expect(error.message == "the database '\(path)' is not a task list (it holds 'recipes'); task commands never add tables to it, and nothing was changed")
        try queue.checkpoint()
        #expect(FileManager.default.contents(atPath: path) == before)
        #expect(try queue.read { try $0.tableExists("tasks") } == false)

        let empty = try DatabaseQueue(path: store.directory + "/empty.db", key: DatabaseKey.random())
        defer { try? empty.close() }
        let missing = try #require(throws: SecureStoreError.self) { try TaskList(queue: empty, createIfMissing: false) }
        #expect(missing.code == SecureStoreError.Code.notFound)
        #expect(try empty.read { try $0.tableExists("tasks") } == false)
        #expect(try TaskList(queue: empty).count() == 0, "an empty database may become a task list")
    }

    @Test func countsStayExactThroughRollbacksBatchesAndDirectSQL() throws {
        let store = try TLStore()
        try store.tasks.insert((0..<30).map { TaskItem(title: "task \($0)", done: $0 % 3 == 0, createdAt: TLDate(Double($0))) })
        #expect(try store.tasks.counts() == TaskList.Counts(total: 30, done: 10))

        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try store.queue.write { db in
                try db.execute("DELETE FROM tasks WHERE done = 0")
                try db.execute("UPDATE tasks SET done = 0")
                throw Abort()
            }
        }
        #expect(try store.tasks.counts() == TaskList.Counts(total: 30, done: 10))

        try store.queue.write { db in
            try db.execute("UPDATE tasks SET done = 1 - done")
            try db.execute("DELETE FROM tasks WHERE title LIKE 'task 1%'")
        }
        let (total, done) = try store.queue.read { db in
            (try db.scalar("SELECT count(*) FROM tasks", as: Int.self), try db.scalar("SELECT sum(done) FROM tasks", as: Int.self))
        }
        #expect(try store.reopen().counts() == TaskList.Counts(total: total ?? -1, done: done ?? -1))
        #expect(try store.tasks.counts().open == (total ?? 0) - (done ?? 0))
    }

    @Test func negativePagingIsRefused() throws {
        let store = try TLStore()
        #expect(expectError(SecureStoreError.Code.invalidArgument) { _ = try store.tasks.list(limit: -1) }?.message == "a page limit cannot be negative (-1)")
        #expect(expectError(SecureStoreError.Code.invalidArgument) { _ = try store.tasks.page(offset: -5) }?.message == "a page offset cannot be negative (-5)")
        #expect(try store.tasks.list(limit: 0).isEmpty)
    }

    @Test func aTaskRoundTripsThroughJSON() throws {
        let item = TaskItem(title: "Codable", done: true, createdAt: TLDate(12.5))
        let data = try JSONEncoder().encode(item)
        #expect(try JSONDecoder().decode(TaskItem.self, from: data) == item)
    }
}
