// The values of the attachments API: the owner row, the description of an attachment, a source of bytes,
// progress, and the store's options.
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
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` when `table` is not a plain SQL identifier or `key` is empty
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
    /// Called by a read when the attachment's bytes are not on this device — its description came from another
    /// device by sync and its bytes were not fetched yet (`--attachments lazy`, Docs/sync.md) — to bring them
    /// (checked against the attachment's SHA-256 digest and stored) before the read goes on; it throws, naming what
    /// is missing, when it cannot. Nil (the default): such a read fails, naming the missing chunk. The sync
    /// module's `SyncEngine.attachmentStoreConfiguration(database:)` sets it.
    public var fetchMissing: (@Sendable (Attachment) throws -> Void)?

    /// The default options.
    public init() {
        database.cacheSizeKiB = 2048
        // A rollback journal from the first open on (see openFile): never switched, so an open writes nothing and a
        // journal left by a crash is rolled back, not refused as foreign.
        database.journalMode = .rollback
        database.format = .secureStoreAttachments
        // No pointer-map pages among the chunks' pages: the store names a damaged page by recomputing each page's HMAC,
        // and a damaged pointer map reads as "malformed" with no page named. Free pages here are reused by later chunks.
        database.incrementalVacuum = false
    }
}
