// The attachments format (securestore-attachments-1): SecureStore's algorithms with 32 KiB pages, chosen per file
// through DatabaseConfiguration.format, readable by the reference tool of SQLCipher 3.4 and 4.x.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

@Suite struct AttachmentFormatTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private var attachmentsFormat: DatabaseConfiguration {
        var configuration = DatabaseConfiguration()
        configuration.format = .secureStoreAttachments
        return configuration
    }

    @Test func aFileCreatedInTheAttachmentsFormatHas32KiBPagesAndReopensInIt() throws {
        let path = directory.file("files.db")
        let queue = try DatabaseQueue(path: path, key: try testKey(), configuration: attachmentsFormat)
        try queue.write { db in
            try db.execute("CREATE TABLE chunk (id INTEGER PRIMARY KEY, data BLOB)")
            try db.execute("INSERT INTO chunk (data) VALUES (?)", [Data(repeating: 7, count: 300_000)])
        }
        let info = try queue.cipherInfo()
        #expect(info.format == .secureStoreAttachments)
        #expect(info.format.name == "securestore-attachments-1")
        #expect(info.pageSize == 32_768)
        #expect(info.hmacAlgorithm == "HMAC_SHA1")
        #expect(try queue.read { db in try db.scalar("PRAGMA page_size", as: Int.self) } == 32_768)
        try queue.checkpoint()
        try queue.close()
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size > 0 && size % 32_768 == 0)

        let again = try DatabaseQueue(path: path, key: try testKey(), configuration: attachmentsFormat)
        #expect(try again.read { db in try db.scalar("SELECT length(data) FROM chunk", as: Int.self) } == 300_000)
        try again.integrityCheck()
    }

    @Test func eachFormatNamesTheOtherInsteadOfCallingTheKeyWrong() throws {
        let attachments = directory.file("files.db")
        try DatabaseQueue(path: attachments, key: try testKey(), configuration: attachmentsFormat).close()
        let before = try snapshot(directory.path)
        let asDatabase = expectError(DatabaseError.Code.otherFormat) { try DatabaseQueue(path: attachments, key: try testKey()) }
        #expect(asDatabase?.message.contains("securestore-attachments-1") == true)
        #expect(asDatabase?.message.contains("the key is right") == true)
        #expect(try snapshot(directory.path) == before, "nothing was written while finding out")

        let database = directory.file("records.db")
        try DatabaseQueue(path: database, key: try testKey()).close()
        let asAttachments = expectError(DatabaseError.Code.otherFormat) {
            try DatabaseQueue(path: database, key: try testKey(), configuration: attachmentsFormat)
        }
        #expect(asAttachments?.message.contains("another SQLCipher format, securestore-1 ") == true)
        #expect(asAttachments?.message.contains("not SecureStore's securestore-attachments-1") == true)
    }

    @Test func anExportKeepsTheAttachmentsFormat() throws {
        let queue = try DatabaseQueue(path: directory.file("files.db"), key: try testKey(), configuration: attachmentsFormat)
        try queue.write { db in try db.executeScript("CREATE TABLE chunk (data BLOB); INSERT INTO chunk VALUES (x'0102')") }
        let copy = directory.file("copy.db")
        try queue.export(to: copy, key: try testKey(0x17))
        let reopened = try DatabaseQueue(path: copy, key: try testKey(0x17), configuration: attachmentsFormat)
        #expect(try reopened.cipherInfo().pageSize == 32_768)
        #expect(try reopened.read { db in try db.scalar("SELECT hex(data) FROM chunk", as: String.self) } == "0102")
    }

    @Test func theReferenceToolReadsTheAttachmentsFormat() throws {
        let path = directory.file("files.db")
        let queue = try DatabaseQueue(path: path, key: try testKey(), configuration: attachmentsFormat)
        try queue.write { db in try db.executeScript("CREATE TABLE chunk (name TEXT); INSERT INTO chunk VALUES ('kestrel-2207')") }
        try queue.checkpoint()
        try queue.close()
        // What Docs/attachments.md tells a person to type: SQLCipher 4 needs the compatibility pragma first;
        // SQLCipher 3 ignores it.
        let reference = try sqlcipher(path, key: .raw(hex: testKeyHex()), pageSize: 32768, "SELECT name FROM chunk;\n")
        #expect(reference.output.contains("kestrel-2207"), "\(reference.error)")
    }
}
