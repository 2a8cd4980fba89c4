// Attachments of any record type: the records layer's table and primary key as the attachment owner.
public import EncryptedDatabase
internal import Foundation

extension AttachmentOwner {
    /// The row of `record`: its type's table and the stored bytes of its primary key — a blob's bytes, a text's
    /// UTF-8, an integer's decimal digits (the bytes SQLite's `CAST(key AS BLOB)` gives, which is what the
    /// row-deleted trigger compares).
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` when the key is `NULL` (a record not inserted yet) or a
    ///   floating-point number, or the table name is not a plain SQL name.
    public init<Record: PersistableRecord>(record: Record) throws {
        let container = try record.persistenceContainer()
        let key: Data
        switch container[Record.databasePrimaryKey]?.databaseValue ?? .null {
        case .blob(let bytes): key = bytes
        case .text(let text): key = Data(text.utf8)
        case .integer(let integer): key = Data(String(integer).utf8)
        case .null, .real:
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "a \(Record.self) can own attachments once its primary key '\(Record.databasePrimaryKey)' is set "
                    + "(an integer, a text or a blob)")
        }
        try self.init(table: Record.databaseTableName, key: key)
    }
}

extension AttachmentStore {
    /// Registers the migration that makes deleting a `Record` delete its attachments (see
    /// ``registerOwnerTable(_:keyColumn:in:)``): call it after the migration that creates the record's table.
    ///
    /// ```swift
    /// import EncryptedDatabase
    /// import Foundation
    /// import SecureStore
    ///
    /// struct Photo: Codable, FetchableRecord, PersistableRecord {
    ///     var id: UUID
    ///     var caption: String
    /// }
    ///
    /// func attach(_ file: String, to photo: Photo, in database: some DatabaseWriter) throws {
    ///     var migrator = DatabaseMigrator()
    ///     migrator.registerMigration("create photo") { db in
    ///         try db.execute("CREATE TABLE photo (id BLOB PRIMARY KEY NOT NULL, caption TEXT NOT NULL)")
    ///     }
    ///     AttachmentStore.registerMigrations(in: &migrator)
    ///     AttachmentStore.registerOwner(Photo.self, in: &migrator)
    ///     try migrator.migrate(database)
    ///
    ///     let store = AttachmentStore(database: database)
    ///     try store.add(.file(file), to: photo)
    /// }
    /// ```
    public static func registerOwner<Record: TableRecord>(_ type: Record.Type, in migrator: inout DatabaseMigrator) {
        registerOwnerTable(Record.databaseTableName, keyColumn: Record.databasePrimaryKey, in: &migrator)
    }

    /// Adds `source` to `record`, which must be stored: checked in the transaction that commits the attachment,
    /// so a record deleted meanwhile gets nothing (``SecureStoreError/Code/notFound``).
    @discardableResult
    public func add<Record: PersistableRecord>(
        _ source: AttachmentSource, to record: Record, progress: (AttachmentProgress) -> Void = { _ in }
    ) throws -> Attachment {
        try add([source], to: record, progress: progress)[0]
    }

    /// Adds `sources` to `record`, all or none (see ``add(_:to:ownerExists:progress:)``).
    @discardableResult
    public func add<Record: PersistableRecord>(
        _ sources: [AttachmentSource], to record: Record, progress: (AttachmentProgress) -> Void = { _ in }
    ) throws -> [Attachment] {
        let owner = try AttachmentOwner(record: record)
        try prepare(owners: [(table: Record.databaseTableName, keyColumn: Record.databasePrimaryKey)])
        return try add(sources, to: owner, ownerExists: { db in try record.exists(db) }, progress: progress)
    }

    /// The attachments of `record`, oldest first.
    public func attachments<Record: PersistableRecord>(of record: Record) throws -> [Attachment] {
        try attachments(of: try AttachmentOwner(record: record))
    }

    /// Deletes every attachment of `record`; returns how many there were.
    @discardableResult
    public func deleteAll<Record: PersistableRecord>(of record: Record) throws -> Int {
        try deleteAll(of: try AttachmentOwner(record: record))
    }
}
