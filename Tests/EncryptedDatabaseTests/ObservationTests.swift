// Observing a query: the first result at once, fresh results after this handle's commits and after another
// process's.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// The first value of `stream` that satisfies `condition`, or nil after `seconds`.
private func firstValue<T: Sendable>(
    _ stream: AsyncThrowingStream<T, any Error>, within seconds: Double, where condition: @escaping @Sendable (T) -> Bool
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            for try await value in stream where condition(value) { return value }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

@Suite struct ObservationTests {
    @Test func anObservedCountFollowsThisHandlesWrites() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["one"])
        let counts = queue.observe(interval: .milliseconds(20)) { db in
            try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
        }
        #expect(try await firstValue(counts, within: 5) { $0 == 1 } == 1, "the first result comes at once")
        try await queue.write { db in
            try db.execute("INSERT INTO item (title) VALUES ('two')")
            try db.execute("INSERT INTO item (title) VALUES ('three')")
        }
        #expect(try await firstValue(counts, within: 5) { $0 == 3 } == 3, "a commit gives a fresh result")
    }

    @Test func anObservedCountFollowsAnotherProcesssWrites() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("shared.db")
        // The stress helper's table, made first so that the query has something to read.
        let queue = try DatabaseQueue(path: path, key: try testKey())
        var migrator = DatabaseMigrator()
        migrator.registerMigration("stress v1") { db in
            try db.execute("CREATE TABLE entry (writer INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (writer, n))")
        }
        try migrator.migrate(queue)
        let counts = queue.observe(interval: .milliseconds(20)) { db in
            try db.scalar("SELECT count(*) FROM entry", as: Int.self) ?? 0
        }
        #expect(try await firstValue(counts, within: 5) { $0 == 0 } == 0)
        let writer = try ChildProcess([stressExecutable, "db", "write", path, testKeyHex(), "1", "25"])
        #expect(writer.wait() == .exited(0))
        #expect(try await firstValue(counts, within: 10) { $0 == 25 } == 25, "another process's commits are seen")
    }
}
