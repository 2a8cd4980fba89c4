// securestore-bench c-baseline DIRECTORY [--scale N] [--runs N] [--only w1,w2]: every database workload of the
// project against the C floor, securestore-bench-c (Tests/Benchmarks/CBaseline: C on the same SQLCipher, same file
// format, same schema and SQL, as a peer would write it), each side one fresh process per measurement, in
// interleaved pairs (A B, then B A, …). Prints, per workload (Docs/performance.md, "Against C on SQLCipher"):
//
//   BENCH <workload>-c project=<median>ms baseline=<median>ms ratio=<median of per-pair project/C> pairs=N
//
// The C program is found in BENCH_C_BASELINE or beside this executable (`make bench` compiles it with cc).
// Workloads: insert (50 000 tasks, TaskList.insert), fetch (200 000 tasks, a fresh connection), toggle (1 000
// toggles), records-fetch (200 000 Codable records, warm), records-insert (50 000 Codable records).
import BenchSupport
import EncryptedDatabase
import Foundation
import Tasks

struct CBaselineBench {
    let directory: String
    let options: BenchOptions

    func run() throws {
        let c = ProcessInfo.processInfo.environment["BENCH_C_BASELINE"]
            ?? URL(filePath: executablePath()).deletingLastPathComponent().appending(path: "securestore-bench-c").path
        guard FileManager.default.isExecutableFile(atPath: c) else {
            fail("\(c) is missing: cc -O2 -o \(c) Tests/Benchmarks/CBaseline/securestore-bench-c.c -lsqlcipher")
        }
        let schema = directory + "/task-schema.sql"
        try TaskList.schemaSQL.write(toFile: schema, atomically: true, encoding: .utf8)
        setenv("BENCH_TASK_SCHEMA", schema, 1)
        let project = ProjectBench(directory: directory, options: options)
        let workloads: [(name: String, count: Int, project: [String], c: [String])] = [
            ("insert", options.insertCount, ["task-child", directory, "insert", String(options.insertCount)],
             [c, directory, "insert", String(options.insertCount)]),
            ("fetch", options.fetchCount, ["task-child", directory, "fetch", String(options.fetchCount)],
             [c, directory, "fetch", String(options.fetchCount)]),
            ("toggle", options.toggleCount, ["task-child", directory, "toggle", String(options.toggleCount)],
             [c, directory, "toggle", String(options.toggleCount), String(options.fetchCount)]),
            ("records-fetch", options.fetchCount, ["records-child", directory, "records", "fetch", String(options.fetchCount)],
             [c, directory, "records-fetch", String(options.fetchCount)]),
            ("records-insert", options.insertCount, ["records-child", directory, "records", "insert", String(options.insertCount)],
             [c, directory, "records-insert", String(options.insertCount)]),
        ]
        guard workloads.contains(where: { options.wants($0.name) }) else { return }
        if options.wants("fetch") || options.wants("toggle") {
            try project.makeStore(directory + "/fetch.db", count: options.fetchCount)
        }
        if options.wants("records-fetch") {
            let path = directory + "/records.db"
            removeDatabase(path)
            let queue = try DatabaseQueue(path: path, key: benchKey())
            try queue.write { db in
                try db.execute(benchItemSchema)
                for index in 0..<options.fetchCount { try handWrittenInsert(BenchItem(index), db) }
            }
            try queue.checkpoint()
            try queue.close()
        }
        for workload in workloads where options.wants(workload.name) {
            var projectSamples: [Double] = []
            var cSamples: [Double] = []
            var ratios: [Double] = []
            for pair in 0..<max(3, options.runs) * 2 {
                let projectFirst = pair % 2 == 0
                var runs: [ChildRun] = []
                for side in projectFirst ? [0, 1] : [1, 0] {
                    runs.append(side == 0 ? runChild([executablePath()] + workload.project) : runChild(workload.c))
                }
                let (p, q) = projectFirst ? (runs[0], runs[1]) : (runs[1], runs[0])
                guard let projectMS = p.value("ms"), let cMS = q.value("ms") else {
                    fail("\(workload.name): \(p.output) \(q.output)")
                }
                projectSamples.append(projectMS)
                cSamples.append(cMS)
                ratios.append(projectMS / cMS)
            }
            print(
                "BENCH \(workload.name)-c project=\(String(format: "%.3f", median(projectSamples)))ms "
                    + "baseline=\(String(format: "%.3f", median(cSamples)))ms ratio=\(String(format: "%.4f", median(ratios))) "
                    + "pairs=\(ratios.count) ratio-min=\(String(format: "%.3f", ratios.min() ?? 0)) "
                    + "ratio-max=\(String(format: "%.3f", ratios.max() ?? 0))")
        }
    }
}

/// `task-child DIRECTORY insert|fetch|toggle COUNT`: one measurement of the task list in a fresh process, printed as
/// `ms <milliseconds>` (CBaselineBench).
func taskChild(_ directory: String, _ operation: String, _ count: Int, options: BenchOptions) throws {
    let milliseconds: Double
    switch operation {
    case "insert":
        let path = directory + "/project-insert.db"
        milliseconds = try ProjectBench(directory: directory, options: options).makeStore(path, count: count)
        removeDatabase(path)
    case "fetch":
        let queue = try DatabaseQueue(path: directory + "/fetch.db", key: benchKey())
        let tasks = TaskList(migratedQueue: queue)
        var fetched = 0
        milliseconds = try BenchSupport.milliseconds {
            fetched = try tasks.list(order: .oldestFirst, limit: count).count
        }
        guard fetched == count else { fail("task-child fetched \(fetched) of \(count)") }
        try queue.close()
    case "toggle":
        let queue = try DatabaseQueue(path: directory + "/fetch.db", key: benchKey())
        let tasks = TaskList(migratedQueue: queue)
        let ids = toggleIndexes(count: count, total: options.fetchCount).map { BenchTask($0).id }
        try tasks.toggle(id: ids[0])  // the first write of a connection creates the WAL: not measured
        try tasks.toggle(id: ids[0])
        milliseconds = try BenchSupport.milliseconds { for id in ids { try tasks.toggle(id: id) } }
        try queue.close()
    default:
        fail("task-child: unknown operation \(operation)")
    }
    print("ms \(milliseconds)")
}
