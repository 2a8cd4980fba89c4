internal import Attachments
public import Foundation
internal import SecureStoreCore

/// Where one application's data lives: its name (the namespace of its keychain items), its data
/// directory (databases) and its configuration directory (preferences), following the XDG Base
/// Directory specification.
///
/// ```swift
/// let paths = try AppPaths(app: "myapp")
/// paths.dataDirectory      // $XDG_DATA_HOME/myapp, or ~/.local/share/myapp
/// paths.configDirectory    // $XDG_CONFIG_HOME/myapp, or ~/.config/myapp
/// ```
public struct AppPaths: Sendable, Hashable {
    /// The application's name: letters, digits, `.`, `_` and `-`, not starting with `.`, at most 64 bytes.
    public let app: String
    /// The directory of the application's databases (created 0700 when first needed).
    public let dataDirectory: URL
    /// The directory of the application's preferences (created 0700 when first needed).
    public let configDirectory: URL

    /// The default application name.
    public static let defaultApp = "securestore"

    /// The paths of `app`.
    ///
    /// - Parameters:
    ///   - dataDirectory: where databases go instead of `$XDG_DATA_HOME/<app>`.
    ///   - environment: the environment to read `XDG_DATA_HOME`, `XDG_CONFIG_HOME` and `HOME` from.
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` for a bad application name or no home directory.
    public init(
        app: String = AppPaths.defaultApp, dataDirectory: URL? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(SecureStoreError) {
        try Self.validate(app: app)
        self.app = app
        // One rule for every module (SecureStoreCore.BaseDirectory): the XDG variable when absolute, else
        // the fallback under $HOME, else under the password database's home directory.
        func base(_ directory: BaseDirectory) throws(SecureStoreError) -> URL {
            guard let path = directory.path(environment: environment) else {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidArgument,
                    "neither \(directory.variable) nor HOME is set to an absolute path and the user has no home "
                        + "directory; set one, or choose the data directory")
            }
            return URL(fileURLWithPath: path, isDirectory: true)
        }
        if let dataDirectory {
            self.dataDirectory = dataDirectory
        } else {
            self.dataDirectory = try base(.data).appendingPathComponent(app, isDirectory: true)
        }
        configDirectory = try base(.config).appendingPathComponent(app, isDirectory: true)
    }

    /// The file of the database called `name` (`<data directory>/<name>.db`).
    public func databaseURL(name: String) -> URL {
        dataDirectory.appendingPathComponent("\(name).db", isDirectory: false)
    }

    /// The keychain service under which this application's tokens are stored (`<app>`), so that
    /// `secret-tool lookup service <app> account <name>` finds a token.
    public var tokenService: String { app }

    /// The keychain service under which this application's database keys are stored
    /// (`<app>.database-key`; the account is the database name).
    public var databaseKeyService: String { "\(app).database-key" }

    /// The keychain service under which git credentials are stored (`<app>.git`).
    public var gitCredentialService: String { "\(app).git" }

    /// Suffixes of the keychain services derived from an application name; no application name may end in one.
    static let reservedSuffixes = [".database-key", ".git", ".sync-key", ".sync-signing-key", ".sync-join-key"]

    static func validate(app: String) throws(SecureStoreError) {
        let allowed = app.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        guard !app.isEmpty, app.utf8.count <= 64, allowed, !app.hasPrefix(".") else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "the application name must be 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'")
        }
        // Token, database-key and git items are told apart by their service name only: an application
        // called `x.database-key` would see (and could overwrite) the database keys of application `x`.
        for reserved in reservedSuffixes where app.hasSuffix(reserved) {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "the application name must not end in '\(reserved)': that suffix names another application's "
                    + "\(reserved == ".git" ? "git credentials" : reserved == ".database-key" ? "database keys" : "sync keys") in the keyring")
        }
    }
}
