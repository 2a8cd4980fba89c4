// The async forms of AttachmentStore's calls: the same calls, run on a dispatch queue of the store (blocking file
// work and fsync never hold a thread of Swift concurrency's cooperative pool), as KeychainAsync does for the keyring.
public import EncryptedDatabase
public import Foundation
internal import SecureStoreCore

extension AttachmentStore {
    /// The `async` form of ``add(_:to:progress:)``. `progress` is called on the store's dispatch queue.
    ///
    /// ```swift
    /// import Attachments
    /// import Foundation
    ///
    /// func attachPhoto(_ store: AttachmentStore, owner: AttachmentOwner, photo: URL) async throws -> Data {
    ///     let attachment = try await store.add(.file(photo.path), to: owner)
    ///     return try await store.data(id: attachment.id)
    /// }
    /// ```
    @discardableResult
    public func add(
        _ source: AttachmentSource, to owner: AttachmentOwner,
        progress: @escaping @Sendable (AttachmentProgress) -> Void = { _ in }
    ) async throws -> Attachment {
        try await perform { try self.add(source, to: owner, progress: progress) }
    }

    /// The `async` form of ``add(_:to:ownerExists:progress:)``: several attachments, all or none.
    @discardableResult
    public func add(
        _ sources: [AttachmentSource], to owner: AttachmentOwner,
        ownerExists: @escaping @Sendable (Database) throws -> Bool = { _ in true },
        progress: @escaping @Sendable (AttachmentProgress) -> Void = { _ in }
    ) async throws -> [Attachment] {
        try await perform { try self.add(sources, to: owner, ownerExists: ownerExists, progress: progress) }
    }

    /// The `async` form of ``attachments(of:)``.
    public func attachments(of owner: AttachmentOwner) async throws -> [Attachment] {
        try await perform { try self.attachments(of: owner) }
    }

    /// The `async` form of ``newest(limit:)``.
    public func newest(limit: Int) async throws -> [Attachment] {
        try await perform { try self.newest(limit: limit) }
    }

    /// The `async` form of ``attachment(id:)``.
    public func attachment(id: UUID) async throws -> Attachment? {
        try await perform { try self.attachment(id: id) }
    }

    /// The `async` form of ``resolve(prefix:)``.
    public func resolve(prefix: String) async throws -> Attachment {
        try await perform { try self.resolve(prefix: prefix) }
    }

    /// The `async` form of ``read(id:progress:_:)``: `body` gets the bytes chunk by chunk on the store's dispatch
    /// queue (one chunk in memory at a time), and the digest is checked at the end.
    @discardableResult
    public func read(
        id: UUID, progress: @escaping @Sendable (AttachmentProgress) -> Void = { _ in },
        _ body: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
    ) async throws -> Attachment {
        try await perform { try self.read(id: id, progress: progress, body) }
    }

    /// The `async` form of ``data(id:)``: the whole attachment in memory.
    public func data(id: UUID) async throws -> Data {
        try await perform { try self.data(id: id) }
    }

    /// The `async` form of ``delete(id:)``.
    @discardableResult
    public func delete(id: UUID) async throws -> Attachment {
        try await perform { try self.delete(id: id) }
    }

    /// The `async` form of ``deleteAll(of:)``.
    @discardableResult
    public func deleteAll(of owner: AttachmentOwner) async throws -> Int {
        try await perform { try self.deleteAll(of: owner) }
    }

    /// The `async` form of ``verify()``: every attachment read back in full against its digest.
    public func verify() async throws -> Verification {
        try await perform { try self.verify() }
    }

    /// The `async` form of ``collectGarbage()``.
    @discardableResult
    public func collectGarbage() async throws -> Int {
        try await perform { try self.collectGarbage() }
    }

    /// The `async` form of ``export(to:)``.
    @discardableResult
    public func export(to destination: String) async throws -> Bool {
        try await perform { try self.export(to: destination) }
    }

    private func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue, body)
    }
}
