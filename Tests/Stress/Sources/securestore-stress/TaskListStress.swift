// Scenarios for the task list (SecureStore's TaskList); see main.swift. Build with -c release to measure.
//
//   securestore-stress tasks seed PATH COUNT [BATCH]
//       Creates the database PATH (it must not exist) and adds COUNT tasks in transactions of BATCH tasks
//       (1 000 000 by default) through TaskList.insert: creation dates one millisecond apart ending now, every
//       third task done. Prints the time, the rate and the file size.
//
//   securestore-stress tasks launch PATH
//       What an app does when it starts: open the database, open the task list (migration check), show the
//       first page (50 tasks, newest first) with the total count. Prints each step's wall time, the count and
//       the peak resident memory (getrusage ru_maxrss). Run it in a fresh process for cold-cache figures.
//
//   securestore-stress tasks measure PATH
//       Times the other operations on a seeded database, each cold in the same fresh process in this order:
//       counts, done/open pages, a deep page by offset and by keyset, a title search and its count, an ID
//       prefix lookup, and single-task create, toggle, rename and delete.
//
//   securestore-stress tasks batch PATH
//       Times markAllDone then deleteAllDone (destructive: use a copy).
//
// The databases use a fixed, test-only key (32 bytes of 0x42): these are benchmark files, not secrets.
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks

import Glibc

/// Runs one task list scenario and returns the process exit status.
func runTaskListStress(_ arguments: [String]) -> Int32 {
    do {
        switch (arguments.first, arguments.count) {
        case ("seed", 3), ("seed", 4):
            guard let count = Int(arguments[2]), count >= 0,
                let batch = arguments.count == 4 ? Int(arguments[3]) : 1_000_000, batch > 0
            else { return taskListStressUsage() }
            try taskListSeed(path: arguments[1], count: count, batch: batch)
        case ("launch", 2):
            try taskListLaunch(path: arguments[1])
        case ("measure", 2):
            try taskListMeasure(path: arguments[1])
        case ("batch", 2):
            try taskListBatch(path: arguments[1])
        default:
            return taskListStressUsage()
        }
        return 0
    } catch {
        FileHandle.standardError.write(Data("securestore-stress tasks: \(error)\n".utf8))
        return 1
    }
}

private func taskListStressUsage() -> Int32 {
    FileHandle.standardError.write(
        Data(
            """
            usage: securestore-stress tasks seed PATH COUNT [BATCH]
                   securestore-stress tasks launch PATH
                   securestore-stress tasks measure PATH
                   securestore-stress tasks batch PATH

            """.utf8))
    return 64
}

private func taskListKey() throws -> DatabaseKey {
    try DatabaseKey(bytes: [UInt8](repeating: 0x42, count: 32))
}

private func taskListMilliseconds<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = ContinuousClock.now
    let value = try body()
    let elapsed = ContinuousClock.now - start
    return (value, Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
}

private func taskListPeakRSSMiB() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_maxrss) / 1024  // KiB on Linux
}

private func taskListReport(_ name: String, _ milliseconds: Double, _ detail: String = "") {
    print(name.padding(toLength: 28, withPad: " ", startingAt: 0), String(format: "%9.2f ms", milliseconds), detail)
}

private func taskListSeed(path: String, count: Int, batch: Int) throws {
    guard !FileManager.default.fileExists(atPath: path) else {
        throw SecureStoreError(SecureStoreError.Code.invalidArgument, "'\(path)' exists; seed makes a new database")
    }
    let queue = try DatabaseQueue(path: path, key: try taskListKey())
    let tasks = try TaskList(queue: queue)
    let end = Date()
    let first = end.addingTimeInterval(-Double(count) / 1000)
    let words = ["Buy", "Call", "Email", "Fix", "Pay", "Read", "Plan", "Book", "Clean", "Write"]
    let things = ["milk", "mum", "the report", "the bike", "rent", "chapter 3", "the trip", "a table", "the garage"]
    // Foundation's UUID() opens /dev/urandom on every call (~5 us); these test IDs come from a fast generator
    // so that the figure is the task list's, not the ID source's.
    var ids = TaskListStressIDs()
    let (_, total) = try taskListMilliseconds {
        var next = 0
        while next < count {
            let upper = min(next + batch, count)
            let items = (next..<upper).lazy.map { n in
                TaskItem(
                    id: ids.next(),
                    title: "\(words[n % words.count]) \(things[n % things.count]) #\(n)", done: n % 3 == 0,
                    createdAt: first.addingTimeInterval(Double(n) / 1000))
            }
            try tasks.insert(items)
            next = upper
        }
    }
    try queue.checkpoint()
    try queue.close()
    let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    taskListReport(
        "seed", total,
        String(
            format: "%d tasks, batches of %d, %.0f tasks/s, file %.1f MiB, peak RSS %.1f MiB", count, batch,
            Double(count) / total * 1000, Double(size) / 1_048_576, taskListPeakRSSMiB()))
}

private func taskListLaunch(path: String) throws {
    let baseline = taskListPeakRSSMiB()
    let start = ContinuousClock.now
    let (queue, open) = try taskListMilliseconds { try DatabaseQueue(path: path, key: try taskListKey()) }
    let (tasks, migrate) = try taskListMilliseconds { try TaskList(queue: queue) }
    let (page, firstPage) = try taskListMilliseconds { try tasks.page(limit: 50) }
    let elapsed = ContinuousClock.now - start
    let total = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    taskListReport("open database", open)
    taskListReport("open task list (migrate)", migrate)
    taskListReport("first page + count", firstPage, "\(page.items.count) tasks of \(page.total)")
    taskListReport("launch total", total, String(format: "peak RSS %.1f MiB (%.1f MiB before opening)",
                                                  taskListPeakRSSMiB(), baseline))
    if let newest = page.items.first { print("newest:", newest.hexID.prefix(8), newest.title) }
    try queue.close()
}

