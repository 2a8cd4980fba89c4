// Side files (-wal, -shm) that another database, a sync tool or a crash left: a failed open writes nothing,
// a side file that does not belong is refused and left in place, a legitimate one is recovered.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// Every file of `directory` with its bytes: equal snapshots mean nothing was created, removed or changed.
func snapshot(_ directory: String) throws -> [String: Data] {
    var files: [String: Data] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
        files[name] = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
    }
    return files
}

/// Recomputes the running checksums of a WAL file after its frames were edited, as SQLite computes them
/// (https://sqlite.org/fileformat2.html#walformat), so that SQLite accepts the edited frames as valid. The test
/// double of a damaged or forged log: a real crash cannot produce one that passes SQLite's checks.
func resealWAL(_ path: String) throws {
    var bytes = [UInt8](try #require(contents(path)))
    func word(_ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }
    func store(_ value: UInt32, _ offset: Int) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
    }
    let bigEndian = word(0) & 1 == 1
    func sum(_ offset: Int, _ count: Int, _ seed: (UInt32, UInt32)) -> (UInt32, UInt32) {
        var (s0, s1) = seed
        for index in stride(from: offset, to: offset + count, by: 8) {
            let a = bigEndian ? word(index) : UInt32(littleEndian: word(index).byteSwapped)
            let b = bigEndian ? word(index + 4) : UInt32(littleEndian: word(index + 4).byteSwapped)
            s0 = s0 &+ a &+ s1
            s1 = s1 &+ b &+ s0
        }
        return (s0, s1)
    }
    let pageSize = Int(word(8))
    var running = sum(0, 24, (0, 0))
    var offset = 32
    while offset + 24 + pageSize <= bytes.count {
        running = sum(offset, 8, running)
        running = sum(offset + 24, pageSize, running)
        store(running.0, offset + 16)
        store(running.1, offset + 20)
        offset += 24 + pageSize
    }
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

@Suite struct SideFileTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    /// The files a writer killed before its checkpoint leaves: the main file holding `titles`, and a `-wal`
    /// holding `pending`, one committed transaction per title. Made in a scratch folder and copied to
    /// `name` while the writer is still open.
    @discardableResult
    func crashImage(
        _ name: String, key: DatabaseKey, titles: [String], pending: [String], keepSharedMemory: Bool = false
    ) throws -> String {
        let scratch = directory.file("scratch-" + name)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        let queue = try makeItemDatabase(scratch + "/db", key: key, titles: titles)
        try queue.checkpoint()
        for title in pending {
            try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", [title]) }
        }
        let path = directory.file(name)
        try FileManager.default.copyItem(atPath: scratch + "/db", toPath: path)
        try FileManager.default.copyItem(atPath: scratch + "/db-wal", toPath: path + "-wal")
        if keepSharedMemory {
            try FileManager.default.copyItem(atPath: scratch + "/db-shm", toPath: path + "-shm")
        }
        try queue.close()
        try FileManager.default.removeItem(atPath: scratch)
        return path
    }

    /// Moves `name` and its side files into a folder of their own, so the folder's snapshot is theirs alone.
    func isolate(_ path: String) throws -> (path: String, folder: String) {
        let folder = directory.file("isolated-" + (path as NSString).lastPathComponent)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for suffix in ["", "-wal", "-shm", "-journal"] where fileExists(path + suffix) {
            try FileManager.default.moveItem(atPath: path + suffix, toPath: folder + "/db" + suffix)
        }
        return (folder + "/db", folder)
    }

    @Test func aLogLeftByAKilledWriterIsRecoveredWithEveryCommittedRow() throws {
        let path = try crashImage("a.db", key: try testKey(), titles: ["one"], pending: ["two", "three"])
        let queue = try DatabaseQueue(path: path, key: try testKey())
        #expect(try titles(queue) == ["one", "two", "three"])
        try queue.close()
        #expect(!fileExists(path + "-wal"), "checkpointed and removed on close")
        let reopened = try DatabaseQueue(path: path, key: try testKey())
        #expect(try titles(reopened) == ["one", "two", "three"])
    }

    @Test(arguments: [UInt8(0x43), UInt8(0x42)])
    func aLogFromAnotherDatabaseIsRefusedAndNothingChanges(otherKey: UInt8) throws {
        // Database A, cleanly closed; database B (another key, or the same key but another file) left a log.
        let a = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["a1", "a2"])
        try a.close()
        let b = try crashImage("b.db", key: try testKey(otherKey), titles: ["b1"], pending: ["b2", "b3"])
        try FileManager.default.copyItem(atPath: b + "-wal", toPath: directory.file("a.db-wal"))
        let (path, folder) = try isolate(directory.file("a.db"))
        let before = try snapshot(folder)

        let error = expectError(DatabaseError.Code.foreignSideFile) { try DatabaseQueue(path: path, key: try testKey()) }
        #expect(error?.message.contains("'\(path)-wal'") == true)
        #expect(error?.message.contains("nothing was changed") == true)
        #expect(try snapshot(folder) == before, "no byte of the database or its side files changed")
        // Also through a read-only open, and a second try: still refused, still nothing changed.
        var readOnly = DatabaseConfiguration()
        readOnly.readOnly = true
        expectError(DatabaseError.Code.foreignSideFile) { try DatabaseQueue(path: path, key: try testKey(), configuration: readOnly) }
        #expect(try snapshot(folder) == before)

        // Moved away, the database opens with every row it had; the foreign log is still there to inspect.
        try FileManager.default.moveItem(atPath: path + "-wal", toPath: folder + "/set-aside-wal")
        let queue = try DatabaseQueue(path: path, key: try testKey())
        #expect(try titles(queue) == ["a1", "a2"])
        #expect(contents(folder + "/set-aside-wal") == before["db-wal"])
    }

    @Test func aForgedFrameWithValidChecksumsIsRefused() throws {
        let image = try crashImage("a.db", key: try testKey(), titles: ["one"], pending: ["two"])
        let (path, folder) = try isolate(image)
        // Damage a byte inside the first frame's page, then make SQLite's own checksums valid again: only
        // the page's authentication can tell.
        var bytes = try #require(contents(path + "-wal"))
        bytes[32 + 24 + 100] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path + "-wal"))
        try resealWAL(path + "-wal")
        let before = try snapshot(folder)

        expectError(DatabaseError.Code.foreignSideFile) { try DatabaseQueue(path: path, key: try testKey()) }
        #expect(try snapshot(folder) == before)
    }

    @Test func aWrongKeyWritesNothingWhenALogIsPresent() throws {
        let image = try crashImage("a.db", key: try testKey(), titles: ["one"], pending: ["two"])
        let (path, folder) = try isolate(image)
        let before = try snapshot(folder)
        let error = expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabaseQueue(path: path, key: try testKey(0x01)) }
        #expect(error?.message.contains("nothing was changed") == true)
        #expect(try snapshot(folder) == before, "the log was neither applied nor removed")
        // The right key still recovers everything.
        #expect(try titles(DatabaseQueue(path: path, key: try testKey())) == ["one", "two"])
    }

    @Test func aTruncatedLogKeepsTheTransactionsBeforeTheTear() throws {
        let image = try crashImage("a.db", key: try testKey(), titles: ["one"], pending: ["two", "three"])
        let (path, folder) = try isolate(image)
        let wal = try #require(contents(path + "-wal"))
        try wal.prefix(wal.count - 100).write(to: URL(fileURLWithPath: path + "-wal"))
        let before = try snapshot(folder)

        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabaseQueue(path: path, key: try testKey(0x01)) }
        #expect(try snapshot(folder) == before)

        // The last transaction's commit frame is torn: SQLite never applies it; the one before it is kept.
        let queue = try DatabaseQueue(path: path, key: try testKey())
        #expect(try titles(queue) == ["one", "two"])
    }

    @Test func sharedMemoryFromAnotherDatabaseIsNeverTrusted() throws {
        let a = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["a1"])
        try a.close()
        let b = try crashImage(
            "b.db", key: try testKey(0x43), titles: ["b1"], pending: ["b2"], keepSharedMemory: true)
        try FileManager.default.copyItem(atPath: b + "-shm", toPath: directory.file("a.db-shm"))
        let (path, folder) = try isolate(directory.file("a.db"))
        let before = try snapshot(folder)

        expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabaseQueue(path: path, key: try testKey(0x43)) }
        #expect(try snapshot(folder) == before)
        // The right key opens it; the index is rebuilt from the database's own (absent) log.
        let queue = try DatabaseQueue(path: path, key: try testKey())
        #expect(try titles(queue) == ["a1"])
        try queue.close()
        #expect(contents(path) == before["db"], "a clean open and close leaves the main file as it was")
    }

    @Test func aHotJournalFromAnotherDatabaseIsRefused() throws {
        // SQLite replays a hot rollback journal before it even looks at the log, whatever the journal mode of
        // the file. One left by another program (plain sqlite3, stopped mid-transaction) must not be replayed.
        let a = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["a1", "a2"])
        try a.close()
        let plain = directory.file("plain.db")
        let made = try run("sqlite3", [plain], input: """
            PRAGMA journal_mode = DELETE;
            PRAGMA synchronous = OFF;
            CREATE TABLE t (x);
            INSERT INTO t VALUES (randomblob(3000)), (randomblob(3000)), (randomblob(3000));
            BEGIN;
            UPDATE t SET x = randomblob(3000);
            .shell cp \(plain)-journal \(directory.file("a.db-journal"))
            """)
        #expect(made.status == 0, "\(made.error)")
        let (path, folder) = try isolate(directory.file("a.db"))
        let journal = try #require(contents(path + "-journal"))
        #expect(journal.count > 4096)
        let before = try snapshot(folder)

        let error = expectError(DatabaseError.Code.foreignSideFile) { try DatabaseQueue(path: path, key: try testKey()) }
        #expect(error?.message.contains("'\(path)-journal'") == true)
        #expect(try snapshot(folder) == before, "the journal was neither replayed nor removed")
        try FileManager.default.moveItem(atPath: path + "-journal", toPath: folder + "/set-aside-journal")
        #expect(try titles(DatabaseQueue(path: path, key: try testKey())) == ["a1", "a2"])
    }

    @Test func aRollbackModeFileKilledMidTransactionIsRolledBack() throws {
        // A file the reference tool made in rollback-journal mode (as the fixtures are), copied with its hot
        // journal in the middle of a transaction, as a crash leaves it: the journal is its own, so SQLite's
        // rollback runs and the rows before the transaction are there.
        let source = directory.file("source.db")
        let image = directory.file("image.db")
        let made = try sqlcipher(source, key: .raw(hex: testKeyHex()), pageSize: 4096, """
            PRAGMA journal_mode = DELETE;
            PRAGMA synchronous = OFF;
            CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL);
            INSERT INTO item (title) VALUES ('before');
            BEGIN;
            UPDATE item SET title = 'during';
            INSERT INTO item (title) SELECT hex(randomblob(2000)) FROM item;
            .shell cp \(source) \(image); cp \(source)-journal \(image)-journal
            """)
        #expect(made.status == 0, "\(made.error)")
        #expect((contents(image + "-journal")?.count ?? 0) > 0)
        let queue = try DatabaseQueue(path: image, key: try testKey())
        #expect(try titles(queue) == ["before"])
        try queue.integrityCheck()
    }

    @Test func privateCheckCopiesLeftByAKilledProcessAreRemoved() throws {
        // A process killed during a check leaves `.NAME.check-PID-XXXXXX` (an encrypted copy) beside the
        // database; the next check removes those of processes that are gone, and leaves a live one's alone.
        let image = try crashImage("a.db", key: try testKey(), titles: ["one"], pending: ["two"])
        let (path, folder) = try isolate(image)
        let ended = try ChildProcess(["/bin/true"])
        ended.wait()
        let stale = folder + "/.db.check-\(ended.pid)-AbCdEf"
        let live = folder + "/.db.check-\(getpid() == 1 ? 2 : 1)-GhIjKl"  // pid 1 always runs
        for directory in [stale, live] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: directory + "/copy.db", contents: Data("x".utf8)))
        }
        #expect(try titles(DatabaseQueue(path: path, key: try testKey())) == ["one", "two"])
        #expect(!fileExists(stale))
        #expect(fileExists(live + "/copy.db"))
        let own = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".check-\(getpid())-") }
        #expect(own.isEmpty, "this process's own check copy is removed when the check ends")
    }

    @Test(.enabled(if: Prerequisites.isRoot, "a read-only bind mount needs root"))
    func onAReadOnlyFileSystemAFileOpensAndACommittedLogIsRefused() throws {
        // A clean database opens (read-only, as immutable: no -shm can be made there).
        let clean = try makeItemDatabase(directory.file("clean.db"), key: try testKey(), titles: ["one"])
        try clean.close()
        let (cleanPath, cleanFolder) = try isolate(directory.file("clean.db"))
        // A crash image: its -wal holds a committed transaction that an immutable open would not see.
        let image = try crashImage("a.db", key: try testKey(), titles: ["one"], pending: ["two"])
        let (path, folder) = try isolate(image)
        defer { for mountPoint in [cleanFolder, folder] { _ = try? TestSupport.run(["/bin/umount", mountPoint]) } }
        for mountPoint in [cleanFolder, folder] {
            try #require(
                try TestSupport.run(["/bin/mount", "--bind", mountPoint, mountPoint]).status == 0
                    && TestSupport.run(["/bin/mount", "-o", "remount,ro,bind", mountPoint]).status == 0,
                "this system refuses a read-only bind mount")
        }
        let before = try snapshot(folder)

        #expect(try titles(DatabaseQueue(path: cleanPath, key: try testKey())) == ["one"])
        let error = expectError(DatabaseError.Code.readOnly) { try DatabaseQueue(path: path, key: try testKey()) }
        #expect(error?.message.contains("read-only file system and its -wal holds") == true)
        #expect(try snapshot(folder) == before)
    }

    @Test func aLiveLogOfAnotherConnectionIsUsedAsIs() throws {
        // Two handles on one file in this process: the second must see the first's committed rows, which are
        // still in the log (no preflight copy is needed: the log is live).
        let path = directory.file("a.db")
        let first = try makeItemDatabase(path, key: try testKey(), titles: ["one", "two"])
        #expect(fileExists(path + "-wal"))
        let second = try DatabaseQueue(path: path, key: try testKey())
        #expect(try titles(second) == ["one", "two"])
        try first.write { db in try db.execute("INSERT INTO item (title) VALUES ('three')") }
        #expect(try titles(second) == ["one", "two", "three"])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.contains(".check-") }
        #expect(leftovers.isEmpty, "no private check copies are left behind")
    }
}

