// securestore-bench: the project's side of `make bench` (Tests/Benchmarks/run-bench.sh, Docs/performance.md).
//
//   securestore-bench run DIRECTORY [--scale N] [--runs N] [--only w1,w2]
//       Runs every workload through the public API of SecureStore, EncryptedDatabase, Keychain and
//       Preferences, in DIRECTORY (created, left for the caller to delete), and prints RESULT and INFO lines
//       (Tests/Benchmarks/Sources/BenchSupport). The `open` workload's baseline (a passphrase-keyed open) is SQLCipher too,
//       so it is measured here; every other baseline is in securestore-bench-baseline.
//
// The children it runs as fresh processes (`open-child`, `launch-child`, `prefs-load-child`) are
// subcommands of this same executable.
//
// The database key is a fixed, test-only key (32 bytes of 0x42): these are benchmark files, not secrets.
import BenchSupport
import EncryptedDatabase
import Foundation
import Keychain
import Preferences
import SecureStore
import Tasks

let benchApp = "securestore-bench"
let launchName = "launch"

func benchKey() -> DatabaseKey {
    do { return try DatabaseKey(bytes: [UInt8](repeating: 0x42, count: 32)) } catch { fail("\(error)") }
}

func taskItem(_ index: Int) -> TaskItem {
    let task = BenchTask(index)
    return TaskItem(
        id: task.id, title: task.title, done: task.done,
        createdAt: Date(timeIntervalSince1970: Double(task.microseconds) / 1e6))
}

func removeDatabase(_ path: String) {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
}

let preferenceLimits = PreferencesLimits(maxValueSize: 1 << 20, softTotalSize: 8 << 20, hardTotalSize: 16 << 20)

// MARK: Workloads

struct ProjectBench {
    let directory: String
    let options: BenchOptions
    var runs: Int { options.runs }

    func run() throws {
        if options.wants("open") { try open() }
        if options.wants("insert") { try insert() }
        if options.wants("bulk") || options.wants("count") || options.wants("launch") { try bulk() }
        if options.wants("fetch") || options.wants("toggle") { try fetchAndToggle() }
        if options.wants("count") { try count() }
        if options.wants("launch") { try launch() }
        if options.wants("keychain-get") || options.wants("keychain-set") { try keychain() }
        if options.wants("prefs-load") || options.wants("prefs-save") { try preferences() }
        if options.wants("export") || options.wants("import") || options.wants("list-json") { try exportAndImport() }
        if options.wants("records-fetch") || options.wants("records-insert") { try records() }
    }

    /// A store of `count` tasks at `path`, made through TaskList.insert in one transaction; returns the
    /// milliseconds of the insert.
    @discardableResult
    func makeStore(_ path: String, count: Int) throws -> Double {
        removeDatabase(path)
        let queue = try DatabaseQueue(path: path, key: benchKey())
        let tasks = try TaskList(queue: queue)
        // The tasks are made before the clock starts, as the C baseline makes its structs (CBaseline).
        let items = (0..<count).map(taskItem)
        let time = try milliseconds { try tasks.insert(items) }
        try queue.checkpoint()
        try queue.close()
        return time
    }

    func open() throws {
        let path = directory + "/open.db"
        try makeStore(path, count: 1_000)
        let passphrasePath = directory + "/open-passphrase.db"
        removeDatabase(passphrasePath)
        let queue = try DatabaseQueue(path: passphrasePath, passphrase: "a passphrase")
        _ = try TaskList(queue: queue)
        try queue.close()
        // A fresh process, so that the first open pays the library's one-time set-up.
        let child = runChild([executablePath(), "open-child", path, passphrasePath, String(runs * 20), String(max(3, runs))])
        print(child.output, terminator: "")
    }

    func insert() throws {
        let path = directory + "/insert.db"
        var samples: [Double] = []
        for _ in 0..<runs { samples.append(try makeStore(path, count: options.insertCount)) }
        removeDatabase(path)
        report("insert", "project", samples)
    }

    func bulk() throws {
        let path = directory + "/bulk.db"
        var samples: [Double] = []
        for _ in 0..<(options.wants("bulk") ? max(2, runs - 2) : 1) {
            samples.append(try makeStore(path, count: options.bulkCount))
        }
        if options.wants("bulk") { report("bulk", "project", samples) }
    }

