// Which SQLCipher format an attachments file is in: `securestore-attachments-1` (32 KiB pages) for files created
// now, `securestore-1` (4 KiB pages) for files created before it. Docs/attachments.md, "Making it faster".
public import EncryptedDatabase
internal import SecureStoreCore

extension AttachmentStore {
    /// Opens the attachments file at `path` in the format of `configuration`, or, when the file turns out to be in
    /// SecureStore's database format (an attachments file created before the attachments format existed), in that
    /// one. A new file is created in the configured format.
    package static func openQueue(_ path: String, key: DatabaseKey, configuration: DatabaseConfiguration) throws -> DatabaseQueue {
        do {
            return try DatabaseQueue(path: path, key: key, configuration: configuration)
        } catch let error as DatabaseError where error.code == .otherFormat && configuration.format != .secureStore {
            // The diagnosis found the key right in another format; only SecureStore's own is taken.
            var legacy = configuration
            legacy.format = .secureStore
            return try DatabaseQueue(path: path, key: key, configuration: legacy)
        }
    }
}

extension AttachmentStore {
    /// The encryption of the attachments file (its format, such as `securestore-attachments-1`, and the cipher
    /// settings SQLCipher reports), read through a read-only connection of its own; nil when there is no
    /// attachments file yet. Nothing is written.
    public func cipherInfo() throws -> CipherInfo? {
        guard fileExists(path), let key = try database.read({ db in try attachmentsKey(db) }) else {
            return nil
        }
        var readOnly = configuration.database
        readOnly.readOnly = true
        let queue = try Self.openQueue(path, key: key, configuration: readOnly)
        defer { try? queue.close() }
        return try queue.cipherInfo()
    }
}
