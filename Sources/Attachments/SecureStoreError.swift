package import SecureStoreCore

/// An error of the SecureStore composition layer (key lifecycle, attachments, task list, paths): a code to match on
/// and a message a person can act on. Declared in Attachments, the lowest module that throws it; `import SecureStore`
/// re-exports it. Errors of the underlying modules (``KeychainError``,
/// `DatabaseError`, `PreferencesError`) pass through unchanged.
public struct SecureStoreError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value a caller can match on. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable name for the code.
        public let name: String
        /// A code named `name`.
        public init(_ name: String) { self.name = name }
        /// The code's name.
        public var description: String { name }

        /// Matches a code against an error in a `catch` pattern: `catch SecureStoreError.Code.missingKey`.
        public static func ~= (pattern: Code, value: any Error) -> Bool {
            (value as? SecureStoreError)?.code == pattern
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence that states what happened and what was (not) changed. Never contains a secret or a key, and
    /// names no command: a program that embeds the library turns ``code`` and the facts below into its own
    /// advice (the `securestore` tool adds a hint).
    public let message: String
    /// The keyed database the error is about, when there is one (for example `tasks`).
    public let databaseName: String?
    /// The file the error is about, when there is one.
    public let path: String?

    /// An error with `code`, `message` and, where known, the database and file it is about.
    public init(_ code: Code, _ message: String, databaseName: String? = nil, path: String? = nil) {
        self.code = code
        self.message = message
        self.databaseName = databaseName
        self.path = path
    }

    /// `code: message`.
    public var description: String { "\(code.name): \(message)" }
}

extension SecureStoreError.Code {
    /// A name, path or option given by the caller is not acceptable.
    public static let invalidArgument = Self("invalidArgument")
    /// A file or value given by the caller is not what it must be (e.g. an import source that is not a
    /// plaintext SQLite database).
    public static let invalidData = Self("invalidData")
    /// A database file exists but its key is not in the keychain.
    public static let missingKey = Self("missingKey")
    /// The key in the keychain does not open the database.
    public static let keyMismatch = Self("keyMismatch")
    /// A thing that was asked for does not exist (a task, a database).
    public static let notFound = Self("notFound")
    /// A task ID prefix matches more than one task.
    public static let ambiguous = Self("ambiguous")
    /// A recovery code is malformed or does not open the database.
    public static let invalidRecoveryCode = Self("invalidRecoveryCode")
    /// A verification found a problem (integrity check, key check).
    public static let verificationFailed = Self("verificationFailed")
    /// A database or file that an operation would create already exists; it was not replaced.
    public static let alreadyExists = Self("alreadyExists")
    /// The database is open in another process or handle, which an operation needs alone (key rotation).
    public static let inUse = Self("inUse")
    /// A database file is a copy of a database that still exists at its recorded place; a copy never takes
    /// over the original's key.
    public static let copiedDatabase = Self("copiedDatabase")
    /// A key would be deleted or replaced while it still opens an existing database; nothing was changed.
    public static let keyStillInUse = Self("keyStillInUse")
    /// A step that needs a person's approval in the keyring (KeePassXC's access requests) did not get it; the
    /// database keeps working meanwhile (a key rotation's new key stays the pending key) and the next open that
    /// may prompt finishes it.
    public static let approvalPending = Self("approvalPending")
    /// A file-system call failed (permissions, disk full, input/output error); the message has the reason.
    public static let fileSystem = Self("fileSystem")
}

extension SecureStoreError {
    /// A failed file-system call as a ``Code/fileSystem`` error: what was being done, then the reason.
    package init(_ error: Errno, _ what: String) {
        self.init(Code.fileSystem, "\(what): \(error)")
    }
}

/// Flushes a file's data and metadata to the disk (the keyed database's files and the attachments file).
///
/// - Throws: ``SecureStoreError/Code/fileSystem``.
package func syncFileToDisk(_ path: String) throws {
    do {
        let descriptor = try FileDescriptor.open(path, .readOnly)
        try descriptor.closeAfter { () throws(Errno) in try descriptor.sync() }
    } catch {
        throw SecureStoreError(error, "cannot flush '\(path)' to the disk")
    }
}
