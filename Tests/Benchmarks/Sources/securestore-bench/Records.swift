// The records workloads (issue 14): the records layer beside the hand-written decode on the same SecureStore
// database, and beside GRDB 7.10's Codable records (securestore-bench-grdb, plain SQLite), interleaved per round.
import BenchSupport
import EncryptedDatabase
import Foundation

/// The seeds' task, as an app would declare it for the records layer.
struct BenchItem: Codable, FetchableRecord, PersistableRecord {
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

    init(id: UUID, title: String, isDone: Bool, creationDate: Date) {
        self.id = id
        self.title = title
        self.isDone = isDone
        self.creationDate = creationDate
    }
}

/// The same item with `init(row:)` written by hand, by column name: the records layer without `Decodable`.
struct BenchItemByName: FetchableRecord, TableRecord {
    static let databaseTableName = "item"
    var item: BenchItem
    init(row: Row) throws {
        item = BenchItem(
            id: try row["id"], title: try row["title"], isDone: try row["isDone"], creationDate: try row["creationDate"])
    }
}

let benchItemSchema =
    "CREATE TABLE item (id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, isDone INTEGER NOT NULL, creationDate INTEGER NOT NULL)"

/// The hand-written path the records layer is held to: typed accessors by column index.
func handWrittenFetch(_ db: Database) throws -> [BenchItem] {
    try db.fetch("SELECT * FROM item") { row in
        BenchItem(
            id: try row.uuid(at: 0), title: try row.string(at: 1), isDone: try row.bool(at: 2),
            creationDate: try row.date(at: 3))
    }
}

func handWrittenInsert(_ item: BenchItem, _ db: Database) throws {
    try db.execute(
        "INSERT INTO item (id, title, isDone, creationDate) VALUES (?, ?, ?, ?)",
        [item.id, item.title, item.isDone, item.creationDate])
}

/// `records-child DIRECTORY records|rowinit|handwritten fetch|insert COUNT`: one measurement in a fresh process;
/// prints `ms <median of 3> rss <peak MiB>`. `rowinit` fetches through the records layer with `init(row:)` by name.
func recordsChild(_ directory: String, _ mode: String, _ operation: String, _ count: Int) throws {
    let records = mode == "records"
    func fetch(_ db: Database) throws -> Int {
        switch mode {
        case "records": try BenchItem.fetchAll(db).count
        case "rowinit": try BenchItemByName.fetchAll(db).count
        default: try handWrittenFetch(db).count
        }
    }
    var samples: [Double] = []
    switch operation {
    case "fetch":
        let queue = try DatabaseQueue(path: directory + "/records.db", key: benchKey())
        _ = try queue.read { db in try fetch(db) }  // warm the cache
        for _ in 0..<3 {
            var fetched = 0
            samples.append(try milliseconds { fetched = try queue.read { db in try fetch(db) } })
            guard fetched == count else { fail("records-child fetched \(fetched) of \(count)") }
        }
        try queue.close()
    case "insert":
        let path = directory + "/records-insert-\(mode).db"
        removeDatabase(path)
        let queue = try DatabaseQueue(path: path, key: benchKey())
        let items = (0..<count).map(BenchItem.init)
        for round in 0..<4 {
            try queue.writeWithoutTransaction { db in
                try db.execute("DROP TABLE IF EXISTS item")
                try db.execute(benchItemSchema)
            }
            let time = try milliseconds {
                try queue.write { db in
                    if records {
                        for item in items { try item.insert(db) }
                    } else {
                        for item in items { try handWrittenInsert(item, db) }
                    }
                }
            }
            if round > 0 { samples.append(time) }  // the first round warms up
        }
        guard try queue.read({ db in try BenchItem.fetchCount(db) }) == count else { fail("records-child insert") }
        try queue.close()
        removeDatabase(path)
    default:
        fail("records-child: unknown operation \(operation)")
    }
    print("ms \(median(samples)) rss \(imagePeakRSSMiB())")
}

