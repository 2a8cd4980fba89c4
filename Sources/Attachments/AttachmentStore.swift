// Encrypted attachments: binary data of any size attached to a row of the record database, kept in a second
// SQLCipher file beside it in chunks, streamed in and out. See Docs/attachments.md for the measurements behind
// the layout and the crash argument.
public import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// Encrypted attachments of the rows of a record database: any number of bytes, streamed in chunks, with a
/// name, a media type, a size and a SHA-256 digest.
///
/// ```swift
/// // fragment: `database` is a KeyedDatabase (or any DatabaseWriter) holding a table `note`
/// let store = AttachmentStore(database: database)
/// let owner = try AttachmentOwner(table: "note", id: noteID)
/// let photo = try store.add(.file("/tmp/photo.jpg"), to: owner)
/// try store.read(id: photo.id) { bytes in consume(bytes) }     // chunk by chunk, digest checked at the end
/// try store.delete(id: photo.id)
/// ```
///
/// **Where the bytes are.** The record database keeps each attachment's description (table
/// `securestore_attachments`) and the random 32-byte key of the attachments file (table
/// `securestore_attachment_key`). The bytes are in a second SQLCipher file beside it, `<name>.attachments.db`
/// (``filePath(forDatabase:)``), in the `securestore-attachments-1` format (SecureStore's algorithms with 32 KiB
/// pages, ``CipherFormat/secureStoreAttachments``), as chunks of ``AttachmentStoreConfiguration/chunkSize``.
/// So the record database stays small and fast, and its key rotation re-encrypts only it: the attachments key,
/// wrapped by the database key, does not change. Small attachments (up to
/// ``AttachmentStoreConfiguration/inlineLimit``, 64 KiB) are the exception: their bytes are kept in the record
/// database beside their description (``Attachment/isInline``), one commit instead of two in two files.
///
/// **All or nothing.** A small attachment is one transaction of the record database. For larger ones, chunks are
/// written first, marked as an upload in progress; the description row in the
/// record database is the commit point. A crash before it leaves chunks that nothing refers to, which
/// ``collectGarbage()`` removes (it runs when the store first opens its file in a process, and in
/// ``verify()``). Deleting removes the description first, then the chunks.
///
/// **Damage.** Every page of the attachments file carries SQLCipher's HMAC: a changed page fails to read,
/// and the attachment is reported damaged with the chunk named (``SecureStoreError/Code/verificationFailed``);
/// no byte of a damaged chunk is ever returned. A full read also checks the SHA-256 digest.
///
/// A store is `Sendable`: calls are serialized per connection.
public final class AttachmentStore: Sendable {
    /// The record database: descriptions of attachments and the attachments key.
    public let database: any DatabaseWriter
    /// The attachments file.
    public let path: String
    /// The options.
    public let configuration: AttachmentStoreConfiguration

    let file = Mutex<DatabaseQueue?>(nil)
    /// Where the `async` forms run (AttachmentAsync.swift): a concurrent dispatch queue of this store, never Swift
    /// concurrency's cooperative pool (the calls block on files, fsync and the record database's lock).
    let asyncQueue = DispatchQueue(label: "securestore.attachments", attributes: .concurrent)
    /// Attachments committed by this store whose upload mark is still in the attachments file.
    let finishedUploads = Mutex<[UUID]>([])
    /// The attachments this process is writing now (any store): an upload mark with this process's pid is in
    /// progress only when it is listed here, so a mark left by a finished upload (or by a store since released)
    /// does not keep a deleted attachment's chunks until the process exits.
    static let uploadsInProgress = Mutex<Set<UUID>>([])

    /// Removes the upload marks of attachments committed earlier, inside a write transaction of the file.
    func clearFinishedUploads(_ db: Database) throws {
        let ids = finishedUploads.withLock { ids in
            defer { ids.removeAll() }
            return ids
        }
        for id in ids { try db.execute("DELETE FROM upload WHERE attachment = ?", [id]) }
    }

    /// The store of the attachments of `database`, whose file is ``filePath(forDatabase:)``. Nothing is opened or
    /// created until an attachment is added or read.
    public init(database: any DatabaseWriter, configuration: AttachmentStoreConfiguration = AttachmentStoreConfiguration()) {
        self.database = database
        self.path = Self.filePath(forDatabase: database.path)
        self.configuration = configuration
    }

    /// The attachments file of the record database at `path`: `<name>.attachments.db` beside `<name>.db`.
    public static func filePath(forDatabase path: String) -> String {
        (path.hasSuffix(".db") ? String(path.dropLast(3)) : path) + ".attachments.db"
    }

    /// Closes the attachments file (the record database is the caller's). Later calls open it again.
    public func close() throws {
        let queue = file.withLock { queue in
            defer { queue = nil }
            return queue
        }
        try queue?.close()
    }

