// One task of the task list: a value, independent of the database.
public import Foundation
internal import SecureStoreCore
public import EncryptedDatabase
internal import SecureStore

/// One task of a ``TaskList``: an ID, a one-line title, whether it is done, and when it was created.
///
/// ```swift
/// let item = TaskItem(title: "Pay rent")
/// item.hexID          // "3f2a9c…" (32 lowercase hex digits; the CLI accepts any unique prefix)
/// ```
///
/// The creation date is kept with the precision the database stores: whole microseconds since
/// 1970-01-01 00:00:00 UTC. `TaskItem(createdAt:)` rounds to the nearest microsecond, so a task reads back
/// from the database equal (`==`) to the value that was written.
public struct TaskItem: Sendable, Hashable, Identifiable {
    /// The task's identity, stored as a 16-byte blob.
    public let id: UUID
    /// The title: one line of text, trimmed, 1 to ``TaskList/maximumTitleLength`` characters.
    public var title: String
    /// Whether the task is done.
    public var done: Bool
    /// Microseconds since 1970-01-01 00:00:00 UTC: the stored value, and the sort key with `id`.
    let createdAtMicroseconds: Int64

    /// A task value. `createdAt` is rounded to the nearest microsecond; `title` is validated only when the task
    /// is written to a ``TaskList``.
    public init(id: UUID = UUID(), title: String, done: Bool = false, createdAt: Date = Date()) {
        self.init(id: id, title: title, done: done, microseconds: TaskItem.microseconds(createdAt))
    }

    init(id: UUID, title: String, done: Bool, microseconds: Int64) {
        self.id = id
        self.title = title
        self.done = done
        self.createdAtMicroseconds = microseconds
    }

    /// When the task was created, to the microsecond.
    public var createdAt: Date { dateFromMicroseconds(createdAtMicroseconds) }

    /// The ID as 32 lowercase hexadecimal digits without dashes, the form ``TaskList/resolve(prefix:)`` matches
    /// prefixes of.
    public var hexID: String {
        hexString(uuid: id)
    }

    /// Whole microseconds since 1970 (the core's one rule, the same as EncryptedDatabase's `Date` storage).
    static func microseconds(_ date: Date) -> Int64 { microsecondsSince1970(date) }
}

extension TaskItem: Codable {
    private enum CodingKeys: String, CodingKey {
        case id, title, done, createdAt
    }

    /// Decodes `id`, `title`, `done` and `createdAt` (rounded to the microsecond).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try container.decode(UUID.self, forKey: .id),
            title: try container.decode(String.self, forKey: .title),
            done: try container.decode(Bool.self, forKey: .done),
            createdAt: try container.decode(Date.self, forKey: .createdAt))
    }

    /// Encodes `id`, `title`, `done` and `createdAt`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(title, forKey: .title)
        try container.encode(done, forKey: .done)
        try container.encode(createdAt, forKey: .createdAt)
    }
}

/// A task is a record of the task list's `tasks` table: `TaskItem.fetchAll(db)`, `Query`s with filters, and
/// `insert`/`update`/`save`/`delete` work on it inside any transaction of the database, beside the task list's own
/// tuned SQL (which ``TaskList`` keeps using where it is faster: counts from one row, keyset pages, prefixes).
///
/// ```swift
/// let open = try database.read { db in
///     try TaskItem.filter(Column("done") == false).order(Column("created_at").desc).limit(20).fetchAll(db)
/// }
/// ```
///
/// The columns are the table's: `id` (16-byte blob), `title`, `done` (0 or 1) and `created_at` (integer
/// microseconds since 1970). Writes validate the title as ``TaskList`` does.
extension TaskItem: FetchableRecord, PersistableRecord {
    /// `tasks`.
    public static var databaseTableName: String { "tasks" }

    /// Reads `id`, `title`, `done` and `created_at` by name.
    public init(row: Row) throws {
        self.init(
            id: try row["id"], title: try row["title"], done: try row["done"], microseconds: try row["created_at"])
    }

    /// Stores `created_at`, `id`, `title` and `done`.
    public func encode(to container: inout PersistenceContainer) throws {
        container["created_at"] = createdAtMicroseconds
        container["id"] = id
        container["title"] = title
        container["done"] = done
    }

    /// Refuses a title that ``TaskList/validatedTitle(_:)`` would not store as it is.
    public func willSave(_ db: Database) throws {
        guard try TaskList.validatedTitle(title) == title else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "a task title cannot start or end with white space (TaskList.create trims it)")
        }
    }
}
