// securestore-bench-baseline: the baselines of `make bench` (Tests/Benchmarks/run-bench.sh, Docs/performance.md).
//
//   securestore-bench-baseline run DIRECTORY [--scale N] [--runs N] [--only w1,w2]
//
// The same workloads, data and SQL as securestore-bench, done the straightforward way with what a Linux
// program would use without SecureStore:
// - plain SQLite (libsqlite3, no encryption) through its C API: the task list's schema (tables, indexes and
//   triggers), the same pragmas (4096-byte pages, 64 MiB cache, WAL, synchronous NORMAL), the same INSERT,
//   UPDATE and SELECT statements, and `SELECT count(*)` for counting;
// - libsecret's simple C API (secret_password_lookupv_sync / secret_password_storev_sync) with the
//   Keychain module's schema and attributes;
// - Foundation's UserDefaults (UserDefaults(suiteName:) + synchronize()).
//
// This executable links plain libsqlite3 and therefore never SQLCipher (they export the same symbols).
import BenchSupport
import CLibSecretBaseline
import CSQLite3
import Foundation

// MARK: Plain SQLite

final class PlainDatabase {
    let connection: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(_ path: String) {
        var connection: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &connection, flags, nil) == SQLITE_OK, let connection else {
            fail("cannot open \(path)")
        }
        self.connection = connection
        sqlite3_busy_timeout(connection, 10_000)
        // The pragmas SecureStore's open applies (Sources/EncryptedDatabase/Opening.swift), minus the key.
        exec("PRAGMA page_size = 4096")
        exec("SELECT count(*) FROM sqlite_master")
        exec("PRAGMA cache_size = -65536")
        exec("PRAGMA journal_mode = WAL")
        exec("PRAGMA synchronous = NORMAL")
        exec("PRAGMA foreign_keys = ON")
    }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        sqlite3_close(connection)
    }

    func exec(_ sql: String) {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(connection, sql, nil, nil, &message) == SQLITE_OK else {
            fail("\(sql.prefix(60)): \(message.map { String(cString: $0) } ?? "?")")
        }
    }

    /// A prepared statement, kept for reuse (as any program doing this many times would).
    func statement(_ sql: String) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            fail("\(sql): \(String(cString: sqlite3_errmsg(connection)))")
        }
        statements[sql] = statement
        return statement
    }

    func check(_ result: Int32, _ what: String) {
        if result != SQLITE_OK && result != SQLITE_DONE && result != SQLITE_ROW {
            fail("\(what): \(String(cString: sqlite3_errmsg(connection)))")
        }
    }

    func bind(_ statement: OpaquePointer, _ index: Int32, _ id: UUID) {
        withUnsafeBytes(of: id.uuid) {
            check(sqlite3_bind_blob(statement, index, $0.baseAddress, 16, bench_sqlite_transient()), "bind")
        }
    }

    func insert(_ task: BenchTask) {
        let statement = statement(BenchSQL.insert)
        check(sqlite3_bind_int64(statement, 1, task.microseconds), "bind")
        bind(statement, 2, task.id)
        var title = task.title
        title.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                check(sqlite3_bind_text(statement, 3, $0.baseAddress, Int32($0.count), bench_sqlite_transient()), "bind")
            }
        }
        check(sqlite3_bind_int64(statement, 4, task.done ? 1 : 0), "bind")
        check(sqlite3_step(statement), "insert")
        sqlite3_reset(statement)
    }

    func task(_ statement: OpaquePointer) -> BenchTask {
        let blob = sqlite3_column_blob(statement, 0)!.assumingMemoryBound(to: UInt8.self)
        let id = UUID(uuid: (blob[0], blob[1], blob[2], blob[3], blob[4], blob[5], blob[6], blob[7],
                             blob[8], blob[9], blob[10], blob[11], blob[12], blob[13], blob[14], blob[15]))
        let text = sqlite3_column_text(statement, 1)!
        let title = String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, 1))), as: UTF8.self)
        return BenchTask(
            id: id, title: title, done: sqlite3_column_int64(statement, 2) != 0,
            microseconds: sqlite3_column_int64(statement, 3))
    }

    func tasks(_ sql: String) -> [BenchTask] {
        let statement = statement(sql)
        var result: [BenchTask] = []
        while true {
            let step = sqlite3_step(statement)
            if step != SQLITE_ROW { check(step, sql); break }
            result.append(task(statement))
        }
        sqlite3_reset(statement)
        return result
    }

    func scalar(_ sql: String) -> Int {
        let statement = statement(sql)
        check(sqlite3_step(statement), sql)
        let value = Int(sqlite3_column_int64(statement, 0))
        sqlite3_reset(statement)
        return value
    }

    /// The project's toggle: the UPDATE, then the task read back, in one transaction.
    func toggle(_ id: UUID) -> BenchTask {
        exec("BEGIN IMMEDIATE")
        let update = statement(BenchSQL.toggle)
        bind(update, 1, id)
        check(sqlite3_step(update), "toggle")
        sqlite3_reset(update)
        let select = statement(BenchSQL.byID)
        bind(select, 1, id)
        guard sqlite3_step(select) == SQLITE_ROW else { fail("toggle: no such task") }
        let task = task(select)
        sqlite3_reset(select)
        exec("COMMIT")
        return task
    }
}

