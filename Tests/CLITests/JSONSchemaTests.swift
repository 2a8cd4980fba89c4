import Foundation
import TestSupport
import Testing
@testable import SecureStoreCommands

/// Every command's `--json` output, as the built tool prints it, against its schema in Docs/json (issue 22, item 4):
/// one vocabulary, documented and checked. A renamed, added or missing key fails here.
@Suite(.serialized) struct JSONSchemaTests {
    private static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Docs/json").path
    private let schemas: JSONSchemaSubset
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        schemas = try JSONSchemaSubset(directory: Self.directory)
        work = try TemporaryDirectory()
    }

    /// The schemas are in the subset the validator checks, closed to other keys, with every key required.
    @Test func theSchemasAreClosedAndInTheCheckedSubset() {
        #expect(schemas.files.count > 40)
        #expect(schemas.problems() == [])
    }

    /// Every command of the tree that prints a JSON document has its schema, so a new command cannot go unchecked;
    /// the exceptions are the commands whose output is the data itself (Docs/cli.md, "JSON output").
    @Test func everyCommandOfTheTreeHasASchema() {
        let dataItself: Set = [
            "tasks-export", "prefs-export", "completion", "man", "git-credential", "token-get", "db-recovery-code",
            "keystore-credential",
        ]
        var missing: [String] = []
        func walk(_ command: Command, _ path: [String]) {
            guard !command.hidden else { return }
            let here = path + [command.name]
            if command.run != nil && command.subcommands.isEmpty {
                let name = here.joined(separator: "-")
                let file = Self.directory + "/" + name + ".schema.json"
                if !dataItself.contains(name) && !FileManager.default.fileExists(atPath: file) { missing.append(name) }
            }
            for sub in command.subcommands { walk(sub, here) }
        }
        for command in commandTree() { walk(command, []) }
        #expect(missing == [], "commands with --json output and no schema in Docs/json: \(missing)")
    }

    /// The validator fails what the schemas forbid: a renamed key, a missing one, a wrong type, an ID without dashes,
    /// a timestamp to the millisecond.
    @Test func theValidatorRefusesWhatTheSchemaForbids() throws {
        let good = #"{"createdAt":"2026-11-23T17:22:16.189531Z","done":false,"id":"3f2a9c01-0000-4000-8000-00000000abcd","title":"x"}"#
        #expect(schemas.validate(try JSONValue.parse(good), against: "tasks-add.schema.json") == [])
        let bad = [
            #"{"createdAt":"2026-11-23T17:22:16.189531Z","done":false,"uuid":"3f2a9c01-0000-4000-8000-00000000abcd","title":"x"}"#,
            #"{"createdAt":"2026-11-23T17:22:16.189531Z","done":false,"title":"x"}"#,
            #"{"createdAt":"2026-11-23T17:22:16.189531Z","done":1,"id":"3f2a9c01-0000-4000-8000-00000000abcd","title":"x"}"#,
            #"{"createdAt":"2026-11-23T17:22:16.189531Z","done":false,"id":"3f2a9c0100004000800000000000abcd","title":"x"}"#,
            #"{"createdAt":"2026-11-23T17:22:16.189Z","done":false,"id":"3f2a9c01-0000-4000-8000-00000000abcd","title":"x"}"#,
            #"[]"#,
        ]
        for text in bad {
            #expect(schemas.validate(try JSONValue.parse(text), against: "tasks-add.schema.json") != [], "\(text)")
        }
        #expect(schemas.validate(try JSONValue.parse(#"{"deleted":true,"name":"g"}"#), against: "token-delete.schema.json") != [])
        #expect(schemas.validate(try JSONValue.parse(#"{"deleted":1,"name":"g"}"#), against: "token-delete.schema.json") == [])
    }

    /// The schema files the scenario below checked, to find a schema no command is checked against.
    private final class Checked: @unchecked Sendable { var files: Set<String> = [] }

    /// Checks that `result` succeeded and printed one JSON document on one line matching `schema`
    /// (`<schema>.schema.json`); returns it.
    @discardableResult
    private func expectDocument(
        _ result: ProcessResult, _ schema: String, _ checked: Checked, oneLine: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONValue {
        let file = schema + ".schema.json"
        checked.files.insert(file)
        #expect(result.status == 0, "\(schema): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.hasSuffix("\n"), "\(schema): \(result.stdout)", sourceLocation: sourceLocation)
        if oneLine {
            #expect(result.stdout.dropLast().contains("\n") == false, "\(schema): \(result.stdout)", sourceLocation: sourceLocation)
        }
        let value = try JSONValue.parse(result.stdout)
        let errors = schemas.validate(value, against: file)
        #expect(errors == [], "\(schema): \(result.stdout)", sourceLocation: sourceLocation)
        return value
    }

    private func string(_ value: JSONValue, _ key: String) -> String? {
        if case .object(let members) = value, case .string(let text)? = members[key] { return text }
        return nil
    }

    private func first(_ value: JSONValue) -> JSONValue? {
        if case .array(let elements) = value { return elements.first }
        return nil
    }

    @Test func everyCommandsJSONMatchesItsSchema() throws {
        let checked = Checked()
        let app = uniqueApp()
        func ss(_ arguments: [String], input: String = "") throws -> ProcessResult {
            try securestore(["--json"] + arguments, app: app, input: input)
        }

        // Tokens.
        try expectDocument(try ss(["token", "set", "a"], input: "s3cret"), "token-set", checked)
        try expectDocument(try ss(["token", "generate", "g"]), "token-generate", checked)
        try expectDocument(try ss(["token", "get", "a"]), "token-get", checked)
        try expectDocument(try ss(["token", "list"]), "token-list", checked)
        try expectDocument(try ss(["token", "delete", "g"]), "token-delete", checked)

        // Preferences.
        try expectDocument(try ss(["prefs", "set", "--int", "width", "800"]), "prefs-set", checked)
        try expectDocument(try ss(["prefs", "set", "--date", "since", "2026-01-01T10:00:00.25Z"]), "prefs-set", checked)
        try expectDocument(try ss(["prefs", "set", "--force", "apiToken", "--stdin"], input: "xoxb-123456789012-abcdefABCDEF"), "prefs-set", checked)
        let date = try expectDocument(try ss(["prefs", "get", "since"]), "prefs-get", checked)
        if case .object(let members) = date { #expect(members["value"] == .string("2026-01-01T10:00:00.250000Z")) }
        try expectDocument(try ss(["prefs", "list"]), "prefs-list", checked)
        try expectDocument(try ss(["prefs", "move-to-keychain", "apiToken", "slack"]), "prefs-move-to-keychain", checked)
        try expectDocument(try ss(["prefs", "audit"]), "prefs-audit", checked, oneLine: false)
        let document = work.path + "/prefs.doc"
        #expect(try securestore(["prefs", "export", "--output", document], app: app).status == 0)
        let imported = try expectDocument(try ss(["prefs", "import", document]), "prefs-import", checked)
        if case .object(let members) = imported { #expect(members["imported"] == .integer(2)) }
        try expectDocument(try ss(["prefs", "delete", "width"]), "prefs-delete", checked)
        try expectDocument(try ss(["prefs", "reset", "--force"]), "prefs-reset", checked)
        try expectDocument(try ss(["prefs", "reset"]), "prefs-reset", checked)

        // Tasks.
        let one = try expectDocument(try ss(["tasks", "add", "Buy", "milk"]), "tasks-add", checked)
        let two = try expectDocument(try ss(["tasks", "add", "Walk"]), "tasks-add", checked)
        let id1 = try #require(string(one, "id")), id2 = try #require(string(two, "id"))
        try expectDocument(try ss(["tasks", "list"]), "tasks-list", checked, oneLine: false)
        try expectDocument(try ss(["tasks", "list", "--totals"]), "tasks-list-totals", checked, oneLine: false)
        try expectDocument(try ss(["tasks", "list", "--totals", "--limit", "none"]), "tasks-list-totals", checked, oneLine: false)
        try expectDocument(try ss(["tasks", "count"]), "tasks-count", checked)
        try expectDocument(try ss(["tasks", "done", id1]), "tasks-done", checked)
        try expectDocument(try ss(["tasks", "undo", id1, id2]), "tasks-undo", checked)
        try expectDocument(try ss(["tasks", "rename", String(id2.prefix(8)), "Walk", "the", "dog"]), "tasks-rename", checked)
        let small = work.path + "/note.txt", large = work.path + "/large.bin"
        try "a note\n".write(toFile: small, atomically: true, encoding: .utf8)
        try Data(repeating: 0x5A, count: 100_000).write(to: URL(fileURLWithPath: large))
        let attached = try expectDocument(try ss(["tasks", "attach", id1, small, large]), "tasks-attach", checked)
        let attachment = try #require(first(attached).flatMap { string($0, "id") })
        #expect(first(attached).flatMap { string($0, "taskId") } == id1)
        try expectDocument(try ss(["tasks", "attachments", id1]), "tasks-attachments", checked)
        try expectDocument(try ss(["tasks", "show", id1]), "tasks-show", checked)
        let copy = work.path + "/copy.txt"
        try expectDocument(try ss(["tasks", "attachment", "get", attachment, "--output", copy]), "tasks-attachment-get", checked)
        #expect(FileManager.default.contents(atPath: copy) == Data("a note\n".utf8))
        try expectDocument(try ss(["tasks", "detach", attachment]), "tasks-detach", checked)
        try expectDocument(
            try ss(["tasks", "import"], input: "{\"title\":\"Imported\"}\n"), "tasks-import", checked)
        try expectDocument(
            try ss(
                ["tasks", "import", "--from", "taskwarrior", "-"],
                input: #"[{"uuid":"5f2e1c3a-1111-4222-8333-944455556666","description":"Gone","status":"deleted","entry":"20260101T000000Z"},"#
                    + #"{"uuid":"5f2e1c3a-1111-4222-8333-944455556667","description":"Kept","status":"pending","entry":"20260101T000000Z"}]"#),
            "tasks-import", checked)
        try expectDocument(
            try ss(["token", "import", "--from", "netrc", "-"], input: "machine json.example.org login u password p-json\n"),
            "token-import", checked)
        try expectDocument(try ss(["tasks", "done", id2]), "tasks-done", checked)
        try expectDocument(try ss(["tasks", "clear-done", "--yes"]), "tasks-clear-done", checked)
        try expectDocument(try ss(["tasks", "done-all", "--yes"]), "tasks-done-all", checked)
        try expectDocument(try ss(["tasks", "delete", id1]), "tasks-delete", checked)

        // The database and its keys.
        try expectDocument(try ss(["db", "info"]), "db-info", checked)
        try expectDocument(try ss(["db", "verify"]), "db-verify", checked)
        let backup = work.path + "/backup.db"
        try expectDocument(try ss(["db", "backup", backup]), "db-backup", checked)
        let code = try #require(string(try expectDocument(try ss(["db", "recovery-code"]), "db-recovery-code", checked), "recoveryCode"))
        try expectDocument(try ss(["db", "recover"], input: code + "\n"), "db-recover", checked)
        try expectDocument(try ss(["db", "rotate-key"]), "db-rotate-key", checked)
        try expectDocument(try ss(["db", "keys", "list"]), "db-keys-list", checked)
        try expectDocument(try ss(["db", "restore", backup]), "db-restore", checked)
        try expectDocument(try ss(["db", "keys", "prune", "--before", "2100-01-01", "--yes"]), "db-keys-prune", checked)
        #expect(try ss(["tasks", "add", "--name", "scratch", "to be deleted"]).status == 0)
        try expectDocument(try ss(["db", "delete", "--name", "scratch", "--yes"]), "db-delete", checked)
        let plain = work.path + "/plain.db"
        let made = try run(["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()", plain])
        #expect(made.status == 0, "\(made.stderr)")
        try expectDocument(try ss(["db", "import-plaintext", "--name", "imported", plain]), "db-import-plaintext", checked)

        // The key stores: the Secret Service's items of an app moved to a key file of its own and back.
        let moving = uniqueApp() + "-keys"
        #expect(try securestore(["token", "set", "t"], app: moving, input: "v").status == 0)
        let passphrase = work.path + "/passphrase", newPassphrase = work.path + "/new-passphrase"
        try "correct horse battery\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        try "another horse battery\n".write(toFile: newPassphrase, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = work.path + "/keyfile-data"
        environment["SECURESTORE_CACHE_TIMEOUT"] = "0"
        environment["PASSFILE"] = passphrase
        environment["NEWFILE"] = newPassphrase
        func keys(_ arguments: [String], passfile: String = "$PASSFILE") throws -> ProcessResult {
            try run(
                ["bash", "-c", "exec \"$0\" --json --app \(moving) --passphrase-fd 3 \"$@\" 3<\"\(passfile)\" 4<\"$NEWFILE\"",
                 product("securestore")] + arguments, environment: environment)
        }
        // With no D-Bus (with-keyfile) there is no Secret Service to move from or to: the moves are checked by the
        // Secret Service passes, the rest of the key file's commands here.
        try expectDocument(try keys(["keystore", "status"]), "keystore-status", checked)
        if Harness.hasSecretService {
            try expectDocument(try keys(["keystore", "move", "--to", "file"]), "keystore-move", checked)
        } else {
            let made = try run(
                ["bash", "-c", "exec \"$0\" --app \(moving) --passphrase-fd 3 --keystore file token set t 3<\"$PASSFILE\"",
                 product("securestore")], input: Data("v".utf8), environment: environment)
            #expect(made.status == 0, "\(made.stderr)")
        }
        try expectDocument(try keys(["--keystore", "file", "keystore", "status"]), "keystore-status", checked)
        try expectDocument(try keys(["keystore", "passphrase", "--new-passphrase-fd", "4"]), "keystore-passphrase", checked)
        try expectDocument(try keys(["lock"], passfile: "$NEWFILE"), "lock", checked)
        if Harness.hasSecretService {
            try expectDocument(
                try keys(["--keystore", "file", "keystore", "move", "--to", "secret-service"], passfile: "$NEWFILE"),
                "keystore-move", checked)
        }
        #expect(try securestore(["token", "get", "t"], app: moving).stdout == "v")

        // Sync: a second device (application) joins through a folder; one task renamed on both makes a conflict.
        let syncFolder = work.path + "/sync-folder"
        let synced = try #require(string(try expectDocument(try ss(["tasks", "add", "Synced"]), "tasks-add", checked), "id"))
        let pairing = try #require(string(try expectDocument(try ss(["sync", "init", "--folder", syncFolder]), "sync-init", checked), "pairingCode"))
        let peer = uniqueApp() + "-peer"
        func peerSS(_ arguments: [String], input: String = "") throws -> ProcessResult {
            try securestore(["--json"] + arguments, app: peer, input: input)
        }
        try expectDocument(try peerSS(["sync", "join", "--folder", syncFolder], input: pairing + "\n"), "sync-join", checked)
        #expect(try ss(["tasks", "rename", synced, "first"]).status == 0)
        Thread.sleep(forTimeInterval: 0.01)
        #expect(try peerSS(["tasks", "rename", synced, "second"]).status == 0)
        try expectDocument(try ss(["sync", "now"]), "sync-now", checked)
        try expectDocument(try peerSS(["sync", "now"]), "sync-now", checked)
        try expectDocument(try ss(["sync", "now"]), "sync-now", checked)
        try expectDocument(try ss(["sync", "snapshot"]), "sync-snapshot", checked)
        try expectDocument(try ss(["sync", "clean"]), "sync-clean", checked)
        try expectDocument(try ss(["sync", "status"]), "sync-status", checked)
        try expectDocument(try ss(["sync", "devices"]), "sync-devices", checked)
        // `sync watch`: one document per line (an event each), ended by SIGTERM after its first sync.
        let watch = try run([
            "bash", "-c",
            "\"$0\" --app \"$1\" --json sync watch >\"$2\" 2>/dev/null & pid=$!; for i in $(seq 1 1200); do "
                + "grep -q '\"synced\"' \"$2\" 2>/dev/null && break; sleep 0.05; done; kill -TERM $pid; wait $pid; s=$?; cat \"$2\"; exit $s",
            product("securestore"), app, work.path + "/watch.out",
        ])
        #expect(watch.status == 0, "sync-watch: \(watch.stderr)")
        let events = watch.stdout.split(separator: "\n").map(String.init)
        #expect(events.count == 3, "sync-watch: \(watch.stdout)")  // started, synced, stopped
        checked.files.insert("sync-watch.schema.json")
        for line in events {
            #expect(schemas.validate(try JSONValue.parse(line), against: "sync-watch.schema.json") == [], "sync-watch: \(line)")
        }
        let conflicts = try expectDocument(try ss(["sync", "conflicts"]), "sync-conflicts", checked)
        guard case .array(let entries) = conflicts, case .object(let conflict)? = entries.first, case .integer(let conflictID)? = conflict["id"]
        else {
            Issue.record("no conflict to restore: \(conflicts)")
            return
        }
        try expectDocument(try ss(["sync", "restore-conflict", String(conflictID)]), "sync-restore-conflict", checked)
        let leaving = uniqueApp() + "-leaving"
        #expect(try securestore(["sync", "join", "--folder", syncFolder], app: leaving, input: pairing + "\n").status == 0)
        #expect(try peerSS(["sync", "now"]).status == 0)
        let leavingID = try #require(
            string(try JSONValue.parse(try securestore(["--json", "sync", "status"], app: leaving).stdout), "device"))
        #expect(try ss(["sync", "now"]).status == 0)
        let newPairing = try #require(
            string(try expectDocument(try ss(["sync", "remove-device", leavingID]), "sync-remove-device", checked), "pairingCode"))
        try expectDocument(try peerSS(["sync", "rekey"], input: newPairing + "\n"), "sync-rekey", checked)
        // Joining by approval: a third device asks, the peer approves, the third joins with the peer's fingerprint.
        let approved = uniqueApp() + "-approved"
        let request = try expectDocument(
            try securestore(["--json", "sync", "request", "--folder", syncFolder], app: approved), "sync-request", checked)
        let fingerprint = try #require(string(request, "fingerprint"))
        let approval = try expectDocument(try peerSS(["sync", "approve", fingerprint]), "sync-approve", checked)
        let approver = try #require(string(approval, "approver"))
        try expectDocument(
            try securestore(["--json", "sync", "join", "--folder", syncFolder, "--approved-by", approver], app: approved),
            "sync-join", checked)

        // Every schema but the shared definitions was checked against a real output.
        let unchecked = Set(schemas.files.keys).subtracting(checked.files).subtracting(["common.schema.json"])
            .subtracting(Harness.hasSecretService ? [] : ["keystore-move.schema.json"])
        #expect(unchecked.isEmpty, "no command was checked against \(unchecked.sorted())")
    }

    /// `attachment get` writes the attachment's bytes to standard output: with `--json` and no `--output` it is
    /// refused (64) before anything is written.
    @Test func attachmentGetWithJSONNeedsAnOutputFile() throws {
        let app = uniqueApp()
        let id = try #require(string(try JSONValue.parse(try securestore(["--json", "tasks", "add", "Scan"], app: app).stdout), "id"))
        let file = work.path + "/scan.txt"
        try "bytes\n".write(toFile: file, atomically: true, encoding: .utf8)
        let attached = try JSONValue.parse(try securestore(["--json", "tasks", "attach", id, file], app: app).stdout)
        let attachment = try #require(first(attached).flatMap { string($0, "id") })
        let refused = try securestore(["--json", "tasks", "attachment", "get", attachment], app: app)
        #expect(refused.status == 64)
        #expect(refused.stdout == "")
        #expect(refused.stderr.contains("--json needs --output FILE here"), "\(refused.stderr)")
        #expect(try securestore(["tasks", "attachment", "get", attachment], app: app).stdout == "bytes\n")
    }

    /// IDs have one form in output and in messages: a lower-case UUID with dashes, for tasks and attachments alike,
    /// in the ambiguous-prefix error too.
    @Test func ambiguousPrefixErrorsNameIDsWithDashes() throws {
        let app = uniqueApp()
        var ids: [String] = []
        // Seventeen IDs: two of them share their first hex digit.
        for index in 0..<17 {
            let added = try securestore(["--json", "tasks", "add", "Task \(index)"], app: app)
            ids.append(try #require(string(try JSONValue.parse(added.stdout), "id")))
        }
        let digit = try #require(Dictionary(grouping: ids, by: { $0.prefix(1) }).first { $0.value.count > 1 }?.key)
        let uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        let task = try securestore(["tasks", "done", String(digit)], app: app)
        #expect(task.status == 64)
        #expect(task.stderr.range(of: "matches [0-9]+ tasks \\(\(uuid), \(uuid)", options: .regularExpression) != nil, "\(task.stderr)")

        let files = (0..<17).map { work.path + "/file-\($0).txt" }
        for file in files { try file.write(toFile: file, atomically: true, encoding: .utf8) }
        let attached = try JSONValue.parse(try securestore(["--json", "tasks", "attach", ids[0]] + files, app: app).stdout)
        guard case .array(let attachments) = attached else {
            Issue.record("tasks attach --json printed no array: \(attached)")
            return
        }
        let attachmentIDs = attachments.compactMap { string($0, "id") }
        #expect(attachmentIDs.count == 17)
        #expect(attachmentIDs.allSatisfy { $0.range(of: "^\(uuid)$", options: .regularExpression) != nil })
        let shared = try #require(Dictionary(grouping: attachmentIDs, by: { $0.prefix(1) }).first { $0.value.count > 1 }?.key)
        let ambiguous = try securestore(["tasks", "detach", String(shared)], app: app)
        #expect(ambiguous.status == 64)
        #expect(
            ambiguous.stderr.range(of: "several attachments \\(\(uuid), \(uuid)", options: .regularExpression) != nil,
            "\(ambiguous.stderr)")
    }
}