    func fetchAndToggle() throws {
        let path = directory + "/fetch.db"
        try makeStore(path, count: options.fetchCount)
        if options.wants("fetch") {
            var cold: [Double] = []
            var warm: [Double] = []
            var fetched = 0
            for _ in 0..<runs {
                let queue = try DatabaseQueue(path: path, key: benchKey())
                let tasks = TaskList(migratedQueue: queue)
                cold.append(try milliseconds { fetched = try tasks.list(order: .oldestFirst, limit: options.fetchCount).count })
                warm.append(try milliseconds { fetched = try tasks.list(order: .oldestFirst, limit: options.fetchCount).count })
                try queue.close()
            }
            guard fetched == options.fetchCount else { fail("fetch read \(fetched) tasks") }
            report("fetch", "project", cold)
            info("fetch-warm-project", median(warm), "same fetch again on the same connection (pages cached)")
        }
        if options.wants("toggle") {
            let queue = try DatabaseQueue(path: path, key: benchKey())
            let tasks = TaskList(migratedQueue: queue)
            let ids = toggleIndexes(count: options.toggleCount, total: options.fetchCount).map { BenchTask($0).id }
            try tasks.toggle(id: ids[0])  // the first write of a connection creates the WAL: not measured
            try tasks.toggle(id: ids[0])
            let samples = try repeatMeasuring(runs) {
                for id in ids { try tasks.toggle(id: id) }
            }
            try queue.close()
            report("toggle", "project", samples)
        }
    }

    func count() throws {
        let path = directory + "/bulk.db"
        var samples: [Double] = []
        var star: [Double] = []
        for _ in 0..<(runs + 2) {
            let queue = try DatabaseQueue(path: path, key: benchKey())
            let tasks = TaskList(migratedQueue: queue)
            var total = 0
            samples.append(try milliseconds { total = try tasks.count() })
            guard total == options.bulkCount else { fail("count gave \(total)") }
            try queue.close()
            let plain = try DatabaseQueue(path: path, key: benchKey())
            star.append(try milliseconds { total = try plain.read { db in try db.scalar(BenchSQL.count, as: Int.self) ?? 0 } })
            try plain.close()
        }
        report("count", "project", samples)
        info("count-star-project", median(star), "SELECT count(*) on the encrypted store, fresh connection (what the trigger-kept count avoids)")
    }

    func launch() throws {
        // The bulk store becomes the keyed database "launch" of the app "securestore-bench", its key stored
        // in the Keychain as KeyedDatabase stores keys (64 lowercase hex digits).
        let dataDirectory = directory + "/keyed"
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        let target = dataDirectory + "/\(launchName).db"
        removeDatabase(target)
        try FileManager.default.moveItem(atPath: directory + "/bulk.db", toPath: target)
        let hex = [UInt8](repeating: 0x42, count: 32).map { String(format: "%02x", $0) }.joined()
        try Keychain().set(hex, service: "\(benchApp).database-key", account: launchName)
        // The warm-up run (the first launch after the move) is not measured.
        let launches = measureChildren([executablePath(), "launch-child", dataDirectory], times: runs * 3, reading: "inprocess") {
            if $0.value("total") != Double(options.bulkCount) { fail("launch child: \($0.output)") }
        }
        report("launch", "project", launches.wall, rssMiB: median(launches.rss))
        info("launch-inprocess-project", median(launches.values), "key lookup + open + count + first 50, inside the process")
    }

    func keychain() throws {
        let keychain = Keychain()
        let service = "\(benchApp).keychain"
        let value = String(repeating: "0123456789abcdef", count: 4)
        let first = try milliseconds { try keychain.set(value, service: service, account: "get") }
        info("keychain-first-call-project", first, "first call of the process: D-Bus connection + store")
        if options.wants("keychain-get") {
            var got: String?
            let samples = try repeatMeasuring(runs * 20) { got = try keychain.string(service: service, account: "get") }
            guard got == value else { fail("keychain get returned a different value") }
            report("keychain-get", "project", samples)
        }
        if options.wants("keychain-set") {
            var counter = 0
            let samples = try repeatMeasuring(runs * 10) {
                counter += 1
                try keychain.set(value + String(counter), service: service, account: "set")
            }
            report("keychain-set", "project", samples)
        }
    }

