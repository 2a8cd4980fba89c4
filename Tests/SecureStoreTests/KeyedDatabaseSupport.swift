// Helpers of the keyed-database tests. Everything here is `KD`-prefixed or private so that it never
// clashes with the other tests of this target.
import EncryptedDatabase
import Foundation
import Glibc
import Keychain
import SecureStore
import TestSupport
import Testing

/// The keychain of this run's store: the Secret Service of the harness, or (with-keyfile, no D-Bus) the key file
/// unlocked from the session keyring, never asking.
func kdKeychainConfiguration() -> Keychain.Configuration {
    guard Harness.isKeyFile else { return .init(allowsPrompts: Harness.isKeePassXC) }
    return StoreClient.keyFileConfiguration
}

/// One test's world: a unique application name (so keychain items never meet another test's), a
/// throw-away data directory, and the real keyring of the harness.
final class KDFixture {
    let app: String
    let directory: URL
    let paths: AppPaths
    /// Under KeePassXC this process must be approved for keys other processes stored (the stand-in user does).
    /// With no D-Bus (with-keyfile), the key file whose key the harness left in the session keyring.
    let keychain = Keychain(configuration: kdKeychainConfiguration())
    let name = "tasks"

    init(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try #require(
            ProcessInfo.processInfo.environment["SECURESTORE_HARNESS_ROOT"] != nil,
            "run the tests inside Tests/Harness/with-keyring, never against your own keyring",
            sourceLocation: sourceLocation)
        app = "kdtest-\(UUID().uuidString.prefix(8).lowercased())"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(app, isDirectory: true)
        paths = try AppPaths(app: app, dataDirectory: directory)
    }

    deinit {
        for account in (try? keychain.accounts(service: service)) ?? [] {
            _ = try? keychain.delete(service: service, account: account)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    var service: String { "\(app).database-key" }
    var path: String { paths.databaseURL(name: name).path }

    func open(configuration: DatabaseConfiguration = DatabaseConfiguration()) throws -> KeyedDatabase {
        try KeyedDatabase(paths: paths, name: name, keychain: keychain, configuration: configuration)
    }

    /// The account of the current key item of the database at `path` (`<id>@<path>`), or nil.
    func currentAccount(path: String? = nil) throws -> String? {
        let suffix = "@" + kdCanonical(path ?? self.path)
        return try keychain.accounts(service: service).last { $0.hasSuffix(suffix) && $0.utf8.count == 32 + suffix.utf8.count }
    }

    /// Every database key account of the fixture's application, sorted.
    func accounts() throws -> [String] {
        try keychain.accounts(service: service)
    }

    /// The accounts of retired keys (`<id>.retired.<date>`).
    func retiredAccounts() throws -> [String] {
        try accounts().filter { $0.contains(".retired.") }
    }

    /// The current key's hex text as `secret-tool` (another Secret Service client) sees it; `account`
    /// names another item.
    func storedHex(account: String? = nil) throws -> String? {
        guard let account = try account ?? currentAccount() else { return nil }
        return try StoreClient.lookup(service: service, account: account)
    }

    /// Deletes the current key item of the database (as a lost keyring would).
    @discardableResult
    func deleteCurrentKey() throws -> Bool {
        guard let account = try currentAccount() else { return false }
        return try keychain.delete(service: service, account: account)
    }

    func storedKey(account: String? = nil) throws -> DatabaseKey? {
        guard let hex = try storedHex(account: account) else { return nil }
        return try kdKey(hex: hex)
    }

    func hasPendingKey() throws -> Bool {
        try accounts().contains { $0.hasSuffix(".pending") }
    }

    /// Every file in the data directory except the lock file.
    func files() throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasSuffix(".lock") }.sorted()
    }
}

/// `path` with its directory's symbolic links resolved, as key items record it.
func kdCanonical(_ path: String) -> String {
    let url = URL(fileURLWithPath: path)
    return url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(url.lastPathComponent).path
}

/// The rows every test writes: `item(id, title)` plus `user_version = 7`.
let kdRowCount = 300

func kdTitle(_ index: Int) -> String { "row \(index) – grüße" }

func kdFill(_ database: KeyedDatabase, rows: Int = kdRowCount) throws {
    try database.queue.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        try db.execute("CREATE INDEX item_title ON item (title)")
        for index in 0..<rows {
            try db.execute("INSERT INTO item (id, title) VALUES (?, ?)", [index, kdTitle(index)])
        }
        try db.setUserVersion(7)
    }
}

/// Fails unless the database holds exactly the rows of `kdFill`.
func kdExpectRows(_ queue: DatabaseQueue, rows: Int = kdRowCount, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let titles = try queue.read { db in
        try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) }
    }
    #expect(titles == (0..<rows).map(kdTitle), sourceLocation: sourceLocation)
    #expect(try queue.read { try $0.userVersion() } == 7, sourceLocation: sourceLocation)
}

func kdKey(hex: String) throws -> DatabaseKey {
    let text = hex.trimmingCharacters(in: .whitespacesAndNewlines)
    try #require(text.utf8.count == 64)
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(try #require(UInt8(text[index..<next], radix: 16)))
        index = next
    }
    return try DatabaseKey(bytes: bytes)
}

func kdBytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

func kdMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? Int) ?? -1
}

/// The `securestore-stress` helper (TestSupport.stressExecutable).
var kdStressBinary: String { stressExecutable }

/// The result of a finished process (TestSupport's runner: posix_spawn with an empty signal mask).
typealias KDProcessResult = ProcessResult

/// Runs a command found on PATH with `input` on standard input.
func kdRun(_ arguments: [String], input: Data = Data()) throws -> KDProcessResult {
    try run(arguments, input: input)
}
