// Small attachments kept in the record database (AttachmentStoreConfiguration.inlineLimit), through the public
// API as an application uses it: a keyed database in the harness's keyring, real SQLCipher files, digests
// compared with `sha256sum`.
import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import TestSupport
import Testing

/// The SHA-256 of bytes, as `sha256sum` (coreutils) computes it.
private func inSHA256(_ data: Data) throws -> String {
    String(try TestSupport.run(["sha256sum"], input: data).stdout.prefix(64))
}

/// `count` random bytes.
private func inRandom(_ count: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
}

/// Every file of the folder with its bytes' SHA-256 (the lock file aside, and `-shm`: SQLite's index of the log,
/// which every read transaction writes to).
private func inHashes(_ directory: URL) throws -> [String: String] {
    var hashes: [String: String] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
    where !name.hasSuffix(".lock") && !name.hasSuffix("-shm") {
        hashes[name] = try inSHA256(FileManager.default.contents(atPath: directory.path + "/" + name) ?? Data())
    }
    return hashes
}

/// How many rows of inline bytes the record database holds.
private func inlineRows(_ database: KeyedDatabase) throws -> Int {
    try database.read { db in try db.scalar("SELECT count(*) FROM securestore_attachment_data", as: Int.self) ?? -1 }
}

@Suite(.serialized) struct InlineAttachmentTests {
    /// Up to the limit (64 KiB by default) an attachment is kept in the record database (the attachments file is
    /// made all the same, empty, at the first attachment: an older SecureStore refuses a database that lists
    /// attachments without it); one byte more is written as chunks into the attachments file. Each reads back whole, by
    /// `sha256sum`'s digest, and `verify` reads them all.
    @Test func attachmentsUpToTheLimitAreKeptInTheDatabaseAndReadBackWhole() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        #expect(AttachmentStoreConfiguration().inlineLimit == 64 * 1024)
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let one = inRandom(1), atLimit = inRandom(65_536), empty = Data()
        let small = try store.add(
            [.data(one, name: "one.bin"), .data(atLimit, name: "limit.bin"), .data(empty, name: "empty.txt")], to: owner)
        #expect(small.map(\.isInline) == [true, true, false], "an empty attachment has no bytes to keep anywhere")
        #expect(small.map(\.chunkCount) == [0, 0, 0])
        #expect(FileManager.default.fileExists(atPath: store.path), "the attachments file is there, for older versions")
        #expect(try store.storage().chunkedCount == 0)
        #expect(try inlineRows(fixture.database) == 2)

        let over = inRandom(65_537)
        let large = try store.add(.data(over, name: "over.bin"), to: owner)
        #expect(!large.isInline && large.chunkCount == 1)
        #expect(try store.storage().chunkedCount == 1)
        #expect(try inlineRows(fixture.database) == 2)

        for (attachment, bytes) in zip(small + [large], [one, atLimit, empty, over]) {
            let back = try store.data(id: attachment.id)
            #expect(try inSHA256(back) == (try inSHA256(bytes)) && attachment.sha256 == (try inSHA256(bytes)))
        }
        #expect(try store.attachments(of: owner).map(\.name).sorted() == ["empty.txt", "limit.bin", "one.bin", "over.bin"])
        let verification = try store.verify()
        #expect(verification.problems.isEmpty && verification.attachmentCount == 4)
        #expect(try store.storage() == (2, 65_537, 1))

        // A limit of 0 keeps every attachment in the attachments file.
        var configuration = AttachmentStoreConfiguration()
        configuration.inlineLimit = 0
        let chunked = try AttachmentStore(database: fixture.database, configuration: configuration)
            .add(.data(one, name: "one-again.bin"), to: owner)
        #expect(!chunked.isInline && chunked.chunkCount == 1)
        #expect(try store.data(id: chunked.id) == one)

