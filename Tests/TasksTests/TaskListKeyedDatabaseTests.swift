// A task list on a keyed database (through DatabaseWriter) keeps working across the database's key rotation.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Tasks
import Testing

@Suite(.serialized) struct TaskListKeyedDatabaseTests {
    @Test func aTaskListOnAKeyedDatabaseInsertsAndReadsAfterARotation() throws {
        let store = try TLKeyedStore()
        let tasks = try TaskList(database: store.database)
        let rent = try tasks.create(title: "Pay rent", createdAt: TLDate(1))
        try tasks.create(title: "Call mum", createdAt: TLDate(2))
        let before = try store.database.recoveryCode()

        try store.database.rotateKey()

        #expect(try store.database.recoveryCode() != before, "the key was rotated")
        // The same TaskList value, made before the rotation.
        try tasks.create(title: "Water plants", createdAt: TLDate(3))
        try tasks.toggle(id: rent.id)
        #expect(try tasks.list(order: .oldestFirst).map(\.title) == ["Pay rent", "Call mum", "Water plants"])
        #expect(try tasks.counts() == TaskList.Counts(total: 3, done: 1))
        #expect(try tasks.task(id: rent.id)?.done == true)
        #expect(tasks.database.path == store.database.path)
    }

    @Test func aTaskListMadeOnTheQueueFailsAfterARotationAndSaysWhy() throws {
        let store = try TLKeyedStore()
        let onQueue = try TaskList(queue: store.database.queue)
        try onQueue.create(title: "Pay rent")

        try store.database.rotateKey()

        let error = #expect(throws: DatabaseError.self) { try onQueue.create(title: "lost") }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("a key rotation of its KeyedDatabase replaced this queue") == true)
        // Made again on the keyed database itself, the list sees the task and takes new ones.
        let tasks = try TaskList(database: store.database)
        try tasks.create(title: "Water plants")
        #expect(try tasks.count() == 2)
    }

    @Test func aTaskListOnAnAlreadyMigratedKeyedDatabaseNeedsNoMigration() throws {
        let store = try TLKeyedStore()
        var migrator = DatabaseMigrator()
        TaskList.registerMigrations(in: &migrator)
        try migrator.migrate(store.database)
        let tasks = TaskList(migratedDatabase: store.database)
        try tasks.create(title: "Pay rent")
        try store.database.rotateKey()
        try tasks.create(title: "Call mum")
        #expect(try tasks.count(.open) == 2)
    }
}