    // MARK: Schema

    /// The identifier of the migration that adds the attachment tables to the record database.
    public static let migrationID = "securestore attachments 1"
    /// The identifier of the migration that adds the table of small attachments' bytes to the record database.
    public static let inlineMigrationID = "securestore attachments 2"
    /// The prefix of the migrations that add an owner table's row-deleted trigger.
    static let ownerMigrationPrefix = "securestore attachments owner "

    static let recordSchema = """
        CREATE TABLE securestore_attachment_key (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 0),
            key BLOB NOT NULL CHECK (typeof(key) = 'blob' AND length(key) = 32)
        );
        CREATE TABLE securestore_attachments (
            id BLOB PRIMARY KEY NOT NULL CHECK (typeof(id) = 'blob' AND length(id) = 16),
            owner_table TEXT NOT NULL,
            owner_key BLOB NOT NULL,
            name TEXT NOT NULL,
            media_type TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 0),
            sha256 BLOB NOT NULL CHECK (length(sha256) = 32),
            chunk_size INTEGER NOT NULL CHECK (chunk_size > 0),
            chunk_count INTEGER NOT NULL CHECK (chunk_count >= 0),
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX securestore_attachments_owner ON securestore_attachments (owner_table, owner_key, created_at);
        """

    /// The bytes of small attachments (``Attachment/isInline``), one row each, in the record database; deleted
    /// with their description (by any delete: the store's, an owner row's trigger, an application's SQL). A rowid
    /// table: rows of up to 64 KiB belong in one, not in a `WITHOUT ROWID` b-tree.
    static let inlineSchema = """
        CREATE TABLE securestore_attachment_data (
            id BLOB PRIMARY KEY NOT NULL CHECK (typeof(id) = 'blob' AND length(id) = 16),
            data BLOB NOT NULL CHECK (typeof(data) = 'blob')
        );
        CREATE TRIGGER securestore_attachment_data_delete AFTER DELETE ON securestore_attachments BEGIN
            DELETE FROM securestore_attachment_data WHERE id = OLD.id;
        END;
        """

    static let fileSchema = """
        CREATE TABLE chunk (
            attachment BLOB NOT NULL,
            seq INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (attachment, seq)
        );
        CREATE TABLE upload (
            attachment BLOB PRIMARY KEY NOT NULL,
            pid INTEGER NOT NULL,
            started_at INTEGER NOT NULL
        );
        """

    /// Registers the migrations that add the attachment tables (and the attachments key) to the record database.
    /// Use it when the application migrates every component with one ``DatabaseMigrator``; the store applies them
    /// itself otherwise, at the first attachment.
    public static func registerMigrations(in migrator: inout DatabaseMigrator) {
        registerMigrations(in: &migrator, except: [])
    }

    /// Registers the store's own migrations that are not in `applied`.
    static func registerMigrations(in migrator: inout DatabaseMigrator, except applied: Set<String>) {
        if !applied.contains(migrationID) {
            migrator.registerMigration(migrationID) { db in
                try db.executeScript(recordSchema)
                // The attachments key is made and stored, inside the encrypted record database, before the
                // attachments file exists: no encrypted file ever exists without its key.
                var bytes = DatabaseKey.random().withUnsafeBytes { Data($0) }
                defer { bytes.resetBytes(in: 0..<bytes.count) }
                try db.execute("INSERT INTO securestore_attachment_key (singleton, key) VALUES (0, ?)", [bytes])
            }
        }
        if !applied.contains(inlineMigrationID) {
            migrator.registerMigration(inlineMigrationID) { db in try db.executeScript(inlineSchema) }
        }
    }

    /// Whether `id` names one of the store's own migrations (its tables, the table of inline bytes, owner tables'
    /// triggers; later versions may add more). An application that migrates with one ``DatabaseMigrator`` and
    /// lists the migrations of other components in `isOtherComponentsMigration` uses this rather than a list of
    /// identifiers, so that a store that adds a migration is not taken for a newer program:
    ///
    /// ```swift
    /// // fragment: `migrator` is the application's DatabaseMigrator
    /// migrator.isOtherComponentsMigration = { AttachmentStore.isOwnMigration($0) }
    /// ```
    public static func isOwnMigration(_ id: String) -> Bool {
        id == migrationID || id == inlineMigrationID || id.hasPrefix(ownerMigrationPrefix)
    }

