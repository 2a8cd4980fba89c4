// A task is a record of the task list's table: the records layer and TaskList see the same rows and counts.
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import Testing

@Suite struct TaskItemRecordTests {
    @Test func tasksMadeByTheListReadBackAsRecordsAndTheReverse() throws {
        let store = try TLStore()
        let rent = try store.tasks.create(title: "Pay rent", createdAt: TLDate(1))
        let milk = try store.tasks.create(title: "Buy milk", createdAt: TLDate(2))
        let walk = TaskItem(title: "Walk the dog", createdAt: TLDate(3))
        try store.queue.write { db in try walk.insert(db) }

        let all = try store.queue.read { db in try TaskItem.order(Column("created_at").asc).fetchAll(db) }
        #expect(all == [rent, milk, walk])
        #expect(try store.tasks.task(id: walk.id) == walk, "the list sees a task the records layer inserted")
        #expect(try store.tasks.counts().total == 3, "the triggers kept the counts exact")

        var done = milk
        done.done = true
        try store.queue.write { db in try done.update(db) }
        #expect(try store.tasks.counts().done == 1)
        #expect(try store.queue.read { db in try TaskItem.filter(Column("done") == true).fetchAll(db) } == [done])

        #expect(try store.queue.write { db in try rent.delete(db) })
        #expect(try store.tasks.counts().total == 2)
        #expect(try store.reopen().list(.all, order: .oldestFirst).map(\.id) == [milk.id, walk.id])
    }

    @Test func aRecordWriteWithATitleTheListWouldRefuseIsRefusedAndNothingIsStored() throws {
        let store = try TLStore()
        let kept = try store.tasks.create(title: "kept")
        try store.queue.checkpoint()
        let before = try Data(contentsOf: URL(filePath: store.path))
        for title in ["", "   ", "two\nlines", " padded "] {
            #expect {
                try store.queue.write { db in try TaskItem(title: title).insert(db) }
            } throws: { error in
                (error as? SecureStoreError)?.code == SecureStoreError.Code.invalidArgument
            }
        }
        var renamed = kept
        renamed.title = "line\rbreak"
        #expect(throws: SecureStoreError.self) { try store.queue.write { db in try renamed.update(db) } }
        #expect(try store.queue.read { db in try TaskItem.fetchAll(db) } == [kept])
        try store.queue.checkpoint()
        #expect(try Data(contentsOf: URL(filePath: store.path)) == before, "the file is byte for byte unchanged")
    }
}
