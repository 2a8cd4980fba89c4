import Foundation
import TestSupport
import Testing

/// `Tests/check-libc-calls`, which `make test` runs before the suite: SecureStoreCore is the one system layer, so a
/// C library file call anywhere else in Sources fails it, naming the file and line; the tree as it is passes.
@Suite struct SystemLayerCheckTests {
    private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    private var script: String { repository + "/Tests/check-libc-calls" }

    /// A tree holding `Sources/<module>/<file>` with `text`.
    private func tree(_ files: [String: String]) throws -> TemporaryDirectory {
        let root = try TemporaryDirectory()
        for (path, text) in files {
            let url = URL(fileURLWithPath: root.path + "/Sources/" + path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
        return root
    }

    @Test func theTreeAsItIsPasses() throws {
        let result = try run([script, repository])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)
    }

    @Test func aPlantedCallOutsideCoreFailsNamingItsPlace() throws {
        let planted = try tree([
            "Tasks/Planted.swift": """
                import Glibc
                // unlink(path) in a comment, and "rename(a, b)" in a string, are not calls.
                func remove(_ path: String) { let text = "rename(a, b)"; _ = text
                    _ = unlink(path)
                }
                func close() {}
                struct Reader { func read(_ column: Int) -> Int { column }; func use() -> Int { read(1) } }
                func flush(_ fd: Int32, _ bytes: [UInt8]) { _ = Glibc.write(fd, bytes, bytes.count) }
                """,
            // Core may call the C library: it is the layer.
            "SecureStoreCore/Calls.swift": "import Glibc\nfunc remove(_ path: String) { _ = unlink(path) }\n",
        ])
        let result = try run([script, planted.path])
        #expect(result.status == 1)
        let lines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("  ") }
        #expect(lines == ["  Sources/Tasks/Planted.swift:4: unlink", "  Sources/Tasks/Planted.swift:8: write"], "\(result.stderr)")
    }
}
