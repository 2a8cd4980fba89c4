// Damage anywhere in an attachments file, read every way: a byte flipped in each page in turn, and the file cut at
// each page boundary. Whatever the read mode (whole, streamed, a caller that stops early), the read-ahead depth
// (none, 1, the maximum) and the load on the machine, every byte delivered is the original's prefix, each chunk
// whole; a read that says it succeeded delivered all of it. (A real SQLCipher file on disk, damaged by hand: no
// double.) SQLCipher fails a page that does not authenticate only at the connection's next page read, so a chunk
// whose last page was damaged used to be handed over with zeros in its tail (issue 21).
import EncryptedDatabase
import Foundation
import Attachments
import Synchronization
import TestSupport
import Testing

@Suite struct AttachmentDamageSweepTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    static let chunkSize = 64 * 1024
    static let pageSize = 32 * 1024

    /// A record database with one 6.5-chunk attachment (the last chunk short), closed, and the original bytes.
    private func pristine() throws -> (folder: String, key: DatabaseKey, id: UUID, data: Data) {
        let folder = directory.path + "/pristine"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let key = DatabaseKey.random()
        let queue = try DatabaseQueue(path: folder + "/notes.db", key: key)
        try queue.write { db in try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY)") }
        var configuration = AttachmentStoreConfiguration()
        configuration.chunkSize = Self.chunkSize
        let store = AttachmentStore(database: queue, configuration: configuration)
        var state: UInt32 = 5
        let data = Data((0..<(6 * Self.chunkSize + 20_000)).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        })
        let added = try store.add(.data(data, name: "scan.bin"), to: try AttachmentOwner(table: "note", id: UUID()))
        #expect(added.chunkCount == 7)
        try store.close()
        try queue.close()
        return (folder, key, added.id, data)
    }

    /// A fresh copy of the pristine files, with `damage` applied to the copy of the attachments file.
    private func damagedCopy(of folder: String, name: String, _ damage: (FileHandle) throws -> Void) throws -> String {
        let copy = directory.path + "/" + name
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: folder) {
            try FileManager.default.copyItem(atPath: folder + "/" + file, toPath: copy + "/" + file)
        }
        let handle = try #require(FileHandle(forUpdatingAtPath: copy + "/notes.attachments.db"))
        try damage(handle)
        try handle.close()
        return copy
    }

    enum Mode: CaseIterable { case whole, streamed, slowConsumer, stopsAfterTwoChunks }

    /// Reads the attachment in `mode` at read-ahead `depth`; returns the bytes delivered and the error, if any.
    private func read(
        _ folder: String, key: DatabaseKey, id: UUID, mode: Mode, depth: Int
    ) -> (delivered: Data, error: (any Error)?) {
        var delivered = Data()
        do {
            let queue = try DatabaseQueue(path: folder + "/notes.db", key: key)
            defer { try? queue.close() }
            var configuration = AttachmentStoreConfiguration()
            configuration.readAhead = depth
            let store = AttachmentStore(database: queue, configuration: configuration)
            defer { try? store.close() }
            struct Enough: Error {}
            switch mode {
            case .whole:
                delivered = try store.data(id: id)
            case .streamed:
                try store.read(id: id) { delivered.append(contentsOf: $0) }
            case .slowConsumer:
                // The worker fills the channel while the consumer is slow: the two race for every hand-over.
                try store.read(id: id) { chunk in
                    usleep(300)
                    delivered.append(contentsOf: chunk)
                }
            case .stopsAfterTwoChunks:
                var seen = 0
                do {
                    try store.read(id: id) { chunk in
                        delivered.append(contentsOf: chunk)
                        seen += 1
                        if seen == 2 { throw Enough() }
                    }
                } catch is Enough {}
            }
            return (delivered, nil)
        } catch {
            return (delivered, error)
        }
    }

    /// Checks one damaged copy in every mode and depth: a prefix of whole chunks, all of it when no error.
    private func check(_ folder: String, key: DatabaseKey, id: UUID, data: Data, what: String) {
        for depth in [0, 1, AttachmentStoreConfiguration.maximumReadAhead] {
            for mode in Mode.allCases {
                let (delivered, error) = read(folder, key: key, id: id, mode: mode, depth: depth)
                let context = "\(what), \(mode), read-ahead \(depth)"
                #expect(delivered == data.prefix(delivered.count), "wrong bytes delivered: \(context)")
                if mode == .whole, error != nil {
                    #expect(delivered.isEmpty, "a failed whole read returned bytes: \(context)")
                }
                if error == nil, mode != .stopsAfterTwoChunks {
                    #expect(delivered.count == data.count, "a read that succeeded delivered a part: \(context)")
                }
                if error != nil, mode != .whole {
                    #expect(delivered.count % Self.chunkSize == 0, "a chunk was cut: \(context)")
                }
                if let error = error as? SecureStoreError, error.code == SecureStoreError.Code.verificationFailed {
                    #expect(!error.message.contains("SQL logic error"), "\(context): \(error.message)")
                }
                // A read that stopped at a damaged chunk says how many bytes the caller got (data(id:) collects them
                // itself and hands over none).
                if let error = error as? SecureStoreError, error.message.contains("is damaged: chunk "), mode != .whole {
                    let said = delivered.isEmpty
                        ? "no byte was delivered"
                        : "its first \(delivered.count) bytes were delivered"
                    #expect(error.message.contains(said), "\(context): \(error.message)")
                }
            }
        }
    }

    /// Keeps the other core busy, so that the worker and the consumer race under load.
    private func withLoad<T>(_ body: () throws -> T) rethrows -> T {
        let stop = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            var x: UInt64 = 1
            while !stop.load(ordering: .relaxed) { for _ in 0..<10_000 { x = x &* 6_364_136_223_846_793_005 &+ 1 } }
            if x == 0 { print(x) }
            done.signal()
        }
        defer {
            stop.store(true, ordering: .relaxed)
            done.wait()
        }
        return try body()
    }

    @Test func aByteFlippedInAnyPageNeverDeliversAWrongByte() throws {
        let (folder, key, id, data) = try pristine()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: folder + "/notes.attachments.db")[.size] as? Int)
        let pages = size / Self.pageSize
        #expect(pages >= 15)
        var failures = 0
        try withLoad {
            for page in 0..<pages {
                // A byte in the page's body (not its IV or HMAC): the page no longer authenticates.
                let offset = UInt64(page * Self.pageSize + 1000 + (page * 7919) % 20_000)
                let copy = try damagedCopy(of: folder, name: "flip-\(page)") { handle in
                    try handle.seek(toOffset: offset)
                    let byte = try #require(try handle.read(upToCount: 1))
                    try handle.seek(toOffset: offset)
                    try handle.write(contentsOf: Data([byte[0] ^ 0x40]))
                }
                let (_, error) = read(copy, key: key, id: id, mode: .streamed, depth: 4)
                if error != nil { failures += 1 }
                check(copy, key: key, id: id, data: data, what: "page \(page + 1) of \(pages) flipped")
            }
        }
        // A flip in a page of the attachment's chunks (at least 14 pages of 32 KiB hold its 6.3 chunks of 64 KiB)
        // or of the chunk index fails the read; a page of another table (the upload marks, free pages) does not.
        #expect(failures >= 14)
    }

    @Test func aFileCutAtAnyPageBoundaryNeverDeliversAWrongByte() throws {
        let (folder, key, id, data) = try pristine()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: folder + "/notes.attachments.db")[.size] as? Int)
        let pages = size / Self.pageSize
        try withLoad {
            for kept in 1..<pages {
                let copy = try damagedCopy(of: folder, name: "cut-\(kept)") { handle in
                    try handle.truncate(atOffset: UInt64(kept * Self.pageSize))
                }
                check(copy, key: key, id: id, data: data, what: "cut after page \(kept) of \(pages)")
            }
        }
    }

    @Test func aChunkWhoseLastPageIsDamagedIsNamedAndNothingOfItIsDelivered() throws {
        // The case of issue 21: flip a byte near the end of the file's middle; the error names the chunk, the
        // authentication failure and the bytes delivered, and the delivered bytes are the original's prefix.
        let (folder, key, id, data) = try pristine()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: folder + "/notes.attachments.db")[.size] as? Int)
        var namedAuthentication = false
        for page in 2..<(size / Self.pageSize) {
            let copy = try damagedCopy(of: folder, name: "named-\(page)") { handle in
                let offset = UInt64(page * Self.pageSize + 5000)
                try handle.seek(toOffset: offset)
                let byte = try #require(try handle.read(upToCount: 1))
                try handle.seek(toOffset: offset)
                try handle.write(contentsOf: Data([byte[0] ^ 0x01]))
            }
            let (delivered, error) = read(copy, key: key, id: id, mode: .streamed, depth: 1)
            guard let error else {
                // A page the attachment does not use (another table's, a free page): all of it, right.
                #expect(delivered == data)
                continue
            }
            let failure = try #require(error as? SecureStoreError)
            #expect(failure.code == SecureStoreError.Code.verificationFailed)
            #expect(delivered == data.prefix(delivered.count))
            // The page is named (SQLCipher does not say which; the store recomputes the HMACs): the one flipped.
            #expect(failure.message.contains("page \(page + 1) of the file fails its HMAC check"), "\(failure.message)")
            if failure.message.contains("failed its authentication (SQLCipher's HMAC check") {
                namedAuthentication = true
                #expect(failure.message.contains("the attachment 'scan.bin'"))
                #expect(failure.message.contains("is damaged: chunk "))
            }
        }
        // At least one page is the last page of a chunk, whose failure SQLCipher reports late.
        #expect(namedAuthentication)
    }
}
