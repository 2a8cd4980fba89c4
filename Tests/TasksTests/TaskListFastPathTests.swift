// The task list's fast paths (issue 25, Docs/performance.md "Against C"): a batch insert binds each task straight into
// SQLite and walks an array through a typed buffer, plain ASCII titles skip the Unicode checks, and a long list
// reserves its array from the counts row. What a user sees must not change: the same values read back, the same
// refusals with the same messages, nothing written when a batch is refused.
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import TestSupport
import Testing

@Suite("TaskList: fast paths keep values and refusals")
struct TaskListFastPathTests {
    /// Titles that take both ways through the title check: plain ASCII (the fast path), a tab, non-ASCII letters,
    /// emoji, the edges of printable ASCII, a single character, almost 1000 characters.
    static let titles = [
        "Pay rent", "two  spaces", "tab\tinside", "Crème brûlée", "日本語のタスク", "👩‍👩‍👧 family", "~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}",
        "x", String(repeating: "y", count: 994), "ends with é", "é starts",
    ]

    /// Task `index` of a batch (the same on every call): titles from ``titles``, every third one done, dates a microsecond and a second apart.
    static func task(_ index: Int) -> TaskItem {
        TaskItem(
            id: UUID(uuidString: String(format: "%08X-0000-4000-8000-000000000000", index))!, title: "\(titles[index % titles.count]) \(index)",
            done: index % 3 == 0, createdAt: TLDate(Double(index) + Double(index % 7) / 1_000_000))
    }

    @Test func aLargeBatchReadsBackExactlyFromAnArrayAndFromALazySequence() throws {
        let store = try TLStore()
        let array = (0..<1500).map(Self.task)
        #expect(try store.tasks.insert(array) == 1500)
        let lazy = (1500..<3000).lazy.map(Self.task)  // not contiguous: the generic loop
        #expect(try store.tasks.insert(lazy) == 1500)
        let expected = array + Array(lazy)

        let reopened = try store.reopen()
        let listed = try reopened.list(order: .oldestFirst, limit: 10_000)
        #expect(listed.count == 3000)
        let byID = Dictionary(uniqueKeysWithValues: expected.map { ($0.id, $0) })
        for item in listed {
            let written = try #require(byID[item.id])
            #expect(item == written)
            #expect(item.createdAt == written.createdAt)
        }
        #expect(listed.map(\.id) == expected.map(\.id))  // dates increase with the index
        #expect(try reopened.list(order: .oldestFirst, limit: 10_000).first?.title == "Pay rent 0")
        #expect(listed.contains { $0.title == "Crème brûlée 3" } && listed.contains { $0.title == "two  spaces 1" })
        #expect(try reopened.counts() == TaskList.Counts(total: 3000, done: 1000))
        // Searching words finds the batch's titles: the deferred index was built.
        #expect(try reopened.count(TaskList.Filter(titleMatches: "brûlée")) == 3000 / Self.titles.count + 1)

        // Titles with white space around them are stored trimmed, in a batch as one by one.
        let padded = (0..<100).map { TaskItem(title: ["  lead \($0)", "trail \($0)\t ", " é \($0) "][$0 % 3], createdAt: TLDate(9000)) }
        try reopened.insert(padded)
        let stored = try reopened.list(.all, order: .newestFirst, limit: 100)
        #expect(Set(stored.map(\.title)) == Set((0..<100).map { ["lead \($0)", "trail \($0)", "é \($0)"][$0 % 3] }))
    }

    @Test func longPagesOfEveryFilterMatchTheSmallPages() throws {
        let store = try TLStore()
        try store.tasks.insert((0..<2500).map(Self.task))
        for filter in [TaskList.Filter.all, .done, .open, TaskList.Filter(titleContains: "rent")] {
            var small: [TaskItem] = []
            while true {
                let page = try store.tasks.list(filter, order: .oldestFirst, after: small.last, limit: 100)
                if page.isEmpty { break }
                small += page
            }
            #expect(try store.tasks.list(filter, order: .oldestFirst, limit: 5000) == small)
            #expect(try store.tasks.list(filter, order: .oldestFirst, limit: .max) == small)
            #expect(try store.tasks.list(filter, order: .oldestFirst, offset: 1200, limit: 2000) == Array(small.dropFirst(1200)))
            #expect(try store.tasks.list(filter, order: .oldestFirst, offset: 99_999, limit: 2000).isEmpty)
        }
    }

    @Test func aBadTitleOrATakenIDInALargeBatchIsRefusedAndNothingIsAdded() throws {
        let store = try TLStore()
        let kept = try store.tasks.create(title: "Kept", createdAt: TLDate(0))
        let cases: [(Int, String, String)] = [
            (700, "trailing DEL \u{7F}", "task 701 of the batch: a task title cannot contain control characters (found U+007F)"),
            (0, "   ", "task 1 of the batch: a task title cannot be only white space"),
            (1999, "", "task 2000 of the batch: a task title cannot be empty"),
            (64, "two\nlines", "task 65 of the batch: a task title must be one line: it contains a line break"),
            (1000, String(repeating: "z", count: 1001),
             "task 1001 of the batch: a task title can be at most 1000 characters long; this one has 1001"),
        ]
        for (index, title, message) in cases {
            var batch = (1..<2001).map(Self.task)
            batch[index].title = title
            let error = expectError(SecureStoreError.Code.invalidArgument) { try store.tasks.insert(batch) }
            #expect(error?.message == message)
        }
        var twice = (1..<2001).map(Self.task)
        twice[1500] = TaskItem(id: twice[10].id, title: "again")
        let taken = expectError(SecureStoreError.Code.invalidArgument) { try store.tasks.insert(twice) }
        #expect(taken?.message == "a task with the ID \(twice[10].id.uuidString.lowercased()) already exists; nothing was added")

        let reopened = try store.reopen()
        #expect(try reopened.list(limit: 5000) == [kept])
        #expect(try reopened.counts() == TaskList.Counts(total: 1, done: 0))
        #expect(try reopened.count(TaskList.Filter(titleMatches: "rent")) == 0)
    }
}
