// The one error type of the Preferences module.
internal import Glibc
internal import SecureStoreCore

/// An error from the Preferences module: a code to match on and a message a person can act on.
///
/// Messages name keys, sizes and paths, never values (a value might be a secret).
///
/// ```swift
/// do {
///     try prefs.set(bigBlob, forKey: "thumbnail")
/// } catch PreferencesError.Code.limitExceeded {
///     // too big: store it elsewhere
/// }
/// ```
public struct PreferencesError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; match the ones you handle.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable name of the code, e.g. `"damagedFile"`.
        public let name: String
        /// A code named `name`.
        public init(_ name: String) { self.name = name }
        /// The stable name.
        public var description: String { name }

        /// Matches a ``PreferencesError`` with this code, so that `catch PreferencesError.Code.limitExceeded`
        /// and `case PreferencesError.Code.damagedFile` work.
        public static func ~= (pattern: Code, value: any Error) -> Bool {
            (value as? PreferencesError)?.code == pattern
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// A sentence a person can act on. Never contains a stored value.
    public let message: String

    /// An error with `code` and `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// An error with `code` and `message`.
    @available(*, deprecated, renamed: "init(_:_:)", message: "the module errors take their code and message unlabelled")
    public init(code: Code, message: String) {
        self.init(code, message)
    }

    /// `code: message`.
    public var description: String { "\(code.name): \(message)" }
}

extension PreferencesError.Code {
    /// The domain file exists but cannot be read as a preferences document; the message gives the path
    /// and, for a syntax error, line and column. The file is left untouched until ``Preferences/reset()``.
    public static let damagedFile = Self("damagedFile")
    /// The file was written by a newer format version than this build reads. Left untouched.
    public static let unsupportedFormat = Self("unsupportedFormat")
    /// A set would break the key-length, per-value or total size limit. Nothing was changed.
    public static let limitExceeded = Self("limitExceeded")
    /// A value of a type that preferences cannot store.
    public static let unsupportedType = Self("unsupportedType")
    /// A value of a supported type that the format cannot represent (a date outside years 0000–9999).
    public static let unsupportedValue = Self("unsupportedValue")
    /// A stored value has a different type from the one asked for.
    public static let typeMismatch = Self("typeMismatch")
    /// A key that cannot be used: empty.
    public static let invalidKey = Self("invalidKey")
    /// An app or domain name that cannot be used as a file name, or no usable configuration directory.
    public static let invalidLocation = Self("invalidLocation")
    /// The file system refused access (EACCES, EPERM, EROFS), or a file or directory has an unsafe owner.
    public static let permissionDenied = Self("permissionDenied")
    /// Any other input/output failure; the message gives the operation, the path and the system's reason.
    public static let io = Self("io")
}

extension PreferencesError {
    /// An error for a failed system call: `operation` on `path` failed with `errno`.
    static func system(_ operation: String, path: String, error: Errno) -> PreferencesError {
        let kind: Code = error.isPermission || error == .readOnlyFileSystem ? .permissionDenied : .io
        return PreferencesError(kind, "cannot \(operation) \(path): \(error)")
    }
}