    /// Registers the migration that makes deleting a row of `table` delete its attachments: an `AFTER DELETE`
    /// trigger removes their descriptions in the same transaction (their chunks are collected afterwards). Call
    /// it after the migration that creates `table`. `keyColumn` is the column whose bytes are
    /// ``AttachmentOwner/key`` (compared as `CAST(key AS BLOB)`: a blob as it is, a text's UTF-8, an integer's
    /// decimal digits, as ``AttachmentOwner/init(record:)`` makes them).
    public static func registerOwnerTable(_ table: String, keyColumn: String, in migrator: inout DatabaseMigrator) {
        migrator.registerMigration(ownerMigrationPrefix + table) { db in
            try AttachmentOwner.checkIdentifier(table, what: "an attachment owner's table")
            try AttachmentOwner.checkIdentifier(keyColumn, what: "an attachment owner's key column")
            try db.execute(
                """
                CREATE TRIGGER securestore_attachments_owner_\(table) AFTER DELETE ON "\(table)" BEGIN
                    DELETE FROM securestore_attachments WHERE owner_table = '\(table)' AND owner_key = CAST(OLD."\(keyColumn)" AS BLOB);
                END
                """)
        }
    }

    /// The migrator of the store's own tables (other components' migrations are left alone).
    static func migrator(owners: [(String, String)]) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        registerMigrations(in: &migrator)
        for (table, column) in owners { registerOwnerTable(table, keyColumn: column, in: &migrator) }
        migrator.isOtherComponentsMigration = { !isOwnMigration($0) }
        return migrator
    }

    /// Adds the attachment tables and `owners`' triggers to the record database when they are missing.
    public func prepare(owners: [(table: String, keyColumn: String)] = []) throws {
        let applied = Set(try database.read { db in
            try db.tableExists(DatabaseMigrator.tableName)
                ? try db.fetch("SELECT id FROM \(DatabaseMigrator.tableName)") { try $0.string(at: 0) } : []
        })
        let wanted = [Self.migrationID, Self.inlineMigrationID] + owners.map { Self.ownerMigrationPrefix + $0.table }
        if wanted.allSatisfy(applied.contains) { return }
        var migrator = DatabaseMigrator()
        Self.registerMigrations(in: &migrator, except: applied)
        for owner in owners where !applied.contains(Self.ownerMigrationPrefix + owner.table) {
            Self.registerOwnerTable(owner.table, keyColumn: owner.keyColumn, in: &migrator)
        }
        migrator.isOtherComponentsMigration = { _ in true }
        try migrator.migrate(database)
    }

    // MARK: The attachments file

    /// The attachments key from the record database, or nil when no attachment was ever added.
    package func attachmentsKey(_ db: Database) throws -> DatabaseKey? { try key(db) }

    /// The attachments key from the record database, or nil when no attachment was ever added.
    func key(_ db: Database) throws -> DatabaseKey? {
        guard try db.tableExists("securestore_attachment_key") else { return nil }
        guard var bytes = try db.fetchOne("SELECT key FROM securestore_attachment_key WHERE singleton = 0", .none, { try $0.data(at: 0) })
        else { return nil }
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        return try DatabaseKey(bytes: bytes)
    }

    /// The open attachments file, opened (and created when `create`) on first use; nil when there is none yet
    /// and `create` is false.
    package func openFile(create: Bool) throws -> DatabaseQueue? {
        if let queue = file.withLock({ $0 }) { return queue }
        if create { try prepare() }
        let found = try database.read { db -> (DatabaseKey, Int)? in
            guard let key = try key(db) else { return nil }
            // Attachments kept in the record database (inline) need no file.
            return (key, try db.scalar("SELECT count(*) FROM securestore_attachments WHERE chunk_count > 0", as: Int.self) ?? 0)
        }
        guard let (key, count) = found else { return nil }
        do {
            _ = try fileStatus(path, followingLinks: false)
        } catch {
            guard error == .noSuchFileOrDirectory else {
                throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot reach the attachments file '\(path)': \(error)")
            }
            if count > 0 {
                throw SecureStoreError(
                    SecureStoreError.Code.notFound,
                    "the attachments file '\(path)' is missing, but the database lists \(count) attachment"
                        + (count == 1 ? "" : "s") + "; restore it from a backup (securestore db restore), or detach them")
            }
            guard create else { return nil }
        }
        let queue: DatabaseQueue
        do {
            queue = try Self.openQueue(path, key: key, configuration: configuration.database)
        } catch let error as DatabaseError where error.code == .wrongKeyOrNotADatabase {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the attachments file '\(path)' does not open with the attachments key kept in '\(database.path)': it "
                    + "belongs to another database or is damaged; nothing was changed")
        } catch let error as DatabaseError where error.code == .corrupt {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed, "the attachments file '\(path)' is damaged (\(error.message))")
        }
        do {
            try queue.writeWithoutTransaction { db in
                // A commit of chunks is on disk before the description that refers to them is committed in the
                // other file (the record database runs synchronous = NORMAL).
                try db.execute("PRAGMA synchronous = FULL")
                // A rollback journal, not WAL: pages appended past the end of the file are not journaled, so each
                // byte of a new attachment is written once; WAL writes it twice (log, then checkpoint): 53 MB took
                // 420 ms against 650 ms (Docs/attachments.md). The open set WAL; another process's open may set it
                // again, and SQLite follows the header either way.
                if !configuration.database.readOnly {
                    _ = try db.fetch("PRAGMA journal_mode = DELETE") { try $0.string(at: 0) }
                }
            }
            var migrator = DatabaseMigrator()
            migrator.registerMigration("attachments file 1") { db in try db.executeScript(Self.fileSchema) }
            try migrator.migrate(queue)
        } catch let error as DatabaseError where error.code == .corrupt {
            try? queue.close()
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the attachments file '\(path)' is damaged (\(error.message))")
        }
        let (winner, opened) = file.withLock { current -> (DatabaseQueue, Bool) in
            if let current { return (current, false) }
            current = queue
            return (queue, true)
        }
        if opened {
            _ = try? collectGarbage(in: winner)
        } else {
            try? queue.close()
        }
        return winner
    }

    // MARK: Helpers

    static let columns = "id, owner_table, owner_key, name, media_type, size, sha256, chunk_size, chunk_count, created_at"

    static func decode(_ row: Row) throws -> Attachment {
        Attachment(
            id: try row.uuid(at: 0), owner: try AttachmentOwner(table: try row.string(at: 1), key: try row.data(at: 2)),
            name: try row.string(at: 3), mediaType: try row.string(at: 4), size: try row.int64(at: 5),
            sha256: hexString(Array(try row.data(at: 6))), chunkSize: try row.int(at: 7),
            chunkCount: try row.int(at: 8), createdAt: dateFromMicroseconds(try row.int64(at: 9)))
    }

    static func fetch(_ db: Database, id: UUID) throws -> Attachment? {
        guard try db.tableExists("securestore_attachments") else { return nil }
        return try db.fetchOne("SELECT \(columns) FROM securestore_attachments WHERE id = ?", [id], decode)
    }

    func damaged(_ what: String, _ reason: String) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.verificationFailed,
            "\(what) is damaged: \(reason); no wrong bytes were returned")
    }

    /// The error of a read that stopped at a damaged chunk after `delivered` bytes: those are the attachment's
    /// first bytes, each authenticated, and the message says how many they are.
    func damaged(_ what: String, _ reason: String, delivered: Int64) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.verificationFailed,
            "\(what) is damaged: \(reason); "
                + (delivered == 0
                    ? "no byte was delivered"
                    : "its first \(delivered) bytes were delivered, each authenticated, and nothing after them"))
    }

    /// Checks an attachment name: 1–255 characters, one line, no control characters, no `/`.
    /// The 32 bytes of a SHA-256 digest written as 64 hexadecimal digits (strictly: an attachment's `sha256` is
    /// always made by ``hexString(_:)``; anything else is refused, never skipped over).
    static func digestBytes(_ hex: String) throws -> [UInt8] {
        guard hex.utf8.count == 64, let bytes = bytes(fromHex: hex) else {
            throw SecureStoreError(SecureStoreError.Code.invalidData, "'\(hex.prefix(70))' is not a SHA-256 digest (64 hexadecimal digits)")
        }
        return bytes
    }

    /// Refuses a name that is not one line of 1 to 255 characters fit to show (Core's `textProblem`), or holds '/'.
    package static func checkName(_ name: String) throws {
        guard !name.isEmpty, name.count <= 255 else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "an attachment name must be 1 to 255 characters (\(name.count))")
        }
        // Core's one rule for names and titles (``textProblem(_:allowingTab:)``), and no '/'.
        guard textProblem(name, allowingTab: false) == nil, !name.contains("/"), name != ".", name != ".." else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "an attachment name must be one line without control characters, invisible formatting characters "
                    + "(such as bidirectional overrides) or '/'")
        }
    }
    /// `size` bytes for a person (the core's one rule: `512 bytes`, `1.5 MiB`).
    package static func formatSize(_ size: Int64) -> String { byteCountText(size) }

    /// A media type guessed from a file name's extension; `application/octet-stream` when unknown.
    public static func mediaType(forName name: String) -> String {
        let ext = (name as NSString).pathExtension.lowercased()
        return Self.mediaTypes[ext] ?? "application/octet-stream"
    }

    static let mediaTypes: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "svg": "image/svg+xml", "pdf": "application/pdf", "txt": "text/plain",
        "md": "text/markdown", "csv": "text/csv", "json": "application/json", "html": "text/html",
        "mp4": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mp3": "audio/mpeg", "m4a": "audio/mp4",
        "wav": "audio/wav", "zip": "application/zip", "gz": "application/gzip", "tar": "application/x-tar",
        "doc": "application/msword", "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "odt": "application/vnd.oasis.opendocument.text",
    ]
}
