import Foundation
import TestSupport
import Testing

/// Runs the built `securestore` with `--app <app>` so that every test has its own keychain items and
/// directories, with `input` on standard input.
func securestore(
    _ arguments: [String], app: String? = nil, input: String = "", environment: [String: String]? = nil
) throws -> ProcessResult {
    var full: [String] = [product("securestore")]
    if let app { full += ["--app", app] }
    return try run(full + arguments, input: Data(input.utf8), environment: environment)
}

/// A unique application name for one test.
func uniqueApp(_ function: String = #function) -> String {
    "clitest-\(function.prefix(while: { $0 != "(" }).prefix(24))-\(UUID().uuidString.prefix(8))"
}

/// Every regular file under `directory`, with its contents.
func filesUnder(_ directory: String) -> [(path: String, data: Data)] {
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
    var files: [(String, Data)] = []
    for case let relative as String in enumerator {
        let path = directory + "/" + relative
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let data = FileManager.default.contents(atPath: path)
        else { continue }
        files.append((path, data))
    }
    return files
}

/// The paths of the files under `directory` that contain `needle`.
func filesContaining(_ needle: String, under directory: String) -> [String] {
    let bytes = Data(needle.utf8)
    return filesUnder(directory).filter { $0.data.range(of: bytes) != nil }.map(\.path)
}

/// The accounts of the database key items of `app` (service `<app>.database-key`), as another client of the
/// store lists them (`secret-tool search`, or the key file with no D-Bus), sorted.
func databaseKeyAccounts(_ app: String) throws -> [String] {
    try StoreClient.accounts(service: "\(app).database-key")
}

/// `path` with its directory's symbolic links resolved, as key items record it.
func canonicalPath(_ path: String) -> String {
    let url = URL(fileURLWithPath: path)
    return url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(url.lastPathComponent).path
}

/// The account of the current key item of the database file at `path` (`<id>@<path>`), or nil.
func currentKeyAccount(_ app: String, path: String) throws -> String? {
    let suffix = "@" + canonicalPath(path)
    return try databaseKeyAccounts(app).first { $0.hasSuffix(suffix) && $0.utf8.count == 32 + suffix.utf8.count }
}

/// The hex key of the database file at `path` as another client of the store reads it (`secret-tool lookup`), or
/// "" when there is none.
func currentDatabaseKey(_ app: String, path: String) throws -> String {
    guard let account = try currentKeyAccount(app, path: path) else { return "" }
    return try StoreClient.lookup(service: "\(app).database-key", account: account) ?? ""
}
