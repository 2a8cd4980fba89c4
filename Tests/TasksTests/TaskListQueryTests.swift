// The task list: sorting, filters, search, pagination, counts, batch operations, ID prefixes, a big seed.
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import TestSupport
import Testing

@Suite("TaskList: listing and finding")
struct TaskListQueryTests {
    /// 300 tasks: creation dates 0…149 s with every date used twice (ties), every third done,
    /// titles "Task n" with a few special ones.
    private func seeded() throws -> (TLStore, [TaskItem]) {
        let store = try TLStore()
        let items = (0..<300).map { n in
            TaskItem(title: "Task \(n)", done: n % 3 == 0, createdAt: TLDate(Double(n / 2)))
        }
        #expect(try store.tasks.insert(items.shuffled()) == 300)
        return (store, items)
    }

    private func expectedOrder(_ items: [TaskItem], _ order: TaskList.Order) -> [TaskItem] {
        let ascending = items.sorted {
            ($0.createdAt, $0.hexID) < ($1.createdAt, $1.hexID)
        }
        return order == .oldestFirst ? ascending : ascending.reversed()
    }

    @Test func listsAreSortedByCreationDateBothWaysWithTiesBrokenByID() throws {
        let (store, items) = try seeded()
        let newest = try store.tasks.list(limit: 1000)
        let oldest = try store.tasks.list(order: .oldestFirst, limit: 1000)
        #expect(newest == expectedOrder(items, .newestFirst))
        #expect(oldest == expectedOrder(items, .oldestFirst))
        #expect(oldest == newest.reversed())
        // Same order after reopening: it depends only on stored values.
        #expect(try store.reopen().list(limit: 1000) == newest)
        // Ties: the two tasks created at the same microsecond come in ID order.
        let tied = newest.filter { $0.createdAt == TLDate(7) }
        #expect(tied.count == 2 && tied[0].hexID > tied[1].hexID)
    }