    func preferences() throws {
        let prefsDirectory = URL(filePath: directory + "/prefs", directoryHint: .isDirectory)
        let location = try PreferencesLocation(directory: prefsDirectory, domain: "bench")
        try? FileManager.default.removeItem(at: location.fileURL)
        let prefs = try Preferences(location: location, limits: preferenceLimits)
        try prefs.update { values in
            for (key, value) in sampleDomain(bytes: options.domainBytes) {
                values[key] = try PreferenceValue(converting: value)
            }
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: location.fileURL.path)[.size] as? Int) ?? 0
        info("prefs-domain-project", Double(size) / 1_024, unit: "KiB", "\(location.fileURL.path), \(prefs.keys.count) keys")
        if options.wants("prefs-load") {
            let loads = measureChildren(
                [executablePath(), "prefs-load-child", prefsDirectory.path, "bench"], times: runs * 3, reading: "load")
            report("prefs-load", "project", loads.values, rssMiB: median(loads.rss))
            info("prefs-load-process-project", median(loads.wall), "whole process that loads the domain")
        }
        if options.wants("prefs-save") {
            var counter = 0
            let samples = try repeatMeasuring(runs * 4) {
                counter += 1
                try prefs.set("value \(counter)", forKey: "bench.changed")
            }
            report("prefs-save", "project", samples)
        }
    }
}

