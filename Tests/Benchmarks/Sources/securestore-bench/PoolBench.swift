// securestore-bench pool DIRECTORY [--scale N] [--runs N]: DatabasePool against DatabaseQueue on the same file,
// in interleaved pairs (queue then pool, then pool then queue, …), each side measured on a fresh handle after one
// unmeasured warm-up run, reported as the median of the per-pair ratios pool/queue. Run by Tests/Benchmarks/run-bench.sh after the main workloads; Docs/database.md keeps the
// figures. Kept apart from main.swift's workloads (issue 14).
//
// Workloads:
//   pool-read-during-write  100 point reads issued while another thread holds a write transaction (30 000
//                           inserts, rolled back): the time from the write being open to the reads being done.
//   pool-parallel-reads     4 threads × 10 scans of the table (sum over every row), wall time.
//   pool-single-reads       one thread, 2 000 point reads, one transaction each: the pool's overhead.
import BenchSupport
import Dispatch
import EncryptedDatabase
import Foundation

/// What each side is measured through: a queue or a pool, opened fresh for each measurement.
private enum PoolBenchSide: String {
    case queue, pool

    func open(_ path: String) throws -> any DatabaseWriter {
        switch self {
        case .queue: try DatabaseQueue(path: path, key: benchKey())
        case .pool: try DatabasePool(path: path, key: benchKey(), readerCount: 4)
        }
    }

    func close(_ database: any DatabaseWriter) throws {
        if let queue = database as? DatabaseQueue { try queue.close() }
        if let pool = database as? DatabasePool { try pool.close() }
    }
}

struct PoolBench {
    let directory: String
    let options: BenchOptions

    var rowCount: Int { options.size(20_000) }
    var path: String { directory + "/pool.db" }

    func run() throws {
        let workloads = ["pool-read-during-write", "pool-parallel-reads", "pool-single-reads"]
        guard workloads.contains(where: options.wants) else { return }
        removeDatabase(path)
        let setUp = try DatabaseQueue(path: path, key: benchKey())
        let rows = rowCount
        try setUp.write { db in
            try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
            try db.execute("CREATE TABLE scratch (n INTEGER NOT NULL, text TEXT NOT NULL)")
            for index in 0..<rows {
                try db.execute(
                    "INSERT INTO item (id, title, body) VALUES (?, ?, ?)",
                    [index, "title \(index)", String(repeating: "body text ", count: 10)])
            }
        }
        try setUp.close()
        let pairs = max(2, options.runs * 2)
        if options.wants(workloads[0]) { try measure(workloads[0], pairs: pairs, readDuringWrite) }
        if options.wants(workloads[1]) { try measure(workloads[1], pairs: pairs, parallelReads) }
        if options.wants(workloads[2]) { try measure(workloads[2], pairs: pairs, singleReads) }
        removeDatabase(path)
    }

    /// Runs `body` on each side in `pairs` interleaved pairs (the first side alternates) and prints one line per
    /// side plus the pairs' ratios: `POOL <workload> pairs=N queue=<median>ms pool=<median>ms ratio=<median of
    /// pool/queue per pair> ratio-min=… ratio-max=…`.
    private func measure(
        _ workload: String, pairs: Int, _ body: (any DatabaseWriter) throws -> Double
    ) throws {
        var queueSamples: [Double] = []
        var poolSamples: [Double] = []
        var ratios: [Double] = []
        for pair in 0..<pairs {
            let order: [PoolBenchSide] = pair % 2 == 0 ? [.queue, .pool] : [.pool, .queue]
            var sample: [PoolBenchSide: Double] = [:]
            for side in order {
                let database = try side.open(path)
                _ = try body(database)  // warm-up: the page caches of the connections it uses, unmeasured
                sample[side] = try body(database)
                try side.close(database)
            }
            queueSamples.append(sample[.queue]!)
            poolSamples.append(sample[.pool]!)
            ratios.append(sample[.pool]! / sample[.queue]!)
        }
        report(workload, "queue", queueSamples)
        report(workload, "pool", poolSamples)
        let sorted = ratios.sorted()
        print(
            "POOL \(workload) pairs=\(pairs) queue=\(String(format: "%.2f", median(queueSamples)))ms "
                + "pool=\(String(format: "%.2f", median(poolSamples)))ms ratio=\(String(format: "%.3f", median(ratios))) "
                + "ratio-min=\(String(format: "%.3f", sorted.first!)) ratio-max=\(String(format: "%.3f", sorted.last!))")
        fflush(nil)
    }

    /// 100 point reads while another thread holds a write open: milliseconds from the write being open to the
    /// last read's answer.
    private func readDuringWrite(_ database: any DatabaseWriter) throws -> Double {
        let inside = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let inserts = options.size(30_000)
        struct RollBack: Error {}
        DispatchQueue.global().async {
            _ = try? database.write { db in
                inside.signal()
                for n in 0..<inserts {
                    try db.execute("INSERT INTO scratch (n, text) VALUES (?, ?)", [n, "scratch row \(n)"])
                }
                throw RollBack()  // the same file for every run
            }
            done.signal()
        }
        inside.wait()
        let rows = rowCount
        let elapsed = try milliseconds {
            for index in 0..<100 {
                let title = try database.read { db in
                    try db.scalar("SELECT title FROM item WHERE id = ?", [index * 97 % rows], as: String.self)
                }
                if title == nil { fail("pool bench: a row is missing") }
            }
        }
        done.wait()
        return elapsed
    }

    /// 4 threads, each scanning the whole table 10 times.
    private func parallelReads(_ database: any DatabaseWriter) throws -> Double {
        let failures = LockedCount()
        let expected = rowCount
        return milliseconds {
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                for _ in 0..<10 {
                    let count = try? database.read { db in
                        try db.scalar("SELECT count(*) FROM item WHERE length(body) + id >= 0", as: Int.self)
                    }
                    if count != expected { failures.add() }
                }
            }
            if failures.value > 0 { fail("pool bench: \(failures.value) scans failed") }
        }
    }

    /// One thread, 2 000 point reads.
    private func singleReads(_ database: any DatabaseWriter) throws -> Double {
        let rows = rowCount
        return try milliseconds {
            for index in 0..<2_000 {
                _ = try database.read { db in
                    try db.scalar("SELECT title FROM item WHERE id = ?", [index * 31 % rows], as: String.self)
                }
            }
        }
    }
}

/// A counter shared by the threads of `concurrentPerform`.
private final class LockedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
