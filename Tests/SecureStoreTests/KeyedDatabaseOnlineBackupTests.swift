// The online backup (issue 34 part 2): writes of the same handle, of a Task and of another connection go on while
// `backup(to:)` copies, and the copy is one consistent moment: it verifies, and its rows are a prefix of the writer's
// sequence that holds every row committed before the backup began. Real SQLCipher files and the harness keyring.
import EncryptedDatabase
import Foundation
import Glibc
import Keychain
import SecureStore
import TestSupport
import Testing

/// `item(seq)` with `count` rows 0..<count, fast (one statement).
private func obFill(_ database: KeyedDatabase, count: Int) throws {
    try database.write { db in
        try db.execute("CREATE TABLE item (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        try db.execute(
            "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i + 1 < ?) "
                + "INSERT INTO item (seq, body) SELECT i, printf('%0500d', i) FROM r", [count])
    }
}

/// The `seq` values of `item` in the backup at `url`, opened read-only with the database's current key.
private func obSequence(_ fixture: KDFixture, _ url: URL) throws -> [Int] {
    let key = try kdKey(hex: try #require(try fixture.storedHex()))
    var configuration = DatabaseConfiguration()
    configuration.readOnly = true
    let copy = try DatabaseQueue(path: url.path, key: key, configuration: configuration)
    defer { try? copy.close() }
    try copy.integrityCheck()
    return try copy.read { db in try db.fetch("SELECT seq FROM item ORDER BY seq") { try $0.int(at: 0) } }
}

/// A writer on its own thread: one row per transaction, in sequence, from `start`, through `write` until stopped.
/// `committed` is the number of rows committed so far (0..<committed are in the file).
private final class OBWriter: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    private var count: Int
    private var failure: String?
    private let done = DispatchSemaphore(value: 0)

    init(start: Int, write: @escaping @Sendable (Int) throws -> Void) {
        count = start
        Thread.detachNewThread { [self] in
            while !lock.withLock({ stopped }) {
                let next = lock.withLock { count }
                do {
                    try write(next)
                } catch {
                    lock.withLock { failure = "\(error)" }
                    break
                }
                lock.withLock { count = next + 1 }
            }
            done.signal()
        }
    }

    var committed: Int { lock.withLock { count } }

    /// Stops the writer and returns the rows it committed in all and why it stopped early, if it did.
    func stop() -> (Int, String?) {
        lock.withLock { stopped = true }
        done.wait()
        return lock.withLock { (count, failure) }
    }
}

/// A count one Task sets and the test's thread reads.
private final class OBCount: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0
    func set(_ value: Int) { lock.withLock { stored = value } }
    var value: Int { lock.withLock { stored } }
}

@Suite(.serialized) struct KeyedDatabaseOnlineBackupTests {
    static let rows = 20_000

    /// Checks the copy: it verified, opens, and holds exactly 0..<n with `atLeast` ≤ n ≤ `atMost`.
    private func expectPrefix(
        _ fixture: KDFixture, _ url: URL, atLeast: Int, atMost: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let sequence = try obSequence(fixture, url)
        #expect(sequence == Array(0..<sequence.count), "a prefix of the writer's sequence", sourceLocation: sourceLocation)
        #expect(sequence.count >= atLeast, "every row committed before the backup began", sourceLocation: sourceLocation)
        #expect(sequence.count <= atMost, sourceLocation: sourceLocation)
        let mode = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600, sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-wal"), sourceLocation: sourceLocation)
    }

