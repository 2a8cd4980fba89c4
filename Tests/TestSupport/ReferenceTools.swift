// The reference tools the tests check the product against: the system's `sqlcipher` shell and `git`.
import Foundation

/// How the reference `sqlcipher` is keyed.
public enum SQLCipherKey: Sendable {
    /// A raw key, `PRAGMA key = "x'<64 hex digits>'"`: how SecureStore keys its files.
    case raw(hex: String)
    /// A passphrase, `PRAGMA key = '<text>'` (text without a single quote).
    case passphrase(String)
}

/// Runs the system's `sqlcipher` shell on `path` with `sql` on its standard input, after the prelude a person
/// types (Docs/database.md): the key, then `PRAGMA cipher_compatibility` (SQLCipher 4 reads a 3.x file after
/// it; SQLCipher 3 ignores it), then `PRAGMA cipher_page_size` (after the compatibility, which resets it).
/// `compatibility` or `pageSize` nil leaves that pragma out. Returns status, standard output and error.
public func sqlcipher(
    _ path: String, key: SQLCipherKey, compatibility: Int? = 3, pageSize: Int? = nil, _ sql: String
) throws -> ProcessResult {
    var prelude: String
    switch key {
    case .raw(let hex): prelude = "PRAGMA key = \"x'\(hex)'\";\n"
    case .passphrase(let text): prelude = "PRAGMA key = '\(text)';\n"
    }
    if let compatibility { prelude += "PRAGMA cipher_compatibility = \(compatibility);\n" }
    if let pageSize { prelude += "PRAGMA cipher_page_size = \(pageSize);\n" }
    return try run(["sqlcipher", path], input: Data((prelude + sql).utf8))
}

/// Runs `git` with `arguments` and `input`, never asking anyone for anything (no terminal prompt, askpass
/// programs that fail). `credentialHelper`: the only credential helper git uses (`-c credential.helper=` clears
/// the user's first). `environment`: the process environment to start from (this one's by default).
public func git(
    _ arguments: [String], input: String = "", credentialHelper: String? = nil, environment: [String: String]? = nil
) throws -> ProcessResult {
    var environment = environment ?? ProcessInfo.processInfo.environment
    environment["GIT_TERMINAL_PROMPT"] = "0"
    environment["GIT_ASKPASS"] = "/bin/false"
    environment["SSH_ASKPASS"] = "/bin/false"
    let helper = credentialHelper.map { ["-c", "credential.helper=", "-c", "credential.helper=\($0)"] } ?? []
    return try run(["git"] + helper + arguments, input: Data(input.utf8), environment: environment)
}
