// securestore-bench-attachments-tasks: the task list with and without attachments stored (issue 16's last target:
// launch and fetch unchanged, within noise, with 1 GB of attachments).
//
//   securestore-bench-attachments-tasks run <dir> [--tasks N] [--attach-mb M] [--pairs P]
//
// Makes one task database of N tasks (200 000) in <dir>/none, copies it to <dir>/with and attaches M MB (1000) of
// random bytes there, as 53 MB files to the first tasks, through TaskList.attachments(); then P pairs (7) of
// interleaved rounds (none then with, then with then none, …): a launch (a fresh process that opens the database with its raw key, as a
// KeyedDatabase does after the key lookup, opens the task list and reads the first page of 50 and the totals) and
// a fetch of all N tasks on a fresh connection. Prints `TASKS launch|fetch none=<ms> with=<ms> ratio=<with/none>`
// (medians; the ratio is the median of per-pair ratios), the files' sizes, and removes <dir>'s two folders.
// The database key is a fixed test-only key: these are benchmark files, not secrets.
import BenchSupport
import EncryptedDatabase
import Foundation
import SecureStore
import Tasks
import Glibc

func benchKey() -> DatabaseKey {
    do { return try DatabaseKey(bytes: [UInt8](repeating: 0x42, count: 32)) } catch { fail("\(error)") }
}

func fileSize(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int64) ?? 0
}

/// A fresh process's launch: open with the key, open the task list, first page of 50 and the totals.
func launchChild(_ directory: String) throws {
    let start = ContinuousClock.now
    let queue = try DatabaseQueue(path: directory + "/tasks.db", key: benchKey())
    let tasks = try TaskList(queue: queue)
    let page = try tasks.page(limit: 50)
    let elapsed = (ContinuousClock.now - start).milliseconds
    try queue.close()
    print("inprocess \(elapsed) total \(page.total) items \(page.items.count) rss \(imagePeakRSSMiB())")
}

func makeTasks(_ path: String, count: Int) throws {
    let queue = try DatabaseQueue(path: path, key: benchKey())
    let tasks = try TaskList(queue: queue)
    try tasks.insert((0..<count).lazy.map { index in
        let task = BenchTask(index)
        return TaskItem(
            id: task.id, title: task.title, done: task.done, createdAt: Date(timeIntervalSince1970: Double(task.microseconds) / 1e6))
    })
    try queue.checkpoint()
    try queue.close()
}

func attach(_ directory: String, megabytes: Int) throws -> Int {
    let source = directory + "/source.bin"
    let piece = 53_000_000
    writeRandomFile(source, size: piece)
    let queue = try DatabaseQueue(path: directory + "/tasks.db", key: benchKey())
    let tasks = try TaskList(queue: queue)
    let files = tasks.attachments()
    var attached = 0
    var index = 0
    while attached < megabytes * 1_000_000 {
        try files.add([.file(source, name: "video-\(index).mp4")], to: BenchTask(index).id)
        attached += piece
        index += 1
    }
    try files.store.close()
    try queue.checkpoint()
    try queue.close()
    unlink(source)
    return index
}

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String, _ fallback: Int) -> Int {
    guard let at = arguments.firstIndex(of: name), at + 1 < arguments.count, let value = Int(arguments[at + 1]) else {
        return fallback
    }
    arguments.removeSubrange(at...(at + 1))
    return value
}
let taskCount = option("--tasks", 200_000)
let megabytes = option("--attach-mb", 1000)
let pairs = option("--pairs", 7)
do {
    switch (arguments.first, arguments.count) {
    case ("launch-child", 2):
        try launchChild(arguments[1])
    case ("run", 2):
        let none = arguments[1] + "/none"
        let with = arguments[1] + "/with"
        for folder in [none, with] {
            try? FileManager.default.removeItem(atPath: folder)
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        defer { for folder in [none, with] { try? FileManager.default.removeItem(atPath: folder) } }
        try makeTasks(none + "/tasks.db", count: taskCount)
        try FileManager.default.copyItem(atPath: none + "/tasks.db", toPath: with + "/tasks.db")
        let attachments = try attach(with, megabytes: megabytes)
        print("INFO tasks \(taskCount) attachments \(attachments) record-db none=\(fileSize(none + "/tasks.db")) "
            + "with=\(fileSize(with + "/tasks.db")) attachments-file=\(fileSize(with + "/tasks.attachments.db"))")
        var launch: [String: [Double]] = [:]
        var fetch: [String: [Double]] = [:]
        var rss: [String: [Double]] = [:]
        let sides = [("none", none), ("with", with)]
        for (_, folder) in sides { _ = runChild([executablePath(), "launch-child", folder]) }  // warm-up
        for pair in 0..<pairs {
            // A B, then B A: neither side always runs second (on a warmer cache).
            let order = pair % 2 == 0 ? sides : sides.reversed()
            for (name, folder) in order {
                let child = runChild([executablePath(), "launch-child", folder])
                guard child.value("total") == Double(taskCount) else { fail("launch child: \(child.output)") }
                launch[name, default: []].append(child.wallMilliseconds)
                rss[name, default: []].append(child.peakRSSMiB)
            }
            for (name, folder) in order {
                let queue = try DatabaseQueue(path: folder + "/tasks.db", key: benchKey())
                let tasks = TaskList(migratedQueue: queue)
                var fetched = 0
                fetch[name, default: []].append(try milliseconds {
                    fetched = try tasks.list(order: .oldestFirst, limit: taskCount).count
                })
                try queue.close()
                guard fetched == taskCount else { fail("fetch read \(fetched) tasks") }
            }
        }
        for (workload, samples) in [("launch", launch), ("fetch", fetch)] {
            let a = samples["none"] ?? [], b = samples["with"] ?? []
            let ratios = zip(a, b).map { $1 / $0 }
            print("TASKS \(workload) none=\(String(format: "%.2f", median(a))) with=\(String(format: "%.2f", median(b))) "
                + "ratio=\(String(format: "%.3f", median(ratios))) min-ratio=\(String(format: "%.3f", ratios.min() ?? .nan)) "
                + "max-ratio=\(String(format: "%.3f", ratios.max() ?? .nan)) pairs=\(ratios.count)"
                + (workload == "launch" ? " rss-none=\(String(format: "%.1f", median(rss["none"] ?? []))) rss-with=\(String(format: "%.1f", median(rss["with"] ?? [])))" : ""))
        }
    default:
        fail("usage: securestore-bench-attachments-tasks run <dir> [--tasks N] [--attach-mb M] [--pairs P]")
    }
} catch {
    fail("\(error)")
}
