// Opening: keys, damaged and foreign files, file modes, export and import, several processes.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct OpeningTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    /// Opening `path` with `key` fails with `code`, and the file is byte-identical afterwards.
    func expectRefused(
        _ path: String, key: DatabaseKey, _ code: DatabaseError.Code, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> DatabaseError? {
        let before = contents(path)
        let error = #expect(throws: DatabaseError.self, sourceLocation: sourceLocation) {
            _ = try DatabaseQueue(path: path, key: key)
        }
        #expect(error?.code == code, sourceLocation: sourceLocation)
        #expect(contents(path) == before, "the refused file was modified", sourceLocation: sourceLocation)
        #expect(!fileExists(path + "-wal"), sourceLocation: sourceLocation)
        return error
    }

    func closedDatabase(_ name: String) throws -> String {
        let path = directory.file(name)
        try makeItemDatabase(path, key: try testKey(), titles: ["a", "b", "c"]).close()
        return path
    }

    @Test func theRightKeyOpensAndAWrongKeyFailsAtOpen() throws {
        let path = try closedDatabase("k.db")
        #expect(try titles(DatabaseQueue(path: path, key: try testKey())) == ["a", "b", "c"])
        let error = try expectRefused(path, key: try testKey(0x43), .wrongKeyOrNotADatabase)
        #expect(error?.extendedResultCode == 26)
        #expect(error?.message.contains("key does not open") == true)
        #expect(error?.description.contains(testKeyHex(0x43)) == false)
        #expect(error?.description.contains(testKeyHex(0x42)) == false)
    }

    @Test func catchMatchesACode() throws {
        let path = try closedDatabase("k.db")
        var matched = false
        do {
            _ = try DatabaseQueue(path: path, key: try testKey(0x01))
        } catch DatabaseError.Code.wrongKeyOrNotADatabase {
            matched = true
        } catch {
            Issue.record("unexpected error \(error)")
        }
        #expect(matched)
    }

    @Test func aTruncatedFileIsCorrupt() throws {
        let path = try closedDatabase("t.db")
        let data = try #require(contents(path))
        try data.prefix(data.count - 1000).write(to: URL(fileURLWithPath: path))
        let error = try expectRefused(path, key: try testKey(), .corrupt)
        #expect(error?.message.contains("truncated") == true)
    }

    @Test func garbageIsNotADatabase() throws {
        let path = directory.file("garbage.db")
        try Data((0..<5000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: path))
        let error = try expectRefused(path, key: try testKey(), .unrecognizedFormat)
        #expect(error?.message.contains("not a SecureStore database") == true)
    }

    @Test func anEmptyFileIsRefused() throws {
        let path = directory.file("empty.db")
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        let error = try expectRefused(path, key: try testKey(), .emptyFile)
        #expect(error?.message.contains("0 bytes") == true)
    }

    @Test func aPlaintextDatabaseIsRefusedAsNotEncrypted() throws {
        let path = directory.file("plain.db")
        let made = try run("sqlite3", [path, "CREATE TABLE t(x); INSERT INTO t VALUES ('visible');"])
        #expect(made.status == 0)
        let error = try expectRefused(path, key: try testKey(), .notEncrypted)
        #expect(error?.message.contains("import") == true)
    }

    @Test func readOnlyOpeningOfAMissingFileIsNotFoundAndCreatesNothing() throws {
        var configuration = DatabaseConfiguration()
        configuration.readOnly = true
        let path = directory.file("missing/none.db")
        expectError(DatabaseError.Code.notFound) {
            _ = try DatabaseQueue(path: path, key: try testKey(), configuration: configuration)
        }
        #expect(!fileExists(directory.file("missing")))
    }

    @Test func readOnlyOpeningReadsButDoesNotWrite() throws {
        let path = try closedDatabase("ro.db")
        var configuration = DatabaseConfiguration()
        configuration.readOnly = true
        let queue = try DatabaseQueue(path: path, key: try testKey(), configuration: configuration)
        #expect(try titles(queue) == ["a", "b", "c"])
        expectError(DatabaseError.Code.readOnly) {
            try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", ["d"]) }
        }
    }

    @Test func aPassphraseOpensTheSlowWay() throws {
        let path = directory.file("p.db")
        let queue = try DatabaseQueue(path: path, passphrase: "correct horse battery staple")
        try queue.write { db in try db.execute("CREATE TABLE t (x)") }
        try queue.close()
        #expect(try DatabaseQueue(path: path, passphrase: "correct horse battery staple")
            .read { db in try db.tableExists("t") })
        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) {
            _ = try DatabaseQueue(path: path, passphrase: "wrong horse")
        }
        // A key is not a passphrase.
        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { _ = try DatabaseQueue(path: path, key: try testKey()) }
    }

    @Test func keysAreThirtyTwoBytesAndCompareByValue() throws {
        expectError(DatabaseError.Code.misuse) { try DatabaseKey(bytes: [UInt8](repeating: 1, count: 31)) }
        #expect(try testKey(1) == testKey(1))
        #expect(try testKey(1) != testKey(2))
        #expect(DatabaseKey.random() != DatabaseKey.random())
        let key = try testKey(7)
        #expect(key.withUnsafeBytes { Array($0) } == [UInt8](repeating: 7, count: 32))
    }

    @Test func filesAre0600InA0700DirectoryEvenUnderUmaskZero() throws {
        let old = umask(0)
        defer { umask(old) }
        let path = directory.file("new/deeper/modes.db")
        let queue = try makeItemDatabase(path, key: try testKey(), titles: ["x"])
        #expect(try fileMode(directory.file("new")) == 0o700)
        #expect(try fileMode(directory.file("new/deeper")) == 0o700)
        #expect(try fileMode(path) == 0o600)
        #expect(try fileMode(path + "-wal") == 0o600)
        #expect(try fileMode(path + "-shm") == 0o600)
        try queue.export(to: directory.file("new/exported.db"), key: try testKey(9))
        #expect(try fileMode(directory.file("new/exported.db")) == 0o600)
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.file("new/deeper")).sorted()
            == ["modes.db", "modes.db-shm", "modes.db-wal"])
    }

    @Test func exportWritesANewFileUnderANewKeyWithTheHeaderFields() throws {
        let path = directory.file("old.db")
        let queue = try makeItemDatabase(path, key: try testKey(), titles: ["one", "two"])
        try queue.write { db in
            try db.setUserVersion(42)
            try db.setApplicationID(0x5353_5452)
        }
        let target = directory.file("rotated.db")
        try queue.export(to: target, key: try testKey(0x77))
        #expect(try titles(queue) == ["one", "two"])  // the source is unchanged and still open

        let exported = try DatabaseQueue(path: target, key: try testKey(0x77))
        #expect(try titles(exported) == ["one", "two"])
        #expect(try exported.read { db in try db.userVersion() } == 42)
        #expect(try exported.read { db in try db.applicationID() } == 0x5353_5452)
        try exported.integrityCheck()
        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { _ = try DatabaseQueue(path: target, key: try testKey()) }
        // Never over an existing file.
        let before = contents(target)
        expectError(DatabaseError.Code.misuse) { try queue.export(to: target, key: try testKey(0x78)) }
        #expect(contents(target) == before)
    }

    @Test func importEncryptsAPlaintextDatabaseAndKeepsItsRowsAndUserVersion() throws {
        let source = directory.file("plain.db")
        let made = try run(
            "sqlite3",
            [source, "CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL); "
                + "CREATE INDEX item_title ON item(title); "
                + "INSERT INTO item (title) VALUES ('alpha'), ('beta'); PRAGMA user_version = 7;"])
        #expect(made.status == 0)
        let before = try #require(contents(source))
        let destination = directory.file("imported.db")
        try DatabaseQueue.importPlaintext(from: source, to: destination, key: try testKey())
        #expect(contents(source) == before)

        let queue = try DatabaseQueue(path: destination, key: try testKey())
        #expect(try titles(queue) == ["alpha", "beta"])
        #expect(try queue.read { db in try db.userVersion() } == 7)
        #expect(try queue.read { db in
            try db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'item_title'", as: Int.self)
        } == 1)
        try queue.close()
        #expect(!containsBytes(try #require(contents(destination)), "alpha"))
        // Importing something that is not plaintext SQLite is refused.
        expectError(DatabaseError.Code.unrecognizedFormat) {
            try DatabaseQueue.importPlaintext(from: destination, to: directory.file("again.db"), key: try testKey())
        }
    }

    @Test func twoProcessesWritingAtOnceLoseNothingAndNeverSeeBusy() throws {
        let path = directory.file("shared.db")
        let helper = stressExecutable
        let count = 150
        let writers = try (1...3).map { writer -> ChildProcess in
            try ChildProcess([helper, "db", "write", path, testKeyHex(), String(writer), String(count)])
        }
        for process in writers {
            #expect(process.wait() == .exited(0))
        }
        let queue = try DatabaseQueue(path: path, key: try testKey())
        let rows = try queue.read { db in
            try db.fetch("SELECT writer, count(*), min(n), max(n) FROM entry GROUP BY writer ORDER BY writer") {
                [try $0.int(at: 0), try $0.int(at: 1), try $0.int(at: 2), try $0.int(at: 3)]
            }
        }
        #expect(rows == [[1, count, 0, count - 1], [2, count, 0, count - 1], [3, count, 0, count - 1]])
        try queue.integrityCheck()
    }
}
