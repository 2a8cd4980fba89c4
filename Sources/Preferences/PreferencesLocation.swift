// Where a domain lives, and how big it may grow.
public import Foundation
internal import Glibc
internal import SecureStoreCore

/// Where a preferences domain lives: `<directory>/<domain>.json`, with `<domain>.json.lock` beside it.
///
/// ```swift
/// let location = try PreferencesLocation.app("com.example.tasks")   // ~/.config/com.example.tasks/preferences.json
/// let custom = try PreferencesLocation(directory: URL(filePath: "/srv/app/config"), domain: "ui")
/// ```
public struct PreferencesLocation: Sendable, Hashable, CustomStringConvertible {
    /// The directory that holds the domain file (created 0700 when missing).
    public let directory: URL
    /// The domain's name: the file is `<domain>.json`.
    public let domain: String

    /// A domain in an explicit directory.
    /// - Throws: ``PreferencesError/Code/invalidLocation`` when `domain` is not a plain file name.
    public init(directory: URL, domain: String = "preferences") throws {
        try Self.checkName(domain, what: "domain")
        self.directory = directory.standardizedFileURL
        self.domain = domain
    }

    /// A domain of the app `app` under `$XDG_CONFIG_HOME/<app>/`, or `~/.config/<app>/` when
    /// `XDG_CONFIG_HOME` is unset, empty or not absolute (as the XDG Base Directory spec says).
    /// - Parameter environment: the environment to read `XDG_CONFIG_HOME` and `HOME` from.
    /// - Throws: ``PreferencesError/Code/invalidLocation`` when `app` or `domain` is not a plain file name,
    ///   or no home directory can be found.
    public static func app(
        _ app: String, domain: String = "preferences",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> PreferencesLocation {
        try checkName(app, what: "app")
        guard let base = BaseDirectory.config.path(environment: environment) else {
            throw PreferencesError(
                .invalidLocation,
                "no configuration directory: XDG_CONFIG_HOME and HOME are unset or not absolute"
            )
        }
        return try PreferencesLocation(directory: URL(filePath: base, directoryHint: .isDirectory).appending(path: app), domain: domain)
    }

    /// The domain file, `<directory>/<domain>.json`.
    public var fileURL: URL { directory.appending(path: domain + ".json") }
    /// The lock file beside it, `<directory>/<domain>.json.lock`.
    public var lockURL: URL { directory.appending(path: domain + ".json.lock") }

    /// The domain file's path.
    public var description: String { fileURL.path }

    var directoryPath: String { directory.path(percentEncoded: false).trimmingSlash }
    var filePath: String { directoryPath + "/" + domain + ".json" }
    var lockPath: String { filePath + ".lock" }
    var temporaryPrefix: String { "." + domain + ".json.tmp-" }

    private static func checkName(_ name: String, what: String) throws {
        let valid =
            !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.contains("\0")
            && name.utf8.count <= 200
        guard valid else {
            throw PreferencesError(
                .invalidLocation,
                "the \(what) name \"\(name)\" cannot be used as a file name (empty, '.', '..', "
                    + "a '/' or longer than 200 bytes)"
            )
        }
    }
}

extension String {
    fileprivate var trimmingSlash: String {
        var text = self
        while text.count > 1 && text.hasSuffix("/") { text.removeLast() }
        return text
    }
}

/// The size limits of a domain, checked at every set. Sizes are bytes of the compact JSON encoding
/// (see Docs/preferences.md): a key counts its UTF-8 bytes, a value the bytes of its compact encoding.
public struct PreferencesLimits: Sendable, Hashable {
    /// The longest key, in UTF-8 bytes. Default 256.
    public var maxKeyLength: Int
    /// The largest single value. Default 32 KiB.
    public var maxValueSize: Int
    /// Above this total, sets still succeed but return a ``PreferencesWarning``. Default 100 KiB.
    public var softTotalSize: Int
    /// A set that would take the total above this fails. Default 512 KiB.
    public var hardTotalSize: Int

    /// Creates limits; the defaults suit settings (a theme, window frames, a list of recent searches).
    public init(
        maxKeyLength: Int = 256, maxValueSize: Int = 32 * 1024,
        softTotalSize: Int = 100 * 1024, hardTotalSize: Int = 512 * 1024
    ) {
        self.maxKeyLength = maxKeyLength
        self.maxValueSize = maxValueSize
        self.softTotalSize = softTotalSize
        self.hardTotalSize = hardTotalSize
    }

    /// The defaults: keys 256 bytes, values 32 KiB, soft total 100 KiB, hard total 512 KiB.
    public static let `default` = PreferencesLimits()
}

/// A set succeeded but the domain is now above its soft total size. Returned by the set, and
/// also readable at any time from ``Preferences/usage``.
public struct PreferencesWarning: Sendable, Hashable, CustomStringConvertible {
    /// The key whose set crossed or stayed above the soft limit.
    public let key: String
    /// The domain's total size after the set, in bytes.
    public let totalSize: Int
    /// The soft limit that is exceeded.
    public let softLimit: Int
    /// The hard limit, where sets start to fail.
    public let hardLimit: Int

    /// A sentence naming the sizes, e.g. "preferences are 120 KiB, above the soft limit of 100 KiB…".
    public var description: String {
        "preferences total \(totalSize) bytes after setting \"\(key)\", above the soft limit of \(softLimit) bytes "
            + "(sets fail above \(hardLimit) bytes); move large or growing values to the database"
    }
}

/// The size of a domain against its limits.
public struct PreferencesUsage: Sendable, Hashable {
    /// Total size of all keys and values, in bytes.
    public let totalSize: Int
    /// Number of keys stored (registered defaults not included).
    public let keyCount: Int
    /// The limits of the handle that measured.
    public let limits: PreferencesLimits
    /// Whether the total is above the soft limit.
    public var isAboveSoftLimit: Bool { totalSize > limits.softTotalSize }
    /// Whether the total is above the hard limit (only possible for a file written elsewhere).
    public var isAboveHardLimit: Bool { totalSize > limits.hardTotalSize }
}