func removeDatabase(_ path: String) {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
}

// MARK: Workloads

struct BaselineBench {
    let directory: String
    let options: BenchOptions
    var runs: Int { options.runs }

    func run() {
        if options.wants("insert") { insert() }
        if options.wants("bulk") || options.wants("count") || options.wants("launch") { bulk() }
        if options.wants("fetch") || options.wants("toggle") { fetchAndToggle() }
        if options.wants("count") { count() }
        if options.wants("launch") { launch() }
        if options.wants("keychain-get") || options.wants("keychain-set") { keychain() }
        if options.wants("prefs-load") || options.wants("prefs-save") { preferences() }
    }

    /// A store of `count` tasks at `path` in one transaction; returns the milliseconds of the insert.
    @discardableResult
    func makeStore(_ path: String, count: Int) -> Double {
        removeDatabase(path)
        let database = PlainDatabase(path)
        database.exec(BenchSQL.schema)
        let tasks = (0..<count).map(BenchTask.init)  // made before the clock, as the project's side does
        let time = milliseconds {
            database.exec("BEGIN IMMEDIATE")
            for task in tasks { database.insert(task) }
            database.exec("COMMIT")
        }
        database.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        database.close()
        return time
    }

    func insert() {
        let path = directory + "/insert.db"
        let samples = (0..<runs).map { _ in makeStore(path, count: options.insertCount) }
        removeDatabase(path)
        report("insert", "baseline", samples)
    }

    func bulk() {
        let path = directory + "/bulk.db"
        let samples = (0..<(options.wants("bulk") ? max(2, runs - 2) : 1)).map { _ in
            makeStore(path, count: options.bulkCount)
        }
        if options.wants("bulk") { report("bulk", "baseline", samples) }
    }

    func fetchAndToggle() {
        let path = directory + "/fetch.db"
        makeStore(path, count: options.fetchCount)
        if options.wants("fetch") {
            var cold: [Double] = []
            var warm: [Double] = []
            var fetched = 0
            for _ in 0..<runs {
                let database = PlainDatabase(path)
                cold.append(milliseconds { fetched = database.tasks(BenchSQL.fetchAll).count })
                warm.append(milliseconds { fetched = database.tasks(BenchSQL.fetchAll).count })
                database.close()
            }
            guard fetched == options.fetchCount else { fail("fetch read \(fetched) tasks") }
            report("fetch", "baseline", cold)
            info("fetch-warm-baseline", median(warm), "same fetch again on the same connection (pages cached)")
        }
        if options.wants("toggle") {
            let database = PlainDatabase(path)
            let ids = toggleIndexes(count: options.toggleCount, total: options.fetchCount).map { BenchTask($0).id }
            _ = database.toggle(ids[0])  // the first write of a connection creates the WAL: not measured
            _ = database.toggle(ids[0])
            let samples = repeatMeasuring(runs) {
                for id in ids { _ = database.toggle(id) }
            }
            database.close()
            report("toggle", "baseline", samples)
        }
    }

    func count() {
        let path = directory + "/bulk.db"
        var samples: [Double] = []
        for _ in 0..<(runs + 2) {
            let database = PlainDatabase(path)
            var total = 0
            samples.append(milliseconds { total = database.scalar(BenchSQL.count) })
            guard total == options.bulkCount else { fail("count gave \(total)") }
            database.close()
        }
        report("count", "baseline", samples)
    }

    func launch() {
        let launches = measureChildren([executablePath(), "launch-child", directory + "/bulk.db"], times: runs * 3, reading: "inprocess") {
            if $0.value("total") != Double(options.bulkCount) { fail("launch child: \($0.output)") }
        }
        report("launch", "baseline", launches.wall, rssMiB: median(launches.rss))
        info("launch-inprocess-baseline", median(launches.values), "open + count(*) + first 50, inside the process")
    }