private func taskListMeasure(path: String) throws {
    let queue = try DatabaseQueue(path: path, key: try taskListKey())
    defer { try? queue.close() }
    let tasks = try TaskList(queue: queue)
    let (counts, countsTime) = try taskListMilliseconds { try tasks.counts() }
    taskListReport("counts", countsTime, "\(counts.total) total, \(counts.done) done")
    let (done, doneTime) = try taskListMilliseconds { try tasks.page(.done, limit: 50) }
    taskListReport("first page done + count", doneTime, "\(done.items.count) of \(done.total)")
    let (open, openTime) = try taskListMilliseconds { try tasks.page(.open, order: .oldestFirst, limit: 50) }
    taskListReport("first page open, oldest", openTime, "\(open.items.count) of \(open.total)")
    let middle = counts.total / 2
    let (deep, offsetTime) = try taskListMilliseconds { try tasks.list(offset: middle, limit: 50) }
    taskListReport("page at offset \(middle)", offsetTime, "\(deep.count) tasks")
    if let cursor = deep.first {
        let (after, keysetTime) = try taskListMilliseconds { try tasks.list(after: cursor, limit: 50) }
        taskListReport("page after a middle task", keysetTime, "\(after.count) tasks (keyset)")
    }
    let search = TaskList.Filter(titleContains: "#12345")
    let (found, searchTime) = try taskListMilliseconds { try tasks.list(search, limit: 50) }
    taskListReport("search '#12345', page", searchTime, "\(found.count) tasks")
    let (searchCount, searchCountTime) = try taskListMilliseconds { try tasks.count(search) }
    taskListReport("search '#12345', count", searchCountTime, "\(searchCount) tasks")
    if let some = deep.last {
        let prefix = String(some.hexID.prefix(7))
        let (resolved, resolveTime) = try taskListMilliseconds { try tasks.resolve(prefix: prefix) }
        taskListReport("resolve 7-digit prefix", resolveTime, resolved.title)
        let (_, shortTime) = taskListMilliseconds { try? tasks.resolve(prefix: String(prefix.prefix(2))) }
        taskListReport("resolve 2-digit (ambiguous)", shortTime)
        let (_, toggleTime) = try taskListMilliseconds { try tasks.toggle(id: some.id) }
        taskListReport("toggle", toggleTime)
        let (_, renameTime) = try taskListMilliseconds { try tasks.rename(id: some.id, to: some.title + " (renamed)") }
        taskListReport("rename", renameTime)
    }
    let (created, createTime) = try taskListMilliseconds { try tasks.create(title: "Measure me") }
    taskListReport("create", createTime)
    let (_, deleteTime) = try taskListMilliseconds { try tasks.delete(id: created.id) }
    taskListReport("delete", deleteTime)
    let (_, warmCount) = try taskListMilliseconds { try tasks.count(search) }
    taskListReport("search count again (warm)", warmCount)
    print(String(format: "peak RSS %.1f MiB", taskListPeakRSSMiB()))
}

private func taskListBatch(path: String) throws {
    let queue = try DatabaseQueue(path: path, key: try taskListKey())
    defer { try? queue.close() }
    let tasks = try TaskList(queue: queue)
    let (marked, markTime) = try taskListMilliseconds { try tasks.markAllDone() }
    taskListReport("markAllDone", markTime, "\(marked) tasks")
    let (deleted, deleteTime) = try taskListMilliseconds { try tasks.deleteAllDone() }
    taskListReport("deleteAllDone", deleteTime, "\(deleted) tasks")
    print(String(format: "peak RSS %.1f MiB", taskListPeakRSSMiB()))
}

/// Random version-4 UUIDs from a SplitMix64 generator seeded by the system: fast, not for secrets.
private struct TaskListStressIDs {
    private var state = UInt64.random(in: .min ... .max)

    private mutating func next64() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next() -> UUID {
        let high = next64()
        let low = next64()
        var bytes = (
            UInt8(truncatingIfNeeded: high >> 56), UInt8(truncatingIfNeeded: high >> 48),
            UInt8(truncatingIfNeeded: high >> 40), UInt8(truncatingIfNeeded: high >> 32),
            UInt8(truncatingIfNeeded: high >> 24), UInt8(truncatingIfNeeded: high >> 16),
            UInt8(truncatingIfNeeded: high >> 8), UInt8(truncatingIfNeeded: high),
            UInt8(truncatingIfNeeded: low >> 56), UInt8(truncatingIfNeeded: low >> 48),
            UInt8(truncatingIfNeeded: low >> 40), UInt8(truncatingIfNeeded: low >> 32),
            UInt8(truncatingIfNeeded: low >> 24), UInt8(truncatingIfNeeded: low >> 16),
            UInt8(truncatingIfNeeded: low >> 8), UInt8(truncatingIfNeeded: low))
        bytes.6 = bytes.6 & 0x0F | 0x40  // version 4
        bytes.8 = bytes.8 & 0x3F | 0x80  // variant 1
        return UUID(uuid: bytes)
    }
}
