// What both benchmark executables share: options, timing, statistics, result lines, fresh processes and the
// data set. It links no database library, so the plain-SQLite baseline can use it too.
//
// Result lines (read by Tests/Benchmarks/run-bench.sh, which joins the two sides):
//
//   RESULT <workload> <side> <median> <min> <max> <runs> <unit> [<peak RSS MiB>]
//   INFO <name> <value> <unit> <free text>
public import Foundation

import Glibc

// MARK: Options

/// The sizes and repetitions of a run: `--scale N` divides every data size by N (the smoke test uses 1000),
/// `--runs N` sets how many times each workload is repeated.
public struct BenchOptions: Sendable {
    /// The divisor of every data size (1 for the real benchmark).
    public var scale = 1
    /// The repetitions of the slow workloads; fast ones repeat a multiple of this.
    public var runs = 5
    /// Only these workloads, when not empty.
    public var only: Set<String> = []

    /// Parses `--scale N`, `--runs N` and `--only a,b` from `arguments`; returns the rest.
    public init(_ arguments: inout [String]) {
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : ""
            switch argument {
            case "--scale": scale = max(1, Int(value) ?? 1); index += 2
            case "--runs": runs = max(1, Int(value) ?? 1); index += 2
            case "--only": only = Set(value.split(separator: ",").map(String.init)); index += 2
            default: rest.append(argument); index += 1
            }
        }
        arguments = rest
    }

    /// `count` divided by the scale, at least 1.
    public func size(_ count: Int) -> Int { max(1, count / scale) }

    /// Whether `workload` is to run.
    public func wants(_ workload: String) -> Bool { only.isEmpty || only.contains(workload) }

    /// The sizes of the workloads (issue 6).
    public var insertCount: Int { size(50_000) }
    /// Tasks of the `bulk` workload, and of the store `count` and `launch` use.
    public var bulkCount: Int { size(1_000_000) }
    /// Tasks of the `fetch` workload's store.
    public var fetchCount: Int { size(200_000) }
    /// Toggles of the `toggle` workload, one transaction each.
    public var toggleCount: Int { size(1_000) }
    /// Bytes of the preferences domain.
    public var domainBytes: Int { max(1_024, 100 * 1_024 / scale) }
}

// MARK: Timing and results

/// The wall time of `body` in milliseconds (monotonic clock).
public func milliseconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return (ContinuousClock.now - start).milliseconds
}

extension Duration {
    /// The duration in (fractional) milliseconds.
    public var milliseconds: Double {
        Double(components.seconds) * 1_000 + Double(components.attoseconds) / 1e15
    }
}

/// Runs `body` `runs` times and returns each run's milliseconds.
public func repeatMeasuring(_ runs: Int, _ body: () throws -> Void) rethrows -> [Double] {
    try repeatMeasuring(runs, setUp: {}, body)
}

/// Runs `body` `runs` times (after `setUp` each time, not timed) and returns each run's milliseconds.
public func repeatMeasuring(_ runs: Int, setUp: () throws -> Void, _ body: () throws -> Void) rethrows -> [Double] {
    var samples: [Double] = []
    for _ in 0..<runs {
        try setUp()
        samples.append(try milliseconds(body))
    }
    return samples
}

/// The median of `samples` (the mean of the middle two for an even count).
public func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// Prints the `RESULT` line of one side of a workload.
public func report(_ workload: String, _ side: String, _ samples: [Double], unit: String = "ms", rssMiB: Double? = nil) {
    let sorted = samples.sorted()
    var line = "RESULT \(workload) \(side) \(format(median(sorted))) \(format(sorted.first ?? .nan)) "
        + "\(format(sorted.last ?? .nan)) \(sorted.count) \(unit)"
    if let rssMiB { line += " " + String(format: "%.1f", rssMiB) }
    print(line)
    fflush(nil)
}

/// Prints an `INFO` line: a figure shown in the table but not a workload of its own.
public func info(_ name: String, _ value: Double, unit: String = "ms", _ detail: String) {
    print("INFO \(name) \(format(value)) \(unit) \(detail)")
    fflush(nil)
}

private func format(_ value: Double) -> String {
    value >= 100 ? String(format: "%.1f", value) : value >= 1 ? String(format: "%.3f", value) : String(format: "%.4f", value)
}

/// The peak resident set size of this process so far, in MiB (getrusage `ru_maxrss`).
public func peakRSSMiB() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_maxrss) / 1_024  // KiB on Linux
}

/// The peak resident set size of this process image in MiB: `VmHWM` of /proc/self/status.
///
/// For a child spawned by a big process this is the figure to use: Linux carries the parent's resident size
/// at `exec` into the child's `ru_maxrss` (posix_spawn shares the parent's memory until then), while
/// `VmHWM` belongs to the new image alone.
public func imagePeakRSSMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
        let kib = Double(line.split(separator: " ").dropFirst().first ?? "")
    else { return peakRSSMiB() }
    return kib / 1_024
}

