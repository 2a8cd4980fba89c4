// One task of the task list: a value, independent of the database.
public import Foundation
internal import SecureStoreCore

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
        withUnsafeBytes(of: id.uuid) { hexString($0) }
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
