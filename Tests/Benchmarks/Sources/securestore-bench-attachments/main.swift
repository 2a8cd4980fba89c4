// securestore-bench-attachments: one side of the attachment benchmark (Docs/attachments.md, `make bench`).
//
//   securestore-bench-attachments <impl> <dir> <size> <count>
//
// impl = `securestore` (AttachmentStore on a SQLCipher database: a file beside it, 256 KiB chunks, digests),
//        `inline` (one BLOB per attachment in a table of the SQLCipher record database itself, whole in memory:
//                  Core Data's "inside the store"), or `file` (plain files: write + fsync; read).
// Attaches `count` objects of `size` bytes copied from one source file (in the page cache), then reads each
// back in full (cold with BENCH_COLD=1: each object's files flushed and dropped from the page cache before it is
// read); prints `RESULT write|read <size> <impl> <ms per object> <MB/s>` and `RSS <MiB>`. The plain
// SQLite BLOB column is measured by securestore-bench-attachments-baseline, which links plain libsqlite3
// (never in one process with SQLCipher). The driver, Tests/Benchmarks/run-attachment-bench.sh, interleaves them.
import BenchSupport
import EncryptedDatabase
import Foundation
import SecureStore
import Glibc

var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 4, let size = Int(arguments[2]), let count = Int(arguments[3]) else {
    fail("usage: securestore-bench-attachments securestore|inline|file <dir> <size> <count>")
}
let implementation = arguments[0]
let directory = arguments[1]
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
let sourcePath = directory + "/source-\(size)"
if !FileManager.default.fileExists(atPath: sourcePath) {
    // Random bytes written in pieces, so that the peak RSS of the first round is the store's, not the source's.
    writeRandomFile(sourcePath, size: size)
}

let chunk = 256 * 1024
let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)

@MainActor func copyFile(_ source: String, _ destination: String) {
    let input = open(source, O_RDONLY)
    let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    while true {
        let n = read(input, buffer.baseAddress, chunk)
        if n <= 0 { break }
        var done = 0
        while done < n { done += write(output, buffer.baseAddress! + done, n - done) }
    }
    fsync(output)
    close(input)
    close(output)
}

@MainActor func readFile(_ path: String) -> Int {
    let input = open(path, O_RDONLY)
    var total = 0
    while true {
        let n = read(input, buffer.baseAddress, chunk)
        if n <= 0 { break }
        total += n
    }
    close(input)
    return total
}

func report(_ operation: String, _ samples: [Double]) {
    let ms = median(samples)
    let mbps = Double(size) / 1_000_000 / (ms / 1000)
    print("RESULT \(operation) \(size) \(implementation) \(String(format: "%.4f", ms)) \(String(format: "%.1f", mbps))")
}

// Warm the source into the page cache.
_ = readFile(sourcePath)
var writes: [Double] = []
var reads: [Double] = []
switch implementation {
case "file":
    let folder = directory + "/files"
    try? FileManager.default.removeItem(atPath: folder)
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for i in 0..<count { writes.append(milliseconds { copyFile(sourcePath, folder + "/\(i)") }) }
    let dir = open(folder, O_RDONLY)
    fsync(dir)
    close(dir)
    for i in 0..<count {
        if benchReadsCold { dropFromPageCache([folder + "/\(i)"]) }
        reads.append(milliseconds { _ = readFile(folder + "/\(i)") })
    }
case "securestore", "inline":
    let path = directory + "/\(implementation).db"
    // The database with its side files (a log left by an earlier run in the same folder would be refused as
    // foreign beside the new database), and its attachments file.
    for file in [path, path + "-wal", path + "-shm", AttachmentStore.filePath(forDatabase: path)] {
        try? FileManager.default.removeItem(atPath: file)
    }
    let queue = try DatabaseQueue(path: path, key: DatabaseKey.random())
    try queue.write { db in try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY, data BLOB)") }
    let owner = try AttachmentOwner(table: "note", id: UUID())
    if implementation == "securestore" {
        var configuration = AttachmentStoreConfiguration()
        if let chunk = ProcessInfo.processInfo.environment["BENCH_CHUNK_KIB"].flatMap(Int.init) {
            configuration.chunkSize = chunk * 1024
        }
        if let limit = ProcessInfo.processInfo.environment["BENCH_INLINE_KIB"].flatMap(Int.init) {
            configuration.inlineLimit = limit * 1024
        }
        if ProcessInfo.processInfo.environment["BENCH_FORMAT"] == "securestore-1" {
            configuration.database.format = .secureStore
        }
        let store = AttachmentStore(database: queue, configuration: configuration)
        try store.prepare()
        var ids: [UUID] = []
        for _ in 0..<count {
            writes.append(try milliseconds { ids.append(try store.add(.file(sourcePath), to: owner).id) })
        }
        for id in ids {
            if benchReadsCold { dropFromPageCache([store.path, store.path + "-journal"]) }
            reads.append(try milliseconds { try store.read(id: id) { _ in } })
        }
    } else {
        var ids: [UUID] = []
        for _ in 0..<count {
            writes.append(try milliseconds {
                let data = FileManager.default.contents(atPath: sourcePath)!
                let id = UUID()
                try queue.write { db in try db.execute("INSERT INTO note (id, data) VALUES (?, ?)", [id, data]) }
                ids.append(id)
            })
        }
        for id in ids {
            if benchReadsCold { dropFromPageCache([path, path + "-wal"]) }
            reads.append(try milliseconds {
                _ = try queue.read { db in try db.fetchOne("SELECT data FROM note WHERE id = ?", [id]) { try $0.data(at: 0) } }
            })
        }
    }
default:
    fail("unknown implementation \(implementation)")
}
report("write", writes)
report("read", reads)
print("RSS \(String(format: "%.1f", peakRSSMiB()))")