    func keychain() {
        let service = "securestore-bench.keychain"
        let value = String(repeating: "0123456789abcdef", count: 4)
        let schema = keychainSchema()
        defer { secret_schema_unref(schema) }
        func attributes(_ account: String) -> OpaquePointer {
            let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
            g_hash_table_insert(table, g_strdup("service"), g_strdup(service))
            g_hash_table_insert(table, g_strdup("account"), g_strdup(account))
            return table
        }
        func store(_ account: String, _ password: String) {
            let table = attributes(account)
            defer { g_hash_table_unref(table) }
            var error: UnsafeMutablePointer<GError>?
            let label = "\(service) (\(account))"
            guard secret_password_storev_sync(schema, table, "default", label, password, nil, &error) != 0 else {
                fail("secret_password_storev_sync: \(error.map { String(cString: $0.pointee.message) } ?? "?")")
            }
        }
        let first = milliseconds { store("get", value) }
        info("keychain-first-call-baseline", first, "first call of the process: D-Bus connection + store")
        if options.wants("keychain-get") {
            var got: String?
            let samples = repeatMeasuring(runs * 20) {
                let table = attributes("get")
                defer { g_hash_table_unref(table) }
                var error: UnsafeMutablePointer<GError>?
                let password = secret_password_lookupv_sync(schema, table, nil, &error)
                got = password.map { String(cString: $0) }
                secret_password_free(password)
            }
            guard got == value else { fail("libsecret lookup returned \(got ?? "nothing")") }
            report("keychain-get", "baseline", samples)
        }
        if options.wants("keychain-set") {
            var counter = 0
            let samples = repeatMeasuring(runs * 10) {
                counter += 1
                store("set", value + String(counter))
            }
            report("keychain-set", "baseline", samples)
        }
    }

    /// The Keychain module's schema: name org.securestore.Secret, string attributes service and account.
    func keychainSchema() -> UnsafeMutablePointer<SecretSchema> {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)!
        defer { g_hash_table_unref(types) }
        g_hash_table_insert(types, g_strdup("service"), nil)  // SECRET_SCHEMA_ATTRIBUTE_STRING = 0
        g_hash_table_insert(types, g_strdup("account"), nil)
        return secret_schema_newv("org.securestore.Secret", SECRET_SCHEMA_NONE, types)
    }

    func preferences() {
        let suite = "securestore-bench"
        guard let defaults = UserDefaults(suiteName: suite) else { fail("UserDefaults(suiteName:) failed") }
        for key in defaults.dictionaryRepresentation().keys { defaults.removeObject(forKey: key) }
        for (key, value) in sampleDomain(bytes: options.domainBytes) { defaults.set(value, forKey: key) }
        defaults.synchronize()
        if let file = userDefaultsFile(suite) {
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
            info("prefs-domain-baseline", Double(size) / 1_024, unit: "KiB", file)
        }
        if options.wants("prefs-load") {
            let loads = measureChildren([executablePath(), "prefs-load-child", suite], times: runs * 3, reading: "load")
            report("prefs-load", "baseline", loads.values, rssMiB: median(loads.rss))
            info("prefs-load-process-baseline", median(loads.wall), "whole process that loads the domain")
        }
        if options.wants("prefs-save") {
            var counter = 0
            let samples = repeatMeasuring(runs * 4) {
                counter += 1
                defaults.set("value \(counter)", forKey: "bench.changed")
                defaults.synchronize()
            }
            report("prefs-save", "baseline", samples)
        }
    }

    /// Where swift-corelibs-foundation keeps a suite: `<XDG_CONFIG_HOME or ~/.config>/<suite>.plist` on
    /// Linux (looked for rather than assumed).
    func userDefaultsFile(_ suite: String) -> String? {
        let environment = ProcessInfo.processInfo.environment
        var bases: [String] = []
        if let config = environment["XDG_CONFIG_HOME"] { bases.append(config) }
        bases.append(NSHomeDirectory() + "/.config")
        bases.append(NSHomeDirectory() + "/Library")
        for base in bases {
            for candidate in [base + "/\(suite).plist", base + "/Preferences/\(suite).plist"]
            where FileManager.default.fileExists(atPath: candidate) {
                return candidate
            }
        }
        return nil
    }
}

// MARK: Children

func launchChild(_ path: String) {
    let start = ContinuousClock.now
    let database = PlainDatabase(path)
    let total = database.scalar(BenchSQL.count)
    let page = database.tasks(BenchSQL.firstPage)
    let elapsed = (ContinuousClock.now - start).milliseconds
    database.close()
    print("inprocess \(elapsed) total \(total) items \(page.count) rss \(imagePeakRSSMiB())")
}

func prefsLoadChild(_ suite: String) {
    let start = ContinuousClock.now
    guard let defaults = UserDefaults(suiteName: suite) else { fail("UserDefaults(suiteName:) failed") }
    let keys = defaults.dictionaryRepresentation().count
    print("load \((ContinuousClock.now - start).milliseconds) keys \(keys) rss \(imagePeakRSSMiB())")
}

// MARK: Main

var arguments = Array(CommandLine.arguments.dropFirst())
let options = BenchOptions(&arguments)
switch (arguments.first, arguments.count) {
case ("run", 2):
    try? FileManager.default.createDirectory(atPath: arguments[1], withIntermediateDirectories: true)
    BaselineBench(directory: arguments[1], options: options).run()
case ("launch-child", 2):
    launchChild(arguments[1])
case ("prefs-load-child", 2):
    prefsLoadChild(arguments[1])
default:
    FileHandle.standardError.write(
        Data("usage: securestore-bench-baseline run DIRECTORY [--scale N] [--runs N] [--only w1,w2]\n".utf8))
    exit(64)
}