/// Writes `size` random bytes to a new file at `path` (mode 0600), in pieces of 64 KiB, so that the writer's peak
/// RSS stays small and the measured process's is its own.
public func writeRandomFile(_ path: String, size: Int) {
    var generator = SystemRandomNumberGenerator()
    let output = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard output >= 0 else { fail("cannot create \(path)") }
    var piece = [UInt64](repeating: 0, count: 8192)
    var left = size
    while left > 0 {
        for i in piece.indices { piece[i] = generator.next() }
        let n = min(left, piece.count * 8)
        _ = piece.withUnsafeBytes { write(output, $0.baseAddress, n) }
        left -= n
    }
    close(output)
}

/// Exits with status 1 and `message` on standard error.
public func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
    exit(1)
}

// MARK: Fresh processes

/// One finished child process: its wall time from spawn to exit, its peak RSS, and its standard output.
public struct ChildRun: Sendable {
    init(wallMilliseconds: Double, peakRSSMiB: Double, output: String) {
        self.wallMilliseconds = wallMilliseconds
        self.peakRSSMiB = peakRSSMiB
        self.output = output
    }

    /// Milliseconds from just before `posix_spawn` to the return of `wait4`.
    public let wallMilliseconds: Double
    /// The child's peak RSS in MiB: the `rss` it printed (``imagePeakRSSMiB()``), or else `ru_maxrss` from
    /// `wait4` (which includes this process's size at the spawn).
    public let peakRSSMiB: Double
    /// What the child wrote on standard output.
    public let output: String

    /// The number after `name` in the output (`name 1.23`), if any.
    public func value(_ name: String) -> Double? {
        let words = output.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard let index = words.firstIndex(where: { $0 == name }), index + 1 < words.count else { return nil }
        return Double(words[index + 1])
    }
}

/// What repeated fresh processes measured: wall times, peak RSS and one value each printed.
public struct ChildSamples: Sendable {
    /// Wall time of each process, spawn to exit, in milliseconds.
    public var wall: [Double] = []
    /// Peak RSS of each process, in MiB.
    public var rss: [Double] = []
    /// The value each process printed after the requested name (NaN when it printed none).
    public var values: [Double] = []
}

/// Runs `command` once to warm up (not measured), then `times` times, collecting each run's wall time,
/// peak RSS and the value it printed after `name`; `check` sees every measured run (it may `fail`).
public func measureChildren(
    _ command: [String], times: Int, reading name: String, check: (ChildRun) -> Void = { _ in }
) -> ChildSamples {
    _ = runChild(command)
    var samples = ChildSamples()
    for _ in 0..<times {
        let child = runChild(command)
        check(child)
        samples.wall.append(child.wallMilliseconds)
        samples.rss.append(child.peakRSSMiB)
        samples.values.append(child.value(name) ?? .nan)
    }
    return samples
}

/// Runs `arguments[0]` (a path) with `arguments` and the current environment, and waits for it.
/// Exits the benchmark when the child fails.
public func runChild(_ arguments: [String]) -> ChildRun {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { fail("pipe: \(String(cString: strerror(errno)))") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
    posix_spawn_file_actions_addclose(&actions, fds[0])
    posix_spawn_file_actions_addclose(&actions, fds[1])
    let cArguments = arguments.map { strdup($0) } + [nil]
    defer { for argument in cArguments { free(argument) } }
    // The child starts with no blocked signals and default handlers, as the tests' runner starts its children
    // (a thread of this process may block some; a child must still stop on SIGTERM).
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var emptySet = sigset_t()
    sigemptyset(&emptySet)
    var defaultSet = sigset_t()
    sigemptyset(&defaultSet)
    for signal in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP] { sigaddset(&defaultSet, signal) }
    posix_spawnattr_setsigmask(&attributes, &emptySet)
    posix_spawnattr_setsigdefault(&attributes, &defaultSet)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let start = ContinuousClock.now
    let result = posix_spawn(&pid, arguments[0], &actions, &attributes, cArguments, environ)
    close(fds[1])
    guard result == 0 else { fail("cannot run \(arguments[0]): \(String(cString: strerror(result)))") }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4_096)
    while true {
        let count = read(fds[0], &buffer, buffer.count)
        if count > 0 { output += buffer[0..<count] } else if count == 0 || errno != EINTR { break }
    }
    close(fds[0])
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) < 0, errno == EINTR {}
    let wall = (ContinuousClock.now - start).milliseconds
    let text = String(decoding: output, as: UTF8.self)
    guard status == 0 else { fail("\(arguments.joined(separator: " ")) failed (status \(status)): \(text)") }
    var run = ChildRun(wallMilliseconds: wall, peakRSSMiB: Double(usage.ru_maxrss) / 1_024, output: text)
    if let rss = run.value("rss") { run = ChildRun(wallMilliseconds: wall, peakRSSMiB: rss, output: text) }
    return run
}

/// The path of this executable (`/proc/self/exe`).
public func executablePath() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

// MARK: The data set

