// securestore-bench backup DIRECTORY [--scale N] [--runs N]: KeyedDatabase.backup(to:) of 100 000 notes (~21 MiB) while
// one thread inserts a note per transaction without pause, against GRDB 7.10's DatabasePool.backup(to:) on the same
// notes in plain SQLite (securestore-bench-grdb backup, a process of its own), in interleaved pairs (the first side
// alternates), and the same writer on the project's database without a backup for as long as a backup takes (issue 34).
// Prints, each a median of per-pair ratios:
//
//   BACKUP backup-time pairs=N project=<ms> grdb=<ms> ratio=<project/grdb> …   the backup's own time (copy + verify
//                                                                              for the project; copy for GRDB)
//   BACKUP backup-longest-write pairs=N alone=<ms> during=<ms> ratio=<during/alone> grdb-during=<ms> …
//                                                                              the longest single write
// Needs a Secret Service (make bench runs it in the harness). Docs/performance.md keeps the figures.
import BenchSupport
import Dispatch
import EncryptedDatabase
import Foundation
import SecureStore

struct BackupBench {
    let directory: String
    let options: BenchOptions

    func run() throws {
        guard options.wants("backup-time") || options.wants("backup-longest-write") else { return }
        let grdb = URL(filePath: executablePath()).deletingLastPathComponent().appending(path: "securestore-bench-grdb").path
        guard FileManager.default.isExecutableFile(atPath: grdb) else {
            fail("\(grdb) is missing: swift build --package-path Tests/Benchmarks -c release --product securestore-bench-grdb")
        }
        let fixture = KeyedNotes(directory: directory, options: options, app: "securestore-bench-backup")
        try fixture.create()
        defer { fixture.delete() }
        let database = try fixture.open()
        defer { try? database.close() }
        let notes = fixture.noteCount
        _ = runChild([grdb, "backup-setup", directory, String(notes)])
        // Warm-up, unmeasured: its length is the window of the writes without a backup.
        var window = try backupWhileWriting(database).backup
        _ = runChild([grdb, "backup", directory, String(notes)])

        let pairs = max(2, options.runs * 2)
        var project: [Double] = [], peer: [Double] = [], timeRatios: [Double] = []
        var alone: [Double] = [], during: [Double] = [], peerDuring: [Double] = [], writeRatios: [Double] = []
        for pair in 0..<pairs {
            var sample: (backup: Double, longest: Double) = (0, 0)
            var longestAlone = 0.0
            var grdbRun: ChildRun?
            for side in pair % 2 == 0 ? ["project", "grdb"] : ["grdb", "project"] {
                if side == "grdb" {
                    grdbRun = runChild([grdb, "backup", directory, String(notes)])
                } else if pair % 4 < 2 {
                    sample = try backupWhileWriting(database)
                    longestAlone = try writesAlone(database, for: window)
                } else {
                    longestAlone = try writesAlone(database, for: window)
                    sample = try backupWhileWriting(database)
                }
            }
            window = sample.backup
            guard let grdbBackup = grdbRun?.value("ms"), let grdbLongest = grdbRun?.value("longest") else {
                fail("securestore-bench-grdb backup printed \(grdbRun?.output ?? "nothing")")
            }
            project.append(sample.backup)
            peer.append(grdbBackup)
            timeRatios.append(sample.backup / grdbBackup)
            alone.append(longestAlone)
            during.append(sample.longest)
            peerDuring.append(grdbLongest)
            writeRatios.append(sample.longest / longestAlone)
        }
        let f = { (value: Double) in String(format: "%.2f", value) }
        let spread = { (ratios: [Double]) in
            "ratio-min=\(String(format: "%.3f", ratios.min()!)) ratio-max=\(String(format: "%.3f", ratios.max()!))"
        }
        print(
            "BACKUP backup-time pairs=\(pairs) notes=\(notes) project=\(f(median(project)))ms grdb=\(f(median(peer)))ms "
                + "ratio=\(String(format: "%.3f", median(timeRatios))) \(spread(timeRatios))")
        print(
            "BACKUP backup-longest-write pairs=\(pairs) alone=\(f(median(alone)))ms during=\(f(median(during)))ms "
                + "ratio=\(String(format: "%.3f", median(writeRatios))) \(spread(writeRatios)) "
                + "grdb-during=\(f(median(peerDuring)))ms")
        fflush(nil)
    }

    /// A backup of `database` while a thread inserts a note per transaction: the backup's milliseconds and the longest
    /// write's.
    private func backupWhileWriting(_ database: KeyedDatabase) throws -> (backup: Double, longest: Double) {
        let destination = directory + "/backup.db"
        removeDatabaseFiles(destination)
        defer { removeDatabaseFiles(destination) }
        let writer = NoteWriter(database)
        writer.waitForFirstWrite()
        let elapsed = try milliseconds { _ = try database.backup(to: URL(fileURLWithPath: destination)) }
        let (longest, _) = writer.stop()
        return (elapsed, longest)
    }

    /// The same writer for `window` milliseconds without a backup: the longest write's milliseconds.
    private func writesAlone(_ database: KeyedDatabase, for window: Double) throws -> Double {
        let writer = NoteWriter(database)
        writer.waitForFirstWrite()
        usleep(UInt32(window * 1_000))
        return writer.stop().longest
    }

    private func removeDatabaseFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}

/// A thread inserting one note per transaction, back to back, until stopped; it keeps the longest write.
private final class NoteWriter: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    private var longest = 0.0
    private var writes = 0
    private let done = DispatchSemaphore(value: 0)

    init(_ database: KeyedDatabase) {
        Thread.detachNewThread { [self] in
            while !lock.withLock({ stopped }) {
                do {
                    let elapsed = try milliseconds {
                        try database.write { db in
                            try db.execute("INSERT INTO note (title, body) VALUES (?, ?)", ["written", "during the backup"])
                        }
                    }
                    lock.withLock {
                        longest = max(longest, elapsed)
                        writes += 1
                    }
                } catch {
                    fail("backup bench: a write failed: \(error)")
                }
            }
            done.signal()
        }
    }

    func waitForFirstWrite() {
        while lock.withLock({ writes }) == 0 { usleep(200) }
    }

    /// Stops the writer: the longest write in milliseconds and the number of writes.
    func stop() -> (longest: Double, writes: Int) {
        lock.withLock { stopped = true }
        done.wait()
        return lock.withLock { (longest, writes) }
    }
}
