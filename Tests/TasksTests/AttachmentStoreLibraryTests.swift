// AttachmentStore through its public API, as an application uses it: a keyed database in the harness's keyring,
// real SQLCipher files, bytes from a real process through a pipe, digests compared with `sha256sum`.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Tasks
import TestSupport
import Testing

extension TLKeyedStore {
    /// A new file of `count` random bytes in the store's folder.
    func randomFile(_ name: String, bytes count: Int) throws -> String {
        let path = directory.path + "/" + name
        #expect(try asShell("head -c \(count) /dev/urandom > '\(path)'").status == 0)
        return path
    }
}

/// Runs `script` with `sh -c` through the tests' one process runner (TestSupport).
private func asShell(_ script: String, input: Data = Data()) throws -> ProcessResult {
    try TestSupport.run(["/bin/sh", "-c", script], input: input)
}

/// The SHA-256 of a file or of bytes, as `sha256sum` (coreutils) computes it.
private func asSHA256(path: String) throws -> String { String(try asShell("sha256sum '\(path)'").stdout.prefix(64)) }
private func asSHA256(_ data: Data) throws -> String { String(try asShell("sha256sum", input: data).stdout.prefix(64)) }

@Suite(.serialized) struct AttachmentStoreLibraryTests {
    /// 64 KiB chunks, so that a megabyte is many chunks and several transactions.
    private func configuration() -> AttachmentStoreConfiguration {
        var configuration = AttachmentStoreConfiguration()
        configuration.chunkSize = 64 * 1024
        return configuration
    }

    @Test func aStreamFromAnotherProcessIsWrittenListedAndReadBackAsAStream() throws {
        let fixture = try TLKeyedStore()
        let store = AttachmentStore(database: fixture.database, configuration: configuration())
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())

        // A real producer writes into a pipe (and keeps a copy to compare with); the store reads the pipe's end.
        let copy = fixture.directory.path + "/produced.bin"
        let producer = try ChildProcess(
            ["/bin/sh", "-c", "head -c 1234567 /dev/urandom | tee '\(copy)'"], captureOutput: true)
        var reports: [AttachmentProgress] = []
        let streamed = try store.add(
            .fileDescriptor(producer.standardOutput, name: "stream.bin", label: "the producer's pipe"), to: owner
        ) { reports.append($0) }
        #expect(producer.wait() == .exited(0))
        #expect(streamed.size == 1_234_567)
        #expect(streamed.sha256 == (try asSHA256(path: copy)))
        #expect(streamed.chunkSize == 64 * 1024 && streamed.chunkCount == 19)
        #expect(streamed.mediaType == "application/octet-stream")
        #expect(reports.first?.bytes == 0 && reports.last?.bytes == 1_234_567)
        #expect(reports.allSatisfy { $0.total == nil }, "a pipe's size is not known in advance")

        let photo = try store.add(.file(try fixture.randomFile("photo.png", bytes: 200_000)), to: owner)
        let note = try store.add(.data(Data("remember the milk".utf8), name: "note.txt"), to: owner)
        #expect(photo.mediaType == "image/png" && note.mediaType == "text/plain")

        // Listed oldest first, with what they are; another owner has none.
        #expect(try store.attachments(of: owner).map(\.name) == ["stream.bin", "photo.png", "note.txt"])
        #expect(try store.attachments(of: owner).map(\.size) == [1_234_567, 200_000, 17])
        #expect(try store.attachments(of: try AttachmentOwner(table: "note", id: UUID())).isEmpty)
        #expect(try store.attachment(id: streamed.id) == streamed)
        #expect(try store.resolve(prefix: String(streamed.hexID.prefix(10))) == streamed)

        // Read as a stream: one chunk at a time, in order, into a file; the digest is checked at the end.
        let output = fixture.directory.path + "/read-back.bin"
        #expect(FileManager.default.createFile(atPath: output, contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: output))
        var chunkSizes: [Int] = []
        try store.read(id: streamed.id) { bytes in
            chunkSizes.append(bytes.count)
            try handle.write(contentsOf: Data(bytes))
        }
        try handle.close()
        #expect(chunkSizes.count == 19 && chunkSizes.dropLast().allSatisfy { $0 == 64 * 1024 })
        #expect(try asSHA256(path: output) == streamed.sha256)
        #expect(try store.data(id: note.id) == Data("remember the milk".utf8))

