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

        init(_ name: String) { self.name = name }

        /// The stable name.
        public var description: String { name }

        /// The domain file exists but cannot be read as a preferences document; the message gives the path
        /// and, for a syntax error, line and column. The file is left untouched until ``Preferences/reset()``.
        public static let damagedFile = Code("damagedFile")
        /// The file was written by a newer format version than this build reads. Left untouched.
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// A set would break the key-length, per-value or total size limit. Nothing was changed.
        public static let limitExceeded = Code("limitExceeded")
        /// A value of a type that preferences cannot store.
        public static let unsupportedType = Code("unsupportedType")
        /// A value of a supported type that the format cannot represent (a date outside years 0000–9999).
        public static let unsupportedValue = Code("unsupportedValue")
        /// A stored value has a different type from the one asked for.
        public static let typeMismatch = Code("typeMismatch")
        /// A key that cannot be used: empty.
        public static let invalidKey = Code("invalidKey")
        /// An app or domain name that cannot be used as a file name, or no usable configuration directory.
        public static let invalidLocation = Code("invalidLocation")
        /// The file system refused access (EACCES, EPERM, EROFS), or a file or directory has an unsafe owner.
        public static let permissionDenied = Code("permissionDenied")
        /// Any other input/output failure; the message gives the operation, the path and the system's reason.
        public static let io = Code("io")
    }

    /// What kind of failure this is.
    public let code: Code
    /// A sentence a person can act on. Never contains a stored value.
    public let message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }


}

extension PreferencesError.Code {
    /// Matches a ``PreferencesError`` with this code, so that `catch PreferencesError.Code.limitExceeded`
    /// and `case PreferencesError.Code.damagedFile` work.
    public static func ~= (pattern: Self, value: any Error) -> Bool {
        (value as? PreferencesError)?.code == pattern
    }
}

extension PreferencesError {
    /// An error for a failed system call: `operation` on `path` failed with `errno`.
    static func system(_ operation: String, path: String, error: Errno) -> PreferencesError {
        let kind: Code = error.isPermission || error == .readOnlyFileSystem ? .permissionDenied : .io
        return PreferencesError(code: kind, message: "cannot \(operation) \(path): \(error)")
    }
}
