internal import EncryptedDatabase
public import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

// Deleting attachments, collecting chunks nothing refers to, verification, figures and export.
extension AttachmentStore {
    // MARK: Deleting

    /// Deletes the attachment `id` and returns it as it was: its description first (the commit point), then its
    /// chunks.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when there is no such attachment.
    @discardableResult
    public func delete(id: UUID) throws -> Attachment {
        let attachment = try database.write { db -> Attachment in
            guard let attachment = try Self.fetch(db, id: id) else {
                throw SecureStoreError(SecureStoreError.Code.notFound, "no attachment has the ID \(id.uuidString.lowercased())")
            }
            // A trigger deletes an inline attachment's bytes with it.
            try db.execute("DELETE FROM securestore_attachments WHERE id = ?", [id])
            return attachment
        }
        if attachment.chunkCount > 0 { try? removeChunks([id]) }
        return attachment
    }

    /// Deletes every attachment of `owner`; returns how many there were.
    @discardableResult
    public func deleteAll(of owner: AttachmentOwner) throws -> Int {
        let (ids, count) = try database.write { db -> ([UUID], Int) in
            guard try db.tableExists("securestore_attachments") else { return ([], 0) }
            let ids = try db.fetch(
                "SELECT id FROM securestore_attachments WHERE owner_table = ? AND owner_key = ? AND chunk_count > 0",
                [owner.table, owner.key]
            ) { try $0.uuid(at: 0) }
            let count = try db.scalar(
                "SELECT count(*) FROM securestore_attachments WHERE owner_table = ? AND owner_key = ?", [owner.table, owner.key],
                as: Int.self) ?? 0
            try db.execute("DELETE FROM securestore_attachments WHERE owner_table = ? AND owner_key = ?", [owner.table, owner.key])
            return (ids, count)
        }
        if !ids.isEmpty { try? removeChunks(ids) }
        return count
    }

    func removeChunks(_ ids: [UUID]) throws {
        guard let file = try openFile(create: false) else { return }
        for id in ids { try deleteChunks(of: id, in: file) }
    }

    /// How many chunks one transaction deletes (see ``deleteChunks(of:in:)``).
    static let chunksPerDeletion = 4

    /// Deletes the chunks of `id` and its upload mark, a few chunks per transaction from the last one down, and
    /// returns whether there were chunks. SQLCipher is built with secure delete, so every page a deletion frees is
    /// overwritten and so first copied into the rollback journal: one transaction for a whole attachment needs as
    /// much free disk as the attachment, which a failed attach on a full disk does not have (its chunks then
    /// stayed, and the disk with them). In steps, the journal stays about 1 MiB (at 256 KiB chunks); the freed
    /// pages are reused by the next attachment. A crash between steps leaves chunks that collection removes.
    @discardableResult
    func deleteChunks(of id: UUID, in file: DatabaseQueue) throws -> Bool {
        let last = try file.read { db in try db.scalar("SELECT max(seq) FROM chunk WHERE attachment = ?", [id], as: Int.self) }
        if var upper = last.map({ $0 + 1 }) {
            while upper > 0 {
                let lower = max(0, upper - Self.chunksPerDeletion)
                try file.write { db in try db.execute("DELETE FROM chunk WHERE attachment = ? AND seq >= ?", [id, lower]) }
                upper = lower
            }
        }
        try file.write { db in try db.execute("DELETE FROM upload WHERE attachment = ?", [id]) }
        return last != nil
    }

    // MARK: Collection and verification

    /// Removes chunks that no attachment refers to: left by a crash between writing chunks and committing the
    /// description, by a delete whose second step did not run, or by deleting owner rows (their trigger removes
    /// only the descriptions). Uploads in progress in a live process are left alone. Returns how many
    /// attachments' chunks were removed.
    @discardableResult
    public func collectGarbage() throws -> Int {
        guard let file = try openFile(create: false) else { return 0 }
        return try collectGarbage(in: file)
    }

    func collectGarbage(in file: DatabaseQueue) throws -> Int {
        let candidates = try file.read { db in
            try db.fetch("SELECT DISTINCT attachment FROM chunk UNION SELECT attachment FROM upload") { try $0.uuid(at: 0) }
        }
        if candidates.isEmpty { return 0 }
        let referenced = Set(try database.read { db in
            try db.fetch("SELECT id FROM securestore_attachments") { try $0.uuid(at: 0) }
        })
        let unreferenced = candidates.filter { !referenced.contains($0) }
        let finishedUploads = candidates.filter { referenced.contains($0) }
        let doomed = try file.write { db -> [UUID] in
            var doomed: [UUID] = []
            for id in finishedUploads { try db.execute("DELETE FROM upload WHERE attachment = ?", [id]) }
            for id in unreferenced {
                // An upload of a live process is in progress: its description is not committed yet.
                if let pid = try db.scalar("SELECT pid FROM upload WHERE attachment = ?", [id], as: Int64.self) {
                    let inProgress =
                        pid == Int64(getpid())
                        ? Self.uploadsInProgress.withLock { $0.contains(id) }
                        : kill(pid_t(truncatingIfNeeded: pid), 0) == 0 || errno == EPERM
                    if inProgress { continue }
                }
                // The writer deletes its upload row only after committing the description, and cannot while this
                // write transaction holds the attachments file: look again at the record database now.
                let committed = try database.read { record in
                    try record.scalar("SELECT count(*) FROM securestore_attachments WHERE id = ?", [id], as: Int.self) ?? 0
                }
                if committed > 0 { continue }
                doomed.append(id)
            }
            return doomed
        }
        // Nothing refers to these any more and nothing can again (IDs are never reused): their chunks go in small
        // steps, outside the transaction that decided it.
        var removed = 0
        for id in doomed {
            // Counted when chunks went: a mark alone (of an attachment deleted since) is not an attachment.
            if try deleteChunks(of: id, in: file) { removed += 1 }
        }
        return removed
    }

