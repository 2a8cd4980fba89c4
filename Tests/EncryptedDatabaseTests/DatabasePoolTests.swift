// The pool: reads beside an open write see the last commit, each read keeps its snapshot, reads run from many
// threads at once, nested access is an error, and observation works through the writer's hooks.
import Dispatch
import EncryptedDatabase
import Foundation
import TestSupport
import Synchronization
import Testing

private func makePool(_ path: String, readerCount: Int = 4, titles: [String]) throws -> DatabasePool {
    let pool = try DatabasePool(path: path, key: try testKey(), readerCount: readerCount)
    try pool.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        for title in titles { try db.execute("INSERT INTO item (title) VALUES (?)", [title]) }
    }
    return pool
}

private func count(_ db: Database) throws -> Int { try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0 }

@Suite struct DatabasePoolTests {
    @Test func aReadDuringAnOpenWriteSeesTheLastCommitAndDoesNotWaitForIt() throws {
        let directory = try TemporaryDirectory()
        let pool = try makePool(directory.file("a.db"), titles: ["one"])
        let inside = DispatchSemaphore(value: 0)
        let finish = DispatchSemaphore(value: 0)
        let writeDone = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? pool.write { db in
                try db.execute("INSERT INTO item (title) VALUES ('two')")
                inside.signal()
                finish.wait()  // the write stays open until the read below has returned
            }
            writeDone.signal()
        }
        inside.wait()
        // On a DatabaseQueue this read would wait for the write (and here, forever).
        #expect(try pool.read(count) == 1, "the uncommitted row is not seen")
        finish.signal()
        writeDone.wait()
        #expect(try pool.read(count) == 2, "a read after the commit sees it")
    }

    @Test func aReadKeepsItsSnapshotWhileAnotherCommitHappens() throws {
        let directory = try TemporaryDirectory()
        let pool = try makePool(directory.file("a.db"), titles: ["one"])
        let (before, after) = try pool.read { db in
            let before = try count(db)
            let committed = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                try? pool.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
                committed.signal()
            }
            committed.wait()
            return (before, try count(db))
        }
        #expect(before == 1 && after == 1, "one snapshot for the whole read")
        #expect(try pool.read(count) == 2)
    }

    @Test func readsFromManyThreadsAtOnceAllAnswer() throws {
        let directory = try TemporaryDirectory()
        let titles = (0..<100).map { "title \($0)" }
        let pool = try makePool(directory.file("a.db"), readerCount: 2, titles: titles)
        let results = Results()
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            results.add(try? pool.read { db in try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) } })
        }
        #expect(results.all.count == 16)
        #expect(results.all.allSatisfy { $0 == titles }, "16 reads through 2 readers, each complete")
    }

    @Test func asyncReadsAndWritesFromManyTasks() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePool(directory.file("a.db"), titles: [])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<20 {
                group.addTask { try await pool.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["t\(n)"]) } }
                group.addTask { _ = try await pool.read(count) }
            }
            try await group.waitForAll()
        }
        #expect(try await pool.read(count) == 20)
    }

    @Test func aNestedAccessIsAnErrorAndAWriteCannotHappenInARead() throws {
        let directory = try TemporaryDirectory()
        let pool = try makePool(directory.file("a.db"), titles: ["one"])
        expectError(DatabaseError.Code.misuse) { try pool.write { _ in try pool.read(count) } }
        expectError(DatabaseError.Code.misuse) { try pool.read { _ in try pool.read(count) } }
        let error = #expect(throws: DatabaseError.self) {
            try pool.read { db in try db.execute("INSERT INTO item (title) VALUES ('no')") }
        }
        #expect(error?.code == .readOnly)
        #expect(try pool.read(count) == 1)
    }

    @Test func aMigratorAndTheProtocolWorkThroughAPool() throws {
        let directory = try TemporaryDirectory()
        let pool = try DatabasePool(path: directory.file("a.db"), key: try testKey())
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in try db.execute("CREATE TABLE note (text TEXT)") }
        try migrator.migrate(pool)
        let writer: any DatabaseWriter = pool
        try writer.write { db in try db.execute("INSERT INTO note VALUES ('hello')") }
        #expect(try writer.read { db in try db.scalar("SELECT text FROM note", as: String.self) } == "hello")
    }

    @Test func aClosedPoolSaysSoAndTheFileOpensAgain() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let pool = try makePool(path, titles: ["one", "two"])
        try pool.close()
        try pool.close()
        let error = expectError(DatabaseError.Code.misuse) { try pool.read(count) }
        #expect(error?.message.contains("is closed") == true)
        expectError(DatabaseError.Code.misuse) { try pool.write { _ in } }
        #expect(try titles(try DatabaseQueue(path: path, key: try testKey())) == ["one", "two"])
    }

    @Test func aWrongKeyFailsAtOpen() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        try makePool(path, titles: ["one"]).close()
        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabasePool(path: path, key: try testKey(0x43)) }
    }

    @Test func thePoolsOwnWriteWakesAnObservationAndAnotherConnectionsIsPolled() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let pool = try makePool(path, titles: ["one"])
        let counts = pool.observe(tables: ["item"], interval: .seconds(3600)) { db in try count(db) }
        var iterator = counts.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
        try await pool.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try await iterator.next() == 2, "through the writer's hooks (the poll is hourly)")

        let polled = pool.observe(tables: ["item"], interval: .milliseconds(20)) { db in try count(db) }
        let other = try DatabaseQueue(path: path, key: try testKey())
        let seen = Task { try await observedValues(polled) { $0.last == 3 } }
        try await other.write { db in try db.execute("INSERT INTO item (title) VALUES ('three')") }
        #expect(try await seen.value.last == 3, "another connection's commit, through the writer's data_version")
    }
}

private final class Results: Sendable {
    private let values = Mutex<[[String]?]>([])
    func add(_ value: [String]?) { values.withLock { $0.append(value) } }
    var all: [[String]?] { values.withLock { $0 } }
}

/// A queue leaves `query_only` on after a read for the reads that follow: writes, checkpoints and the close
/// after a read behave as ever.
@Suite struct QueueReadModeTests {
    @Test func aWriteAfterReadsWorksAReadStillCannotWriteAndCloseRemovesTheWal() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let queue = try makeItemDatabase(path, key: try testKey(), titles: ["one"])
        for _ in 0..<3 { #expect(try queue.read(count) == 1) }
        try queue.write { db in try db.execute("INSERT INTO item (title) VALUES ('two')") }
        #expect(try queue.read(count) == 2)
        expectError(DatabaseError.Code.readOnly) { try queue.read { db in try db.execute("DELETE FROM item") } }
        try queue.writeWithoutTransaction { db in try db.execute("INSERT INTO item (title) VALUES ('three')") }
        #expect(try queue.read(count) == 3)
        try queue.close()
        #expect(!fileExists(path + "-wal"), "the last close after a read checkpoints and removes the -wal")
        #expect(try titles(try DatabaseQueue(path: path, key: try testKey())) == ["one", "two", "three"])
    }
}