/// One task of the data set, as both sides store it: a random 16-byte ID, a title, a done flag and a
/// creation date in microseconds since 1970.
public struct BenchTask: Sendable {
    /// The task's ID.
    public let id: UUID
    /// The task's title (at most 15 UTF-8 bytes, so a small string).
    public let title: String
    /// Whether the task is done (every third one).
    public let done: Bool
    /// Creation date, microseconds since 1970; tasks are one millisecond apart.
    public let microseconds: Int64

    /// A task read back from a database.
    public init(id: UUID, title: String, done: Bool, microseconds: Int64) {
        self.id = id
        self.title = title
        self.done = done
        self.microseconds = microseconds
    }

    /// Task number `index` of the data set: the same on both sides and in every run.
    public init(_ index: Int) {
        let high = splitMix(UInt64(index) &* 2)
        let low = splitMix(UInt64(index) &* 2 &+ 1)
        var bytes = withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) {
            $0.load(as: uuid_t.self)
        }
        bytes.6 = bytes.6 & 0x0F | 0x40  // version 4
        bytes.8 = bytes.8 & 0x3F | 0x80  // variant 1
        id = UUID(uuid: bytes)
        title = "\(benchWords[index % benchWords.count]) #\(index)"
        done = index % 3 == 0
        microseconds = 1_700_000_000_000_000 + Int64(index) * 1_000
    }
}

private let benchWords = ["Buy", "Call", "Email", "Fix", "Pay", "Read", "Plan", "Book", "Clean", "Write"]

/// SplitMix64's output function over a fixed stream: a cheap, well-mixed hash of `index`.
private func splitMix(_ index: UInt64) -> UInt64 {
    var z = 0x5EC0_5709_E000_0000 &+ (index &+ 1) &* 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

/// The indexes of the tasks the `toggle` workload flips: `count` tasks spread over a store of `total`.
public func toggleIndexes(count: Int, total: Int) -> [Int] {
    (0..<count).map { ($0 &* 7_919 &+ 13) % max(total, 1) }
}

/// The SQL both sides run, where the project's library does not choose it itself.
public enum BenchSQL {
    /// The task list's schema for the baseline: the product's own `TaskList.createSQL`, which the project side
    /// prints (`securestore-bench schema`) and run-bench.sh hands over in the file named by `BENCH_TASK_SCHEMA` —
    /// the baseline links plain libsqlite3 and so cannot import the Tasks module (which links SQLCipher).
    public static let schema: String = {
        guard let path = ProcessInfo.processInfo.environment["BENCH_TASK_SCHEMA"],
            let text = try? String(contentsOfFile: path, encoding: .utf8), !text.isEmpty
        else { fail("BENCH_TASK_SCHEMA must name a file holding the task list's schema (run-bench.sh makes it)") }
        return text
    }()
    /// Inserting one task.
    public static let insert = "INSERT OR ROLLBACK INTO tasks (created_at, id, title, done) VALUES (?, ?, ?, ?)"
    /// Every task, oldest first.
    public static let fetchAll = "SELECT id, title, done, created_at FROM tasks ORDER BY created_at, id"
    /// The first page, newest first.
    public static let firstPage = "SELECT id, title, done, created_at FROM tasks ORDER BY created_at DESC, id DESC LIMIT 50"
    /// Counting every task the straightforward way.
    public static let count = "SELECT count(*) FROM tasks"
    /// Flipping one task's done flag.
    public static let toggle = "UPDATE OR ROLLBACK tasks SET done = 1 - done WHERE id = ?"
    /// Reading one task back by ID (the project's toggle returns the task).
    public static let byID = "SELECT id, title, done, created_at FROM tasks WHERE id = ?"
}

// MARK: Preferences data

/// Settings-like values adding up to about `bytes` bytes of compact JSON (as securestore-stress writes).
public func sampleDomain(bytes: Int) -> [(String, any Sendable)] {
    var result: [(String, any Sendable)] = []
    var total = 0
    var index = 0
    while total < bytes {
        let key = "setting.\(index)"
        let value: any Sendable
        switch index % 5 {
        case 0: value = "A sentence of settings text number \(index), with some words in it."
        case 1: value = index * 7919
        case 2: value = Double(index) / 3
        case 3: value = ["recent-\(index)", "recent-\(index + 1)", "recent-\(index + 2)"]
        default: value = ["width": index, "height": index * 2, "visible": index % 2 == 0] as [String: any Sendable]
        }
        result.append((key, value))
        total += key.utf8.count + 40
        index += 1
    }
    return result
}

// MARK: Cold reads

/// Whether the attachment benchmarks read cold (`BENCH_COLD=1`): each object's files are flushed and dropped from
/// the page cache before it is read, so that both sides read from the device.
public let benchReadsCold = ProcessInfo.processInfo.environment["BENCH_COLD"] == "1"

/// Flushes each existing file of `paths` and asks the kernel to drop its pages from the page cache
/// (`fsync`, then `posix_fadvise(POSIX_FADV_DONTNEED)`: only clean pages are dropped, hence the flush).
/// `/proc/sys/vm/drop_caches` needs privileges this does not.
public func dropFromPageCache(_ paths: [String]) {
    for path in paths {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { continue }
        fsync(descriptor)
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
        close(descriptor)
    }
}