    /// What ``verify()`` found.
    public struct Verification: Sendable, Hashable {
        /// How many attachments the record database lists.
        public let attachmentCount: Int
        /// Their total size in bytes.
        public let totalSize: Int64
        /// The attachments file's size in bytes (0 when there is none).
        public let fileSize: Int64
        /// Unreferenced chunks removed (see ``AttachmentStore/collectGarbage()``), and inline bytes whose description
        /// was gone, counted by attachment.
        public let collected: Int
        /// One sentence per damaged attachment; empty when every attachment read back whole with its digest.
        public let problems: [String]
    }

    /// Checks the attachments file (opens with its key, `integrity_check`), collects unreferenced chunks, and
    /// reads every attachment back in full, checking chunk sizes and SHA-256 digests.
    public func verify() throws -> Verification { try verify(skipping: []) }

    /// ``verify()`` that does not read the attachments whose IDs are in `skipped` (a lazily syncing device's
    /// attachments whose bytes are on the remote only); they are still counted in the totals.
    package func verify(skipping skipped: Set<UUID>) throws -> Verification {
        let all = try database.read { db -> [Attachment] in
            guard try db.tableExists("securestore_attachments") else { return [] }
            return try db.fetch("SELECT \(Self.columns) FROM securestore_attachments ORDER BY id", .none, Self.decode)
        }
        var problems: [String] = []
        // Inline bytes without a description (the trigger makes this impossible unless it was dropped): removed.
        let orphans = "FROM securestore_attachment_data WHERE id NOT IN (SELECT id FROM securestore_attachments)"
        var collected = 0
        if try database.read({ db in
            try db.tableExists("securestore_attachment_data") && (try db.scalar("SELECT count(*) \(orphans)", as: Int.self) ?? 0) > 0
        }) {
            collected = try database.write { db in
                try db.execute("DELETE \(orphans)")
                return db.changes
            }
        }
        var integrity: String?
        if let file = try openFile(create: false) {
            do {
                try file.integrityCheck()
            } catch let error as DatabaseError {
                integrity = "the attachments file '\(path)' fails the integrity check (\(error.message))"
            }
            collected += (try? collectGarbage(in: file)) ?? 0
        }
        for attachment in all where !skipped.contains(attachment.id) {
            do {
                try read(attachment) { _ in }
            } catch let error as SecureStoreError {
                problems.append(error.message)
            }
        }
        // The damaged attachments by name first; the file-level finding after them.
        if let integrity { problems.append(integrity) }
        return Verification(
            attachmentCount: all.count, totalSize: all.reduce(0) { $0 + $1.size },
            fileSize: (try? fileStatus(path).size).map(Int64.init) ?? 0, collected: collected, problems: problems)
    }

    /// How many attachments there are and their total size, from the record database only.
    public func summary() throws -> (count: Int, totalSize: Int64) {
        try database.read { db in
            guard try db.tableExists("securestore_attachments") else { return (0, 0) }
            return try db.fetchOne("SELECT count(*), coalesce(sum(size), 0) FROM securestore_attachments") { row in
                (try row.int(at: 0), try row.int64(at: 1))
            } ?? (0, 0)
        }
    }

    /// How many bytes of the attachments file no attachment uses: its free pages, left by deleted attachments
    /// and failed attaches. The next attachments reuse them before the file grows; the file does not shrink.
    /// Nil when there is no attachments file.
    ///
    /// The corresponding pragmas are `freelist_count` and `page_size`.
    public func unusedBytes() throws -> Int64? {
        guard let file = try openFile(create: false) else { return nil }
        return try file.read { db in
            let pages = try db.scalar("PRAGMA freelist_count", as: Int64.self) ?? 0
            return pages * (try db.scalar("PRAGMA page_size", as: Int64.self) ?? 0)
        }
    }

    /// Where the attachments are kept, from the record database only (one read): how many are inside the record
    /// database (``Attachment/isInline``) and their total size, and how many are chunks in the attachments file
    /// (empty attachments are neither).
    public func storage() throws -> (inlineCount: Int, inlineSize: Int64, chunkedCount: Int) {
        try database.read { db in
            guard try db.tableExists("securestore_attachments") else { return (0, 0, 0) }
            return try db.fetchOne(
                """
                SELECT coalesce(sum(chunk_count = 0 AND size > 0), 0), coalesce(sum(CASE WHEN chunk_count = 0 THEN size END), 0),
                    coalesce(sum(chunk_count > 0), 0) FROM securestore_attachments
                """
            ) { row in (try row.int(at: 0), try row.int64(at: 1), try row.int(at: 2)) } ?? (0, 0, 0)
        }
    }

    /// Writes an encrypted copy of the attachments file, under its own key, to the new file `destination`, and
    /// flushes it. Does nothing and returns false when there is no attachments file.
    public func export(to destination: String) throws -> Bool {
        guard let file = try openFile(create: false) else { return false }
        guard let key = try database.read({ db in try key(db) }) else { return false }
        try file.export(to: destination, key: key)
        try syncFileToDisk(destination)
        return true
    }
}
