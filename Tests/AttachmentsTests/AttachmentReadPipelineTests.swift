// Reading a multi-chunk attachment on two threads (SQLCipher on a worker, SHA-256 and the caller's closure on the
// calling thread): the bytes, the order, the digest check, a damaged chunk and a caller that stops early behave
// as on one thread, and the store is usable afterwards.
import EncryptedDatabase
import Foundation
import Attachments
import TestSupport
import Testing

@Suite struct AttachmentReadPipelineTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func store() throws -> (AttachmentStore, AttachmentOwner) {
        let queue = try DatabaseQueue(path: directory.path + "/notes.db", key: DatabaseKey.random())
        try queue.write { db in try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY)") }
        var configuration = AttachmentStoreConfiguration()
        configuration.chunkSize = 64 * 1024
        return (AttachmentStore(database: queue, configuration: configuration), try AttachmentOwner(table: "note", id: UUID()))
    }

    private func bytes(_ count: Int, seed: UInt32) -> Data {
        var state = seed
        return Data((0..<count).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        })
    }

    @Test func aManyChunkAttachmentReadsBackInOrderWithProgress() throws {
        let (store, owner) = try store()
        let data = bytes(3_000_000, seed: 7)  // 46 chunks of 64 KiB, the last one short
        let added = try store.add(.data(data, name: "video.mp4"), to: owner)
        #expect(added.chunkCount == 46)
        var read = Data()
        var reported: [Int64] = []
        try store.read(id: added.id, progress: { reported.append($0.bytes) }) { read.append(contentsOf: $0) }
        #expect(read == data)
        #expect(reported.first == 0)
        #expect(reported.last == 3_000_000)
        #expect(reported == reported.sorted())
    }

    @Test func aCallerThatStopsEarlyLeavesTheStoreUsable() throws {
        let (store, owner) = try store()
        let data = bytes(2_000_000, seed: 3)
        let added = try store.add(.data(data, name: "big.bin"), to: owner)
        struct Enough: Error {}
        var seen = 0
        #expect(throws: Enough.self) {
            try store.read(id: added.id) { chunk in
                seen += 1
                if seen == 3 { throw Enough() }
            }
        }
        #expect(seen == 3)
        // Stopping at every chunk, again and again: the worker may have queued chunks nobody takes; the channel
        // and the worker go away cleanly each time.
        for stop in 1...31 {
            var count = 0
            #expect(throws: Enough.self) {
                try store.read(id: added.id) { _ in
                    count += 1
                    if count == stop { throw Enough() }
                }
            }
        }
        // The worker has left its read transaction: writing and reading again work at once.
        let second = try store.add(.data(bytes(500_000, seed: 4), name: "second.bin"), to: owner)
        #expect(try store.data(id: added.id) == data)
        #expect(try store.data(id: second.id).count == 500_000)
        #expect(try store.verify().problems.isEmpty)
    }

    @Test func aDamagedChunkStopsTheReadAfterTheGoodChunksBeforeIt() throws {
        let (store, owner) = try store()
        let data = bytes(4_000_000, seed: 11)
        let added = try store.add(.data(data, name: "scan.tiff"), to: owner)
        try store.close()
        // Flip one byte of a page near the end of the file: a chunk late in the attachment.
        let handle = try #require(FileHandle(forUpdatingAtPath: store.path))
        let size = try handle.seekToEnd()
        let offset = size - 100_000
        try handle.seek(toOffset: offset)
        let byte = try #require(try handle.read(upToCount: 1))
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data([byte[0] ^ 0x20]))
        try handle.close()

        var read = Data()
        let error = expectError(SecureStoreError.Code.verificationFailed) {
            try store.read(id: added.id) { read.append(contentsOf: $0) }
        }
        let message = error?.message ?? ""
        #expect(message.contains("the attachment 'scan.tiff'"))
        #expect(message.contains("is damaged: chunk "))
        #expect(message.contains("bytes were delivered, each authenticated, and nothing after them"))
        // Only whole, authenticated chunks before the damaged one were passed on, each byte right.
        #expect(read.count % (64 * 1024) == 0)
        #expect(read.count < data.count)
        #expect(read == data.prefix(read.count))
    }
}
