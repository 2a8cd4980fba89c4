import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// Attachments through the library (Docs/sync.md, "Attachments"): a real folder, real keyed databases.
@Suite(.serialized) struct SyncAttachmentTests {
    /// A lazy device lists an attachment added on another device without its bytes; a store made with
    /// `SyncEngine.attachmentStoreConfiguration` fetches them when first read (checked, then kept), while a plain
    /// store's read refuses, naming the missing bytes, and returns nothing.
    @Test func aLazyDeviceFetchesBytesWhenFirstRead() throws {
        let folder = try TemporaryDirectory()
        let a = try SyncDevice_(), b = try SyncDevice_()
        let task = try a.tasks.create(title: "Receipt")
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        let added = try a.tasks.attachments().add([.data(bytes, name: "receipt.bin")], to: task.id)[0]
        let code = try a.initialize(.folder(folder.path))
        try b.join(.folder(folder.path), code)
        try b.engine.setAttachmentMode(.lazy)
        let report = try b.sync()
        #expect(report.missingAttachments == 1 && report.fetchedAttachments == 0)
        #expect(try b.engine.attachmentMode() == .lazy)
        #expect(try b.tasks.attachments().list(of: task.id).map(\.id) == [added.id])

        #expect(throws: SecureStoreError.self) { try b.tasks.attachments().store.data(id: added.id) }
        let syncing = b.tasks.attachments(configuration: SyncEngine.attachmentStoreConfiguration(database: b.database))
        #expect(try syncing.store.data(id: added.id) == bytes)
        // Kept: a plain store reads them now, and the next sync has nothing missing.
        #expect(try b.tasks.attachments().store.data(id: added.id) == bytes)
        #expect(try b.sync().missingAttachments == 0)
    }

    /// Chunk names are keyed: the same bytes get the same name under one sync key and another under another key,
    /// never their plain SHA-256; a sealed chunk opens only under its own name and kind.
    @Test func chunkNamesAreKeyedAndBindTheirFile() throws {
        let one = SyncAttachmentKeys(SyncKey.random()), two = SyncAttachmentKeys(SyncKey.random())
        let plaintext = Array("the same bytes on two devices".utf8)
        #expect(one.chunkName(plaintext) == one.chunkName(plaintext))
        #expect(one.chunkName(plaintext) != two.chunkName(plaintext))
        #expect(one.chunkName(plaintext) != SealedBundle.sha256(plaintext))
        let name = one.chunkName(plaintext), other = one.chunkName(Array("other".utf8))
        let sealed = try #require(one.seal(plaintext, name: name, kind: SyncAttachmentKeys.chunkKind))
        #expect(one.open(sealed, name: name, kind: SyncAttachmentKeys.chunkKind) == plaintext)
        #expect(one.open(sealed, name: other, kind: SyncAttachmentKeys.chunkKind) == nil)  // renamed
        #expect(one.open(sealed, name: name, kind: SyncAttachmentKeys.manifestKind) == nil)  // taken for a manifest
        #expect(two.open(sealed, name: name, kind: SyncAttachmentKeys.chunkKind) == nil)  // another group's key
        #expect(one.open(Array(sealed.dropLast()), name: name, kind: SyncAttachmentKeys.chunkKind) == nil)  // truncated
        #expect(sealed.count == plaintext.count + 8 + 1 + 12 + 16)
    }

    /// A manifest whose size does not fit its number of chunks is refused when read.
    @Test func manifestsAreCheckedWhenRead() {
        let name = [UInt8](repeating: 7, count: 32)
        let chunk = SyncEngine.attachmentChunkSize
        let good = SyncAttachmentManifest(size: Int64(chunk + 1), chunks: [name, name])
        #expect(SyncAttachmentManifest.decode(good.encoded()) == good)
        #expect(SyncAttachmentManifest.decode(SyncAttachmentManifest(size: 0, chunks: []).encoded()) != nil)
        #expect(SyncAttachmentManifest.decode(SyncAttachmentManifest(size: Int64(chunk), chunks: [name, name]).encoded()) == nil)
        #expect(SyncAttachmentManifest.decode(SyncAttachmentManifest(size: Int64(2 * chunk + 1), chunks: [name, name]).encoded()) == nil)
        #expect(SyncAttachmentManifest.decode(Array(good.encoded().dropLast())) == nil)
    }
}
