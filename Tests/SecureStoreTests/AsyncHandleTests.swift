// The async forms of the blocking calls (run on the handles' own dispatch queues, never on a thread of Swift
// concurrency's cooperative pool — by construction, see SecureStoreCore.runBlocking): the same results, from many
// tasks at once, with a key rotation in between.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

@Suite(.serialized) struct AsyncHandleTests {
    init() throws { try Harness.require() }

    @Test func aKeyedDatabaseReadsWritesAndRotatesFromAsyncCode() async throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database)
        let oldHex = try #require(try fixture.storedHex())

        try await database.write { db in
            try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [kdRowCount, "from async"])
        }
        let retired = try await database.rotateKey()
        #expect(retired.account.contains(".retired."))
        #expect(try fixture.storedHex() != oldHex)
        let count = try await database.read { db in try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0 }
        #expect(count == kdRowCount + 1)
        try database.close()
    }

    @Test func aDatabaseQueueReadsAndWritesFromManyTasks() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("async-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let queue = try DatabaseQueue(
            path: directory.appendingPathComponent("a.db").path, key: try DatabaseKey(bytes: [UInt8](repeating: 7, count: 32)))
        _ = try await queue.write { db in try db.execute("CREATE TABLE n (v INTEGER)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for value in 0..<40 {
                group.addTask {
                    try await queue.write { db in try db.execute("INSERT INTO n (v) VALUES (?)", [value]) }
                }
            }
            try await group.waitForAll()
        }
        let sum = try await queue.read { db in try db.scalar("SELECT sum(v) FROM n", as: Int.self) ?? 0 }
        #expect(sum == (0..<40).reduce(0, +))
    }

    @Test func theKeychainAnswersAsyncCallers() async throws {
        let keychain = StoreClient.keychain
        let service = uniqueService()
        try await keychain.set("async value", service: service, account: "a", label: "async")
        #expect(try await keychain.string(service: service, account: "a") == "async value")
        #expect(try await keychain.items(service: service).map(\.account) == ["a"])
        #expect(try await keychain.delete(service: service, account: "a"))
        #expect(try await keychain.secret(service: service, account: "a") == nil)
    }
}
