internal import EncryptedDatabase
public import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

// Listing, resolving and reading attachments: chunks read ahead, HMAC failures and digests reported as damage.
extension AttachmentStore {
    // MARK: Reading

    /// The attachments of `owner`, oldest first.
    public func attachments(of owner: AttachmentOwner) throws -> [Attachment] {
        try database.read { db in
            guard try db.tableExists("securestore_attachments") else { return [] }
            return try db.fetch(
                "SELECT \(Self.columns) FROM securestore_attachments WHERE owner_table = ? AND owner_key = ? "
                    + "ORDER BY created_at, id", [owner.table, owner.key], Self.decode)
        }
    }

    /// The newest `limit` attachments of every owner, newest first: what a shell's completion of attachment IDs
    /// offers. Nothing is created when the database has no attachments yet.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` for a negative `limit`.
    public func newest(limit: Int) throws -> [Attachment] {
        guard limit >= 0 else {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a limit cannot be negative (\(limit))")
        }
        return try database.read { db in
            guard try db.tableExists("securestore_attachments") else { return [] }
            return try db.fetch(
                "SELECT \(Self.columns) FROM securestore_attachments ORDER BY created_at DESC, id DESC LIMIT ?", [limit],
                Self.decode)
        }
    }

    /// The attachment `id`, or nil when there is none.
    public func attachment(id: UUID) throws -> Attachment? {
        try database.read { db in try Self.fetch(db, id: id) }
    }

