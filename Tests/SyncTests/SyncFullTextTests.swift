import EncryptedDatabase
import Foundation
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// The task list's word search on a device that received its tasks by sync. A merge of many rows defers the
/// search index's per-row trigger to one statement at the end (as a bulk insert does); rows inserted, renamed
/// and deleted inside that one merge must leave the index exactly as a device that made the same edits itself.
@Suite(.serialized)
struct SyncFullTextTests {
    private static let words = ["apple", "banana", "cherry", "damson", "elder", "fig"]

    /// What a person searching sees: for every word (and one word no task has any more), the IDs found.
    private func searches(_ device: SyncDevice_) throws -> [String: [UUID]] {
        var found: [String: [UUID]] = [:]
        for word in Self.words + ["renamed", "kiwi"] {
            found[word] = try device.tasks.list(TaskList.Filter(titleMatches: word), limit: 10_000).map(\.id).sorted {
                $0.uuidString < $1.uuidString
            }
        }
        return found
    }

    @Test func aNewDeviceFindsByWordWhatTheFirstFinds() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path + "/remote")
        let a = try SyncDevice_()
        var ids: [UUID] = []
        for number in 0..<300 {
            ids.append(try a.tasks.create(title: "\(Self.words[number % Self.words.count]) kiwi \(number)").id)
        }
        let code = try a.initialize(remote)
        // A second bundle that renames, deletes and marks rows of the first: the new device merges both in one
        // transaction, so these edits hit rows its deferred index has not indexed yet.
        for number in stride(from: 0, to: 300, by: 7) { try a.tasks.rename(id: ids[number], to: "renamed \(number)") }
        for number in stride(from: 3, to: 300, by: 11) { try a.tasks.delete(id: ids[number]) }
        for number in stride(from: 5, to: 300, by: 13) where number % 11 != 3 { try a.tasks.setDone(true, id: ids[number]) }
        for number in 300..<320 { try a.tasks.create(title: "\(Self.words[number % Self.words.count]) late \(number)") }
        try a.sync()

        let b = try SyncDevice_()
        try b.join(remote, code)
        try b.sync()
        let (rowsA, rowsB) = (try a.rows(), try b.rows())
        #expect(rowsA.count == 293 && Set(rowsA).symmetricDifference(rowsB).isEmpty)
        let expected = try searches(a)
        #expect(expected["renamed"]?.count == 39)   // 43 renamed, 4 of them deleted
        #expect(expected["apple"]?.isEmpty == false)
        #expect(try searches(b) == expected)
        // The index itself: as many entries as tasks, and SQLite's own check of the index passes.
        let indexed = try b.database.read { db in
            (try db.fetchOne("SELECT count(*) FROM tasks_search") { try $0.int(at: 0) },
             try db.fetchOne("SELECT count(*) FROM tasks_search_keys") { try $0.int(at: 0) })
        }
        let count = try b.tasks.count()
        #expect(indexed.0 == count && indexed.1 == count)
        try b.database.write { db in try db.execute("INSERT INTO tasks_search (tasks_search) VALUES ('integrity-check')") }

        // And afterwards the index is kept by its trigger again: a task added on the new device is found at once.
        let added = try b.tasks.create(title: "grape kiwi")
        #expect(try b.tasks.list(TaskList.Filter(titleMatches: "grape")).map(\.id) == [added.id])
        let triggers = try b.database.read { db in
            (try db.fetchOne("SELECT count(*) FROM sqlite_master WHERE name = 'tasks_search_insert'") { try $0.int(at: 0) },
             try db.fetchOne("SELECT count(*) FROM sqlite_temp_master") { try $0.int(at: 0) })
        }
        #expect(triggers.0 == 1 && triggers.1 == 0)
    }

    /// The index read back from the schema is the task list's own (so the merge defers exactly it).
    @Test func theTaskListsIndexIsFoundInTheSchema() throws {
        let a = try SyncDevice_()
        let found = try a.database.read { db in (try db.fullTextIndexes(on: "tasks"), try db.fullTextIndexes(on: "sqlite_master")) }
        #expect(found.0 == [TaskList.searchIndex])
        #expect(found.1.isEmpty)
    }
}
