// securestore-bench-attachments-baseline: a BLOB column in plain SQLite (libsqlite3, never with SQLCipher in one
// process), the third side of the attachment benchmark: `sqlite <dir> <size> <count>`. WAL, synchronous = FULL
// (each commit is on disk, as the plain-file side's fsync), one row per object, bound whole.
import BenchSupport
import CSQLite3
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 4, let size = Int(arguments[2]), let count = Int(arguments[3]) else {
    fail("usage: securestore-bench-attachments-baseline sqlite <dir> <size> <count>")
}
let directory = arguments[1]
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
let sourcePath = directory + "/source-\(size)"
guard FileManager.default.fileExists(atPath: sourcePath) else { fail("run the project side first: \(sourcePath)") }
let path = directory + "/plain.db"
for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
var db: OpaquePointer?
guard sqlite3_open(path, &db) == SQLITE_OK else { fail("cannot open \(path)") }
@MainActor func exec(_ sql: String) {
    guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { fail(String(cString: sqlite3_errmsg(db))) }
}
exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE note (id INTEGER PRIMARY KEY, data BLOB)")
var insert: OpaquePointer?
sqlite3_prepare_v2(db, "INSERT INTO note (id, data) VALUES (?, ?)", -1, &insert, nil)
var select: OpaquePointer?
sqlite3_prepare_v2(db, "SELECT data FROM note WHERE id = ?", -1, &select, nil)
var writes: [Double] = []
var reads: [Double] = []
for i in 0..<count {
    writes.append(milliseconds {
        let data = FileManager.default.contents(atPath: sourcePath)!
        exec("BEGIN IMMEDIATE")
        sqlite3_bind_int64(insert, 1, Int64(i))
        _ = data.withUnsafeBytes { sqlite3_bind_blob(insert, 2, $0.baseAddress, Int32($0.count), nil) }
        guard sqlite3_step(insert) == SQLITE_DONE else { fail(String(cString: sqlite3_errmsg(db))) }
        sqlite3_reset(insert)
        exec("COMMIT")
    })
}
var sink = 0
for i in 0..<count {
    if benchReadsCold { dropFromPageCache([path, path + "-wal"]) }
    reads.append(milliseconds {
        exec("BEGIN")
        sqlite3_bind_int64(select, 1, Int64(i))
        if sqlite3_step(select) == SQLITE_ROW {
            let bytes = sqlite3_column_bytes(select, 0)
            let copy = Data(bytes: sqlite3_column_blob(select, 0)!, count: Int(bytes))
            sink &+= copy.count
        }
        sqlite3_reset(select)
        exec("COMMIT")
    })
}
func report(_ operation: String, _ samples: [Double]) {
    let ms = median(samples)
    let mbps = Double(size) / 1_000_000 / (ms / 1000)
    print("RESULT \(operation) \(size) sqlite \(String(format: "%.4f", ms)) \(String(format: "%.1f", mbps))")
}
report("write", writes)
report("read", reads)
print("RSS \(String(format: "%.1f", peakRSSMiB()))")
