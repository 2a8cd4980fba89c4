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