extension ProjectBench {
    /// `export`: every task of a bulkCount store to a JSON Lines file, by TaskList.forEachTask and
    /// TaskStreamWriter in a fresh process, beside the reference `sqlcipher` tool dumping the same table
    /// (`.mode list`, `.output`) in the same run, interleaved A B A B. `list-json`: what `securestore --json tasks
    /// list --limit none` runs (TaskList.snapshot, newest first, TaskStreamWriter's json array) beside the export
    /// of the same tasks as a JSON array (`tasks export --format json`), interleaved. `import`: the JSON Lines file
    /// read back by TaskStreamReader into TaskList.importTasks (one transaction, titles exact, as `tasks import`)
    /// into a new store, beside `sqlcipher` loading its own `.dump` of the same store (`.read` into a new file: the
    /// same schema, rows, indexes and triggers). Each reports the child's peak RSS; INFO lines give the RSS at a
    /// tenth of the size (flat memory) and the median of the per-pair ratios.
    func exportAndImport() throws {
        let store = directory + "/export.db"
        try makeStore(store, count: options.bulkCount)
        let small = directory + "/export-small.db"
        try makeStore(small, count: max(1, options.bulkCount / 10))
        let jsonl = directory + "/export.jsonl"
        let dump = directory + "/export-sqlcipher.txt"
        let hexKey = String(repeating: "42", count: 32)
        let prelude = "PRAGMA key=\"x'\(hexKey)'\";\nPRAGMA cipher_compatibility = 3;\nPRAGMA cipher_page_size = 4096;\n"
        let dumpScript = directory + "/export.sql"
        try (prelude + ".mode list\n.output \(dump)\nSELECT created_at, hex(id), title, done FROM tasks ORDER BY created_at, id;\n")
            .write(toFile: dumpScript, atomically: true, encoding: .utf8)
        let runs = max(3, self.runs)
        /// Interleaved pairs of `a` (the project) and `b` (the baseline): both reported with their RSS, and the
        /// median of the per-pair ratios as INFO `<workload>-pair-ratio`.
        func pairs(_ workload: String, _ baselineName: String, _ a: () -> ChildRun, _ b: () -> (wall: Double, rss: Double)) {
            var project: [Double] = []
            var projectRSS: [Double] = []
            var baseline: [Double] = []
            var baselineRSS: [Double] = []
            var ratios: [Double] = []
            for _ in 0..<runs {
                let first = a()
                let second = b()
                project.append(first.wallMilliseconds)
                projectRSS.append(first.peakRSSMiB)
                baseline.append(second.wall)
                baselineRSS.append(second.rss)
                ratios.append(first.wallMilliseconds / second.wall)
            }
            report(workload, "project", project, rssMiB: median(projectRSS))
            report(workload, "baseline", baseline, rssMiB: median(baselineRSS))
            info("\(workload)-pair-ratio", median(ratios), unit: "x", "median of the \(runs) per-pair ratios project/\(baselineName) (A B A B)")
        }
        func counted(_ run: ChildRun, _ what: String) -> ChildRun {
            guard run.value("count") == Double(options.bulkCount) else { fail("\(what) child: \(run.output)") }
            return run
        }
        func sqlcipher(_ path: String, _ script: String) -> (wall: Double, rss: Double) {
            let run = runChild([executablePath(), "sqlcipher-child", path, ".read \(script)"])
            return (run.value("wall") ?? .nan, run.value("rss") ?? .nan)
        }
        if options.wants("export") {
            pairs("export", "sqlcipher", { counted(runChild([executablePath(), "export-child", store, jsonl, "jsonl"]), "export") }) {
                sqlcipher(store, dumpScript)
            }
            let dumped = try String(contentsOfFile: dump, encoding: .utf8).utf8.lazy.filter { $0 == 0x0A }.count
            guard dumped == options.bulkCount else { fail("sqlcipher dumped \(dumped) lines") }
            let smallRun = runChild([executablePath(), "export-child", small, directory + "/export-small.jsonl", "jsonl"])
            info("export-rss-tenth", smallRun.peakRSSMiB, unit: "MiB", "peak RSS of the project's export of \(max(1, options.bulkCount / 10)) tasks")
        }
        if options.wants("list-json") {
            let listed = directory + "/list.json"
            let exported = directory + "/export.json"
            pairs("list-json", "export --format json", { counted(runChild([executablePath(), "list-child", store, listed]), "list") }) {
                let run = counted(runChild([executablePath(), "export-child", store, exported, "json"]), "export")
                return (run.wallMilliseconds, run.peakRSSMiB)
            }
            let smallRun = runChild([executablePath(), "list-child", small, listed])
            info("list-json-rss-tenth", smallRun.peakRSSMiB, unit: "MiB", "peak RSS of the project's list of \(max(1, options.bulkCount / 10)) tasks")
            for path in [listed, exported] { try? FileManager.default.removeItem(atPath: path) }
        }
        if options.wants("import") {
            if !FileManager.default.fileExists(atPath: jsonl) { _ = runChild([executablePath(), "export-child", store, jsonl, "jsonl"]) }
            let target = directory + "/import.db"
            let baselineTarget = directory + "/import-sqlcipher.db"
            // sqlcipher's own dump of the store (schema, rows, indexes, triggers), loaded by sqlcipher into a new file.
            let sqlDump = directory + "/store-dump.sql"
            let dumpAll = directory + "/dump-all.sql"
            try (prelude + ".output \(sqlDump)\n.dump\n").write(toFile: dumpAll, atomically: true, encoding: .utf8)
            _ = sqlcipher(store, dumpAll)
            let loadScript = directory + "/load.sql"
            // A dump of a database with a virtual table (the task list's full-text index) writes sqlite_master under
            // `PRAGMA writable_schema`, which the shell of SQLite 3.26 and later refuses in its default defensive mode.
            let defensiveOff = Database.sqliteVersion >= SQLiteVersion(3, 26, 0) ? ".dbconfig defensive off\n" : ""
            try (prelude + defensiveOff + ".read \(sqlDump)\n").write(toFile: loadScript, atomically: true, encoding: .utf8)
            pairs("import", "sqlcipher loading its .dump", {
                removeDatabase(target)
                return counted(runChild([executablePath(), "import-child", target, jsonl]), "import")
            }) {
                removeDatabase(baselineTarget)
                return sqlcipher(baselineTarget, loadScript)
            }
            let smallJSONL = directory + "/export-small.jsonl"
            if !FileManager.default.fileExists(atPath: smallJSONL) {
                _ = runChild([executablePath(), "export-child", small, smallJSONL, "jsonl"])
            }
            removeDatabase(target)
            let smallRun = runChild([executablePath(), "import-child", target, smallJSONL])
            info("import-rss-tenth", smallRun.peakRSSMiB, unit: "MiB", "peak RSS of the project's import of \(max(1, options.bulkCount / 10)) tasks")
            removeDatabase(target)
            removeDatabase(baselineTarget)
            for path in [sqlDump, dumpAll, loadScript] { try? FileManager.default.removeItem(atPath: path) }
        }
        for path in [store, small] { removeDatabase(path) }
        for path in [jsonl, dump, directory + "/export-small.jsonl"] { try? FileManager.default.removeItem(atPath: path) }
    }
}

