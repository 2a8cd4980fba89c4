// Encrypted attachments: binary data of any size attached to a row of the record database, kept in a second
// SQLCipher file beside it in chunks, streamed in and out. See Docs/attachments.md for the measurements behind
// the layout and the crash argument.
public import EncryptedDatabase
public import Foundation
internal import SecureStoreCore
internal import Synchronization
internal import Glibc

/// The row an attachment belongs to: a table of the record database and the row's key, as bytes.
///
/// The store does not know the table's shape; it only needs the name (for the row-deleted trigger, see
/// ``AttachmentStore/registerOwnerTable(_:keyColumn:in:)``) and the key's bytes (for a UUID key, its 16 bytes).
public struct AttachmentOwner: Sendable, Hashable {
    /// The owner's table: an SQL identifier (letters, digits, `_`; not starting with a digit), at most 64 bytes.
    public let table: String
    /// The owner row's key, as stored in its key column.
    public let key: Data

    /// The row of `table` whose key is `key`.
    ///
    /// - Throws: ``SecureStoreError/invalidArgument`` when `table` is not a plain SQL identifier or `key` is empty
    ///   or longer than 1024 bytes.
    public init(table: String, key: Data) throws {
        try Self.checkIdentifier(table, what: "an attachment owner's table")
        guard !key.isEmpty, key.count <= 1024 else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "an attachment owner's key must be 1 to 1024 bytes (\(key.count))")
        }
        self.table = table
        self.key = key
    }

    /// The row of `table` whose key is the UUID `id` (stored as its 16 bytes).
    public init(table: String, id: UUID) throws {
        try self.init(table: table, key: withUnsafeBytes(of: id.uuid) { Data($0) })
    }

    /// Checks that `name` is a plain SQL identifier, so that it can appear in SQL text without quoting issues.
    static func checkIdentifier(_ name: String, what: String) throws {
        let bytes = Array(name.utf8)
        let valid = !bytes.isEmpty && bytes.count <= 64 && !(bytes[0] >= 0x30 && bytes[0] <= 0x39)
            && bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x5f }
        guard valid else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "\(what) must be a plain SQL name (letters, digits and '_', at most 64, not starting with a digit)")
        }
    }
}

/// An attachment as stored: what it is called, what it holds and how it is kept. Never contains its data.
public struct Attachment: Sendable, Hashable, Identifiable {
    /// The attachment's random identifier.
    public let id: UUID
    /// The row it belongs to.
    public let owner: AttachmentOwner
    /// Its name (usually the file name it was attached from), 1–255 characters on one line, no `/`.
    public let name: String
    /// Its media type, such as `image/png` (`application/octet-stream` when unknown).
    public let mediaType: String
    /// Its size in bytes.
    public let size: Int64
    /// The SHA-256 digest of its bytes, as 64 lowercase hexadecimal digits.
    public let sha256: String
    /// The size of its chunks in the attachments file (the last one may be shorter).
    public let chunkSize: Int
    /// How many chunks it has in the attachments file: `ceil(size / chunkSize)`, or 0 when it is kept in the
    /// record database (``isInline``) or empty.
    public let chunkCount: Int
    /// When it was attached, in whole microseconds.
    public let createdAt: Date

    /// Whether its bytes are kept in the record database, beside its description, rather than as chunks in the
    /// attachments file: attachments up to ``AttachmentStoreConfiguration/inlineLimit`` bytes are
    /// (Docs/attachments.md, "Where the bytes live").
    public var isInline: Bool { chunkCount == 0 && size > 0 }

    /// The identifier as 32 lowercase hexadecimal digits (what the command line shows and resolves by prefix).
    public var hexID: String {
        hexString(uuid: id)
    }
}

/// Where the bytes of a new attachment come from.
public struct AttachmentSource: Sendable {
    enum Origin: Sendable {
        case path(String)
        case descriptor(Int32)
        case data(Data)
    }

    let origin: Origin
    /// The attachment's name.
    public var name: String
    /// The attachment's media type; `nil` guesses it from the name's extension.
    public var mediaType: String?
    /// How the source is named in messages: the path, or what the caller passed.
    public var label: String

    /// The regular file at `path` (symbolic links are followed). It is read once, in chunks; if it changes,
    /// shrinks, grows or is deleted while it is being read, nothing is attached.
    public static func file(_ path: String, name: String? = nil, mediaType: String? = nil) -> AttachmentSource {
        AttachmentSource(
            origin: .path(path), name: name ?? (path as NSString).lastPathComponent, mediaType: mediaType, label: path)
    }

    /// Whatever can be read from the open descriptor `fileDescriptor` (standard input, a pipe) until its end. The
    /// descriptor is not closed.
    public static func fileDescriptor(
        _ fileDescriptor: Int32, name: String, mediaType: String? = nil, label: String = "standard input"
    ) -> AttachmentSource {
        AttachmentSource(origin: .descriptor(fileDescriptor), name: name, mediaType: mediaType, label: label)
    }