        // The bytes are encrypted: neither the attachments file nor the database holds them in plain text.
        let files = try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path).filter { $0.hasPrefix("tasks") }
        #expect(files.contains("tasks.attachments.db"))
        for file in files {
            let raw = try Data(contentsOf: URL(fileURLWithPath: fixture.directory.path + "/" + file))
            #expect(raw.range(of: Data("remember the milk".utf8)) == nil, "\(file)")
        }
    }

    @Test func deletingAnAttachmentRemovesItAndLeavesTheOthersIntact() throws {
        let fixture = try TLKeyedStore()
        let store = AttachmentStore(database: fixture.database, configuration: configuration())
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let kept = try store.add(.file(try fixture.randomFile("kept.bin", bytes: 500_000)), to: owner)
        let gone = try store.add(.file(try fixture.randomFile("gone.bin", bytes: 300_000)), to: owner)

        #expect(try store.delete(id: gone.id) == gone)
        #expect(try store.attachments(of: owner) == [kept])
        #expect(try store.attachment(id: gone.id) == nil)
        let message = expectError(SecureStoreError.Code.notFound) { try store.data(id: gone.id) }?.message
        #expect(message == "no attachment has the ID \(gone.id.uuidString.lowercased())")
        expectError(SecureStoreError.Code.notFound) { try store.delete(id: gone.id) }
        #expect(try store.collectGarbage() == 0, "its chunks went with it")
        #expect(try asSHA256(try store.data(id: kept.id)) == kept.sha256)
        let verification = try store.verify()
        #expect(verification.attachmentCount == 1 && verification.totalSize == 500_000 && verification.problems.isEmpty)
        #expect(try store.summary() == (1, 500_000))
    }

    /// The description's digest no longer matches the bytes (changed behind the store's back): a full read says
    /// so, naming the attachment; so does verify. A size that no longer matches its chunks is named too.
    @Test func aDigestOrSizeMismatchIsDetectedAndNamed() throws {
        let fixture = try TLKeyedStore()
        let store = AttachmentStore(database: fixture.database, configuration: configuration())
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let scan = try store.add(.file(try fixture.randomFile("scan.pdf", bytes: 150_000)), to: owner)
        let photo = try store.add(.file(try fixture.randomFile("photo.jpg", bytes: 90_000)), to: owner)
        try fixture.database.write { db in
            try db.execute(
                "UPDATE securestore_attachments SET sha256 = ? WHERE id = ?", [Data(repeating: 0xab, count: 32), scan.id])
            try db.execute("UPDATE securestore_attachments SET size = size + 1 WHERE id = ?", [photo.id])
        }

        let digest = expectError(SecureStoreError.Code.verificationFailed) { try store.data(id: scan.id) }?.message
        #expect(digest == "the attachment 'scan.pdf' (\(scan.id.uuidString.lowercased())) is damaged: its bytes do not match its SHA-256 "
            + "digest, although SQLCipher authenticated every chunk; all 150000 bytes were delivered: do not use them")
        let size = expectError(SecureStoreError.Code.verificationFailed) { try store.read(id: photo.id) { _ in } }?.message
        #expect(size == "the attachment 'photo.jpg' (\(photo.id.uuidString.lowercased())) is damaged: chunk 2 of 2 holds 24464 bytes instead "
            + "of 24465; its first 65536 bytes were delivered, each authenticated, and nothing after them")
        let problems = try store.verify().problems
        #expect(problems.count == 2)
        #expect(problems.contains(digest ?? "-") && problems.contains(size ?? "-"))
    }

    /// A table of the application's own beside the task list: `note`, with its migration, registered as an owner
    /// (`registerOwnerTable`). Deleting a note row with plain SQL removes its attachments' descriptions in the same
    /// transaction; collection removes their chunks; the task's attachments are untouched, and deleting the task
    /// removes its own.
    @Test func anApplicationsOwnTableOwnsAttachmentsBesideTheTaskList() throws {
        let fixture = try TLKeyedStore()
        let tasks = try TaskList(database: fixture.database)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("app notes 1") { db in
            try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL)")
        }
        AttachmentStore.registerMigrations(in: &migrator)
        AttachmentStore.registerOwnerTable("note", keyColumn: "id", in: &migrator)
        migrator.isOtherComponentsMigration = { !$0.hasPrefix("app notes ") && !$0.hasPrefix("securestore attachments") }
        try migrator.migrate(fixture.database)

        let store = AttachmentStore(database: fixture.database, configuration: configuration())
        defer { try? store.close() }
        let keptNote = UUID(), deletedNote = UUID()
        try fixture.database.write { db in
            for (id, title) in [(keptNote, "kept"), (deletedNote, "deleted")] {
                try db.execute("INSERT INTO note (id, title) VALUES (?, ?)", [id, title])
            }
        }
        let keptOwner = try AttachmentOwner(table: "note", id: keptNote)
        let deletedOwner = try AttachmentOwner(table: "note", id: deletedNote)
        let kept = try store.add(.file(try fixture.randomFile("kept.bin", bytes: 100_000)), to: keptOwner)
        try store.add(
            [.file(try fixture.randomFile("a.bin", bytes: 200_000)), .data(Data("b".utf8), name: "b.txt")], to: deletedOwner)
        let task = try tasks.create(title: "Receipts")
        let files = tasks.attachments()
        let receipt = try files.add([.file(try fixture.randomFile("receipt.pdf", bytes: 80_000))], to: task.id)[0]

        #expect(try fixture.database.read { db in
            try db.scalar("SELECT count(*) FROM securestore_attachment_data", as: Int.self)
        } == 1, "b.txt's bytes are kept in the database")
        try fixture.database.write { db in try db.execute("DELETE FROM note WHERE id = ?", [deletedNote]) }
        #expect(try store.attachments(of: deletedOwner).isEmpty, "the trigger removed the descriptions")
        #expect(try store.collectGarbage() == 1, "and collection the chunks of a.bin (b.txt was inline)")
        let inlineRows = try fixture.database.read { db in
            try db.scalar("SELECT count(*) FROM securestore_attachment_data", as: Int.self)
        }
        #expect(inlineRows == 0, "b.txt's bytes, kept in the database, went with its description")
        #expect(try store.attachments(of: keptOwner) == [kept])
        #expect(try asSHA256(try store.data(id: kept.id)) == kept.sha256)
        #expect(try files.list(of: task.id) == [receipt])

        try tasks.delete(id: task.id)
        #expect(try files.list(of: task.id).isEmpty)
        #expect(try store.collectGarbage() == 1)
        let verification = try store.verify()
        #expect(verification.attachmentCount == 1 && verification.problems.isEmpty)
    }

    /// A file that shrinks, or is deleted, while it is being read: a real second process (`truncate`, `rm`) acts
    /// at a known moment, when the first transaction of chunks is committed (the progress report after it), and
    /// the reading goes on after that. Nothing is attached; the message says what happened; the database files
    /// hash the same and the existing attachment is listed and reads back by hash. (The attachments file's bytes
    /// differ: the chunks of the first transaction were committed, then removed.)
    @Test(arguments: ["truncate -s 1M", "rm"])
    func aFileThatShrinksOrVanishesWhileReadIsRefusedAndNothingIsLost(change: String) throws {
        let fixture = try TLKeyedStore()
        let store = AttachmentStore(database: fixture.database, configuration: configuration())
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let kept = try store.add(.file(try fixture.randomFile("kept.bin", bytes: 100_000)), to: owner)
        let database = fixture.database.path
        let before = try [database, database + "-wal"].map { try asSHA256(path: $0) }
        let path = try fixture.randomFile("growing-log.bin", bytes: 12 << 20)

        var changed = false
        let message = expectError(SecureStoreError.Code.invalidData) {
            try store.add(.file(path), to: owner) { progress in
                guard progress.bytes > 0, !changed else { return }
                changed = true
                #expect(progress.bytes == 8 << 20, "the first transaction: 8 MiB of 12")
                #expect((try? asShell("\(change) '\(path)'").status) == 0)
            }
        }?.message
        #expect(changed)
        if change == "rm" {
            #expect(message == "\(path) was deleted while it was being read; nothing was attached")
        } else {
            #expect(message == "\(path) shrank while it was being read (12582912 bytes at the start, 8388608 read); nothing was attached")
        }
        #expect(try [database, database + "-wal"].map { try asSHA256(path: $0) } == before)
        #expect(try store.attachments(of: owner) == [kept])
        #expect(try store.collectGarbage() == 0, "the refused attachment's chunks are already gone")
        #expect(try asSHA256(try store.data(id: kept.id)) == kept.sha256)
        #expect(try store.verify().problems.isEmpty)
    }
}
