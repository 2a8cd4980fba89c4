// The attachments file's format: new files in securestore-attachments-1 (32 KiB pages); files written before in
// securestore-1 (4 KiB pages) keep opening, reading and taking new attachments in their format.
import EncryptedDatabase
import Foundation
import Attachments
import TestSupport
import Testing

@Suite struct AttachmentFileFormatTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func recordDatabase() throws -> (DatabaseQueue, AttachmentOwner) {
        let queue = try DatabaseQueue(path: directory.path + "/notes.db", key: DatabaseKey.random())
        try queue.write { db in try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY)") }
        return (queue, try AttachmentOwner(table: "note", id: UUID()))
    }

    private func bytes(_ count: Int, seed: UInt8) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 * 31) ^ seed }) }

    @Test func aNewAttachmentsFileIsInTheAttachmentsFormat() throws {
        let (queue, owner) = try recordDatabase()
        let store = AttachmentStore(database: queue)
        #expect(try store.cipherInfo() == nil)
        let data = bytes(700_000, seed: 3)
        let added = try store.add(.data(data, name: "photo.jpg"), to: owner)
        let info = try #require(try store.cipherInfo())
        #expect(info.format == .secureStoreAttachments)
        #expect(info.pageSize == 32_768)
        #expect(try store.data(id: added.id) == data)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: store.path)[.size] as? Int)
        #expect(size % 32_768 == 0)
    }

    @Test func anAttachmentsFileInTheDatabaseFormatKeepsOpeningInIt() throws {
        let (queue, owner) = try recordDatabase()
        var old = AttachmentStoreConfiguration()
        old.database.format = .secureStore
        let before = AttachmentStore(database: queue, configuration: old)
        let first = bytes(600_000, seed: 9)
        let kept = try before.add(.data(first, name: "scan.pdf"), to: owner)
        try before.close()

        let store = AttachmentStore(database: queue)
        #expect(try store.data(id: kept.id) == first)
        let second = bytes(70_000, seed: 1)
        let added = try store.add(.data(second, name: "note.txt"), to: owner)
        #expect(try store.data(id: added.id) == second)
        #expect(try store.cipherInfo()?.format == .secureStore)
        let verification = try store.verify()
        #expect(verification.problems.isEmpty)
        #expect(verification.attachmentCount == 2)
        try store.close()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: store.path)[.size] as? Int)
        #expect(size % 4096 == 0)
    }

    /// A small attachment kept inside the record database is a row the reference tool reads: `sqlcipher` (3.4 here,
    /// 4.6 on Debian 13), given the key and SecureStore's format as Docs/database.md says, prints its description
    /// and its bytes, and nothing of the record database's other rows is needed to find them.
    @Test func theReferenceToolReadsAnInlineAttachment() throws {
        let key = Data((0..<32).map { UInt8($0 &* 7 &+ 1) })
        let keyHex = key.map { String(format: "%02x", $0) }.joined()
        let path = directory.path + "/notes.db"
        let queue = try DatabaseQueue(path: path, key: try DatabaseKey(bytes: key))
        try queue.write { db in try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY)") }
        let store = AttachmentStore(database: queue)
        let text = Data("a note for the reference tool".utf8)
        let note = try store.add(.data(text, name: "note.txt"), to: try AttachmentOwner(table: "note", id: UUID()))
        #expect(note.isInline)
        try store.close()
        try queue.close()

        let query = "SELECT a.name, a.size, hex(d.data) FROM securestore_attachments a "
            + "JOIN securestore_attachment_data d ON d.id = a.id;\n"
        let reference = try sqlcipher(path, key: .raw(hex: keyHex), pageSize: 4096, query)
        let hex = text.map { String(format: "%02X", $0) }.joined()
        #expect(reference.stdout.split(separator: "\n").last.map(String.init) == "note.txt|\(text.count)|\(hex)",
            "\(reference.stdout) \(reference.stderr)")
    }
}
