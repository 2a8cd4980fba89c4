// The task list's attachments: AttachmentStore (module SecureStore) with the tasks table as owner.
internal import EncryptedDatabase
public import Foundation
public import SecureStore
internal import SecureStoreCore

extension TaskList {
    /// The attachments of this list's tasks (Docs/attachments.md).
    ///
    /// ```swift
    /// // fragment: `tasks` is a TaskList, `task` one of its items
    /// let files = tasks.attachments()
    /// let photo = try files.add([.file("/tmp/receipt.pdf")], to: task.id)[0]
    /// let copies = try files.list(of: task.id)                // name, media type, size, SHA-256
    /// try files.read(id: photo.id) { chunk in consume(chunk) } // streamed, digest checked
    /// try tasks.delete(id: task.id)                            // deletes its attachments too
    /// ```
    public func attachments(configuration: AttachmentStoreConfiguration = AttachmentStoreConfiguration()) -> TaskAttachments {
        TaskAttachments(tasks: self, configuration: configuration)
    }
}

/// The attachments of the tasks of a ``TaskList``: files of any size, encrypted in the database's attachments
/// file, streamed in chunks. Deleting a task deletes its attachments (a trigger removes their descriptions in the
/// same transaction; their chunks are collected afterwards).
public struct TaskAttachments: Sendable {
    /// The store underneath: owner table `tasks`, owner key the task's 16-byte ID.
    public let store: AttachmentStore
    private let tasks: TaskList

    init(tasks: TaskList, configuration: AttachmentStoreConfiguration) {
        self.tasks = tasks
        store = AttachmentStore(database: tasks.database, configuration: configuration)
    }

    /// The owner of a task's attachments.
    public static func owner(_ taskID: UUID) throws -> AttachmentOwner {
        try AttachmentOwner(table: "tasks", id: taskID)
    }

    /// Adds `sources` to the task `taskID`, all or none, and returns them.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when there is no such task (also when it is deleted while
    ///   the bytes are being written); see ``AttachmentStore/add(_:to:ownerExists:progress:)`` for the rest.
    @discardableResult
    public func add(
        _ sources: [AttachmentSource], to taskID: UUID, progress: (AttachmentProgress) -> Void = { _ in }
    ) throws -> [Attachment] {
        guard try tasks.task(id: taskID) != nil else { throw Self.noTask(taskID) }
        // Bad names are refused before the first attach makes the attachments' tables: a refusal writes nothing.
        for source in sources { try AttachmentStore.checkName(source.name) }
        try store.prepare(owners: [(table: "tasks", keyColumn: "id")])
        do {
            return try store.add(
                sources, to: try Self.owner(taskID),
                ownerExists: { db in
                    try db.scalar("SELECT count(*) FROM tasks WHERE id = ?", [taskID], as: Int.self) ?? 0 > 0
                }, progress: progress)
        } catch let error as SecureStoreError where error.code == SecureStoreError.Code.notFound && error.path == nil
            && error.message.hasPrefix("the owner")
        {
            throw Self.noTask(taskID, meanwhile: true)
        }
    }

    /// The attachments of the task `taskID`, oldest first.
    public func list(of taskID: UUID) throws -> [Attachment] {
        try store.attachments(of: try Self.owner(taskID))
    }

    /// The one attachment whose ID starts with `prefix`.
    public func resolve(prefix: String) throws -> Attachment {
        try store.resolve(prefix: prefix)
    }

    /// Streams the attachment `id` to `body`, chunk by chunk (see ``AttachmentStore/read(id:progress:_:)``).
    @discardableResult
    public func read(
        id: UUID, progress: (AttachmentProgress) -> Void = { _ in }, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> Attachment {
        try store.read(id: id, progress: progress, body)
    }

    /// Deletes the attachment `id` and returns it as it was.
    @discardableResult
    public func delete(id: UUID) throws -> Attachment {
        try store.delete(id: id)
    }

    private static func noTask(_ id: UUID, meanwhile: Bool = false) -> SecureStoreError {
        let hex = hexString(uuid: id)
        return SecureStoreError(
            SecureStoreError.Code.notFound,
            meanwhile
                ? "the task \(hex) was deleted while its attachments were being written; nothing was attached"
                : "no task has the ID \(hex)")
    }
}
