// The task list's word search (`titleMatches`, `tasks list --search`): the full-text index inside the encrypted
// file, kept in step by triggers, built for lists made before it existed, and never written in plain anywhere.
import EncryptedDatabase
import Foundation
import Tasks
import Testing

@Suite("TaskList: word search")
struct TaskListSearchTests {
    private func titles(_ tasks: TaskList, _ words: String, _ status: TaskList.Filter.Status = .all) throws -> [String] {
        let filter = TaskList.Filter(status: status, titleMatches: words)
        let listed = try tasks.list(filter, order: .oldestFirst).map(\.title)
        #expect(try tasks.count(filter) == listed.count, "the count of '\(words)' is the length of its listing")
        return listed
    }

    @Test func wordsAreFoundByTheirBeginningInAnyOrderCaseAndDiacriticsIgnored() throws {
        let store = try TLStore()
        for (index, title) in ["Pay rent", "Buy milk", "Parent meeting", "Café au lait", "ÉCOLE: inscription", "Pay the RENTAL car"]
            .enumerated()
        {
            try store.tasks.create(title: title, done: index == 5, createdAt: TLDate(Double(index)))
        }
        #expect(try titles(store.tasks, "rent") == ["Pay rent", "Pay the RENTAL car"])
        #expect(try titles(store.tasks, "ren pay") == ["Pay rent", "Pay the RENTAL car"])
        #expect(try titles(store.tasks, "REN", .open) == ["Pay rent"])
        #expect(try titles(store.tasks, "cafe") == ["Café au lait"])
        #expect(try titles(store.tasks, "ecole") == ["ÉCOLE: inscription"])
        // A word is found by its beginning, not any substring (LIKE's titleContains finds "Parent" for "rent").
        #expect(try titles(store.tasks, "arent").isEmpty)
        #expect(try store.tasks.list(TaskList.Filter(titleContains: "rent"), order: .oldestFirst).map(\.title)
            == ["Pay rent", "Parent meeting", "Pay the RENTAL car"])
        // Punctuation separates words and is never syntax; text without a word matches nothing.
        #expect(try titles(store.tasks, "\"pay\" -rent* OR") == [])
        #expect(try titles(store.tasks, "pay: rent!") == ["Pay rent", "Pay the RENTAL car"])
        #expect(try titles(store.tasks, "%!*\"") == [])
        #expect(try store.tasks.count(TaskList.Filter(titleMatches: "")) == 6, "an empty search does not filter")
    }

    /// Past 2 000 matches a listing scans the tasks in order instead of sorting the matches: the same tasks, the
    /// same order and totals either way, paged by offset or after a task, for every status.
    @Test func aSearchMatchingManyTasksListsTheSameAsTheSubstringSearch() throws {
        let store = try TLStore()
        var items: [TaskItem] = []
        for n in 0..<2_600 {
            let title = n % 5 == 0 ? "Rare \(n)" : "Common \(n)"
            items.append(TaskItem(id: UUID(), title: title, done: n % 3 == 0, createdAt: TLDate(Double(n))))
        }
        try store.tasks.insert(items)
        for status in [TaskList.Filter.Status.all, .done, .open] {
            for (words, substring) in [("common", "Common"), ("rare", "Rare")] {
                let words = TaskList.Filter(status: status, titleMatches: words)
                let like = TaskList.Filter(status: status, titleContains: substring)
                for order in [TaskList.Order.newestFirst, .oldestFirst] {
                    #expect(try store.tasks.page(words, order: order, limit: 50) == store.tasks.page(like, order: order, limit: 50))
                    #expect(try store.tasks.list(words, order: order, offset: 700, limit: 30) == store.tasks.list(like, order: order, offset: 700, limit: 30))
                    let cursor = try #require(try store.tasks.list(like, order: order, offset: 100, limit: 1).first)
                    #expect(try store.tasks.list(words, order: order, after: cursor, limit: 20) == store.tasks.list(like, order: order, after: cursor, limit: 20))
                }
                #expect(try store.tasks.count(words) == store.tasks.count(like))
            }
        }
    }

    /// A page of a word with more than 2 000 matches is read from the index's matches with the highest (newest
    /// first) or lowest numbers when the tasks were indexed in the order of their dates, and the usual way when
    /// they were not (a newer task indexed first, older tasks imported last, any order): the same page either way,
    /// through `list`, `page` and a snapshot's `forEachTask`.
    @Test func aCommonWordListsTheSameWhateverOrderTheTasksWereIndexedIn() throws {
        let ordered: [TaskItem] = (0..<2_800).map { (n: Int) -> TaskItem in
            let title = n % 7 == 0 ? "Other \(n)" : "Pay bill \(n)"
            return TaskItem(id: UUID(), title: title, done: n % 3 == 0, createdAt: TLDate(Double(n)))
        }
        let arrangements: [(String, [TaskItem])] = [
            ("by date", ordered), ("newest first", Array(ordered.reversed())), ("shuffled", ordered.shuffled()),
            ("oldest imported last", Array(ordered[300...]) + Array(ordered[..<300])),
            ("newest indexed first", [ordered[2_799]] + Array(ordered[..<2_799])),
        ]
        for (arrangement, items) in arrangements {
            let store = try TLStore()
            try store.tasks.insert(items)
            for status in [TaskList.Filter.Status.all, .done, .open] {
                let words = TaskList.Filter(status: status, titleMatches: "pay")
                let like = TaskList.Filter(status: status, titleContains: "Pay")
                for order in [TaskList.Order.newestFirst, .oldestFirst] {
                    let expected = try store.tasks.list(like, order: order, offset: 40, limit: 25)
                    #expect(expected.count == 25)
                    #expect(try store.tasks.list(words, order: order, offset: 40, limit: 25) == expected, "\(arrangement)")
                    #expect(try store.tasks.page(words, order: order, limit: 50) == store.tasks.page(like, order: order, limit: 50), "\(arrangement)")
                    var streamed: [TaskItem] = []
                    _ = try store.tasks.snapshot { snapshot in
                        try snapshot.forEachTask(words, order: order, offset: 40, limit: 25) { streamed.append($0) }
                    }
                    #expect(streamed == expected, "\(arrangement), \(status), \(order)")
                }
            }
        }
    }

    @Test func renamesDeletesAndBatchChangesKeepTheIndexInStep() throws {
        let store = try TLStore()
        let rent = try store.tasks.create(title: "Pay rent", createdAt: TLDate(1))
        let milk = try store.tasks.create(title: "Buy milk", createdAt: TLDate(2))
        try store.tasks.rename(id: rent.id, to: "Water the plants")
        #expect(try titles(store.tasks, "rent").isEmpty)
        #expect(try titles(store.tasks, "plant") == ["Water the plants"])
        try store.tasks.toggle(id: milk.id)
        #expect(try titles(store.tasks, "milk", .done) == ["Buy milk"])
        try store.tasks.delete(id: milk.id)
        #expect(try titles(store.tasks, "milk").isEmpty)
        try store.tasks.create(title: "Buy milk again", done: true, createdAt: TLDate(3))
        #expect(try store.tasks.deleteAllDone() == 1)
        #expect(try titles(store.tasks, "milk").isEmpty)
        // SQL written by hand goes through the triggers too.
        try store.queue.write { db in
            try db.execute("UPDATE tasks SET title = 'Feed the cat' WHERE title = 'Water the plants'")
        }
        #expect(try titles(store.tasks, "cat") == ["Feed the cat"])
        #expect(try titles(store.tasks, "water").isEmpty)
        try store.queue.read { db in try db.integrityCheck() }
    }

    /// A task list as the version before the search index made it (the first migration only), with `tasks` tasks
    /// titled "old task number<i>".
    private func makeListBeforeTheIndex(at path: String, key: DatabaseKey, tasks: Int) throws {
        let queue = try DatabaseQueue(path: path, key: key)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create tasks") { db in try db.executeScript(TaskList.createSQL) }
        try migrator.migrate(queue)
        try queue.write { db in
            for index in 0..<tasks {
                try db.execute(
                    "INSERT INTO tasks (created_at, id, title, done) VALUES (?, ?, ?, 0)",
                    [Int64(index), UUID(), "old task number\(index)"])
            }
        }
        try queue.close()
    }

    @Test func aListMadeBeforeTheIndexGetsItWhenOpened() throws {
        let directory = try TLStore()
        let path = directory.directory + "/old.db"
        let key = DatabaseKey.random()
        try makeListBeforeTheIndex(at: path, key: key, tasks: 300)
        let queue = try DatabaseQueue(path: path, key: key)
        defer { try? queue.close() }
        let tasks = try TaskList(queue: queue)
        #expect(try DatabaseMigrator().appliedMigrations(queue) == TaskList.migrationIDs)
        #expect(try tasks.count(TaskList.Filter(titleMatches: "old")) == 300)
        #expect(try titles(tasks, "number12") == ["old task number12"] + (120...129).map { "old task number\($0)" })
    }

    /// A list made before the index, opened where it may only be read: it opens (nothing is written, the file is
    /// byte-identical), and a word search is the substring search of the version that made it; the next open that
    /// may write builds the index.
    @Test func aListMadeBeforeTheIndexOpensReadOnlyAndSearchesAsItsVersionDid() throws {
        let directory = try TLStore()
        let path = directory.directory + "/old-read-only.db"
        let key = DatabaseKey.random()
        try makeListBeforeTheIndex(at: path, key: key, tasks: 30)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        var configuration = DatabaseConfiguration()
        configuration.readOnly = true
        let readOnly = try DatabaseQueue(path: path, key: key, configuration: configuration)
        let tasks = try TaskList(queue: readOnly)
        #expect(try tasks.count(TaskList.Filter(titleMatches: "umber1")) == 11, "a substring, as before the index")
        #expect(try tasks.list(TaskList.Filter(titleMatches: "number12"), order: .oldestFirst).map(\.title) == ["old task number12"])
        #expect(try tasks.count() == 30)
        try readOnly.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "nothing was written")

        let writable = try DatabaseQueue(path: path, key: key)
        defer { try? writable.close() }
        let indexed = try TaskList(queue: writable)
        #expect(try DatabaseMigrator().appliedMigrations(writable) == TaskList.migrationIDs)
        #expect(try indexed.count(TaskList.Filter(titleMatches: "umber1")) == 0, "word prefixes once indexed")
        #expect(try indexed.count(TaskList.Filter(titleMatches: "number1")) == 11)
    }

    /// The titles are in the index and in the index's own copy of the text, but only encrypted: no file of the
    /// database (the main file, its -wal, its -shm) holds a title's bytes in plain, before or after a checkpoint.
    @Test func noTitleAppearsInPlainInAnyFileOfTheDatabase() throws {
        let store = try TLStore()
        let marker = "Zebracrossingword"
        for index in 0..<200 { try store.tasks.create(title: "\(marker) \(index) plain-text probe") }
        #expect(try store.tasks.count(TaskList.Filter(titleMatches: marker.lowercased())) == 200)
        func scan() throws {
            for suffix in ["", "-wal", "-shm"] {
                let path = store.path + suffix
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                for needle in [marker, marker.lowercased(), "plain-text probe", "probe"] {
                    #expect(data.range(of: Data(needle.utf8)) == nil, "'\(needle)' in plain in \(path)")
                }
            }
        }
        try scan()
        #expect(FileManager.default.fileExists(atPath: store.path + "-wal"))
        try store.queue.writeWithoutTransaction { db in try db.checkpoint() }
        try scan()
    }
}
