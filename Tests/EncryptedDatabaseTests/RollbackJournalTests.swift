// DatabaseConfiguration.journalMode = .rollback (SecureStore's attachments file): the file is made with page 1 and
// stays in rollback-journal mode, an open writes nothing, and a hot journal left by a crash is rolled back at the
// next open instead of being refused as foreign.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct RollbackJournalTests {
    private func rollback(cacheKiB: Int = 2048) -> DatabaseConfiguration {
        var configuration = DatabaseConfiguration()
        configuration.journalMode = .rollback
        configuration.cacheSizeKiB = cacheKiB
        return configuration
    }

    @Test func aRollbackFileIsMadeWholeAndAnOpenWritesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("files.db")
        let queue = try DatabaseQueue(path: path, key: try testKey(), configuration: rollback())
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0) >= 4096, "page 1 is there")
        #expect(try queue.read { db in try db.fetch("PRAGMA journal_mode") { try $0.string(at: 0) } } == ["delete"])
        try queue.write { db in try db.execute("CREATE TABLE chunk (data BLOB)") }
        try queue.close()
        let bytes = try #require(contents(path))

        for _ in 0..<2 {
            let again = try DatabaseQueue(path: path, key: try testKey(), configuration: rollback())
            #expect(try again.read { db in try db.scalar("SELECT count(*) FROM chunk", as: Int.self) } == 0)
            try again.close()
        }
        #expect(contents(path) == bytes, "opening and reading wrote nothing")
        #expect(!fileExists(path + "-wal") && !fileExists(path + "-journal"))
    }

    /// A crash in the middle of a transaction that had already overwritten pages of the file (a small page cache
    /// spills them): the file and its hot journal are copied as they are at that moment, then opened.
    @Test func aHotJournalLeftByACrashIsRolledBackAtTheNextOpen() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("files.db")
        let queue = try DatabaseQueue(path: path, key: try testKey(), configuration: rollback(cacheKiB: 64))
        try queue.write { db in
            try db.execute("CREATE TABLE chunk (n INTEGER PRIMARY KEY, data BLOB NOT NULL)")
            for n in 0..<200 { try db.execute("INSERT INTO chunk (n, data) VALUES (?, zeroblob(4000))", [n]) }
        }
        let crashed = directory.file("crashed.db")
        struct Abandon: Error {}
        #expect(throws: Abandon.self) {
            try queue.write { db in
                try db.execute("UPDATE chunk SET data = randomblob(4000)")
                for n in 200..<1200 { try db.execute("INSERT INTO chunk (n, data) VALUES (?, randomblob(4000))", [n]) }
                // What a kill -9 leaves now: the file with some new pages, and the journal holding the old ones.
                #expect((try FileManager.default.attributesOfItem(atPath: path + "-journal")[.size] as? Int ?? 0) > 0)
                try FileManager.default.copyItem(atPath: path, toPath: crashed)
                try FileManager.default.copyItem(atPath: path + "-journal", toPath: crashed + "-journal")
                throw Abandon()
            }
        }
        try queue.close()
        #expect(contents(crashed) != contents(path), "the crashed copy holds pages of the unfinished transaction")

        let reopened = try DatabaseQueue(path: crashed, key: try testKey(), configuration: rollback())
        try reopened.integrityCheck()
        let changed = try reopened.read { db in
            try db.scalar("SELECT count(*) FROM chunk WHERE data != zeroblob(4000)", as: Int.self)
        }
        #expect(changed == 0, "the unfinished transaction was rolled back")
        #expect(try reopened.read { db in try db.scalar("SELECT count(*) FROM chunk", as: Int.self) } == 200)
        try reopened.close()
        #expect(!fileExists(crashed + "-journal"))
    }
}