// MARK: Children

/// Exports every task of the store at `path` to `output` in `format`, streaming; prints the count and peak RSS.
func exportChild(_ path: String, _ output: String, _ format: String) throws {
    let queue = try DatabaseQueue(path: path, key: benchKey())
    let tasks = TaskList(migratedQueue: queue)
    let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fail("cannot create \(output)") }
    var writer = TaskStreamWriter(format: TaskStreamFormat(rawValue: format) ?? .jsonl, fileDescriptor: fd, name: output)
    var count = 0
    try writer.begin()
    try tasks.forEachTask { task in
        try writer.encode(task)
        count += 1
    }
    try writer.end()
    close(fd)
    try queue.close()
    print("count \(count) rss \(imagePeakRSSMiB())")
}

/// What `securestore --json tasks list --limit none` runs: every task, newest first, as a JSON array to `output`,
/// streamed from one snapshot; prints the count and peak RSS.
func listChild(_ path: String, _ output: String) throws {
    let queue = try DatabaseQueue(path: path, key: benchKey())
    let tasks = TaskList(migratedQueue: queue)
    let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fail("cannot create \(output)") }
    var writer = TaskStreamWriter(format: .json, fileDescriptor: fd, name: output)
    try writer.begin()
    let count = try tasks.snapshot { snapshot in
        try snapshot.forEachTask(.all, order: .newestFirst, limit: nil) { try writer.encode($0) }
    }
    try writer.end()
    close(fd)
    try queue.close()
    print("count \(count) rss \(imagePeakRSSMiB())")
}