    /// The one attachment whose identifier starts with the hexadecimal digits `prefix` (dashes ignored).
    ///
    /// - Throws: ``SecureStoreError/Code/notFound``, ``SecureStoreError/Code/ambiguous``, or
    ///   ``SecureStoreError/Code/invalidArgument`` when `prefix` is not 1–32 hexadecimal digits.
    public func resolve(prefix: String) throws -> Attachment {
        let range: HexPrefixRange
        do {
            range = try HexPrefixRange(prefix)
        } catch {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "an attachment ID is 1 to 32 hexadecimal digits")
        }
        let (lower, upper, digits) = (range.lower, range.upper, range.digits)
        var arguments: [any DatabaseValueConvertible] = [Data(lower)]
        let condition: String
        if let upper {
            condition = "id >= ? AND id < ?"
            arguments.append(Data(upper))
        } else {
            condition = "id >= ?"
        }
        let found = try database.read { db -> [Attachment] in
            guard try db.tableExists("securestore_attachments") else { return [] }
            return try db.fetch(
                "SELECT \(Self.columns) FROM securestore_attachments WHERE \(condition) ORDER BY id LIMIT 2",
                StatementArguments(arguments), Self.decode)
        }
        switch found.count {
        case 0: throw SecureStoreError(SecureStoreError.Code.notFound, "no attachment has an ID starting with \(digits)")
        case 1: return found[0]
        default:
            throw SecureStoreError(
                SecureStoreError.Code.ambiguous,
                "the ID prefix \(digits) matches several attachments (\(found[0].id.uuidString.lowercased()), \(found[1].id.uuidString.lowercased())…); give more digits")
        }
    }

    /// Reads the attachment `id` chunk by chunk, calling `body` with each chunk's bytes in order, and checks its
    /// SHA-256 digest at the end. Memory use is one chunk, whatever the size.
    ///
    /// Every chunk is authenticated by SQLCipher before `body` sees it: a damaged chunk stops the read with
    /// ``SecureStoreError/Code/verificationFailed`` naming the attachment and the chunk, and none of its bytes are
    /// passed on. A digest that does not match at the end throws the same code (after `body` saw the bytes:
    /// write to a temporary file and keep it only when this returns).
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when there is no such attachment.
    @discardableResult
    public func read(
        id: UUID, progress: (AttachmentProgress) -> Void = { _ in }, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Attachment {
        guard let attachment = try attachment(id: id) else {
            throw SecureStoreError(SecureStoreError.Code.notFound, "no attachment has the ID \(id.uuidString.lowercased())")
        }
        try read(attachment, progress: progress, body)
        return attachment
    }

    /// Reads `attachment` as ``read(id:progress:_:)`` does.
    public func read(
        _ attachment: Attachment, progress: (AttachmentProgress) -> Void = { _ in },
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let what = "the attachment '\(attachment.name)' (\(attachment.id.uuidString.lowercased()))"
        // Bytes that sync has not brought yet are fetched first; a file that cannot even be asked (damaged) is left to
        // the read below, which names the damage.
        if let fetch = configuration.fetchMissing, (try? hasBytes(attachment)) == false { try fetch(attachment) }
        guard attachment.chunkCount > 0 else {
            if attachment.size != 0 { try readInline(attachment, what: what, progress: progress, body) }
            return
        }
        let opened: DatabaseQueue?
        do {
            opened = try openFile(create: false)
        } catch let error as SecureStoreError where error.code == .verificationFailed {
            throw damaged(what, error.message, delivered: 0)
        }
        guard let file = opened else {
            throw damaged(what, "the attachments file '\(path)' is missing")
        }
        guard let digest = SHA256Digest() else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "libcrypto could not start a SHA-256 digest")
        }
        var done: Int64 = 0
        var delivered = 0
        progress(AttachmentProgress(name: attachment.name, bytes: 0, total: attachment.size))
        func deliver(_ bytes: UnsafeRawBufferPointer) throws {
            digest.update(bytes)
            try body(bytes)
            done += Int64(bytes.count)
            delivered += 1
            if delivered % chunksPerTransaction == 0 || delivered == attachment.chunkCount {
                progress(AttachmentProgress(name: attachment.name, bytes: done, total: attachment.size))
            }
        }
        do {
            if Self.pipelines(chunkCount: attachment.chunkCount, depth: pipelineDepth) {
                // SQLCipher decrypts and authenticates the next chunks on a worker thread while this one hashes and
                // hands over the previous ones; at most `pipelineDepth` chunks wait in between. A chunk is sent
                // only after SQLCipher has authenticated every page of it (see `readChunks`), so what waits in the
                // channel is always whole and right; a failure is delivered after the chunks before it.
                let channel = ChunkChannel<Data>(capacity: pipelineDepth)
                let worker = ChunkWorker { [self] in
                    do {
                        try readChunks(attachment, file: file) { channel.send($0) }
                        channel.finish(nil)
                    } catch {
                        channel.finish(error)
                    }
                }
                // On every way out (the body threw, a damaged chunk), the worker stops and leaves its transaction
                // before this returns.
                defer {
                    channel.cancel()
                    worker.join()
                }
                receiving: while true {
                    switch channel.receive() {
                    case .value(let data): try data.withUnsafeBytes { try deliver($0) }
                    case .end: break receiving
                    case .failure(let error): throw error
                    }
                }
            } else {
                try readChunks(attachment, file: file) { data in
                    try data.withUnsafeBytes { try deliver($0) }
                    return true
                }
            }
        } catch let damage as ChunkDamage {
            // A chunk gone because the attachment was deleted meanwhile is not damage (as for inline ones).
            if damage.isMissing, (try? self.attachment(id: attachment.id)) == .some(nil) {
                throw SecureStoreError(
                    SecureStoreError.Code.notFound,
                    "\(what) was deleted while it was being read; its first \(done) bytes had been delivered")
            }
            var reason = damage.reason
            if damage.isAuthentication, let pages = damagedPages() {
                reason += pages.isEmpty
                    ? "" : "; page " + pages.map(String.init).joined(separator: ", ") + " of the file fails its HMAC check"
            }
            throw damaged(what, reason, delivered: done)
        }
        let actual = hexString(digest.finish())
        guard actual == attachment.sha256 else {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "\(what) is damaged: its bytes do not match its SHA-256 digest, although SQLCipher authenticated "
                    + "every chunk; all \(done) bytes were delivered: do not use them")
        }
    }

    /// Reads an attachment kept in the record database: its bytes are checked against the size and the SHA-256
    /// digest before `body` sees any of them (they are at most ``AttachmentStoreConfiguration/inlineLimit``).
    func readInline(
        _ attachment: Attachment, what: String, progress: (AttachmentProgress) -> Void,
        _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        progress(AttachmentProgress(name: attachment.name, bytes: 0, total: attachment.size))
        let data: Data?
        let described: Bool
        do {
            (data, described) = try database.read { db -> (Data?, Bool) in
                // The bytes and, in the same snapshot, whether the description is still there.
                let data = try db.tableExists("securestore_attachment_data")
                    ? try db.fetchOne("SELECT data FROM securestore_attachment_data WHERE id = ?", [attachment.id]) {
                        try $0.data(at: 0)
                    } : nil
                return (data, try Self.fetch(db, id: attachment.id) != nil)
            }
        } catch let error as DatabaseError {
            throw damaged(what, "its bytes cannot be read from the database (\(error.message))")
        }
        guard described else {
            throw SecureStoreError(
                SecureStoreError.Code.notFound, "\(what) was deleted while it was being read; nothing was returned")
        }
        guard let data else {
            throw damaged(what, "its bytes (\(attachment.size) in the database) are missing")
        }
        guard data.count == attachment.size else {
            throw damaged(what, "the database holds \(data.count) bytes of it instead of \(attachment.size)")
        }
        guard let digest = SHA256Digest() else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "libcrypto could not start a SHA-256 digest")
        }
        data.withUnsafeBytes { digest.update($0) }
        guard hexString(digest.finish()) == attachment.sha256 else {
            throw damaged(what, "its bytes do not match its SHA-256 digest")
        }
        try data.withUnsafeBytes { try body($0) }
        progress(AttachmentProgress(name: attachment.name, bytes: attachment.size, total: attachment.size))
    }

    /// Reads the chunks of `attachment` in order, in read transactions of about 8 MiB, checking that each is there,
    /// has its size and was authenticated by SQLCipher page by page, and passes each to `deliver` (which returns
    /// false to stop). A damaged, missing or wrongly sized chunk throws ``ChunkDamage`` naming it; no byte of it
    /// is passed on.
    ///
    /// SQLCipher hands back a page that fails its HMAC check as zeros and fails only the connection's next page
    /// read (``Database/checkPagesAuthenticated()``): without that check after each chunk, a chunk whose last
    /// page is damaged would be passed on with zeros in its tail and the failure named at the next chunk.
    func readChunks(_ attachment: Attachment, file: DatabaseQueue, deliver: (Data) throws -> Bool) throws {
        var seq = 0
        func chunk() -> String { "chunk \(seq + 1) of \(attachment.chunkCount)" }
        func unreadable(_ error: DatabaseError) -> ChunkDamage {
            error.code == .corrupt && error.extendedResultCode == 1
                ? ChunkDamage(
                    reason: "\(chunk()) failed its authentication (SQLCipher's HMAC check of a page of "
                        + "the attachments file '\(path)'): the file was changed or damaged on disk", isAuthentication: true)
                : ChunkDamage(reason: "\(chunk()) cannot be read (\(error.message))", isAuthentication: error.code == .corrupt)
        }
        while seq < attachment.chunkCount {
            let end = min(attachment.chunkCount, seq + chunksPerTransaction)
            do {
                try file.read { db in
                    let select = try db.cachedStatement("SELECT data FROM chunk WHERE attachment = ? AND seq = ?")
                    while seq < end {
                        let expected = seq == attachment.chunkCount - 1
                            ? Int(attachment.size - Int64(attachment.chunkSize) * Int64(attachment.chunkCount - 1))
                            : attachment.chunkSize
                        let data: Data?
                        do {
                            data = try select.fetch([attachment.id, seq]) { try $0.data(at: 0) }.first
                            try db.checkPagesAuthenticated()
                        } catch let error as DatabaseError {
                            throw unreadable(error)
                        }
                        guard let data else { throw ChunkDamage(reason: "\(chunk()) is missing", isMissing: true) }
                        guard data.count == expected else {
                            throw ChunkDamage(reason: "\(chunk()) holds \(data.count) bytes instead of \(expected)")
                        }
                        guard try deliver(data) else { throw ChunkChannelCancelled() }
                        seq += 1
                    }
                }
            } catch let error as DatabaseError {
                throw unreadable(error)
            }
        }
    }

    /// The bytes of the attachment `id`, in memory: for small attachments. Use ``read(id:progress:_:)`` to stream.
    public func data(id: UUID) throws -> Data {
        var data = Data()
        try read(id: id) { data.append(contentsOf: $0) }
        return data
    }
}
