public import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

// Adding an attachment: small ones inline in the record database, larger ones as chunks in the attachments
// file, with the description row as the commit point.
extension AttachmentStore {
    // MARK: Adding

    /// Adds one attachment to `owner` from `source`, streaming it in chunks, and returns it.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when the owner row does not exist (checked when `checkOwner`
    ///   says so), ``SecureStoreError/Code/invalidData`` for a source over the limit or that changed while being
    ///   read, ``SecureStoreError/Code/invalidArgument`` for a bad name, ``SecureStoreError/Code/fileSystem``
    ///   when the source cannot be read, `DatabaseError` (e.g. `diskFull`). Nothing is attached then.
    @discardableResult
    public func add(
        _ source: AttachmentSource, to owner: AttachmentOwner, progress: (AttachmentProgress) -> Void = { _ in }
    ) throws -> Attachment {
        try add([source], to: owner, progress: progress)[0]
    }

    /// Adds several attachments to `owner`, all or none: every source is written first, and the descriptions are
    /// committed together in one transaction of the record database. Sources of up to
    /// ``AttachmentStoreConfiguration/inlineLimit`` bytes are kept in that transaction too (``Attachment/isInline``);
    /// larger ones are written as chunks into the attachments file before it.
    ///
    /// - Parameter ownerExists: checks, inside the committing transaction, that the owner row still exists; when
    ///   it returns false, nothing is attached and the call throws ``SecureStoreError/Code/notFound``.
    @discardableResult
    public func add(
        _ sources: [AttachmentSource], to owner: AttachmentOwner,
        ownerExists: (Database) throws -> Bool = { _ in true },
        progress: (AttachmentProgress) -> Void = { _ in }
    ) throws -> [Attachment] {
        for source in sources { try Self.checkName(source.name) }
        let chunkSize = configuration.chunkSize
        guard (4096...(16 << 20)).contains(chunkSize) else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "the attachment chunk size must be 4 KiB to 16 MiB (\(chunkSize))")
        }
        // Which source ends within the first chunk is known after reading it: the limit is below a chunk (and
        // within what one call keeps in memory).
        let inlineLimit = max(0, min(configuration.inlineLimit, chunkSize - 1, Self.inlineBytesPerCall))
        try prepare()
        var opened: DatabaseQueue?
        func chunksFile() throws -> DatabaseQueue {
            if let opened { return opened }
            guard let file = try openFile(create: true) else {
                throw SecureStoreError(SecureStoreError.Code.notFound, "the attachments file '\(path)' could not be created")
            }
            opened = file
            return file
        }
        var written: [(attachment: Attachment, inline: Data?)] = []
        var started: [UUID] = []
        // The bytes of small attachments wait in memory for the commit: at most 8 MiB of them per call, so that
        // memory stays bounded whatever the number of sources (the rest go to the attachments file).
        var inlineBytes = 0
        defer { Self.uploadsInProgress.withLock { $0.subtract(started) } }
        do {
            for source in sources {
                let id = UUID()
                started.append(id)
                Self.uploadsInProgress.withLock { _ = $0.insert(id) }
                let allowed = inlineBytes + inlineLimit <= Self.inlineBytesPerCall ? inlineLimit : 0
                let result = try write(source, id: id, owner: owner, inlineLimit: allowed, file: chunksFile, progress: progress)
                inlineBytes += result.inline?.count ?? 0
                written.append(result)
            }
            // The attachments file exists once any attachment does, inline ones included: a SecureStore from before
            // inline attachments refuses a database that lists attachments without their file ("restore it from a
            // backup, or detach them"). Made once, before the first description commits.
            if opened == nil, !fileExists(path) { _ = try chunksFile() }
            // The commit point: the descriptions (and small attachments' bytes), in the record database.
            try database.write { db in
                guard try ownerExists(db) else {
                    throw SecureStoreError(
                        SecureStoreError.Code.notFound, "the owner of the attachment was deleted meanwhile; nothing was attached")
                }
                let statement = try db.cachedStatement(
                    "INSERT OR ROLLBACK INTO securestore_attachments (id, owner_table, owner_key, name, media_type, size, "
                        + "sha256, chunk_size, chunk_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                for (attachment, inline) in written {
                    try statement.execute([
                        attachment.id, owner.table, owner.key, attachment.name, attachment.mediaType, attachment.size,
                        Data(try Self.digestBytes(attachment.sha256)), attachment.chunkSize, attachment.chunkCount,
                        microsecondsSince1970(attachment.createdAt),
                    ])
                    if let inline, !inline.isEmpty {
                        try db.execute(
                            "INSERT OR ROLLBACK INTO securestore_attachment_data (id, data) VALUES (?, ?)", [attachment.id, inline])
                    }
                }
            }
        } catch {
            // Nothing refers to the chunks: remove them now (or, if even that fails, at the next collection).
            if let opened {
                for id in started { _ = try? deleteChunks(of: id, in: opened) }
            }
            throw error
        }
        // The upload marks of committed attachments are removed by the next write to the attachments file (or
        // the next collection): one commit and one fsync fewer per attachment.
        if opened != nil { finishedUploads.withLock { $0.append(contentsOf: started) } }
        return written.map(\.attachment)
    }

    /// How many bytes of small attachments one ``add(_:to:ownerExists:progress:)`` keeps in memory until its commit.
    static let inlineBytesPerCall = 8 << 20

    /// The pages of the attachments file that fail their HMAC check (at most 8), when the file is in one of SecureStore's
    /// formats and its key can be read; nil otherwise. On the error path only: it reads the whole file.
    func damagedPages() -> [Int]? {
        guard let key = try? database.read({ db in try key(db) }) ?? nil,
            case let format = (try? cipherInfo())?.flatMap({ $0 })?.format ?? configuration.database.format,
            format.hmacAlgorithm == "HMAC_SHA1"
        else { return nil }
        return PageAuthentication.failingPages(path: path, key: key, pageSize: format.pageSize)
    }

    /// How many chunks a read decrypts ahead of its caller (``AttachmentStoreConfiguration/readAhead``, bounded).
    var pipelineDepth: Int { min(max(0, configuration.readAhead), AttachmentStoreConfiguration.maximumReadAhead) }

    /// How many chunks go into one transaction of the attachments file (about 8 MiB).
    var chunksPerTransaction: Int { max(1, (8 << 20) / configuration.chunkSize) }

    /// Reads `source` and returns its description, with its bytes when it ends within `inlineLimit` bytes (kept in
    /// the record database by the caller's commit); a longer source is written as chunks into `file()`.
    func write(
        _ source: AttachmentSource, id: UUID, owner: AttachmentOwner, inlineLimit: Int,
        file: () throws -> DatabaseQueue, progress: (AttachmentProgress) -> Void
    ) throws -> (attachment: Attachment, inline: Data?) {
        let chunkSize = configuration.chunkSize
        var reader = try SourceReader(source)
        defer { reader.close() }
        guard let digest = SHA256Digest() else {
            throw SecureStoreError(SecureStoreError.Code.fileSystem, "libcrypto could not start a SHA-256 digest")
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        func checkLimit(_ total: Int64) throws {
            if total > configuration.maximumSize {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidData,
                    "\(source.label) is larger than the attachment limit of \(Self.formatSize(configuration.maximumSize)); "
                        + "nothing was attached")
            }
        }
        func described(size: Int64, chunks: Int) -> Attachment {
            Attachment(
                id: id, owner: owner, name: source.name, mediaType: source.mediaType ?? Self.mediaType(forName: source.name),
                size: size, sha256: hexString(digest.finish()), chunkSize: chunkSize, chunkCount: chunks,
                createdAt: dateFromMicroseconds(microsecondsSince1970(Date())))
        }
        progress(AttachmentProgress(name: source.name, bytes: 0, total: reader.expectedSize))
        // The first chunk decides: a source that ends within it, and within the inline limit, is kept inline
        // (`fill` returns less than the buffer only at the end of the source).
        var first: Int? = try reader.fill(buffer)
        if let count = first, count <= inlineLimit, count < chunkSize {
            try checkLimit(Int64(count))
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            digest.update(bytes)
            try reader.checkUnchanged(bytesRead: Int64(count))
            progress(AttachmentProgress(name: source.name, bytes: Int64(count), total: reader.expectedSize))
            return (described(size: Int64(count), chunks: 0), Data(bytes))
        }
        if let count = first { try checkLimit(Int64(count)) }
        let file = try file()
        var total: Int64 = 0
        var seq = 0
        var finished = false
        while !finished {
            try file.write { db in
                if seq == 0 {
                    // The upload mark, in the transaction of the first chunks: until the description is committed,
                    // collection leaves these chunks alone while this process lives.
                    try clearFinishedUploads(db)
                    try db.execute(
                        "INSERT OR ROLLBACK INTO upload (attachment, pid, started_at) VALUES (?, ?, ?)",
                        [id, Int64(getpid()), microsecondsSince1970(Date())])
                }
                let insert = try db.cachedStatement("INSERT OR ROLLBACK INTO chunk (attachment, seq, data) VALUES (?, ?, ?)")
                for _ in 0..<chunksPerTransaction {
                    let count = try first ?? reader.fill(buffer)
                    first = nil
                    if count == 0 {
                        finished = true
                        break
                    }
                    total += Int64(count)
                    try checkLimit(total)
                    let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                    digest.update(chunk)
                    try insert.execute([
                        id, seq, Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: chunk.baseAddress!), count: count, deallocator: .none),
                    ])
                    seq += 1
                    if count < chunkSize {
                        finished = true
                        break
                    }
                }
            }
            progress(AttachmentProgress(name: source.name, bytes: total, total: reader.expectedSize))
        }
        try reader.checkUnchanged(bytesRead: total)
        return (described(size: total, chunks: seq), nil)
    }
}
