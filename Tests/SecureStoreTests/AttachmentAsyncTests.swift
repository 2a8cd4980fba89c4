// The async forms of AttachmentStore on a keyed database and the real keyring: what they add, list, read (whole and
// streamed), verify and delete is what the blocking calls see, byte for byte (SHA-256 by `sha256sum`).
import Attachments
import Foundation
import SecureStore
import TestSupport
import Testing

/// The names of the attachments of the test's owner, through the blocking call (a synchronous function: in an async
/// one the async form is chosen).
private func blockingNames(_ store: AttachmentStore) throws -> [String] {
    try store.attachments(of: attOwner).map(\.name).sorted()
}

@Suite(.serialized) struct AttachmentAsyncTests {
    init() throws { try Harness.require() }

    @Test func theAsyncFormsAddReadVerifyAndDeleteAsTheBlockingOnesDo() async throws {
        let fixture = try KDFixture()
        let database = try fixture.open()
        try kdFill(database, rows: 3)
        let store = database.attachmentStore()
        let large = try attRandomBytes(300_000)  // kept as chunks in the attachments file
        let small = Data("a small note".utf8)  // kept inline in the database
        let progressed = KDBox<Int64>()
        let added = try await store.add(.data(large, name: "photo.bin"), to: attOwner) { step in
            progressed.value = step.bytes
        }
        let more = try await store.add([.data(small, name: "note.txt")], to: attOwner)
        #expect(added.size == 300_000 && !added.isInline)
        #expect(more.count == 1 && more[0].isInline)
        #expect(progressed.value == 300_000)

        // What the blocking calls see.
        #expect(try blockingNames(store) == ["note.txt", "photo.bin"])
        #expect(try await store.attachments(of: attOwner).map(\.id).sorted { $0.uuidString < $1.uuidString }
            == [added.id, more[0].id].sorted { $0.uuidString < $1.uuidString })
        #expect(try await store.attachment(id: added.id) == added)
        #expect(try await store.newest(limit: 1).count == 1)
        #expect(try await store.resolve(prefix: String(added.id.uuidString.lowercased().prefix(8))).id == added.id)

        let whole = try await store.data(id: added.id)
        #expect(try attSHA256(whole) == (try attSHA256(large)))
        #expect(try await store.data(id: more[0].id) == small)
        let streamed = KDBox<Data>()
        streamed.value = Data()
        let read = try await store.read(id: added.id) { chunk in streamed.value?.append(contentsOf: chunk) }
        #expect(read == added)
        #expect(streamed.value == large)

        let verification = try await store.verify()
        #expect(verification.attachmentCount == 2 && verification.problems.isEmpty)
        #expect(try await store.delete(id: more[0].id).id == more[0].id)
        #expect(try await store.deleteAll(of: attOwner) == 1)
        #expect(try blockingNames(store) == [])
        #expect(try await store.collectGarbage() >= 0)
        let missing = await #expect(throws: SecureStoreError.self) { try await store.data(id: added.id) }
        #expect(missing?.code == SecureStoreError.Code.notFound)
        try store.close()
        try database.close()
    }
}
