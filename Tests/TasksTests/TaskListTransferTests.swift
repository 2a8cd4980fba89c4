// Streaming every task out and a stream of tasks in: forEachTask, importTasks and the stream formats.
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import Testing

@Suite("TaskList: streaming export and import")
struct TaskListTransferTests {
    @Test func forEachTaskVisitsEveryTaskInOrderAndGivesTheConnectionItsCacheBack() throws {
        let store = try TLStore()
        let before = try store.queue.read { db in try db.scalar("PRAGMA cache_size", as: Int.self) }
        for index in 0..<5 { try store.tasks.create(title: "task \(index)", createdAt: TLDate(Double(index))) }
        var seen: [String] = []
        try store.tasks.forEachTask { seen.append($0.title) }
        #expect(seen == (0..<5).map { "task \($0)" })
        var newest: [String] = []
        try store.tasks.forEachTask(order: .newestFirst) { newest.append($0.title) }
        #expect(newest == seen.reversed())
        #expect(try store.queue.read { db in try db.scalar("PRAGMA cache_size", as: Int.self) } == before)
    }

    @Test func importKeepsCountsExactUnderEveryDuplicatePolicy() throws {
        let store = try TLStore()
        let existing = try store.tasks.create(title: "existing", createdAt: TLDate(1))
        func stream(_ items: [TaskItem]) -> () throws -> TaskItem? {
            var iterator = items.makeIterator()
            return { iterator.next() }
        }
        let changed = TaskItem(id: existing.id, title: "changed", done: true, createdAt: TLDate(5))
        let fresh = TaskItem(title: "fresh", createdAt: TLDate(2))

        #expect(throws: SecureStoreError.self) {
            try store.tasks.importTasks(next: stream([fresh, changed]))
        }
        #expect(try store.tasks.counts() == TaskList.Counts(total: 1, done: 0), "fail: nothing written")

        let skipped = try store.tasks.importTasks(onDuplicate: .skip, next: stream([fresh, changed]))
        #expect(skipped.inserted == 1 && skipped.skipped == 1)
        #expect(try store.tasks.task(id: existing.id) == existing)

        let replaced = try store.tasks.importTasks(onDuplicate: .replace, batchSize: 1, next: stream([changed]))
        #expect(replaced.replaced == 1)
        #expect(try store.tasks.task(id: existing.id) == changed)
        #expect(try store.tasks.counts() == TaskList.Counts(total: 2, done: 1), "the done count follows the replacement")
        #expect(try store.tasks.list(order: .oldestFirst).map(\.title) == ["fresh", "changed"])
    }
}