    /// The bytes `data` (for small attachments made in memory).
    public static func data(_ data: Data, name: String, mediaType: String? = nil) -> AttachmentSource {
        AttachmentSource(origin: .data(data), name: name, mediaType: mediaType, label: "'\(name)'")
    }
}

/// How far an attachment has been written or read.
public struct AttachmentProgress: Sendable, Hashable {
    /// The attachment's name.
    public let name: String
    /// Bytes done so far.
    public let bytes: Int64
    /// The total, when known (a regular file, or an attachment being read).
    public let total: Int64?
}

/// Options of an ``AttachmentStore``.
public struct AttachmentStoreConfiguration: Sendable {
    /// The size of the chunks new attachments are cut into. 256 KiB by default (Docs/attachments.md has the
    /// measurements); 4 KiB to 16 MiB. Each attachment records its own chunk size, so changing it is safe.
    public var chunkSize = 256 * 1024
    /// The largest attachment accepted, in bytes: 16 GiB by default. A larger one is refused with
    /// ``SecureStoreError/Code/invalidData`` and nothing is attached.
    public var maximumSize: Int64 = 16 << 30
    /// The largest attachment kept in the record database itself, in one row beside its description, instead of
    /// as chunks in the attachments file: 64 KiB by default, 0 to keep every attachment in the attachments file (a
    /// limit of ``chunkSize`` or more is taken as one byte less than a chunk). A small attachment kept there costs
    /// one commit of the record database, not two commits in two files and their fsyncs (Docs/attachments.md has
    /// the measured break-even); its bytes are re-encrypted by every key rotation of the record database, like
    /// every other row.
    public var inlineLimit = 64 * 1024
    /// How many chunks a read may decrypt ahead of the caller, on a second thread: 4 by default (1 MiB at 256 KiB
    /// chunks), at most ``maximumReadAhead``; 0 reads on the caller's thread alone. A chunk waits there only once
    /// SQLCipher has authenticated all of it, so the depth changes speed and memory, never what is delivered.
    public var readAhead = 4
    /// The largest ``readAhead`` taken; a larger one is read as this.
    public static let maximumReadAhead = 16
    /// The options the attachments file is opened with. Its page cache is 2 MiB by default: chunks are read
    /// once, so a larger cache would only grow memory with the size of the attachment. Its format is
    /// ``CipherFormat/secureStoreAttachments`` (32 KiB pages) by default; a file created in SecureStore's
    /// database format (``CipherFormat/secureStore``, attachment files written before 32 KiB pages) still opens
    /// in that format.
    public var database = DatabaseConfiguration()

