// An observation of the task list in this process sees `securestore tasks add` run by another process (the
// built tool), through the poll of SQLite's data_version.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct ObservationAcrossProcessesTests {
    init() throws { try Harness.require() }

    @Test func anObservedTaskCountSeesTasksAddedByTheTool() async throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "first"], app: app).status == 0)
        let database = try KeyedDatabase(paths: try AppPaths(app: app), name: "tasks", keychain: StoreClient.keychain)
        let counts = database.observe(tables: ["tasks"], interval: .milliseconds(20)) { db in
            try db.scalar("SELECT count(*) FROM tasks", as: Int.self) ?? 0
        }
        var iterator = counts.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
        let added = try securestore(["tasks", "add", "second"], app: app)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try await iterator.next() == 2, "the other process's commit is seen")
        try database.close()
    }
}
