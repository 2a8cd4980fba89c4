// Attachments of an app's own records (not tasks): a UUID-keyed and an integer-keyed record type own
// attachments through the records layer; deleting the record deletes them; refusals attach nothing.
import EncryptedDatabase
import Foundation
import Attachments
import TestSupport
import Testing

private struct Photo: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: UUID
    var caption: String
}

private struct Album: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var title: String
    mutating func didInsert(rowID: Int64) { id = rowID }
}

/// A record database with the two tables, the attachment tables and both owner triggers, migrated as an app
/// would: one migrator for every component.
private func makeDatabase(_ directory: TemporaryDirectory) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.path + "/app.db", key: DatabaseKey.random())
    var migrator = DatabaseMigrator()
    migrator.registerMigration("create photo and album") { db in
        try db.execute("CREATE TABLE photo (id BLOB PRIMARY KEY NOT NULL, caption TEXT NOT NULL)")
        try db.execute("CREATE TABLE album (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
    }
    AttachmentStore.registerMigrations(in: &migrator)
    AttachmentStore.registerOwner(Photo.self, in: &migrator)
    AttachmentStore.registerOwner(Album.self, in: &migrator)
    try migrator.migrate(queue)
    return queue
}

private func bytes(_ count: Int, seed: UInt8) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) ^ seed })
}

@Suite struct RecordAttachmentTests {
    @Test func recordsOfAnyKeyTypeOwnAttachmentsThatReadBackWhole() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory)
        let photo = Photo(id: UUID(), caption: "beach")
        let album = try queue.write { db in
            try photo.insert(db)
            return try Album(id: nil, title: "Summer").inserted(db)
        }
        let store = AttachmentStore(database: queue)
        let image = bytes(700_000, seed: 7)  // several chunks
        let attached = try store.add(.data(image, name: "beach.jpg", mediaType: "image/jpeg"), to: photo)
        try store.add(.data(bytes(10, seed: 1), name: "cover.txt"), to: album)

        #expect(try store.attachments(of: photo).map(\.name) == ["beach.jpg"])
        #expect(try store.attachments(of: album).map(\.name) == ["cover.txt"])
        #expect(try store.data(id: attached.id) == image)
        #expect(attached.size == 700_000 && attached.mediaType == "image/jpeg")
        try store.close()
    }

    @Test func deletingARecordDeletesItsAttachmentsAndLeavesTheOthers() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory)
        let kept = Photo(id: UUID(), caption: "kept")
        let gone = Photo(id: UUID(), caption: "gone")
        let album = try queue.write { db in
            try kept.insert(db)
            try gone.insert(db)
            return try Album(id: nil, title: "Winter").inserted(db)
        }
        let store = AttachmentStore(database: queue)
        let keptFile = try store.add(.data(bytes(300_000, seed: 2), name: "kept.raw"), to: kept)
        let goneFile = try store.add(.data(bytes(300_000, seed: 3), name: "gone.raw"), to: gone)
        let albumFile = try store.add(.data(bytes(5, seed: 4), name: "a.txt"), to: album)

        #expect(try queue.write { db in try gone.delete(db) })
        #expect(try queue.write { db in try album.delete(db) })
        #expect(try store.attachment(id: goneFile.id) == nil, "the photo's attachment went with it")
        #expect(try store.attachment(id: albumFile.id) == nil, "an integer key matches its trigger too")
        #expect(try store.data(id: keptFile.id) == bytes(300_000, seed: 2))
        let verification = try store.verify()
        #expect(verification.attachmentCount == 1 && verification.problems.isEmpty)
        #expect(verification.collected == 1, "the deleted photo's chunks are collected")
        #expect(albumFile.isInline && !goneFile.isInline, "5 bytes are kept in the database, 300 000 as chunks")
        let inlineRows = try queue.read { db in
            try db.scalar("SELECT count(*) FROM securestore_attachment_data WHERE id = ?", [albumFile.id], as: Int.self)
        }
        #expect(inlineRows == 0, "the album's inline bytes went with its description, in the same transaction")
        try store.close()
    }

    @Test func aRecordThatIsNotStoredGetsNothingAttached() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeDatabase(directory)
        let store = AttachmentStore(database: queue)
        #expect {
            try store.add(.data(bytes(10, seed: 5), name: "x.txt"), to: Album(id: nil, title: "unsaved"))
        } throws: { error in
            (error as? SecureStoreError)?.code == SecureStoreError.Code.invalidArgument
                && "\(error)".contains("once its primary key 'id' is set")
        }
        let neverInserted = Photo(id: UUID(), caption: "not in the table")
        #expect {
            try store.add(.data(bytes(10, seed: 6), name: "y.txt"), to: neverInserted)
        } throws: { error in
            (error as? SecureStoreError)?.code == SecureStoreError.Code.notFound
        }
        #expect(try store.attachments(of: neverInserted).isEmpty)
        let verification = try store.verify()
        #expect(verification.attachmentCount == 0 && verification.collected == 0 && verification.problems.isEmpty)
        try store.close()
    }
}
