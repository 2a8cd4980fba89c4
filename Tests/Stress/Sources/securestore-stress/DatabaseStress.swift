// Scenarios for the EncryptedDatabase module; see main.swift.
//
//   securestore-stress db write PATH KEY_HEX WRITER COUNT
//       Opens PATH with the 32-byte key given as 64 hex digits, applies the stress schema, then inserts
//       COUNT rows (WRITER, 0..<COUNT), each in its own write transaction. Exit 0 when every write succeeded,
//       1 with the error on stderr otherwise. Several of these run at once against one file.
//
//   securestore-stress db measure DIRECTORY
//       Prints the time of the workloads in Docs/database.md through the public API (build with -c release
//       for meaningful figures). Creates and deletes its files in DIRECTORY.
import EncryptedDatabase
import Foundation

/// Runs one database scenario and returns the process exit status.
func runDatabaseStress(_ arguments: [String]) -> Int32 {
    guard let scenario = arguments.first else {
        return databaseStressUsage()
    }
    switch scenario {
    case "write":
        guard arguments.count == 5, let key = databaseKey(hex: arguments[2]), let writer = Int(arguments[3]),
            let count = Int(arguments[4])
        else { return databaseStressUsage() }
        do {
            let queue = try DatabaseQueue(path: arguments[1], key: key)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("stress v1") { db in
                try db.execute(
                    "CREATE TABLE entry (writer INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (writer, n))")
            }
            try migrator.migrate(queue)
            for n in 0..<count {
                try queue.write { db in
                    try db.execute("INSERT INTO entry (writer, n) VALUES (?, ?)", [writer, n])
                }
            }
            try queue.close()
            return 0
        } catch {
            FileHandle.standardError.write(Data("securestore-stress db write: \(error)\n".utf8))
            return 1
        }
    case "measure":
        guard arguments.count == 2 else { return databaseStressUsage() }
        do {
            try measure(directory: arguments[1])
            return 0
        } catch {
            FileHandle.standardError.write(Data("securestore-stress db measure: \(error)\n".utf8))
            return 1
        }
    default:
        return databaseStressUsage()
    }
}

private func milliseconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
}

private func measure(directory: String) throws {
    let key = DatabaseKey.random()
    func fresh(_ name: String) throws -> (String, DatabaseQueue) {
        let path = directory + "/" + name
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let queue = try DatabaseQueue(path: path, key: key)
        try queue.write { db in
            try db.execute(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL, created REAL NOT NULL)")
        }
        return (path, queue)
    }
    func fill(_ queue: DatabaseQueue, _ count: Int) throws {
        try queue.write { db in
            for index in 0..<count {
                try db.execute(
                    "INSERT INTO t (title, done, created) VALUES (?, ?, ?)",
                    ["task number \(index) to do", index & 1, 1.7e9 + Double(index)])
            }
        }
    }
    func report(_ name: String, _ value: Double) { print(name, String(format: "%.2f", value)) }

    var (path, queue) = try fresh("measure.db")
    try queue.close()
    _ = try DatabaseQueue(path: path, key: key)  // warm the library
    var opens: [Double] = []
    for _ in 0..<50 { opens.append(try milliseconds { _ = try DatabaseQueue(path: path, key: key) }) }
    report("open-raw-key-median", opens.sorted()[opens.count / 2])
    (path, queue) = try fresh("measure-passphrase.db")
    try queue.close()
    let passphrase = directory + "/measure-passphrase2.db"
    try? FileManager.default.removeItem(atPath: passphrase)
    _ = try DatabaseQueue(path: passphrase, passphrase: "measure")
    report("open-passphrase", try milliseconds { _ = try DatabaseQueue(path: passphrase, passphrase: "measure") })

    (path, queue) = try fresh("measure.db")
    report("insert50k", try milliseconds { try fill(queue, 50_000) })
    (path, queue) = try fresh("measure.db")
    try fill(queue, 200_000)
    try queue.checkpoint()
    try queue.close()
    queue = try DatabaseQueue(path: path, key: key)
    report("fetch200k-cold", try milliseconds {
        _ = try queue.read { db in
            try db.fetch("SELECT id, title, done, created FROM t") { row in
                (try row.int64(at: 0), try row.string(at: 1), try row.bool(at: 2), try row.double(at: 3))
            }
        }
    })
    report("fetch200k-warm", try milliseconds {
        _ = try queue.read { db in
            try db.fetch("SELECT id, title, done, created FROM t") { row in
                (try row.int64(at: 0), try row.string(at: 1), try row.bool(at: 2), try row.double(at: 3))
            }
        }
    })
    (path, queue) = try fresh("measure.db")
    report("insert1m", try milliseconds { try fill(queue, 1_000_000) })
    try queue.checkpoint()
    try queue.close()
    queue = try DatabaseQueue(path: path, key: key)
    report("count1m-cold", try milliseconds { _ = try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } })
    report("count1m-warm", try milliseconds { _ = try queue.read { db in try db.scalar("SELECT count(*) FROM t", as: Int.self) } })
    (path, queue) = try fresh("measure.db")
    report("tx1000", try milliseconds {
        for _ in 0..<1000 {
            try queue.write { db in
                try db.execute("INSERT INTO t (title, done, created) VALUES (?, 0, 0)", ["one row"])
            }
        }
    })
    try queue.close()
    for name in ["measure.db", "measure-passphrase.db", "measure-passphrase2.db"] {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: directory + "/" + name + suffix) }
    }
}

private func databaseStressUsage() -> Int32 {
    FileHandle.standardError.write(Data("usage: securestore-stress db write PATH KEY_HEX WRITER COUNT | measure DIRECTORY\n".utf8))
    return 64
}

private func databaseKey(hex: String) -> DatabaseKey? {
    let digits = Array(hex.utf8)
    guard digits.count == 64 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: 64, by: 2) {
        guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
            return nil
        }
        bytes.append(byte)
    }
    defer { for index in bytes.indices { bytes[index] = 0 } }
    return try? DatabaseKey(bytes: bytes)
}
