// Habits of the tools people come from (issue 22, item 6), through the built tool: words joined into a title,
// several IDs at once (all or none), `tasks show`, "did you mean", bulk changes that ask or need --yes, one rule for
// an existing token, one date grammar, SECURESTORE_TIMEOUT.
import Foundation
import TestSupport
import Testing

@Suite(.serialized) struct CLIHabitsTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }
    private var data: String { work.path + "/data" }

    private func tool(_ arguments: [String], app: String, input: String = "", environment: [String: String]? = nil) throws
        -> ProcessResult
    {
        try securestore(["--data-dir", data] + arguments, app: app, input: input, environment: environment)
    }

    /// Adds a task and returns its 8-digit ID prefix.
    private func add(_ title: String, app: String) throws -> String {
        let added = try tool(["tasks", "add", title], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        return String(added.stdout.prefix(8))
    }

    /// The text listing of every task, oldest first.
    private func listing(_ app: String) throws -> String {
        try tool(["tasks", "list", "--oldest-first"], app: app).stdout
    }

    @Test func addPrintsTheTaskLineAndRenameJoinsItsWordsAsAddDoes() throws {
        let app = uniqueApp()
        let added = try tool(["tasks", "add", "Buy", "milk"], app: app)
        #expect(added.status == 0)
        // What Docs/cli.md says `tasks add` prints: the task's line (ID prefix, done mark, title), not a bare ID.
        #expect(added.stdout.wholeMatch(of: #/[0-9a-f]{8}  \[ \]  Buy milk\n/#) != nil, "\(added.stdout)")
        let id = String(added.stdout.prefix(8))

        let renamed = try tool(["tasks", "rename", id, "Buy", "oat", "milk"], app: app)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        #expect(renamed.stdout == "\(id)  [ ]  Buy oat milk\n")
        let json = try tool(["--json", "tasks", "rename", id, "--", "-", "oat", "milk"], app: app)
        #expect(json.stdout.contains("\"title\":\"- oat milk\""), "\(json.stdout)")

        let missing = try tool(["tasks", "rename", id], app: app)
        #expect(missing.status == 64)
        #expect(missing.stderr.hasPrefix("securestore: missing argument TITLE\n"))
        let empty = try tool(["tasks", "rename", id, "Buy", ""], app: app)
        #expect(empty.status == 64)
        #expect(empty.stderr.hasPrefix("securestore: TITLE must not be empty\n"))
        #expect(try listing(app) == "\(id)  [ ]  - oat milk\n", "bad input changed nothing")
    }

    @Test func doneUndoAndDeleteTakeSeveralIDsAndChangeAllOrNone() throws {
        let app = uniqueApp()
        let a = try add("one", app: app)
        let b = try add("two", app: app)
        let c = try add("three", app: app)

        let done = try tool(["tasks", "done", a, c], app: app)
        #expect(done.status == 0, "\(done.stderr)")
        #expect(done.stdout == "\(a)  [x]  one\n\(c)  [x]  three\n")

        // One ID that does not resolve: the error names it and nothing changes, not even the IDs before it.
        let before = try listing(app)
        let unknown = try tool(["tasks", "undo", a, "ffffffff", c], app: app)
        #expect(unknown.status == 66)
        #expect(unknown.stderr == "securestore: 'ffffffff': no task has an ID starting with ffffffff; nothing was changed\n")
        let bad = try tool(["tasks", "delete", b, "not-hex"], app: app)
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: 'not-hex': "), "\(bad.stderr)")
        #expect(try listing(app) == before)

        // An ID given twice is changed once; --json gives an array, for one ID as for several (one shape).
        let undone = try tool(["--json", "tasks", "undo", a, a, c], app: app)
        #expect(undone.status == 0)
        let array = try JSONSerialization.jsonObject(with: Data(undone.stdout.utf8)) as? [[String: Any]]
        #expect(array?.compactMap { $0["title"] as? String } == ["one", "three"])
        #expect(array?.allSatisfy { $0["done"] as? Bool == false } == true)
        let single = try tool(["--json", "tasks", "done", b], app: app)
        #expect(single.stdout.hasPrefix("[{\"createdAt\":"), "\(single.stdout)")

        let deleted = try tool(["tasks", "delete", a, b], app: app)
        #expect(deleted.status == 0)
        #expect(deleted.stdout == "\(a)  [ ]  one\n\(b)  [x]  two\n")
        #expect(try listing(app) == "\(c)  [ ]  three\n")
    }

    @Test func showPrintsOneTaskWithItsAttachments() throws {
        let app = uniqueApp()
        let id = try add("Scan receipts", app: app)
        let bare = try tool(["tasks", "show", id], app: app)
        #expect(bare.status == 0, "\(bare.stderr)")
        let lines = bare.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(bare.stdout)")
        #expect(lines.first?.hasPrefix("id           \(id)-") == true)
        #expect(lines.contains("title        Scan receipts"))
        #expect(lines.contains("status       open"))
        #expect(lines.last == "attachments  none")

        let file = work.path + "/receipt.txt"
        try Data("milk 1.20\n".utf8).write(to: URL(fileURLWithPath: file))
        let attached = try tool(["tasks", "attach", id, file], app: app)
        #expect(attached.status == 0, "\(attached.stderr)")
        let attachmentID = String(attached.stdout.prefix(8))
        #expect(try tool(["tasks", "done", id], app: app).status == 0)

        let shown = try tool(["tasks", "show", id], app: app)
        #expect(shown.stdout.contains("status       done\n"))
        #expect(shown.stdout.hasSuffix("attachments  1\n  \(attachmentID)  10 bytes  text/plain  receipt.txt\n"), "\(shown.stdout)")

        let json = try tool(["--json", "tasks", "show", id], app: app)
        #expect(json.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["title"] as? String == "Scan receipts")
        #expect(object["done"] as? Bool == true)
        #expect((object["id"] as? String)?.hasPrefix(id) == true)
        let attachments = try #require(object["attachments"] as? [[String: Any]])
        #expect(attachments.count == 1)
        #expect(attachments.first?["name"] as? String == "receipt.txt")
        #expect(attachments.first?["size"] as? Int == 10)

        let absent = try tool(["tasks", "show", "ffffffff"], app: app)
        #expect(absent.status == 66)
        #expect(absent.stdout.isEmpty)
    }

    @Test func aMistypedCommandOrOptionSuggestsTheNearestAndChangesNothing() throws {
        let app = uniqueApp()
        let command = try tool(["tasks", "lst"], app: app)
        #expect(command.status == 64)
        #expect(command.stderr.hasPrefix("securestore: unknown command 'lst' (did you mean 'list'? expected one of: add, list,"))
        let option = try tool(["tasks", "list", "--serach", "milk"], app: app)
        #expect(option.status == 64)
        #expect(option.stderr.hasPrefix("securestore: unknown option '--serach' (did you mean '--search'?)\n"))
        let global = try tool(["tasks", "count", "--jsno"], app: app)
        #expect(global.stderr.hasPrefix("securestore: unknown option '--jsno' (did you mean '--json'?)\n"))
        let far = try tool(["tasks", "frobnicate"], app: app)
        #expect(far.stderr.hasPrefix("securestore: unknown command 'frobnicate' (expected one of: "), "no guess when nothing is near")
        #expect(!FileManager.default.fileExists(atPath: data), "nothing was created")
    }

    @Test func bulkChangesNeedYesOffATerminalAndAskOnOne() throws {
        let app = uniqueApp()
        let a = try add("one", app: app)
        _ = try add("two", app: app)
        #expect(try tool(["tasks", "done", a], app: app).status == 0)
        let before = try listing(app)

        for command in [["tasks", "clear-done"], ["tasks", "done-all"]] {
            let refused = try tool(command, app: app)
            #expect(refused.status == 64, "\(command)")
            #expect(refused.stderr.hasPrefix("securestore: 'securestore \(command.joined(separator: " "))' "), "\(refused.stderr)")
            #expect(refused.stderr.contains("off a terminal it asks no question and needs --yes; nothing was changed"))
        }
        #expect(try listing(app) == before)

        // On a terminal it says what it will do and asks; anything but y changes nothing (exit 1).
        let app2 = uniqueApp()
        let c = try securestore(["tasks", "add", "three"], app: app2)
        let d = try securestore(["tasks", "add", "four"], app: app2)
        #expect(try securestore(["tasks", "done", String(c.stdout.prefix(8))], app: app2).status == 0)
        let no = try securestoreOnTerminal(["tasks", "clear-done"], app: app2, answers: ["n"])
        #expect(no.status == 1)
        #expect(no.screen.contains("this will delete 1 done task and their attachments from database 'tasks'. Continue? [y/N] "))
        #expect(no.screen.contains("securestore: not confirmed; nothing was changed"))
        #expect(try securestore(["tasks", "count"], app: app2).stdout == "2\n")
        let yes = try securestoreOnTerminal(["tasks", "done-all"], app: app2, answers: ["y"])
        #expect(yes.status == 0)
        #expect(yes.screen.contains("this will mark 1 open task of database 'tasks' done. Continue? [y/N] "))
        #expect(yes.screen.contains("marked 1 task(s) done"))
        #expect(try securestore(["tasks", "list"], app: app2).stdout == "\(d.stdout.prefix(8))  [x]  four\n\(c.stdout.prefix(8))  [x]  three\n")

        // --yes: what scripts say.
        let cleared = try tool(["tasks", "clear-done", "--yes"], app: app)
        #expect(cleared.status == 0)
        #expect(cleared.stdout == "deleted 1 done task(s)\n")
        let all = try tool(["--json", "tasks", "done-all", "--yes"], app: app)
        #expect(all.stdout == "{\"updated\":1}\n")
    }

    @Test func pruneSaysWhichKeysItWillDeleteAndNeedsYesOffATerminal() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 0)
        #expect(try securestore(["db", "rotate-key"], app: app).status == 0)
        let retired = try databaseKeyAccounts(app).filter { $0.contains(".retired") }
        #expect(retired.count == 1, "\(retired)")

        let refused = try securestore(["db", "keys", "prune", "--before", "2999-01-01"], app: app)
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("needs --yes; nothing was changed"))
        #expect(try databaseKeyAccounts(app).filter { $0.contains(".retired") } == retired)

        let no = try securestoreOnTerminal(["db", "keys", "prune", "--before", "2999-01-01"], app: app, answers: ["no"])
        #expect(no.status == 1)
        #expect(no.screen.contains("this will delete the 1 retired key above from the keyring"), "\(no.screen)")
        #expect(try databaseKeyAccounts(app).filter { $0.contains(".retired") } == retired)

        let pruned = try securestore(["db", "keys", "prune", "--before", "2999-01-01", "--yes"], app: app)
        #expect(pruned.status == 0, "\(pruned.stderr)")
        #expect(try databaseKeyAccounts(app).filter { $0.contains(".retired") }.isEmpty)
        #expect(try securestore(["tasks", "count"], app: app).stdout == "1\n")
    }

    @Test func tokenSetAndGenerateFollowOneRuleForAnExistingName() throws {
        let app = uniqueApp()
        func lookup(_ name: String) throws -> String {
            try StoreClient.lookup(service: app, account: name) ?? ""
        }
        #expect(try securestore(["token", "set", "gh"], app: app, input: "first").status == 0)
        for command in [["token", "set", "gh"], ["token", "generate", "gh"]] {
            let refused = try securestore(command, app: app, input: "second")
            #expect(refused.status == 73, "\(command)")
            #expect(refused.stderr == "securestore: a token named 'gh' exists; nothing was changed (hint: --force replaces it)\n")
            #expect(try lookup("gh") == "first")
        }
        #expect(try securestore(["token", "set", "gh", "--force"], app: app, input: "second").status == 0)
        #expect(try lookup("gh") == "second")
        #expect(try securestore(["token", "generate", "gh", "--force"], app: app).status == 0)
        #expect(try lookup("gh").count == 32)
        // A new name needs no --force, with or without --label.
        #expect(try securestore(["token", "generate", "new", "--label", "New"], app: app).status == 0)
        #expect(try securestore(["token", "list", "new"], app: app).stdout == "new  New\n")
        _ = try securestore(["token", "delete", "gh"], app: app)
        _ = try securestore(["token", "delete", "new"], app: app)
    }

    @Test func prefsSetDateAndPruneBeforeReadTheSameDates() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 0)
        let dates = [
            ("2026-01-01", "2026-01-01T00:00:00Z"), ("2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z"),
            ("2026-01-01T10:00:00.250+01:00", "2026-01-01T09:00:00Z"),
        ]
        for (text, shown) in dates {
            let set = try securestore(["prefs", "set", "--date", "day", text], app: app)
            #expect(set.status == 0, "\(text): \(set.stderr)")
            #expect(try securestore(["prefs", "get", "day"], app: app).stdout == shown + "\n")
            let prune = try securestore(["db", "keys", "prune", "--before", text, "--yes"], app: app)
            #expect(prune.status == 0, "\(text): \(prune.stderr)")
        }
        for text in ["2026-1-1", "2026-01-01T10:00", "01/02/2026", "2026-01-01 junk"] {
            let set = try securestore(["prefs", "set", "--date", "day", text], app: app)
            let prune = try securestore(["db", "keys", "prune", "--before", text, "--yes"], app: app)
            #expect(set.status == 64 && prune.status == 64, "\(text)")
            let grammar = "a date such as 2026-11-23 (midnight UTC), 2026-11-23T16:15:02Z or 2026-11-23T16:15:02.250+01:00"
            #expect(set.stderr.hasPrefix("securestore: VALUE is not \(grammar): "), "\(set.stderr)")
            #expect(prune.stderr.hasPrefix("securestore: --before takes \(grammar), not "), "\(prune.stderr)")
        }
        #expect(try securestore(["prefs", "get", "day"], app: app).stdout == "2026-01-01T09:00:00Z\n", "unchanged")
    }

    @Test(.enabled(if: Harness.hasSecretService, "freezes the Secret Service of the harness"))
    func theKeyringTimeoutHintNamesSecureStoreTimeout() throws {
        let app = uniqueApp()
        let bad = try securestore(["token", "list"], app: app, environment: environment(["SECURESTORE_TIMEOUT": "soon"]))
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: SECURESTORE_TIMEOUT must be a number of seconds from 0.1 to 3600, not 'soon'\n"))
        #expect(try securestore(["token", "list"], app: app, environment: environment(["SECURESTORE_TIMEOUT": "30"])).status == 0)

        try Harness.providerCtl("freeze")
        var thawed = false
        defer { if !thawed { _ = try? Harness.providerCtl("thaw") } }
        let frozen = try securestore(["token", "get", "x"], app: app, environment: environment(["SECURESTORE_TIMEOUT": "0.3"]))
        try Harness.providerCtl("thaw")
        thawed = true
        #expect(frozen.status == 75, "\(frozen.stderr)")
        #expect(frozen.stderr.contains("did not answer in time"))
        #expect(frozen.stderr.contains("(hint: SECURESTORE_TIMEOUT=SECONDS makes the tool wait longer for the keyring (default 5))"))
    }

    private func environment(_ extra: [String: String]) -> [String: String] {
        ProcessInfo.processInfo.environment.merging(extra) { $1 }
    }
}
