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
// Then what Ed25519 signing and checking cost (issue 32: "≤ 10 % on the first sync, ≤ 2 ms on one change"), each
// interleaved with the same work with signing and checking turned off through the benchmark-only hook
// (`SyncBenchmarkHooks`, not an option of the library or the tool):
//   one-change-signing  the one change above, signed and checked vs not
//   first-sync-signing  a new device joins a copy of the folder of N tasks (`SyncEngine.join` + `sync()`: verify,
//                       decrypt, merge every bundle, publish its own), signed and checked vs not
// printed as
//   BENCH <workload> signed=<ms>ms unsigned=<ms>ms ratio=<median of signed/unsigned> added=<median difference>ms
// Usage: securestore-bench-sync DIR [--tasks N] [--pairs N] [--join-pairs N]   (inside Tests/Harness/with-keyring)
import BenchSupport
import Foundation
import Keychain
import SecureStore
@_spi(Benchmarks) import Sync
import Tasks

var arguments = Array(CommandLine.arguments.dropFirst())
guard let directory = arguments.first else { fail("usage: securestore-bench-sync DIR [--tasks N] [--pairs N]") }
arguments.removeFirst()
var taskCount = 10_000
var pairs = 15
var joinPairs = 5
while let flag = arguments.first {
    arguments.removeFirst()
    guard let value = arguments.first.flatMap(Int.init), value > 0 else { fail("\(flag) needs a positive number") }
    arguments.removeFirst()
    switch flag {
    case "--tasks": taskCount = value
    case "--pairs": pairs = value
    case "--join-pairs": joinPairs = value
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
        for service in ["\(app).database-key", "\(app).sync-key", "\(app).sync-signing-key"] {
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

    // Signing and checking: the same work with them (A) and without them (B), interleaved A B A B.
    func report(_ name: String, _ signed: [Double], _ unsigned: [Double]) {
        let ratios = zip(signed, unsigned).map { $0 / $1 }
        let added = zip(signed, unsigned).map { $0 - $1 }
        print(
            "BENCH \(name) signed=\(ms(median(signed))) unsigned=\(ms(median(unsigned))) "
                + "ratio=\(String(format: "%.3f", median(ratios))) added=\(String(format: "%.2fms", median(added)))")
    }
    func oneChange(_ title: String, from sender: Device, to receiver: Device) throws -> Double {
        try milliseconds {
            _ = try sender.tasks.create(title: title)
            try sender.engine!.sync()
            if try receiver.engine!.sync().changedRows != 1 { fail("the other device did not apply the one change") }
        }
    }
    let pristine = directory + "/pristine"
    try FileManager.default.copyItem(atPath: directory + "/remote", toPath: pristine)
    // Two more pairs of devices, each with its own folder and set up the same way: one with signing and checking on,
    // one with them off from the start, so that neither ever reads a file of the other mode (a zero signature read
    // with checking on would cost a failed check) and both have the same history.
    func pair(_ names: (String, String), signing: Bool) throws -> (Device, Device) {
        SyncBenchmarkHooks.setSigningAndChecking(signing)
        defer { SyncBenchmarkHooks.setSigningAndChecking(true) }
        var sender = try Device(names.0, under: directory)
        var receiver = try Device(names.1, under: directory)
        _ = try sender.tasks.insert((0..<taskCount).map { TaskItem(id: UUID(), title: "task number \($0)", done: false, createdAt: start) })
        let remote = SyncRemote.folder(directory + "/remote-" + names.0)
        let (engine, pairingCode) = try SyncEngine.initialize(database: sender.database, remote: remote, tables: ["tasks"])
        sender.engine = engine
        try engine.sync()
        receiver.engine = try SyncEngine.join(database: receiver.database, remote: remote, tables: ["tasks"], pairingCode: pairingCode)
        try receiver.engine!.sync()
        _ = try oneChange("warm-up", from: sender, to: receiver)
        return (sender, receiver)
    }
    let (c, d) = try pair(("c", "d"), signing: false)
    let (e, f) = try pair(("e", "f"), signing: true)
    defer {
        for device in [c, d, e, f] { device.remove() }
    }
    var signedChange: [Double] = [], unsignedChange: [Double] = []
    var changeCounts: [(signatures: Int, checks: Int)] = []
    for pair in 0..<pairs {
        SyncBenchmarkHooks.setSigningAndChecking(true)
        let before = SyncBenchmarkHooks.counts
        signedChange.append(try oneChange("signed \(pair)", from: e, to: f))
        let after = SyncBenchmarkHooks.counts
        changeCounts.append((after.signatures - before.signatures, after.checks - before.checks))
        SyncBenchmarkHooks.setSigningAndChecking(false)
        unsignedChange.append(try oneChange("unsigned \(pair)", from: c, to: d))
        SyncBenchmarkHooks.setSigningAndChecking(true)
    }
    report("one-change-signing", signedChange, unsignedChange)
    // The crypto alone: how many signatures and checks one change made (the median pair), and what each costs here.
    let small = SyncBenchmarkHooks.signAndCheckMicroseconds(bytes: 300, iterations: 201)
    let large = SyncBenchmarkHooks.signAndCheckMicroseconds(bytes: 180_000, iterations: 51)
    let counted = changeCounts.sorted { $0.signatures + $0.checks < $1.signatures + $1.checks }[changeCounts.count / 2]
    print(
        "BENCH signing-crypto sign-small=\(String(format: "%.0f", small.sign))us check-small=\(String(format: "%.0f", small.check))us "
            + "sign-180KB=\(String(format: "%.0f", large.sign))us check-180KB=\(String(format: "%.0f", large.check))us "
            + "per-change=\(counted.signatures)sign+\(counted.checks)check "
            + "per-change-crypto=\(String(format: "%.2fms", (Double(counted.signatures) * small.sign + Double(counted.checks) * small.check) / 1000))")

    // A new device's first sync of the folder as it was before the unsigned changes below (a fresh copy each time,
    // so that no joiner sees another's files). The unsigned side's own files carry zero signatures; its copy goes.
    var signedJoin: [Double] = [], unsignedJoin: [Double] = []
    var joiner = 0
    func firstSync(signing: Bool) throws -> Double {
        joiner += 1
        let copy = directory + "/copy-\(joiner)"
        try FileManager.default.copyItem(atPath: pristine, toPath: copy)
        let device = try Device("join-\(joiner)", under: directory)
        defer {
            device.remove()
            try? FileManager.default.removeItem(atPath: copy)
            try? FileManager.default.removeItem(atPath: directory + "/join-\(joiner)")
        }
        SyncBenchmarkHooks.setSigningAndChecking(signing)
        defer { SyncBenchmarkHooks.setSigningAndChecking(true) }
        var applied = 0
        let time = try milliseconds {
            let engine = try SyncEngine.join(database: device.database, remote: .folder(copy), tables: ["tasks"], pairingCode: code)
            applied = try engine.sync().changedRows
        }
        if applied < taskCount { fail("the new device applied \(applied) rows, not \(taskCount)") }
        return time
    }
    var joinCounts: [(signatures: Int, checks: Int)] = []
    for _ in 0..<joinPairs {
        let before = SyncBenchmarkHooks.counts
        signedJoin.append(try firstSync(signing: true))
        let after = SyncBenchmarkHooks.counts
        joinCounts.append((after.signatures - before.signatures, after.checks - before.checks))
        unsignedJoin.append(try firstSync(signing: false))
    }
    report("first-sync-signing", signedJoin, unsignedJoin)
    if let counted = joinCounts.first {
        print("BENCH first-sync-crypto \(counted.signatures)sign+\(counted.checks)check")
    }
} catch {
    fail("\(error)")
}
