// securestore-bench-grdb: GRDB 7.10's Codable records on the records workloads' data, for `make bench`
// (securestore-bench's `records-fetch` and `records-insert` run it between the project's children).
//
//   securestore-bench-grdb setup DIRECTORY COUNT     makes DIRECTORY/grdb.db with COUNT items (not measured)
//   securestore-bench-grdb fetch DIRECTORY COUNT     Item.fetchAll: prints `ms <median of 3> rss <MiB>`
//   securestore-bench-grdb insert DIRECTORY COUNT    COUNT × item.insert(db) in one transaction, the same
//   securestore-bench-grdb backup-setup DIRECTORY COUNT   makes DIRECTORY/grdb-notes.db with COUNT notes (not measured)
//   securestore-bench-grdb backup DIRECTORY COUNT    DatabasePool.backup(to:) of it into a new file while a thread
//                                                    inserts a note per transaction: prints `ms <backup> longest <the
//                                                    longest write>` (securestore-bench backup, issue 34)
//
// GRDB links the system's plain libsqlite3 (no encryption), with the same journal settings as SecureStore's
// queue (WAL, synchronous NORMAL) and GRDB's default Codable storage (a UUID is a 16-byte blob, a Date is text).
import BenchSupport
import Dispatch
import Foundation
import GRDB

struct Item: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "item"
    var id: UUID
    var title: String
    var isDone: Bool
    var creationDate: Date

    init(_ index: Int) {
        let task = BenchTask(index)
        id = task.id
        title = task.title
        isDone = task.done
        creationDate = Date(timeIntervalSince1970: Double(task.microseconds) / 1e6)
    }
}

func openQueue(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.prepareDatabase { db in
        try db.execute(sql: "PRAGMA journal_mode = WAL")
        try db.execute(sql: "PRAGMA synchronous = NORMAL")
    }
    return try DatabaseQueue(path: path, configuration: configuration)
}

func createTable(_ db: GRDB.Database) throws {
    try db.execute(
        sql: "CREATE TABLE item (id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, isDone INTEGER NOT NULL, creationDate TEXT NOT NULL)")
}

func remove(_ path: String) {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
}

/// The notes of securestore-bench backup: the same table and rows as the project's.
func setUpNotes(_ path: String, count: Int) throws {
    remove(path)
    let pool = try DatabasePool(path: path)
    try pool.write { db in
        try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
        let body = String(repeating: "journal text ", count: 14)
        for index in 0..<count {
            try db.execute(sql: "INSERT INTO note (id, title, body) VALUES (?, ?, ?)", arguments: [index, "note \(index)", body])
        }
    }
    try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
}

/// A backup of the notes while a thread inserts a note per transaction: the backup's and the longest write's ms.
func backupWhileWriting(_ directory: String) throws -> (Double, Double) {
    let pool = try DatabasePool(path: directory + "/grdb-notes.db")
    let destination = directory + "/grdb-backup.db"
    remove(destination)
    defer { remove(destination) }
    final class Writer: @unchecked Sendable {
        let lock = NSLock()
        var stopped = false
        var longest = 0.0
        var writes = 0
    }
    let writer = Writer()
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        while !writer.lock.withLock({ writer.stopped }) {
            do {
                let elapsed = try milliseconds {
                    try pool.write { db in
                        try db.execute(sql: "INSERT INTO note (title, body) VALUES (?, ?)", arguments: ["written", "during the backup"])
                    }
                }
                writer.lock.withLock {
                    writer.longest = max(writer.longest, elapsed)
                    writer.writes += 1
                }
            } catch {
                fail("grdb backup: a write failed: \(error)")
            }
        }
        done.signal()
    }
    while writer.lock.withLock({ writer.writes }) == 0 { usleep(200) }
    let elapsed = try milliseconds {
        let target = try DatabaseQueue(path: destination)
        try pool.backup(to: target)
        try target.close()
    }
    writer.lock.withLock { writer.stopped = true }
    done.wait()
    return (elapsed, writer.lock.withLock { writer.longest })
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 3, let count = Int(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: securestore-bench-grdb setup|fetch|insert DIRECTORY COUNT\n".utf8))
    exit(64)
}
let directory = arguments[1]
do {
    var samples: [Double] = []
    switch arguments[0] {
    case "setup":
        let path = directory + "/grdb.db"
        remove(path)
        let queue = try openQueue(path)
        try queue.write { db in
            try createTable(db)
            for index in 0..<count { try Item(index).insert(db) }
        }
        try queue.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        print("setup \(count)")
    case "backup-setup":
        try setUpNotes(directory + "/grdb-notes.db", count: count)
        print("setup \(count)")
    case "backup":
        let (backup, longest) = try backupWhileWriting(directory)
        print("ms \(backup) longest \(longest)")
    case "fetch":
        let queue = try openQueue(directory + "/grdb.db")
        _ = try queue.read { db in try Item.fetchAll(db) }  // warm the cache
        for _ in 0..<3 {
            var fetched = 0
            samples.append(try milliseconds { fetched = try queue.read { db in try Item.fetchAll(db) }.count })
            guard fetched == count else { fail("grdb fetched \(fetched) of \(count)") }
        }
        print("ms \(median(samples)) rss \(imagePeakRSSMiB())")
    case "insert":
        let path = directory + "/grdb-insert.db"
        remove(path)
        let queue = try openQueue(path)
        let items = (0..<count).map(Item.init)
        for round in 0..<4 {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "DROP TABLE IF EXISTS item")
                try createTable(db)
            }
            let time = try milliseconds {
                try queue.write { db in
                    for item in items { try item.insert(db) }
                }
            }
            if round > 0 { samples.append(time) }  // the first round warms up
        }
        guard try queue.read({ db in try Item.fetchCount(db) }) == count else { fail("grdb insert") }
        remove(path)
        print("ms \(median(samples)) rss \(imagePeakRSSMiB())")
    default:
        fail("unknown operation \(arguments[0])")
    }
} catch {
    fail("\(error)")
}
