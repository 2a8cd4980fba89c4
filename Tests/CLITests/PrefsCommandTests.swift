import Foundation
import TestSupport
import Testing

/// `securestore prefs …` on real preference files under the harness's XDG_CONFIG_HOME.
@Suite(.serialized) struct PrefsCommandTests {
    init() throws { try Harness.require() }

    private func preferencesFile(_ app: String) throws -> String {
        try #require(Harness.root) + "/config/\(app)/preferences.json"
    }

    @Test func typedSetGetListAndDelete() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        #expect(try securestore(["prefs", "set", "--int", "width", "800"], app: app).status == 0)
        #expect(try securestore(["prefs", "set", "--bool", "compact", "yes"], app: app).status == 0)
        #expect(try securestore(["prefs", "set", "--double", "zoom", "1.25"], app: app).status == 0)
        #expect(try securestore(["prefs", "get", "width"], app: app).stdout == "800\n")
        #expect(try securestore(["--json", "prefs", "get", "compact"], app: app).stdout
            == "{\"key\":\"compact\",\"type\":\"Bool\",\"value\":true}\n")
        let list = try securestore(["prefs", "list"], app: app)
        #expect(list.stdout == "compact (Bool) = true\ntheme (String) = dark\nwidth (Int) = 800\nzoom (Double) = 1.25\n")

        let bad = try securestore(["prefs", "set", "--int", "width", "wide"], app: app)
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: VALUE is not an integer: 'wide'"))
        #expect(try securestore(["prefs", "get", "width"], app: app).stdout == "800\n", "unchanged")

        #expect(try securestore(["prefs", "delete", "theme"], app: app).status == 0)
        let gone = try securestore(["prefs", "get", "theme"], app: app)
        #expect(gone.status == 66)
        #expect(gone.stderr == "securestore: no preference 'theme'\n")
        // The file is private.
        let attributes = try FileManager.default.attributesOfItem(atPath: try preferencesFile(app))
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    /// `--json` sorts by code point (JSONEncoder's order of object keys, and `prefs list`'s order of preferences):
    /// upper case before lower case, `a10` before `a9`, the same on every machine.
    @Test func jsonListSortsKeysByCodePoint() throws {
        let app = uniqueApp()
        for key in ["b", "a9", "B", "a10", "path"] {
            #expect(try securestore(["prefs", "set", key, key == "path" ? "/srv/x" : "v"], app: app).status == 0)
        }
        #expect(try securestore(["--json", "prefs", "list"], app: app).stdout
            == "[" + [("B", "v"), ("a10", "v"), ("a9", "v"), ("b", "v"), ("path", "/srv/x")].map { key, value in
                "{\"key\":\"\(key)\",\"type\":\"String\",\"value\":\"\(value)\"}"
            }.joined(separator: ",") + "]\n")
    }

    @Test func oversizeValueIsRefusedAndTheFileIsByteIdentical() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: try preferencesFile(app)))
        let result = try securestore(["prefs", "set", "blob", String(repeating: "x", count: 40_000)], app: app)
        #expect(result.status == 65)
        #expect(result.stderr.hasPrefix("securestore: "))
        #expect(result.stderr.contains("\"blob\""))
        #expect(result.stderr.contains("limit"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: try preferencesFile(app))) == before)
    }

    @Test func damagedFileIsReportedAndLeftAloneUntilReset() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let path = try preferencesFile(app)
        let damaged = Data("{\"format\": \"securestore-preferences\", \"version\": 1, \"values\": {\"theme\": ".utf8)
        try damaged.write(to: URL(fileURLWithPath: path))
        let get = try securestore(["prefs", "get", "theme"], app: app)
        #expect(get.status == 65)
        #expect(get.stderr.contains(path))
        #expect(get.stderr.contains("prefs reset"))
        let set = try securestore(["prefs", "set", "theme", "light"], app: app)
        #expect(set.status == 65)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == damaged, "byte-identical after a refused set")

        let reset = try securestore(["prefs", "reset"], app: app)
        #expect(reset.status == 0)
        #expect(reset.stderr.contains(".reset-"))
        #expect(try securestore(["prefs", "set", "theme", "light"], app: app).status == 0)
        #expect(try securestore(["prefs", "get", "theme"], app: app).stdout == "light\n")
    }

    @Test func auditGatesOnPlantedSecretsWithoutPrintingThemAndMoveToKeychainFixesIt() throws {
        let app = uniqueApp()
        let token = "ghp_" + String(repeating: "A1b2C3d4", count: 5).prefix(36)
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        #expect(try securestore(["prefs", "set", "--force", "githubToken", token], app: app).status == 0)

        let audit = try securestore(["prefs", "audit"], app: app)
        #expect(audit.status == 1)
        #expect(audit.stdout.contains("githubToken"))
        #expect(!audit.stdout.contains(token) && !audit.stdout.contains("A1b2C3d4"))
        let json = try securestore(["--json", "prefs", "audit"], app: app)
        #expect(json.status == 1)
        #expect(!json.stdout.contains("A1b2C3d4"))
        let report = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(report?["fail"] as? Bool == true)
        let secrets = report?["secrets"] as? [[String: Any]]
        #expect(secrets?.first?["key"] as? String == "githubToken")
        #expect(secrets?.first?["rule"] as? String == "github-token")

        let move = try securestore(["prefs", "move-to-keychain", "githubToken", "github"], app: app)
        #expect(move.status == 0)
        #expect(try securestore(["token", "get", "github"], app: app).stdout == token)
        #expect(try securestore(["prefs", "get", "githubToken"], app: app).status == 66)
        #expect(try securestore(["prefs", "audit"], app: app).status == 0)
        #expect(!String(decoding: try Data(contentsOf: URL(fileURLWithPath: try preferencesFile(app))), as: UTF8.self)
            .contains("A1b2C3d4"))
    }

    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring")) func moveToKeychainWithALockedKeyringKeepsThePreference() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "--force", "apiToken", "xoxb-123456789012-abcdefABCDEF"], app: app).status == 0)
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }
        let move = try securestore(["prefs", "move-to-keychain", "apiToken"], app: app)
        #expect(move.status == 77)
        try Harness.keyringCtl("unlock")
        #expect(try securestore(["prefs", "get", "apiToken"], app: app).stdout == "xoxb-123456789012-abcdefABCDEF\n")
        #expect(try securestore(["token", "get", "apiToken"], app: app).status == 66)
    }
}
