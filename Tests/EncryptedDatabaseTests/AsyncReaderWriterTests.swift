// GRDB's AppDatabase pattern: a Sendable type that keeps `any DatabaseWriter` and awaits its reads and writes,
// over a queue and a pool, from concurrent tasks (Swift 6 strict concurrency).
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

private struct Player: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var score: Int
}

/// What an app writes once and uses with any handle.
private final class AppDatabase: Sendable {
    private let writer: any DatabaseWriter

    init(_ writer: any DatabaseWriter) throws {
        self.writer = writer
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "player") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
                t.column("score", .integer).notNull()
            }
        }
        try migrator.migrate(writer)
    }

    var reader: any DatabaseReader { writer }

    func save(_ player: Player) async throws -> Player {
        try await writer.write { db in try player.inserted(db) }
    }

    func players() async throws -> [Player] {
        try await reader.read { db in try Player.order(Column("id")).fetchAll(db) }
    }

    func failingWrite() async throws {
        try await writer.write { db in
            try Player(id: nil, name: "rolled back", score: 0).insert(db)
            throw DatabaseError(.misuse, "given up")
        }
    }
}

private func playerCount(_ reader: any DatabaseReader) throws -> Int {
    try reader.read { db in try Player.fetchCount(db) }
}

@Suite struct AsyncReaderWriterTests {
    @Test(arguments: ["queue", "pool"])
    func anAppDatabaseKeepsAnyDatabaseWriterAndAwaitsItsWritesFromConcurrentTasks(handle: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("app.db")
        let writer: any DatabaseWriter = handle == "queue"
            ? try DatabaseQueue(path: path, key: try testKey()) : try DatabasePool(path: path, key: try testKey())
        let app = try AppDatabase(writer)
        try await withThrowingTaskGroup(of: Player.self) { group in
            for number in 1...20 {
                group.addTask { try await app.save(Player(id: nil, name: "player \(number)", score: number)) }
            }
            var ids: Set<Int64> = []
            for try await player in group { ids.insert(player.id ?? -1) }
            #expect(ids == Set(1...20))
        }
        let error = await expectError(DatabaseError.Code.misuse) { try await app.failingWrite() }
        #expect(error?.message == "given up")
        let players = try await app.players()
        #expect(players.count == 20 && !players.contains { $0.name == "rolled back" })
        #expect(players.map(\.score).sorted() == Array(1...20))
        // The synchronous forms are still there for code that is not async.
        #expect(try playerCount(writer) == 20)
    }
}
