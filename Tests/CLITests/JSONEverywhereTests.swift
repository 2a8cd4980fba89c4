import Foundation
import TestSupport
import Testing

/// `--json` on every command that succeeds: one JSON document on stdout (one line, but for `prefs audit`'s indented report
/// and the streamed `tasks list`). JSONSchemaTests checks each against its schema in Docs/json.
@Suite(.serialized) struct JSONEverywhereTests {
    init() throws { try Harness.require() }

    /// The one document `result` printed, as a dictionary (or nil when it is another JSON value).
    @discardableResult
    private func document(_ result: ProcessResult, _ what: String) throws -> [String: Any]? {
        #expect(result.status == 0, "\(what): \(result.stderr)")
        #expect(result.stdout.hasSuffix("\n"), "\(what): \(result.stdout)")
        let value = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
        return value as? [String: Any]
    }

    @Test func everyCommandPrintsOneJSONDocument() throws {
        let app = uniqueApp()
        func ss(_ arguments: [String], input: String = "") throws -> ProcessResult {
            try securestore(["--json"] + arguments, app: app, input: input)
        }
        #expect(try ss(["token", "set", "a"], input: "quote\" back\\ tab\tend").stdout == "{\"name\":\"a\",\"stored\":1}\n")
        let get = try document(try ss(["token", "get", "a"]), "token get")
        #expect(get?["secret"] as? String == "quote\" back\\ tab\tend")
        #expect(get?["name"] as? String == "a")
        try document(try ss(["token", "generate", "g"]), "token generate")
        try document(try ss(["token", "list", "g*"]), "token list")
        #expect(try ss(["token", "delete", "g"]).stdout == "{\"deleted\":1,\"name\":\"g\"}\n")

        #expect(try ss(["prefs", "set", "--int", "width", "800"]).stdout
            == "{\"key\":\"width\",\"stored\":1,\"type\":\"Int\"}\n")
        #expect(try ss(["prefs", "set", "--force", "apiToken", "--stdin"], input: "xoxb-123456789012-abcdefABCDEF").stdout
            == "{\"key\":\"apiToken\",\"stored\":1,\"type\":\"String\"}\n")
        try document(try ss(["prefs", "get", "width"]), "prefs get")
        try document(try ss(["prefs", "list"]), "prefs list")
        #expect(try ss(["prefs", "move-to-keychain", "apiToken", "slack"]).stdout
            == "{\"key\":\"apiToken\",\"moved\":1,\"token\":\"slack\"}\n")
        try document(try ss(["prefs", "audit"]), "prefs audit")
        #expect(try ss(["prefs", "delete", "width"]).stdout == "{\"deleted\":1,\"key\":\"width\"}\n")
        let path = try #require(Harness.root) + "/config/\(app)/preferences.json"
        let reset = try document(try ss(["prefs", "reset", "--force"]), "prefs reset")
        #expect(reset?["path"] as? String == path)
        #expect((reset?["movedTo"] as? String)?.hasPrefix(path + ".reset-") == true)
        #expect(try ss(["prefs", "reset"]).stdout == "{\"movedTo\":null,\"path\":\"\(path)\"}\n")

        try document(try ss(["tasks", "add", "one"]), "tasks add")
        try document(try ss(["db", "info"]), "db info")
        try document(try ss(["db", "verify"]), "db verify")
        let backup = try #require(Harness.root) + "/\(app)-backup.db"
        defer { try? FileManager.default.removeItem(atPath: backup) }
        try document(try ss(["db", "backup", backup]), "db backup")
        let code = try document(try ss(["db", "recovery-code"]), "db recovery-code")?["recoveryCode"] as? String
        #expect((code?.count ?? 0) > 60)
        let recovered = try document(try ss(["db", "recover"], input: try #require(code) + "\n"), "db recover")
        #expect(recovered?["name"] as? String == "tasks")
        try document(try ss(["db", "rotate-key"]), "db rotate-key")
        try document(try ss(["db", "keys", "list"]), "db keys list")
        try document(try ss(["db", "restore", backup]), "db restore")
        try document(try ss(["db", "keys", "prune", "--before", "2000-01-01", "--yes"]), "db keys prune")

        let plain = try #require(Harness.root) + "/\(app)-plain.db"
        defer { try? FileManager.default.removeItem(atPath: plain) }
        #expect(try run(["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()", plain]).status == 0)
        let imported = try document(try ss(["db", "import-plaintext", "--name", "imported", plain]), "db import-plaintext")
        #expect(imported?["name"] as? String == "imported")
        #expect(imported?["source"] as? String == plain)
        #expect((imported?["databaseId"] as? String)?.count == 32)
    }
}