    /// The default options.
    public init() {
        database.cacheSizeKiB = 2048
        // A rollback journal from the first open on (see openFile): never switched, so an open writes nothing and a
        // journal left by a crash is rolled back, not refused as foreign.
        database.journalMode = .rollback
        database.format = .secureStoreAttachments
    }
}

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

    private let file = Mutex<DatabaseQueue?>(nil)
    /// Attachments committed by this store whose upload mark is still in the attachments file.
    private let finishedUploads = Mutex<[UUID]>([])
    /// The attachments this process is writing now (any store): an upload mark with this process's pid is in
    /// progress only when it is listed here, so a mark left by a finished upload (or by a store since released)
    /// does not keep a deleted attachment's chunks until the process exits.
    private static let uploadsInProgress = Mutex<Set<UUID>>([])

    /// Removes the upload marks of attachments committed earlier, inside a write transaction of the file.
    private func clearFinishedUploads(_ db: Database) throws {
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
    func attachmentsKey(_ db: Database) throws -> DatabaseKey? { try key(db) }

    /// The attachments key from the record database, or nil when no attachment was ever added.
    private func key(_ db: Database) throws -> DatabaseKey? {
        guard try db.tableExists("securestore_attachment_key") else { return nil }
        guard var bytes = try db.fetchOne("SELECT key FROM securestore_attachment_key WHERE singleton = 0", .none, { try $0.data(at: 0) })
        else { return nil }
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        return try DatabaseKey(bytes: bytes)
    }

    /// The open attachments file, opened (and created when `create`) on first use; nil when there is none yet
    /// and `create` is false.
    func openFile(create: Bool) throws -> DatabaseQueue? {
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
            if opened == nil, !KeyedDatabaseFiles.exists(path) { _ = try chunksFile() }
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
    private func damagedPages() -> [Int]? {
        guard let key = try? database.read({ db in try key(db) }) ?? nil,
            case let format = (try? cipherInfo())?.flatMap({ $0 })?.format ?? configuration.database.format,
            format.hmacAlgorithm == "HMAC_SHA1"
        else { return nil }
        return PageAuthentication.failingPages(path: path, key: key, pageSize: format.pageSize)
    }

    /// How many chunks a read decrypts ahead of its caller (``AttachmentStoreConfiguration/readAhead``, bounded).
    private var pipelineDepth: Int { min(max(0, configuration.readAhead), AttachmentStoreConfiguration.maximumReadAhead) }

    /// How many chunks go into one transaction of the attachments file (about 8 MiB).
    private var chunksPerTransaction: Int { max(1, (8 << 20) / configuration.chunkSize) }

    /// Reads `source` and returns its description, with its bytes when it ends within `inlineLimit` bytes (kept in
    /// the record database by the caller's commit); a longer source is written as chunks into `file()`.
    private func write(
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
    private func readInline(
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
    private func readChunks(_ attachment: Attachment, file: DatabaseQueue, deliver: (Data) throws -> Bool) throws {
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

    private func removeChunks(_ ids: [UUID]) throws {
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
    private func deleteChunks(of id: UUID, in file: DatabaseQueue) throws -> Bool {
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

    private func collectGarbage(in file: DatabaseQueue) throws -> Int {
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
    public func verify() throws -> Verification {
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
        for attachment in all {
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
            fileSize: Int64(KeyedDatabaseFiles.size(path) ?? 0), collected: collected, problems: problems)
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
        try KeyedDatabaseFiles.syncFile(destination)
        return true
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

    private func damaged(_ what: String, _ reason: String) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.verificationFailed,
            "\(what) is damaged: \(reason); no wrong bytes were returned")
    }

    /// The error of a read that stopped at a damaged chunk after `delivered` bytes: those are the attachment's
    /// first bytes, each authenticated, and the message says how many they are.
    private func damaged(_ what: String, _ reason: String, delivered: Int64) -> SecureStoreError {
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
    static func formatSize(_ size: Int64) -> String { byteCountText(size) }

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

/// Reads a source into chunk buffers and notices a file that changes under it.
struct SourceReader {
    private var descriptor: Int32
    private let ownsDescriptor: Bool
    private let label: String
    private var memory: Data?
    private var memoryOffset = 0
    private var initial: stat?
    /// The size of a regular file when reading began.
    let expectedSize: Int64?

    init(_ source: AttachmentSource) throws {
        label = source.label
        switch source.origin {
        case .data(let data):
            descriptor = -1
            ownsDescriptor = false
            memory = data
            expectedSize = Int64(data.count)
        case .descriptor(let fd):
            descriptor = fd
            ownsDescriptor = false
            if let status = try? FileDescriptor(rawValue: fd).fileStatus(), status.isRegularFile {
                initial = status.raw
                // Standard input redirected from a file is read from its current offset.
                let offset = (try? FileDescriptor(rawValue: fd).currentOffset()) ?? 0
                expectedSize = Int64(status.size) - Int64(max(0, offset))
            } else {
                expectedSize = nil
            }
        case .path(let path):
            ownsDescriptor = true
            do {
                switch try FileDescriptor.openRegularFile(path, followingLinks: true) {
                case .opened(let fd, let status):
                    descriptor = fd.rawValue
                    initial = status
                    expectedSize = Int64(status.st_size)
                case .missing:
                    throw SecureStoreError(SecureStoreError.Code.notFound, "'\(path)' does not exist; nothing was attached")
                case .notRegular:
                    throw SecureStoreError(
                        SecureStoreError.Code.invalidArgument,
                        "'\(path)' is not a regular file; to attach a stream, pipe it to standard input with a name")
                }
            } catch let error as Errno {
                throw SecureStoreError(
                    error.isPermission ? SecureStoreError.Code.fileSystem : SecureStoreError.Code.fileSystem,
                    "cannot open '\(path)': \(error); nothing was attached")
            }
        }
    }

    mutating func close() {
        if ownsDescriptor, descriptor >= 0 { FileDescriptor(rawValue: descriptor).close() }
        descriptor = -1
    }

    /// Fills `buffer` as far as the source goes; returns the byte count (less than the buffer only at the end).
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if let memory {
            let count = min(buffer.count, memory.count - memoryOffset)
            memory.copyBytes(to: buffer.bindMemory(to: UInt8.self), from: memoryOffset..<(memoryOffset + count))
            memoryOffset += count
            return count
        }
        var filled = 0
        while filled < buffer.count {
            let result: Int
            do {
                result = try FileDescriptor(rawValue: descriptor).readSome(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            } catch {
                throw SecureStoreError(SecureStoreError.Code.fileSystem, "cannot read \(label): \(error); nothing was attached")
            }
            if result == 0 { break }
            filled += result
        }
        return filled
    }

    /// Checks, at the end, that a regular file was not changed, truncated or deleted while it was read.
    func checkUnchanged(bytesRead: Int64) throws {
        guard let initial, descriptor >= 0 else { return }
        guard let now = try? FileDescriptor(rawValue: descriptor).status() else { return }
        let expected = expectedSize ?? Int64(initial.st_size)
        if bytesRead < expected {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "\(label) shrank while it was being read (\(expected) bytes at the start, \(bytesRead) read); nothing was attached")
        }
        if now.st_size != initial.st_size || now.st_mtim.tv_sec != initial.st_mtim.tv_sec
            || now.st_mtim.tv_nsec != initial.st_mtim.tv_nsec || bytesRead != expected
        {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "\(label) changed while it was being read; nothing was attached. Attach it again when it is complete")
        }
        if now.st_nlink == 0 {
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "\(label) was deleted while it was being read; nothing was attached")
        }
    }
}