@Suite struct LibraryOutputTests {
    /// SQLCipher 4 logs failed page authentications to stderr by default; a library must not write into its
    /// host's stderr, so the failed opens here (wrong key, other format) print nothing at all.
    @Test func aFailedOpenWritesNothingToStandardError() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        try makeItemDatabase(path, key: try testKey(), titles: ["x"]).close()
        try FileManager.default.copyItem(
            atPath: fixturesDirectory().appendingPathComponent("sqlcipher4-default-rawkey.db").path,
            toPath: directory.file("other.db"))
        let captured = directory.file("stderr")
        let file = open(captured, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        let saved = dup(2)
        fflush(nil)
        dup2(file, 2)
        _ = try? DatabaseQueue(path: path, key: try testKey(9))
        _ = try? DatabaseQueue(path: directory.file("other.db"), key: try testKey(9))
        fflush(nil)
        dup2(saved, 2)
        close(saved)
        close(file)
        #expect(String(decoding: try #require(contents(captured)), as: UTF8.self) == "")
    }
}

@Suite struct NotARegularDatabaseFileTests {
    /// A FIFO in place of the database is refused at once (opening it for reading would block forever).
    @Test func aFIFOInPlaceOfTheDatabaseIsRefusedAtOnce() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("fifo.db")
        #expect(mkfifo(path, 0o600) == 0)
        let error = expectError(DatabaseError.Code.unrecognizedFormat) { try DatabaseQueue(path: path, key: try testKey()) }
        #expect(error?.message == "'\(path)' is not a regular file")
    }
}