/// Imports the JSON Lines file `input` into a new store at `path` in one transaction; prints the count and peak RSS.
func importChild(_ path: String, _ input: String) throws {
    removeDatabase(path)
    let queue = try DatabaseQueue(path: path, key: benchKey())
    let tasks = try TaskList(queue: queue)
    let fd = open(input, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { fail("cannot read \(input)") }
    let reader = TaskStreamReader(format: .jsonl, fileDescriptor: fd, name: input)
    let summary = try tasks.importTasks(titles: .exact, next: reader.next)
    close(fd)
    try queue.close()
    print("count \(summary.inserted) rss \(imagePeakRSSMiB())")
}

/// Runs the reference `sqlcipher` tool on `path` with `command` from a small process, so that its peak RSS
/// (`ru_maxrss`, which counts the spawning process's size) is not the benchmark's; prints its wall time and RSS.
func sqlcipherChild(_ path: String, _ command: String) {
    let run = runChild(["/usr/bin/sqlcipher", "-batch", path, command])
    print("wall \(run.wallMilliseconds) rss \(run.peakRSSMiB)")
}

/// The first raw-key open of a process, then repeated raw-key and passphrase opens.
func openChild(_ path: String, _ passphrasePath: String, _ runs: Int, _ passphraseRuns: Int) throws {
    let key = benchKey()
    var queue: DatabaseQueue?
    let first = try milliseconds { queue = try DatabaseQueue(path: path, key: key) }
    try queue?.close()
    info("open-first-project", first, "first raw-key open of a process (pays the library's one-time set-up)")
    let raw = try repeatMeasuring(runs, setUp: { try queue?.close() }) { queue = try DatabaseQueue(path: path, key: key) }
    try queue?.close()
    report("open", "project", raw)
    let passphrase = try repeatMeasuring(passphraseRuns, setUp: { try queue?.close() }) {
        queue = try DatabaseQueue(path: passphrasePath, passphrase: "a passphrase")
    }
    try queue?.close()
    report("open", "baseline", passphrase)
}

/// What an app does when it starts: key from the Keychain, open, count, the first 50 newest tasks.
func launchChild(_ dataDirectory: String) throws {
    let start = ContinuousClock.now
    let paths = try AppPaths(app: benchApp, dataDirectory: URL(fileURLWithPath: dataDirectory, isDirectory: true))
    let database = try KeyedDatabase(paths: paths, name: launchName, keychain: Keychain())
    let tasks = try TaskList(queue: database.queue)
    let page = try tasks.page(limit: 50)
    let elapsed = (ContinuousClock.now - start).milliseconds
    try database.close()
    print("inprocess \(elapsed) total \(page.total) items \(page.items.count) rss \(imagePeakRSSMiB())")
}

func prefsLoadChild(_ directory: String, _ domain: String) throws {
    let start = ContinuousClock.now
    let prefs = try Preferences(
        location: PreferencesLocation(directory: URL(filePath: directory, directoryHint: .isDirectory), domain: domain),
        limits: preferenceLimits)
    let keys = prefs.storedValues.count
    print("load \((ContinuousClock.now - start).milliseconds) keys \(keys) rss \(imagePeakRSSMiB())")
}

// MARK: Main

var arguments = Array(CommandLine.arguments.dropFirst())
let options = BenchOptions(&arguments)
do {
    switch (arguments.first, arguments.count) {
    case ("schema", 1):
        // The task list's schema, for the plain-SQLite baseline (one source of truth: the Tasks module), without the
        // search index: the `insert` and `bulk` ratios show what the index costs. The C baseline on SQLCipher runs
        // the whole schema and the project's deferred indexing (CBaselineBench.swift).
        print(TaskList.createSQL)
    case ("run", 2):
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        try ProjectBench(directory: arguments[1], options: options).run()
    case ("open-child", 5):
        try openChild(arguments[1], arguments[2], Int(arguments[3]) ?? 50, Int(arguments[4]) ?? 5)
    case ("launch-child", 2):
        try launchChild(arguments[1])
    case ("export-child", 4):
        try exportChild(arguments[1], arguments[2], arguments[3])
    case ("import-child", 3):
        try importChild(arguments[1], arguments[2])
    case ("list-child", 3):
        try listChild(arguments[1], arguments[2])
    case ("sqlcipher-child", 3):
        sqlcipherChild(arguments[1], arguments[2])
    case ("records-child", 5):
        try recordsChild(arguments[1], arguments[2], arguments[3], Int(arguments[4]) ?? 0)
    case ("records-floor", 2):
        // What `Decodable` alone costs for COUNT items, from a decoder of constants (Records.swift), in its own process.
        print("ms \(try decodableFloor(Int(arguments[1]) ?? 200_000))")
    case ("prefs-load-child", 3):
        try prefsLoadChild(arguments[1], arguments[2])
    case ("c-baseline", 2):
        // Every database workload against the C floor on SQLCipher, interleaved pairs (CBaselineBench.swift).
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        try CBaselineBench(directory: arguments[1], options: options).run()
    case ("task-child", 4):
        try taskChild(arguments[1], arguments[2], Int(arguments[3]) ?? 0, options: options)
    case ("search", 2):
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        try SearchBench(directory: arguments[1], options: options).run()
    case ("search-child", 4):
        // One process of the word search on a kept store, for A/B pairs of two builds (SearchBench.swift).
        try searchChild(arguments[1], arguments[2], Int(arguments[3]) ?? 5, options: options)
    case ("keyed-pool", 2):
        // KeyedDatabase with reading connections against without, interleaved pairs (KeyedPoolBench.swift).
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        try KeyedPoolBench(directory: arguments[1], options: options).run()
    case ("backup", 2):
        // KeyedDatabase.backup(to:) while writing, against GRDB's DatabasePool.backup, interleaved pairs (BackupBench.swift).
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        try BackupBench(directory: arguments[1], options: options).run()
    case ("pool", 2):
        // DatabasePool against DatabaseQueue, interleaved pairs (PoolBench.swift).
        try FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
        try PoolBench(directory: arguments[1], options: options).run()
    default:
        FileHandle.standardError.write(
            Data("usage: securestore-bench run DIRECTORY [--scale N] [--runs N] [--only w1,w2]\n".utf8))
        exit(64)
    }
} catch {
    fail("\(error)")
}
