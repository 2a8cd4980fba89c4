import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import SecureStoreCore
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
        #expect(sealed.count == SyncPadding.bucket(plaintext.count) + 8 + 1 + 12 + 16, "padded")
    }

    /// Issue 35 part 2: two attachments 100 bytes apart (1 200 000 and 1 200 100 bytes) put files of the same sizes on
    /// the remote — no exact attachment size is readable there — and arrive byte for byte on the other device.
    @Test func attachmentsOfNearbySizesLookAlikeOnTheRemote() throws {
        let folder = try TemporaryDirectory()
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(folder.path))
        try b.join(.folder(folder.path), code)
        func attachmentFiles() -> [String: Int] {
            var sizes: [String: Int] = [:]
            let root = URL(fileURLWithPath: folder.path)
            let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
            while let url = walk?.nextObject() as? URL {
                if url.path.contains("/attachments/"), let size = try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int,
                    !url.hasDirectoryPath { sizes[url.path] = size }
            }
            return sizes
        }
        var added: [[Int]] = []
        var attached: [(UUID, Data)] = []
        for (index, length) in [1_200_000, 1_200_100].enumerated() {
            let before = attachmentFiles()
            let task = try a.tasks.create(title: "scan \(index)")
            let bytes = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* (31 + index) &+ $0 >> 9) })
            let attachment = try a.tasks.attachments().add([.data(bytes, name: "scan.bin")], to: task.id)[0]
            attached.append((attachment.id, bytes))
            try a.sync()
            added.append(attachmentFiles().filter { before[$0.key] == nil }.values.sorted())
        }
        #expect(added[0].count >= 2 && added[0] == added[1], "\(added)")
        try b.sync()
        for (id, bytes) in attached { #expect(try b.tasks.attachments().store.data(id: id) == bytes) }
    }

    /// A chunk sealed before padding (magic `SSYNCA\0\1`, the plaintext as it is) still opens, to its plaintext.
    @Test func anUnpaddedChunkOfTheEarlierFormatStillOpens() throws {
        let keys = SyncAttachmentKeys(SyncKey.random())
        let plaintext = Array("a chunk sealed by the earlier version".utf8)
        let name = keys.chunkName(plaintext)
        let nonce = KeyFile.randomBytes(SealedBundle.nonceSize)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        let tag = try #require(keys.sealing.withUnsafeBytes { key in
            ciphertext.withUnsafeMutableBytes { out in
                Sealed.gcm(
                    encrypt: true, key: key, nonce: nonce, aad: SyncAttachmentKeys.aad(name, SyncAttachmentKeys.chunkKind),
                    input: plaintext, output: out, tag: nil)
            }
        })
        let earlier = SyncAttachmentKeys.unpaddedMagic + [SyncAttachmentKeys.chunkKind] + nonce + ciphertext + tag
        #expect(keys.open(earlier, name: name, kind: SyncAttachmentKeys.chunkKind) == plaintext)
        #expect(keys.open(Array(earlier.dropLast()), name: name, kind: SyncAttachmentKeys.chunkKind) == nil)
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
