// securestore-bench keyed-pool DIRECTORY [--scale N] [--runs N]: a KeyedDatabase with reading connections
// (readerCount: 4) against one without (readerCount: 0, reads on the writing connection), on the same file and real
// keyring, in interleaved pairs (the first side alternates), each side on a fresh handle after one unmeasured warm-up
// run, reported as the median of the per-pair ratios readers/none (issue 25). Needs a Secret Service (make bench runs
// it in the harness). Docs/performance.md keeps the figures.
//
// Workloads:
//   keyed-read-during-rotation  one point read issued as soon as a key rotation of 100 000 notes (~21 MiB) has
//                               stored its pending key, on another thread: milliseconds from the read's call to its
//                               answer (without readers it waits for the whole rotation).
//   keyed-tasks-write-read      8 Swift Tasks × 25 (insert a note, then read it back by id), through the async API:
//                               wall time. (With a count of every note as the read, readers lose badly: a reading
//                               connection drops its page cache when another connection has committed, and the
//                               count decrypts all 5 000 pages again — 9.1 s against 77 ms in one run.)
import BenchSupport
import Dispatch
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore

/// The issue's journal in a keyed database of the harness keyring: `note(id, title, body)` with 100 000 notes (~21
/// MiB) divided by the scale, in `<directory>/notes.db` of an application named after `app` and this process.
struct KeyedNotes {
    let directory: String
    let options: BenchOptions
    let app: String

    var noteCount: Int { options.size(100_000) }
    var paths: AppPaths {
        get throws {
            try AppPaths(
                app: "\(app)-\(ProcessInfo.processInfo.processIdentifier)",
                dataDirectory: URL(fileURLWithPath: directory, isDirectory: true))
        }
    }

    func open(readers: Int = 0) throws -> KeyedDatabase {
        try KeyedDatabase(paths: paths, name: "notes", keychain: Keychain(), readerCount: readers)
    }

    /// Makes the database with its notes (not measured).
    func create() throws {
        let setUp = try open()
        let notes = noteCount
        try setUp.write { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
            for index in 0..<notes {
                try db.execute(
                    "INSERT INTO note (id, title, body) VALUES (?, ?, ?)",
                    [index, "note \(index)", String(repeating: "journal text ", count: 14)])
            }
        }
        try setUp.close()
    }

    /// Deletes the database and its keys.
    func delete() {
        _ = try? KeyedDatabase.delete(paths: paths, name: "notes", keychain: Keychain(), keys: .delete)
    }
}

struct KeyedPoolBench {
    let directory: String
    let options: BenchOptions

    private var notes: KeyedNotes { KeyedNotes(directory: directory, options: options, app: "securestore-bench-keyedpool") }
    var noteCount: Int { notes.noteCount }

    func open(readers: Int) throws -> KeyedDatabase { try notes.open(readers: readers) }

    func run() throws {
        let workloads = ["keyed-read-during-rotation", "keyed-tasks-write-read"]
        guard workloads.contains(where: options.wants) else { return }
        try notes.create()
        defer { notes.delete() }
        let pairs = max(2, options.runs * 2)
        if options.wants(workloads[0]) { try measure(workloads[0], pairs: pairs, readDuringRotation) }
        if options.wants(workloads[1]) { try measure(workloads[1], pairs: pairs, tasksWriteRead) }
    }

    /// Runs `body` on each side in `pairs` interleaved pairs and prints `KEYEDPOOL <workload> pairs=N none=<median>ms
    /// readers=<median>ms ratio=<median of readers/none per pair> ratio-min=… ratio-max=…`.
    private func measure(_ workload: String, pairs: Int, _ body: (KeyedDatabase) throws -> Double) throws {
        var none: [Double] = []
        var pooled: [Double] = []
        var ratios: [Double] = []
        for pair in 0..<pairs {
            var sample: [Int: Double] = [:]
            for readers in pair % 2 == 0 ? [0, 4] : [4, 0] {
                let database = try open(readers: readers)
                _ = try body(database)  // warm-up, unmeasured
                sample[readers] = try body(database)
                try database.close()
            }
            none.append(sample[0]!)
            pooled.append(sample[4]!)
            ratios.append(sample[4]! / sample[0]!)
        }
        report(workload, "none", none)
        report(workload, "readers", pooled)
        let sorted = ratios.sorted()
        print(
            "KEYEDPOOL \(workload) pairs=\(pairs) none=\(String(format: "%.2f", median(none)))ms "
                + "readers=\(String(format: "%.2f", median(pooled)))ms ratio=\(String(format: "%.3f", median(ratios))) "
                + "ratio-min=\(String(format: "%.3f", sorted.first!)) ratio-max=\(String(format: "%.3f", sorted.last!))")
        fflush(nil)
    }

    /// A rotation on another thread; as soon as its pending key is stored, one point read: its latency in ms.
    private func readDuringRotation(_ database: KeyedDatabase) throws -> Double {
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                try database.rotateKey { step in if step == .pendingKeyStored { started.signal() } }
            } catch {
                fail("keyed-pool bench: rotation failed: \(error)")
            }
            done.signal()
        }
        started.wait()
        let notes = noteCount
        let elapsed = try milliseconds {
            let title = try database.read { db in
                try db.scalar("SELECT title FROM note WHERE id = ?", [notes / 2], as: String.self)
            }
            if title == nil { fail("keyed-pool bench: a note is missing") }
        }
        done.wait()
        return elapsed
    }

    /// 8 Tasks, each 25 times: insert a note, then read it back.
    private func tasksWriteRead(_ database: KeyedDatabase) throws -> Double {
        let finished = DispatchSemaphore(value: 0)
        let elapsed = LockedDouble()
        Task {
            let start = ContinuousClock.now
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        for step in 0..<25 {
                            do {
                                let id = try await database.write { db in
                                    try db.execute(
                                        "INSERT INTO note (title, body) VALUES (?, ?)", ["task \(worker) step \(step)", "x"])
                                    return db.lastInsertRowID
                                }
                                let title = try await database.read { db in
                                    try db.scalar("SELECT title FROM note WHERE id = ?", [id], as: String.self)
                                }
                                if title == nil { fail("keyed-pool bench: a note just written is missing") }
                            } catch {
                                fail("keyed-pool bench: \(error)")
                            }
                        }
                    }
                }
            }
            elapsed.set((ContinuousClock.now - start).milliseconds)
            finished.signal()
        }
        finished.wait()
        try database.write { db in try db.execute("DELETE FROM note WHERE body = 'x'") }
        return elapsed.value
    }
}

/// A Double set by one Task and read by the thread that waited for it.
private final class LockedDouble: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0.0
    func set(_ value: Double) { lock.withLock { stored = value } }
    var value: Double { lock.withLock { stored } }
}
