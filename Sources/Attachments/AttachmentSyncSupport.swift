// What sync needs of the store (Docs/sync.md, "Attachments"): whether an attachment's bytes are on this device, and
// storing the bytes of an attachment whose description arrived from another device, checked before anything is kept.
internal import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore

extension AttachmentStore {
    /// Every attachment described in the database, oldest first (none when it has no attachment tables).
    package func allAttachments() throws -> [Attachment] {
        try database.read { db in
            guard try db.tableExists("securestore_attachments") else { return [] }
            return try db.fetch("SELECT \(Self.columns) FROM securestore_attachments ORDER BY created_at, id", .none, Self.decode)
        }
    }

    /// The attachments of which this device holds no byte at all: on a device that syncs lazily, those not read
    /// yet (their bytes are on the remote). One with some of its chunks is not among them: that is damage, which a
    /// read names.
    package func attachmentsWithoutBytes() throws -> [Attachment] {
        let all = try allAttachments().filter { $0.size > 0 }
        guard !all.isEmpty else { return [] }
        let inline = try database.read { db -> Set<UUID> in
            guard try db.tableExists("securestore_attachment_data") else { return [] }
            return Set(try db.fetch("SELECT id FROM securestore_attachment_data") { try $0.uuid(at: 0) })
        }
        let chunked: Set<UUID>
        if FileManager.default.fileExists(atPath: path), let file = try openFile(create: false) {
            chunked = Set(try file.read { db in try db.fetch("SELECT DISTINCT attachment FROM chunk") { try $0.uuid(at: 0) } })
        } else {
            chunked = []
        }
        return all.filter { $0.chunkCount == 0 ? !inline.contains($0.id) : !chunked.contains($0.id) }
    }

    /// Whether the bytes of `attachment` are on this device: its inline row, or all its chunks in the attachments
    /// file (an empty attachment has none to hold). False for a description that sync brought without its bytes.
    package func hasBytes(_ attachment: Attachment) throws -> Bool {
        if attachment.chunkCount == 0 {
            if attachment.size == 0 { return true }
            return try database.read { db in
                try db.tableExists("securestore_attachment_data")
                    && (try db.scalar(
                        "SELECT count(*) FROM securestore_attachment_data WHERE id = ?", [attachment.id], as: Int.self) ?? 0) > 0
            }
        }
        guard FileManager.default.fileExists(atPath: path), let file = try openFile(create: false) else { return false }
        let count = try file.read { db in
            try db.scalar("SELECT count(*) FROM chunk WHERE attachment = ?", [attachment.id], as: Int.self) ?? 0
        }
        return count == attachment.chunkCount
    }

    /// Makes the attachment tables and an empty attachments file when there are none yet, so that descriptions
    /// received by sync before their bytes never make the file look lost ("the attachments file is missing, but
    /// the database lists …"). Nothing is done when the file is there.
    package func prepareForSync() throws {
        try prepare()
        // A file that cannot be made here (its attachments listed but the file gone: restore it) is left to the
        // reads that need it, which name the problem; sync of the rows goes on.
        if !FileManager.default.fileExists(atPath: path) { _ = try? openFile(create: true) }
    }

    /// Stores the bytes of `attachment`, whose description is already in the database and whose bytes are not:
    /// `produce` hands them over in order (any piece sizes) to the function it is given. They are cut as the
    /// description says (inline, or chunks of its chunk size) and kept only if their size and SHA-256 digest are
    /// the description's: all in one transaction, so a refusal (or an error `produce` throws) stores nothing.
    ///
    /// - Throws: ``SecureStoreError/Code/verificationFailed`` when the bytes are not the attachment's; nothing is
    ///   stored then.
    package func storeBytes(
        of attachment: Attachment, _ produce: (_ write: (UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws {
        guard let digest = SHA256Digest() else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "libcrypto could not start a SHA-256 digest")
        }
        let what = "the attachment '\(attachment.name)' (\(attachment.id.uuidString.lowercased()))"
        var total: Int64 = 0
        func tooLong() -> SecureStoreError {
            SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the bytes received for \(what) are more than its \(attachment.size); nothing was stored")
        }
        func check() throws {
            guard total == attachment.size, hexString(digest.finish()) == attachment.sha256 else {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "the bytes received for \(what) do not match its size and SHA-256 digest; nothing was stored")
            }
        }
        if attachment.chunkCount == 0 {
            var data = Data()
            try produce { bytes in
                total += Int64(bytes.count)
                guard total <= attachment.size else { throw tooLong() }
                digest.update(bytes)
                data.append(contentsOf: bytes)
            }
            try check()
            guard attachment.size > 0 else { return }
            try database.write { db in
                // Only while the description is there (a delete meanwhile leaves no orphan bytes).
                try db.execute(
                    """
                    INSERT OR REPLACE INTO securestore_attachment_data (id, data)
                    SELECT ?, ? WHERE EXISTS (SELECT 1 FROM securestore_attachments WHERE id = ?)
                    """, [attachment.id, data, attachment.id])
            }
            return
        }
        try prepareForSync()
        guard let file = try openFile(create: true) else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot create the attachments file '\(path)'")
        }
        let chunkSize = attachment.chunkSize
        try file.write { db in
            var buffer = Data()
            var seq = 0
            let insert = try db.cachedStatement("INSERT OR REPLACE INTO chunk (attachment, seq, data) VALUES (?, ?, ?)")
            func flush(_ piece: Data) throws {
                try insert.execute([attachment.id, seq, piece])
                seq += 1
            }
            try produce { bytes in
                total += Int64(bytes.count)
                guard total <= attachment.size else { throw tooLong() }
                digest.update(bytes)
                buffer.append(contentsOf: bytes)
                var start = 0
                while buffer.count - start >= chunkSize {
                    try flush(buffer.subdata(in: start..<(start + chunkSize)))
                    start += chunkSize
                }
                if start > 0 { buffer = buffer.subdata(in: start..<buffer.count) }
            }
            if !buffer.isEmpty { try flush(buffer) }
            guard seq == attachment.chunkCount else {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "the bytes received for \(what) make \(seq) chunks instead of \(attachment.chunkCount); nothing was stored")
            }
            try check()
        }
    }
}