        // Deleting removes the bytes with the description.
        try store.delete(id: small[0].id)
        #expect(try inlineRows(fixture.database) == 1)
        #expect(try store.deleteAll(of: owner) == 4)
        #expect(try inlineRows(fixture.database) == 0)
    }

    /// Inline bytes changed or removed behind the store's back: a read names the attachment and hands over no
    /// byte at all (the digest is checked before any byte is passed on); `verify` lists both.
    @Test func changedOrMissingInlineBytesAreNamedAndNoByteIsReturned() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let note = try store.add(.data(Data("meet at noon".utf8), name: "note.txt"), to: owner)
        let photo = try store.add(.data(inRandom(20_000), name: "thumb.png"), to: owner)
        try fixture.database.write { db in
            try db.execute("UPDATE securestore_attachment_data SET data = ? WHERE id = ?", [Data("meet at nine".utf8), note.id])
            try db.execute("DELETE FROM securestore_attachment_data WHERE id = ?", [photo.id])
        }
        var handed = 0
        #expect {
            try store.read(id: note.id) { handed += $0.count }
        } throws: { error in
            (error as? SecureStoreError)?.code == SecureStoreError.Code.verificationFailed
                && (error as? SecureStoreError)?.message == "the attachment 'note.txt' (\(note.id.uuidString.lowercased())) is damaged: its bytes "
                    + "do not match its SHA-256 digest; no wrong bytes were returned"
        }
        #expect(handed == 0, "no byte of a damaged inline attachment reaches the caller")
        #expect {
            try store.read(id: photo.id) { handed += $0.count }
        } throws: { error in
            (error as? SecureStoreError)?.message == "the attachment 'thumb.png' (\(photo.id.uuidString.lowercased())) is damaged: its bytes "
                + "(20000 in the database) are missing; no wrong bytes were returned"
        }
        #expect(handed == 0)
        let problems = try store.verify().problems
        #expect(problems.count == 2 && problems.allSatisfy { $0.contains("is damaged") })

        // Bytes of another length than the description says: named before any digest is computed.
        let memo = try store.add(.data(Data("twelve bytes".utf8), name: "memo.txt"), to: owner)
        try fixture.database.write { db in
            try db.execute("UPDATE securestore_attachment_data SET data = ? WHERE id = ?", [Data("eleven byte".utf8), memo.id])
        }
        #expect {
            try store.read(id: memo.id) { handed += $0.count }
        } throws: { error in
            (error as? SecureStoreError)?.message == "the attachment 'memo.txt' (\(memo.id.uuidString.lowercased())) is damaged: the database "
                + "holds 11 bytes of it instead of 12; no wrong bytes were returned"
        }
        #expect(handed == 0)
    }

    /// Inline bytes whose description is gone (possible only if the delete trigger was dropped, as here on purpose):
    /// `verify` removes them and counts them as collected; every other attachment is untouched and reads back.
    @Test func verifyRemovesInlineBytesWithoutADescription() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let kept = try store.add(.data(Data("kept".utf8), name: "kept.txt"), to: owner)
        let orphan = try store.add(.data(Data("orphan".utf8), name: "orphan.txt"), to: owner)
        try fixture.database.write { db in
            try db.execute("DROP TRIGGER securestore_attachment_data_delete")
            try db.execute("DELETE FROM securestore_attachments WHERE id = ?", [orphan.id])
        }
        #expect(try inlineRows(fixture.database) == 2)
        let verification = try store.verify()
        #expect(verification.collected == 1 && verification.problems.isEmpty && verification.attachmentCount == 1)
        #expect(try inlineRows(fixture.database) == 1)
        #expect(try store.data(id: kept.id) == Data("kept".utf8))
        #expect(try store.verify().collected == 0, "nothing left to collect")
    }

    /// All or none across kinds: a small source (inline) and a bad one in one call — a missing file, a source over
    /// the size limit — attach nothing: no description, no inline bytes, the database files byte-identical.
    @Test func aFailingSourceBesideASmallOneAttachesNothing() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let kept = try store.add(.data(Data("kept".utf8), name: "kept.txt"), to: owner)
        try fixture.database.queue.checkpoint()
        let before = try inHashes(fixture.directory)

        #expect {
            try store.add([.data(Data("small".utf8), name: "small.txt"), .file(fixture.directory.path + "/missing.pdf")], to: owner)
        } throws: { error in
            (error as? SecureStoreError)?.message == "'\(fixture.directory.path)/missing.pdf' does not exist; nothing was attached"
        }
        var limited = AttachmentStoreConfiguration()
        limited.maximumSize = 100
        #expect {
            try AttachmentStore(database: fixture.database, configuration: limited)
                .add([.data(Data("small".utf8), name: "small.txt"), .data(inRandom(101), name: "big.bin")], to: owner)
        } throws: { error in
            (error as? SecureStoreError)?.message == "'big.bin' is larger than the attachment limit of 100 bytes; nothing was attached"
        }
        try fixture.database.queue.checkpoint()
        #expect(try store.attachments(of: owner) == [kept])
        #expect(try inlineRows(fixture.database) == 1)
        let after = try inHashes(fixture.directory)
        #expect(after == before, "changed: \(after.filter { before[$0.key] != $0.value }.keys.sorted())")
        #expect(try store.data(id: kept.id) == Data("kept".utf8))
    }

    /// One call with many small sources keeps at most 8 MiB of them in memory for its commit: the rest go to the
    /// attachments file. All read back whole.
    @Test func manySmallSourcesInOneCallAreBoundedInMemory() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let sources = (0..<140).map { Data(repeating: UInt8($0), count: 64 * 1024) }
        let added = try store.add(sources.enumerated().map { .data($1, name: "part-\($0).bin") }, to: owner)
        #expect(added.filter(\.isInline).count == 128, "128 × 64 KiB = 8 MiB inline, the other 12 as chunks")
        #expect(added.suffix(12).allSatisfy { !$0.isInline })
        for (attachment, bytes) in zip(added, sources) { #expect(try store.data(id: attachment.id) == bytes) }
    }

    /// A database made before inline attachments (migration "securestore attachments 1" only, no table of inline
    /// bytes) — reproduced here by removing that table, its trigger and its migration row from a new one: a test
    /// double of the older release's file, since the older release is not built beside this one. Its chunked
    /// attachment keeps reading, and the next small attachment adds the table and is kept inline.
    @Test func aDatabaseFromBeforeInlineAttachmentsKeepsReadingAndGainsThem() throws {
        let fixture = try TLKeyedStore()
        let owner = try AttachmentOwner(table: "note", id: UUID())
        var configuration = AttachmentStoreConfiguration()
        configuration.inlineLimit = 0
        let old = AttachmentStore(database: fixture.database, configuration: configuration)
        let scan = try old.add(.data(Data("an old attachment".utf8), name: "old.txt"), to: owner)
        try old.close()
        try fixture.database.write { db in
            try db.execute("DROP TRIGGER securestore_attachment_data_delete")
            try db.execute("DROP TABLE securestore_attachment_data")
            try db.execute("DELETE FROM \(DatabaseMigrator.tableName) WHERE id = ?", [AttachmentStore.inlineMigrationID])
        }
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        #expect(try store.data(id: scan.id) == Data("an old attachment".utf8))
        let note = try store.add(.data(Data("a new one".utf8), name: "new.txt"), to: owner)
        #expect(note.isInline)
        #expect(try store.data(id: note.id) == Data("a new one".utf8))
        #expect(try store.verify().problems.isEmpty)
        let applied = try fixture.database.read { db in
            try db.fetch("SELECT id FROM \(DatabaseMigrator.tableName) WHERE id LIKE 'securestore attachments%' ORDER BY id") {
                try $0.string(at: 0)
            }
        }
        #expect(applied == [AttachmentStore.migrationID, AttachmentStore.inlineMigrationID])
    }

    /// An `Attachment` value read before its attachment was deleted (another process detached it): reading it says
    /// it was deleted — not that it is damaged.
    @Test func readingAnInlineAttachmentDeletedMeanwhileSaysSo() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        let note = try store.add(.data(Data("gone soon".utf8), name: "note.txt"), to: owner)
        try store.delete(id: note.id)
        var handed = 0
        #expect {
            try store.read(note) { handed += $0.count }
        } throws: { error in
            (error as? SecureStoreError)?.code == SecureStoreError.Code.notFound
                && (error as? SecureStoreError)?.message
                    == "the attachment 'note.txt' (\(note.id.uuidString.lowercased())) was deleted while it was being read; nothing was returned"
        }
        #expect(handed == 0)
    }

    /// A small file that a real second process (`truncate`) shortens after the store opened it, at the progress
    /// report made before the first byte is read: the inline path checks it like the chunk path — nothing is
    /// attached, the message says so, the database files are byte-identical.
    @Test func aSmallFileThatShrinksWhileReadIsRefusedAndNothingIsAttached() throws {
        let fixture = try TLKeyedStore()
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        let owner = try AttachmentOwner(table: "note", id: UUID())
        _ = try store.add(.data(Data("first".utf8), name: "first.txt"), to: owner)
        let path = fixture.directory.path + "/small.txt"
        try inRandom(10_000).write(to: URL(fileURLWithPath: path))
        try fixture.database.queue.checkpoint()
        // The store's files (the source itself is shortened on purpose).
        let before = try inHashes(fixture.directory).filter { $0.key != "small.txt" }
        #expect {
            try store.add(.file(path), to: owner) { progress in
                if progress.bytes == 0 { _ = try? TestSupport.run(["truncate", "-s", "4000", path]) }
            }
        } throws: { error in
            (error as? SecureStoreError)?.message
                == "\(path) shrank while it was being read (10000 bytes at the start, 4000 read); nothing was attached"
        }
        try fixture.database.queue.checkpoint()
        #expect(try store.attachments(of: owner).map(\.name) == ["first.txt"])
        let after = try inHashes(fixture.directory).filter { $0.key != "small.txt" }
        #expect(after == before, "changed: \(after.filter { before[$0.key] != $0.value }.keys.sorted())")
    }

    /// An application that migrates with one migrator of its own and counts the store's migrations as another
    /// component's by ``AttachmentStore/isOwnMigration(_:)`` keeps opening after the store added its second migration.
    @Test func anApplicationMigratorThatCountsTheStoresMigrationsKeepsOpening() throws {
        let fixture = try TLKeyedStore()
        func appMigrator() -> DatabaseMigrator {
            var migrator = DatabaseMigrator()
            migrator.registerMigration("app notes 1") { db in
                try db.execute("CREATE TABLE note (id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL)")
            }
            migrator.isOtherComponentsMigration = { AttachmentStore.isOwnMigration($0) }
            return migrator
        }
        try appMigrator().migrate(fixture.database)
        let store = fixture.database.attachmentStore()
        defer { try? store.close() }
        _ = try store.add(.data(Data("x".utf8), name: "x.txt"), to: try AttachmentOwner(table: "note", id: UUID()))
        try appMigrator().migrate(fixture.database)   // no "migrated by a newer version" refusal
        #expect(AttachmentStore.isOwnMigration(AttachmentStore.migrationID))
        #expect(AttachmentStore.isOwnMigration(AttachmentStore.inlineMigrationID))
        #expect(!AttachmentStore.isOwnMigration("app notes 1"))
    }
}
