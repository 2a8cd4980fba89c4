import Foundation
import TestSupport
import Testing

/// `prefs export` and `prefs import`, the dconf dump/load of this tool: a round trip between two applications,
/// merge and --replace, and a damaged or over-limit document that changes nothing.
@Suite struct PrefsTransferTests {
    init() throws { try Harness.require() }

    private func file(_ app: String) throws -> String { try #require(Harness.root) + "/config/\(app)/preferences.json" }

    @Test func anExportImportsIntoAnotherApplication() throws {
        let from = uniqueApp(), to = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: from).status == 0)
        #expect(try securestore(["prefs", "set", "--int", "window.width", "1200"], app: from).status == 0)
        #expect(try securestore(["prefs", "set", "kept", "yes"], app: to).status == 0)
        let exported = try securestore(["prefs", "export"], app: from)
        #expect(exported.status == 0)
        #expect(exported.stdout.contains("\"securestore-preferences\""))

        let imported = try securestore(["prefs", "import"], app: to, input: exported.stdout)
        #expect(imported.status == 0, "\(imported.stderr)")
        let list = try securestore(["prefs", "list"], app: to).stdout
        #expect(list.contains("theme (String) = dark") && list.contains("window.width (Int) = 1200"))
        #expect(list.contains("kept (String) = yes"), "merged by default")

        let replaced = try securestore(["prefs", "import", "--replace"], app: to, input: exported.stdout)
        #expect(replaced.status == 0)
        #expect(!(try securestore(["prefs", "list"], app: to).stdout.contains("kept")), "--replace")
    }

    @Test func exportToAFileIsPrivateAndReadable() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let target = try #require(Harness.root) + "/export-\(app).json"
        #expect(try securestore(["prefs", "export", "--output", target], app: app).status == 0)
        let attributes = try FileManager.default.attributesOfItem(atPath: target)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let other = uniqueApp()
        #expect(try securestore(["prefs", "import", target], app: other).status == 0)
        #expect(try securestore(["prefs", "get", "theme"], app: other).stdout == "dark\n")
    }

    @Test func aDamagedDocumentChangesNothing() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let before = try #require(FileManager.default.contents(atPath: try file(app)))
        let result = try securestore(["prefs", "import"], app: app, input: "{\"theme\": \"light\"")
        #expect(result.status == 65)
        #expect(result.stderr.hasPrefix("securestore: the document to import is not a preferences document"))
        #expect(result.stderr.contains("nothing was changed"))
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(FileManager.default.contents(atPath: try file(app)) == before)
    }

    @Test func aSecretInTheDocumentIsNamedButNeverShown() throws {
        let from = uniqueApp(), to = uniqueApp()
        let token = "ghp_" + String(repeating: "aB3dE6gH9k", count: 4).prefix(36)
        #expect(try securestore(["prefs", "set", "--force", "note", String(token)], app: from).status == 0
            || (try securestore(["prefs", "set", "note", String(token)], app: from)).status == 0)
        let exported = try securestore(["prefs", "export"], app: from).stdout
        let imported = try securestore(["prefs", "import"], app: to, input: exported)
        #expect(imported.status == 0)
        #expect(imported.stderr.contains("'note' looks like a secret"))
        #expect(!imported.stderr.contains(String(token)))
    }
}
