// Giving freed pages back: auto_vacuum = INCREMENTAL on new files, releaseFreePages().
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct FreePagesTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func fill(_ queue: DatabaseQueue, rows: Int) throws {
        try queue.write { db in
            try db.execute("CREATE TABLE IF NOT EXISTS blob (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
            for _ in 0..<rows { try db.execute("INSERT INTO blob (data) VALUES (randomblob(3000))") }
        }
    }

    private func fileBytes(_ queue: DatabaseQueue, _ path: String) throws -> Int {
        try queue.checkpoint()
        return (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
    }

    /// A new file can shrink: after a delete frees 2 000 pages, releasing them gives the space back, and the file,
    /// smaller, still holds what was kept — for this library and for the reference tool.
    @Test func aNewFileGivesBackThePagesADeleteFreed() throws {
        let path = directory.file("shrinks.db")
        let queue = try DatabaseQueue(path: path, key: try testKey())
        try fill(queue, rows: 2_100)
        #expect(try queue.read { try $0.scalar("PRAGMA auto_vacuum", as: Int.self) } == 2, "INCREMENTAL")
        try queue.write { db in try db.execute("DELETE FROM blob WHERE id > 100") }
        let before = try fileBytes(queue, path)
        let free = try queue.read { try $0.scalar("PRAGMA freelist_count", as: Int.self) } ?? 0
        #expect(free >= 1_500, "the delete freed pages: \(free)")

        // Fewer free pages than it keeps: nothing happens.
        #expect(try queue.writeWithoutTransaction { try $0.releaseFreePages(keeping: free) } == 0)
        let released = try queue.writeWithoutTransaction { try $0.releaseFreePages() }
        #expect(released == free)
        let after = try fileBytes(queue, path)
        #expect(after <= before - free * 4096, "\(before) → \(after) bytes")
        #expect(try queue.read { try $0.scalar("SELECT count(*) FROM blob", as: Int.self) } == 100)
        try queue.read { try $0.integrityCheck() }
        try queue.close()

        let reference = try sqlcipher(
            path, key: .raw(hex: testKeyHex()), pageSize: 4096, "PRAGMA integrity_check; SELECT count(*) FROM blob;\n")
        #expect(reference.output.split(separator: "\n").map(String.init).suffix(2) == ["ok", "100"])
    }

    /// An export (what a key rotation, a restore and `importPlaintext` write through) keeps the mode of the file it
    /// copies: SQLCipher's `sqlcipher_export` copies no `auto_vacuum`, so a rotated file used to stop giving pages back.
    @Test func anExportKeepsTheFilesMode() throws {
        for incremental in [true, false] {
            let path = directory.file("source-\(incremental).db"), copy = directory.file("copy-\(incremental).db")
            var configuration = DatabaseConfiguration()
            configuration.incrementalVacuum = incremental
            let source = try DatabaseQueue(path: path, key: try testKey(), configuration: configuration)
            try fill(source, rows: 300)
            try source.export(to: copy, key: try testKey(9))
            try source.close()
            let exported = try DatabaseQueue(path: copy, key: try testKey(9))
            #expect(try exported.read { try $0.scalar("PRAGMA auto_vacuum", as: Int.self) } == (incremental ? 2 : 0))
            #expect(try exported.read { try $0.scalar("SELECT count(*) FROM blob", as: Int.self) } == 300)
            try exported.write { db in try db.execute("DELETE FROM blob") }
            let released = try exported.writeWithoutTransaction { try $0.releaseFreePages(keeping: 0) }
            #expect(incremental ? released > 200 : released == 0, "\(released)")
            try exported.read { try $0.integrityCheck() }
        }
    }

    /// A file made without it keeps its mode: opening it with the default does not change it, and releasing does
    /// nothing (the free pages stay for later growth).
    @Test func aFileMadeWithoutItKeepsItsMode() throws {
        let path = directory.file("kept.db")
        var off = DatabaseConfiguration()
        off.incrementalVacuum = false
        let made = try DatabaseQueue(path: path, key: try testKey(), configuration: off)
        try fill(made, rows: 600)
        try made.close()

        let queue = try DatabaseQueue(path: path, key: try testKey())
        #expect(try queue.read { try $0.scalar("PRAGMA auto_vacuum", as: Int.self) } == 0)
        try queue.write { db in try db.execute("DELETE FROM blob") }
        let before = try fileBytes(queue, path)
        #expect(try queue.writeWithoutTransaction { try $0.releaseFreePages(keeping: 0) } == 0)
        #expect(try fileBytes(queue, path) == before)
        #expect(try queue.read { try $0.scalar("PRAGMA auto_vacuum", as: Int.self) } == 0)
    }
}