extension ProjectBench {
    /// `records-fetch` (200 000 rows) and `records-insert` (50 000 rows): per round, one fresh process each for
    /// the records layer, the hand-written path and GRDB, in that order; the ratios are per round.
    func records() throws {
        let grdb = URL(filePath: executablePath()).deletingLastPathComponent().appending(path: "securestore-bench-grdb")
            .path
        guard FileManager.default.isExecutableFile(atPath: grdb) else {
            fail("\(grdb) is missing: swift build --package-path Tests/Benchmarks -c release --product securestore-bench-grdb")
        }
        let rounds = max(3, runs)
        for (workload, operation, count) in [
            ("records-fetch", "fetch", options.fetchCount), ("records-insert", "insert", options.insertCount),
        ] where options.wants(workload) {
            if operation == "fetch" {
                // One store per library, made once and not measured.
                let path = directory + "/records.db"
                removeDatabase(path)
                let queue = try DatabaseQueue(path: path, key: benchKey())
                try queue.write { db in
                    try db.execute(benchItemSchema)
                    for index in 0..<count { try handWrittenInsert(BenchItem(index), db) }
                }
                try queue.checkpoint()
                try queue.close()
                _ = runChild([grdb, "setup", directory, String(count)])
            }
            var record: [Double] = [], hand: [Double] = [], peer: [Double] = []
            var recordRSS: [Double] = [], handRSS: [Double] = [], peerRSS: [Double] = []
            var versusHand: [Double] = [], versusPeer: [Double] = [], memory: [Double] = []
            var byName: [Double] = []
            for _ in 0..<rounds {
                if operation == "fetch" {
                    let d = runChild([executablePath(), "records-child", directory, "rowinit", operation, String(count)])
                    let e = runChild([executablePath(), "records-child", directory, "handwritten", operation, String(count)])
                    if let rd = d.value("ms"), let re = e.value("ms") { byName.append(rd / re) }
                }
                let a = runChild([executablePath(), "records-child", directory, "records", operation, String(count)])
                let b = runChild([executablePath(), "records-child", directory, "handwritten", operation, String(count)])
                let c = runChild([grdb, operation, directory, String(count)])
                guard let ra = a.value("ms"), let rb = b.value("ms"), let rc = c.value("ms") else {
                    fail("records children: \(a.output) \(b.output) \(c.output)")
                }
                record.append(ra)
                hand.append(rb)
                peer.append(rc)
                recordRSS.append(a.peakRSSMiB)
                handRSS.append(b.peakRSSMiB)
                peerRSS.append(c.peakRSSMiB)
                versusHand.append(ra / rb)
                versusPeer.append(ra / rc)
                memory.append(a.peakRSSMiB / b.peakRSSMiB)
            }
            report(workload, "project", record, rssMiB: median(recordRSS))
            report(workload, "baseline", hand, rssMiB: median(handRSS))
            report(workload + "-grdb", "project", record, rssMiB: median(recordRSS))
            report(workload + "-grdb", "baseline", peer, rssMiB: median(peerRSS))
            info(
                workload + "-pair-ratio", median(versusHand), unit: "x",
                "median of \(rounds) per-round ratios records / hand-written (\(count) rows; A B C A B C …)")
            info(
                workload + "-grdb-pair-ratio", median(versusPeer), unit: "x",
                "median of \(rounds) per-round ratios records / GRDB 7.10 Codable records (\(count) rows)")
            if operation == "fetch" {
                info(
                    workload + "-decodable-floor", try decodableFloor(count), unit: "ms",
                    "\(count) items through Decodable from a decoder that returns constants (no database): the cost of "
                        + "Decodable itself, compare with the hand-written fetch")
            }
            if !byName.isEmpty {
                info(
                    workload + "-rowinit-pair-ratio", median(byName), unit: "x",
                    "median of \(rounds) per-pair ratios records with init(row:) by column name / hand-written by index")
            }
            info(
                workload + "-rss-ratio", median(memory), unit: "x",
                "median peak RSS records / hand-written (\(count) rows)")
        }
    }
}

// MARK: The floor of Decodable

/// A decoder that hands out constants: what `Decodable` itself costs per row, with no database at all.
private struct ConstantDecoder: Decoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ConstantContainer<Key>())
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { fail("unkeyed") }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { fail("single value") }
}

private struct ConstantContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }
    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { key.stringValue.isEmpty }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { key.stringValue }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        if T.self == Date.self { return Date(timeIntervalSince1970: 1) as! T }
        if T.self == UUID.self { return UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)) as! T }
        fail("unexpected \(T.self)")
    }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    { fail("nested") }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { fail("nested") }
    func superDecoder() throws -> any Decoder { fail("super") }
    func superDecoder(forKey key: Key) throws -> any Decoder { fail("super") }
}

/// Milliseconds to make `count` items through `Decodable` from constants (median of 3, after a warm-up).
func decodableFloor(_ count: Int) throws -> Double {
    var samples: [Double] = []
    for round in 0..<4 {
        var items: [BenchItem] = []
        items.reserveCapacity(count)
        let time = try milliseconds {
            for _ in 0..<count { items.append(try BenchItem(from: ConstantDecoder())) }
        }
        guard items.count == count else { fail("floor") }
        if round > 0 { samples.append(time) }
    }
    return median(samples)
}