    @Test func writesOfAnotherThreadGoOnDuringABackupWhichHoldsAPrefixOfThem() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        defer { try? database.close() }
        try obFill(database, count: Self.rows)
        let writer = OBWriter(start: Self.rows) { seq in
            try database.write { db in try db.execute("INSERT INTO item (seq, body) VALUES (?, 'w')", [seq]) }
        }
        while writer.committed < Self.rows + 5 { usleep(1_000) }
        let url = fixture.directory.appendingPathComponent("backups/during.db")
        let before = writer.committed
        var steps = 0
        var duringSteps: [Int] = []
        let report = try database.backup(to: url, pagesPerStep: 64) { progress in
            steps += 1
            duringSteps.append(writer.committed)
            #expect(progress.totalPageCount > 0 && progress.completedPageCount <= progress.totalPageCount)
            usleep(2_000)  // room for the writer between steps
        }
        let after = writer.committed
        let (total, failure) = writer.stop()
        #expect(failure == nil, "\(failure ?? "")")
        #expect(steps > 10, "copied in steps")
        #expect(duringSteps.last! > duringSteps.first!, "the writer committed while the backup copied")
        #expect(report.path == url.path && report.key == .current)
        try expectPrefix(fixture, url, atLeast: before, atMost: after)
        #expect(try database.read { db in try db.scalar("SELECT count(*) FROM item", as: Int.self) } == total)
    }

    @Test func aWriteInsideTheProgressOfTheSameHandleRunsAndIsNotInTheCopy() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        defer { try? database.close() }
        try obFill(database, count: 2_000)
        var next = 2_000
        let url = fixture.directory.appendingPathComponent("inside.db")
        _ = try database.backup(to: url, pagesPerStep: 16) { _ in
            try database.write { db in try db.execute("INSERT INTO item (seq, body) VALUES (?, 'p')", [next]) }
            next += 1
        }
        #expect(next > 2_010)
        try expectPrefix(fixture, url, atLeast: 2_000, atMost: 2_000)
    }

    @Test func writesOfATaskAndOfAnotherConnectionGoOnDuringABackup() async throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        defer { try? database.close() }
        try obFill(database, count: Self.rows)
        // Another connection of the file (as another process would have), writing from its own thread.
        let other = try DatabaseQueue(path: fixture.path, key: try kdKey(hex: try #require(try fixture.storedHex())))
        defer { try? other.close() }
        let writer = OBWriter(start: Self.rows) { seq in
            try other.write { db in try db.execute("INSERT INTO item (seq, body) VALUES (?, 'c')", [seq]) }
            usleep(500)  // two writers of one file take turns; back to back, one could starve the other
        }
        while writer.committed < Self.rows + 5 { usleep(1_000) }
        // A Task writing rows of its own (negative, so that the connection's sequence stays a prefix) through async.
        let taskCount = OBCount()
        let taskWrites = Task {
            var written = 0
            while !Task.isCancelled {
                let seq = -1 - written
                try await database.write { db in try db.execute("INSERT INTO item (seq, body) VALUES (?, 't')", [seq]) }
                written += 1
                taskCount.set(written)
            }
            return written
        }
        while taskCount.value < 2 { usleep(1_000) }
        let before = writer.committed
        let url = fixture.directory.appendingPathComponent("tasks-backup.db")
        var steps: [(Int, Int)] = []
        _ = try database.backup(to: url, pagesPerStep: 64) { _ in
            steps.append((writer.committed, taskCount.value))
            usleep(2_000)
        }
        let after = writer.committed
        taskWrites.cancel()
        _ = try await taskWrites.value
        let (_, failure) = writer.stop()
        #expect(failure == nil, "\(failure ?? "")")
        #expect(steps.last!.0 > steps.first!.0, "the other connection committed while the backup copied")
        #expect(steps.last!.1 > steps.first!.1, "the Task committed while the backup copied")
        let sequence = try obSequence(fixture, url).filter { $0 >= 0 }
        #expect(sequence == Array(0..<sequence.count))
        #expect(sequence.count >= before && sequence.count <= after)
        let negatives = try obSequence(fixture, url).filter { $0 < 0 }.sorted(by: >)
        #expect(negatives == Array((-negatives.count..<0).reversed()), "the Task's rows: a prefix too")
    }

    @Test func aBackupStoppedByItsProgressLeavesNoFileAndNoTemporary() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        defer { try? database.close() }
        try obFill(database, count: 2_000)
        struct Stop: Error {}
        let folder = fixture.directory.appendingPathComponent("stopped")
        let url = folder.appendingPathComponent("stopped.db")
        #expect(throws: Stop.self) {
            try database.backup(to: url, pagesPerStep: 8) { progress in
                if progress.completedPageCount > 40 { throw Stop() }
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == [])
        _ = try database.backup(to: url)
        try expectPrefix(fixture, url, atLeast: 2_000, atMost: 2_000)
        // A closed handle makes no backup, as before (it reads the file through a connection of its own).
        try database.close()
        let closed = folder.appendingPathComponent("closed.db")
        let error = try #require(throws: DatabaseError.self) { try database.backup(to: closed) }
        #expect(error.code == .misuse && error.message.contains("is closed"))
        #expect(!FileManager.default.fileExists(atPath: closed.path))
    }

    @Test func closeOrRotationInsideTheProgressIsMisuseAndARotationWaitsForTheCopy() throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        defer { try? database.close() }
        try obFill(database, count: 2_000)
        let url = fixture.directory.appendingPathComponent("misuse.db")
        var errors: [DatabaseError.Code] = []
        _ = try database.backup(to: url, pagesPerStep: 64) { progress in
            guard errors.isEmpty else { return }
            for call in [{ try database.close() }, { _ = try database.rotateKey() }] {
                do { try call() } catch let error as DatabaseError { errors.append(error.code) }
            }
        }
        #expect(errors == [.misuse, .misuse])
        // A rotation on another thread starts while the copy runs and ends after it: the copy opens under the key
        // it was made with (now retired).
        let started = DispatchSemaphore(value: 0)
        let rotated = DispatchSemaphore(value: 0)
        let url2 = fixture.directory.appendingPathComponent("rotated.db")
        var rotatedDuringCopy = false
        let report = try database.backup(to: url2, pagesPerStep: 8) { progress in
            if progress.completedPageCount <= 8 {
                Thread.detachNewThread {
                    started.signal()
                    _ = try? database.rotateKey()
                    rotated.signal()
                }
                started.wait()
                usleep(50_000)
            }
            if rotated.wait(timeout: .now()) == .success { rotatedDuringCopy = true }
        }
        rotated.wait()
        #expect(!rotatedDuringCopy, "the rotation waited for the copy")
        // Verified after the copy: with the current key, or the retired one if the rotation came first.
        #expect([.current, .retired].contains(report.key))
        #expect(try database.verifyBackup(at: url2).key == .retired)
    }
}
