// One change end to end through a folder, in one process (issue 26: "≤ 50 ms of our own time"): the engine's own
// time, without the two process starts, the key lookups and the database opening that `run-sync-bench.sh`'s
// whole-process `one-change` pays. Two devices (two applications of the throw-away keyring, each its own keyed
// database and task list) share a folder remote; per pair, interleaved:
//   project   `TaskList.create` on device A, `sync()` on A (seal, write and fsync the bundle and the seen vector),
//             `sync()` on B (read, verify, merge, publish its seen vector)
//   baseline  `TaskList.create` on device A alone
// and prints the medians, the median of the per-pair ratios, and the median of the per-pair differences (the
// engine's own time for one change), as
//   BENCH one-change-in-process project=<ms>ms baseline=<ms>ms ratio=<r> own=<ms>ms send=<ms>ms receive=<ms>ms
// Usage: securestore-bench-sync DIR [--tasks N] [--pairs N]   (inside Tests/Harness/with-keyring)
import BenchSupport
import Foundation
import Keychain
import SecureStore
import Sync
import Tasks

var arguments = Array(CommandLine.arguments.dropFirst())
guard let directory = arguments.first else { fail("usage: securestore-bench-sync DIR [--tasks N] [--pairs N]") }
arguments.removeFirst()
var taskCount = 10_000
var pairs = 15
while let flag = arguments.first {
    arguments.removeFirst()
    guard let value = arguments.first.flatMap(Int.init), value > 0 else { fail("\(flag) needs a positive number") }
    arguments.removeFirst()
    switch flag {
    case "--tasks": taskCount = value
    case "--pairs": pairs = value
    default: fail("unknown option \(flag)")
    }
}

/// One device: its application's keyed database, task list and sync engine.
struct Device {
    let app: String
    let database: KeyedDatabase
    let tasks: TaskList
    var engine: SyncEngine?

    init(_ name: String, under directory: String) throws {
        app = "bench-sync-\(name)-\(ProcessInfo.processInfo.processIdentifier)"
        let paths = try AppPaths(app: app, dataDirectory: URL(fileURLWithPath: directory + "/" + name))
        database = try KeyedDatabase(paths: paths, name: "tasks", keychain: Keychain())
        tasks = try TaskList(database: database)
    }

    /// Closes the database and deletes its key items from the keyring.
    func remove() {
        try? database.close()
        let keychain = Keychain()
        for service in ["\(app).database-key", "\(app).sync-key"] {
            for account in (try? keychain.accounts(service: service)) ?? [] { _ = try? keychain.delete(service: service, account: account) }
        }
    }
}

do {
    var a = try Device("a", under: directory)
    var b = try Device("b", under: directory)
    defer {
        a.remove()
        b.remove()
    }
    let start = Date(timeIntervalSince1970: 1_767_225_600)
    _ = try a.tasks.insert((0..<taskCount).map { TaskItem(id: UUID(), title: "task number \($0)", done: false, createdAt: start) })
    let remote = SyncRemote.folder(directory + "/remote")
    let (engineA, code) = try SyncEngine.initialize(database: a.database, remote: remote, tables: ["tasks"])
    a.engine = engineA
    try engineA.sync()
    let engineB = try SyncEngine.join(database: b.database, remote: remote, tables: ["tasks"], pairingCode: code)
    b.engine = engineB
    try engineB.sync()
    // A warm-up of each side, not measured.
    _ = try a.tasks.create(title: "warm-up")
    try engineA.sync()
    try engineB.sync()

    var project: [Double] = [], baseline: [Double] = [], send: [Double] = [], receive: [Double] = []
    for pair in 0..<pairs {
        var sent = 0.0, received = 0.0
        project.append(
            try milliseconds {
                _ = try a.tasks.create(title: "one more \(pair)")
                sent = try milliseconds { try engineA.sync() }
                received = try milliseconds {
                    let report = try engineB.sync()
                    if report.changedRows != 1 { fail("device B applied \(report.changedRows) rows, not the one change") }
                }
            })
        send.append(sent)
        receive.append(received)
        baseline.append(try milliseconds { _ = try a.tasks.create(title: "alone \(pair)") })
        try engineA.sync()  // the baseline's task goes out unmeasured, so that each measured sync sends one change
        try engineB.sync()
    }
    let ratios = zip(project, baseline).map { $0 / $1 }
    let own = zip(project, baseline).map { $0 - $1 }
    func ms(_ value: Double) -> String { String(format: "%.1fms", value) }
    print(
        "# sync in one process: \(Date()), load \(((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")), \(taskCount) tasks, \(pairs) pairs")
    print(
        "BENCH one-change-in-process project=\(ms(median(project))) baseline=\(ms(median(baseline))) "
            + "ratio=\(String(format: "%.2f", median(ratios))) own=\(ms(median(own))) send=\(ms(median(send))) receive=\(ms(median(receive)))")
} catch {
    fail("\(error)")
}