    @Test func filtersByStatus() throws {
        let (store, items) = try seeded()
        #expect(try store.tasks.list(.done, limit: 1000) == expectedOrder(items.filter(\.done), .newestFirst))
        #expect(try store.tasks.list(.open, order: .oldestFirst, limit: 1000)
            == expectedOrder(items.filter { !$0.done }, .oldestFirst))
        #expect(try store.tasks.list(.all, limit: 1000).count == 300)
    }

    @Test func searchFindsTitlesIgnoringASCIICaseAndTreatsWildcardsLiterally() throws {
        let store = try TLStore()
        let titles = [
            "Pay RENT", "rental car", "100% done", "1000 done", "snake_case name", "snakeXcase name",
            #"back\slash"#, "Éclair", "éclair", "Straße", "STRASSE",
        ]
        for (n, title) in titles.enumerated() { try store.tasks.create(title: title, createdAt: TLDate(Double(n))) }
        func search(_ text: String, _ status: TaskList.Filter.Status = .all) throws -> [String] {
            try store.tasks.list(TaskList.Filter(status: status, titleContains: text), order: .oldestFirst).map(\.title)
        }
        #expect(try search("rent") == ["Pay RENT", "rental car"])
        #expect(try search("RENT") == ["Pay RENT", "rental car"])
        #expect(try search("0%") == ["100% done"])            // % is not "anything"
        #expect(try search("%") == ["100% done"])
        #expect(try search("e_c") == ["snake_case name"])      // _ is not "any one character"
        #expect(try search(#"\s"#) == [#"back\slash"#])
        #expect(try search(#"\"#) == [#"back\slash"#])
        #expect(try search("") == titles)                       // an empty search does not filter
        #expect(try search("nothing like this").isEmpty)
        // SQLite's LIKE folds ASCII letters only: é/É and ß/SS are different.
        #expect(try search("éclair") == ["éclair"])
        #expect(try search("ÉCLAIR") == ["Éclair"])
        #expect(try search("ECLAIR").isEmpty)
        #expect(try search("strasse") == ["STRASSE"])
        // Search combines with status, and counts agree with lists.
        try store.tasks.setDone(true, id: try store.tasks.resolve(prefix: store.tasks.list(.init(titleContains: "rental"))[0].hexID).id)
        #expect(try search("rent", .done) == ["rental car"])
        #expect(try search("rent", .open) == ["Pay RENT"])
        #expect(try store.tasks.count(TaskList.Filter(status: .open, titleContains: "rent")) == 1)
        // A search longer than any title can be matches nothing, without an error.
        #expect(try search(String(repeating: "a", count: 60_000)).isEmpty)
        #expect(try search("e\u{0}x").isEmpty)                 // no title holds NUL (LIKE would stop at it)
        #expect(try store.tasks.count(TaskList.Filter(titleContains: String(repeating: "a", count: 60_000))) == 0)
    }

    @Test func offsetPagesCoverEverythingWithoutGapsOrDuplicates() throws {
        let (store, items) = try seeded()
        for filter in [TaskList.Filter.all, .done, .open, TaskList.Filter(titleContains: "1")] {
            for order in [TaskList.Order.newestFirst, .oldestFirst] {
                var pages: [TaskItem] = []
                var offset = 0
                while true {
                    let page = try store.tasks.page(filter, order: order, offset: offset, limit: 37)
                    pages += page.items
                    offset += 37
                    #expect(page.total == (try store.tasks.count(filter)))
                    if page.items.count < 37 { break }
                }
                let all = try store.tasks.list(filter, order: order, limit: 10_000)
                #expect(pages == all)
                #expect(Set(pages.map(\.id)).count == pages.count)
                #expect(all.count == (try store.tasks.count(filter)))
                #expect(all.count == items.filter { matches(filter, $0) }.count)
            }
        }
    }

    private func matches(_ filter: TaskList.Filter, _ item: TaskItem) -> Bool {
        switch filter.status {
        case .all: break
        case .done: if !item.done { return false }
        case .open: if item.done { return false }
        }
        return filter.titleContains.map { item.title.contains($0) } ?? true
    }

    @Test func keysetPagesCoverEverythingAndSurviveDeletingTheCursor() throws {
        let (store, items) = try seeded()
        for filter in [TaskList.Filter.all, .done, .open, TaskList.Filter(status: .open, titleContains: "2")] {
            for order in [TaskList.Order.newestFirst, .oldestFirst] {
                var pages: [TaskItem] = []
                var cursor: TaskItem?
                repeat {
                    let page = try store.tasks.list(filter, order: order, after: cursor, limit: 25)
                    pages += page
                    cursor = page.last
                    if page.count < 25 { break }
                } while true
                #expect(pages == expectedOrder(items.filter { matches(filter, $0) }, order))
            }
        }
        // Delete the last task of the first page: the next page still starts right after it.
        let first = try store.tasks.list(limit: 10)
        let expectedNext = try store.tasks.list(offset: 10, limit: 10)
        try store.tasks.delete(id: first[9].id)
        #expect(try store.tasks.list(after: first[9], limit: 10) == expectedNext)
        // A task created after the first page was read (newer) does not appear on later pages.
        try store.tasks.create(title: "Newest", createdAt: TLDate(10_000))
        #expect(try store.tasks.list(after: first[8], limit: 10) == expectedNext)
    }

    @Test func countsWithFiltersEqualTheListedTasks() throws {
        let (store, _) = try seeded()
        try store.tasks.create(title: "Special 50% off", done: true, createdAt: TLDate(500))
        for filter in [
            TaskList.Filter.all, .done, .open, TaskList.Filter(titleContains: "task 1"),
            TaskList.Filter(status: .done, titleContains: "%"), TaskList.Filter(status: .open, titleContains: "9"),
        ] {
            #expect(try store.tasks.count(filter) == store.tasks.list(filter, limit: 100_000).count)
        }
        let counts = try store.tasks.counts()
        #expect(counts == TaskList.Counts(total: 301, done: 101))
        #expect(counts.open == 200)
    }

    @Test func batchOperationsChangeExactlyTheRightTasks() throws {
        let (store, items) = try seeded()
        let done = Set(items.filter(\.done).map(\.id))
        #expect(try store.tasks.deleteAllDone() == 100)
        #expect(Set(try store.tasks.list(limit: 1000).map(\.id)) == Set(items.map(\.id)).subtracting(done))
        #expect(try store.tasks.counts() == TaskList.Counts(total: 200, done: 0))
        #expect(try store.tasks.deleteAllDone() == 0)

        try store.tasks.toggle(id: items[1].id)
        #expect(try store.tasks.markAllDone() == 199)
        let reopened = try store.reopen()
        let remaining = try reopened.list(limit: 1000)
        #expect(remaining.count == 200 && remaining.allSatisfy(\.done))
        #expect(remaining.map(\.title).sorted() == items.filter { !$0.done }.map(\.title).sorted())
        #expect(try reopened.counts() == TaskList.Counts(total: 200, done: 200))
        #expect(try reopened.markAllDone() == 0)
        #expect(try reopened.deleteAllDone() == 200)
        #expect(try reopened.counts() == TaskList.Counts(total: 0, done: 0))
        #expect(try reopened.list().isEmpty)
    }

    @Test func idPrefixesResolveLikeGit() throws {
        let store = try TLStore()
        let a = try store.tasks.create(title: "A", id: TLUUID("ab12", fill: 0x00))
        let b = try store.tasks.create(title: "B", id: TLUUID("ab13", fill: 0x00))
        let c = try store.tasks.create(title: "C", id: TLUUID("ab12ff"))
        let f = try store.tasks.create(title: "F", id: TLUUID("ffff", fill: 0xFF))
        let odd = try store.tasks.create(title: "odd", id: TLUUID("0123", fill: 0x00))

        #expect(try store.tasks.resolve(prefix: "ab13").id == b.id)
        #expect(try store.tasks.resolve(prefix: "AB13").id == b.id)
        #expect(try store.tasks.resolve(prefix: "ab120").id == a.id)
        #expect(try store.tasks.resolve(prefix: "ab12f").id == c.id)
        #expect(try store.tasks.resolve(prefix: "01").id == odd.id)
        #expect(try store.tasks.resolve(prefix: "f").id == f.id)
        #expect(try store.tasks.resolve(prefix: f.hexID).id == f.id)
        #expect(try store.tasks.resolve(prefix: b.id.uuidString).id == b.id)             // with dashes
        #expect(try store.tasks.resolve(prefix: b.id.uuidString.lowercased()).title == "B")

        let ambiguous = expectError(SecureStoreError.Code.ambiguous) { _ = try store.tasks.resolve(prefix: "ab1") }
        #expect(ambiguous?.message
            == "the ID prefix ab1 matches 3 tasks (\(a.id.uuidString.lowercased()), \(c.id.uuidString.lowercased()), …); give more digits")
        let two = expectError(SecureStoreError.Code.ambiguous) { _ = try store.tasks.resolve(prefix: "ab12") }
        #expect(two?.message == "the ID prefix ab12 matches 2 tasks (\(a.id.uuidString.lowercased()), \(c.id.uuidString.lowercased())); give more digits")

        let none = expectError(SecureStoreError.Code.notFound) { _ = try store.tasks.resolve(prefix: "ab14") }
        #expect(none?.message == "no task has an ID starting with ab14")
        expectError(SecureStoreError.Code.notFound) { _ = try store.tasks.resolve(prefix: "0124") }

        let invalid = expectError(SecureStoreError.Code.invalidArgument) { _ = try store.tasks.resolve(prefix: "xyz") }
        #expect(invalid?.message == "'xyz' is not a task ID or ID prefix: use hexadecimal digits 0-9 and a-f")
        #expect(expectError(SecureStoreError.Code.invalidArgument) { _ = try store.tasks.resolve(prefix: "") }?.message
            == "a task ID prefix needs at least one hexadecimal digit")
        expectError(SecureStoreError.Code.invalidArgument) { _ = try store.tasks.resolve(prefix: f.hexID + "0") }
    }

    @Test func aHundredThousandTaskSeedShowsTheRightFirstPageAndCount() throws {
        let store = try TLStore()
        let count = 100_000
        let batch = (0..<count).map { n in
            TaskItem(title: "Seeded task \(n)", done: n % 4 == 0, createdAt: TLDate(Double(n) / 1000))
        }
        let start = ContinuousClock.now
        #expect(try store.tasks.insert(batch) == count)
        print("TaskList: inserting \(count) tasks took \(ContinuousClock.now - start) (debug build)")
        let last = Array(batch.suffix(50).reversed())

        let reopened = try store.reopen()
        let page = try reopened.page(limit: 50)
        #expect(page.total == count)
        #expect(page.items == last)
        #expect(try reopened.counts() == TaskList.Counts(total: count, done: count / 4))
        let deep = try reopened.list(order: .oldestFirst, after: batch[89_999], limit: 3)
        #expect(deep.map(\.title) == ["Seeded task 90000", "Seeded task 90001", "Seeded task 90002"])
        #expect(try reopened.resolve(prefix: page.items[0].hexID).title == "Seeded task 99999")
    }
}
