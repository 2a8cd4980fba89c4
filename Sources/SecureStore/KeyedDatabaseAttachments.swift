// The keyed database's attachments: its AttachmentStore, and the attachments' part of backup and verification.
public import Attachments
internal import EncryptedDatabase
internal import SecureStoreCore
public import Foundation

extension KeyedDatabase {
    /// The attachments of this database (``AttachmentStore``): the file `<name>.attachments.db` beside it, whose
    /// key is kept inside this database. A key rotation re-encrypts only this database; the attachments key is
    /// inside it, so the attachments file stays as it is and keeps opening.
    public func attachmentStore(configuration: AttachmentStoreConfiguration = AttachmentStoreConfiguration()) -> AttachmentStore {
        AttachmentStore(database: self, configuration: configuration)
    }

    /// Where the backup of the attachments file goes when a backup of the database is written to `backup`: the
    /// same rule as for the database (`x.db` → `x.attachments.db`; other names get `.attachments.db` added).
    public static func attachmentsBackupPath(forBackup backup: URL) -> String {
        AttachmentStore.filePath(forDatabase: backup.path)
    }

    /// Writes the attachments file's copy beside the database backup at `backup` and checks that every attachment
    /// the backup lists has all its chunks there (an attachment deleted by another process between the two copies
    /// would be missing: then both copies are made again, up to three times). Returns false when there are no
    /// attachments.
    func backupAttachments(besideBackup backup: URL, redoDatabaseBackup: () throws -> Void) throws -> Bool {
        let store = attachmentStore()
        let destination = Self.attachmentsBackupPath(forBackup: backup)
        if KeyedDatabaseFiles.exists(destination) {
            throw SecureStoreError(
                SecureStoreError.Code.alreadyExists,
                "'\(destination)' already exists; a backup never replaces a file. Choose a new name")
        }
        for attempt in 1...3 {
            guard try store.export(to: destination) else { return false }
            let missing = try missingChunks(backup: backup.path, attachments: destination, store: store)
            if missing.isEmpty { return true }
            try? removeFile(destination)
            guard attempt < 3 else {
                throw SecureStoreError(
                    SecureStoreError.Code.verificationFailed,
                    "the attachments changed during the backup three times (\(missing.count) attachment(s) incomplete in "
                        + "the copy); the backup was removed. Try again when nothing is being attached or detached")
            }
            try? removeFile(backup.path)
            try redoDatabaseBackup()
        }
        return true
    }

    /// The attachments listed in the database backup at `backup` whose chunks are not all in `attachments`.
    private func missingChunks(backup: String, attachments: String, store: AttachmentStore) throws -> [String] {
        guard let recordKey = try items.key(account: items.currentAccount(id: databaseID)) else {
            throw self.store.missingKeyError()
        }
        var readOnly = DatabaseConfiguration()
        readOnly.readOnly = true
        let record = try DatabaseQueue(path: backup, key: recordKey, configuration: readOnly)
        defer { try? record.close() }
        var configuration = AttachmentStoreConfiguration()
        configuration.database.readOnly = true
        let copy = AttachmentStore(database: record, configuration: configuration)
        return try copy.incompleteAttachments(inFile: attachments)
    }
}

extension AttachmentStore {
    /// The names of the attachments whose chunk count in the attachments file at `file` (opened read-only with the
    /// key in this store's database) differs from their description.
    func incompleteAttachments(inFile file: String) throws -> [String] {
        let listed = try database.read { db -> [(UUID, String, Int)] in
            guard try db.tableExists("securestore_attachments") else { return [] }
            // Inline attachments (in the database itself) have no chunks to find.
            return try db.fetch("SELECT id, name, chunk_count FROM securestore_attachments WHERE chunk_count > 0") {
                (try $0.uuid(at: 0), try $0.string(at: 1), try $0.int(at: 2))
            }
        }
        if listed.isEmpty { return [] }
        guard let key = try database.read({ db in try attachmentsKey(db) }) else { return listed.map(\.1) }
        var readOnly = configuration.database
        readOnly.readOnly = true
        let queue = try Self.openQueue(file, key: key, configuration: readOnly)
        defer { try? queue.close() }
        return try queue.read { db in
            try listed.filter { id, _, count in
                try db.scalar("SELECT count(*) FROM chunk WHERE attachment = ?", [id], as: Int.self) != count
            }.map(\.1)
        }
    }
}
