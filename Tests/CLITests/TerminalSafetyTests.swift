import Foundation
import TestSupport
import Testing

/// Names, keys, labels, values and titles that hold terminal controls — ESC sequences, a C1 control, a bidi
/// override, a newline — are printed escaped by every listing, so they cannot clear the screen, fake a line or
/// reorder text (`invoice‮exe.pdf`). JSON output keeps them as they are (escaped by JSON itself).
@Suite struct TerminalSafetyTests {
    init() throws { try Harness.require() }

    private static let raw = ["\u{1B}", "\u{9B}", "\u{202E}"]

    private func expectNoRawControls(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for scalar in Self.raw { #expect(!text.contains(scalar), "raw control in: \(text)", sourceLocation: sourceLocation) }
    }

    /// Every file of `directory` (the lock file aside: it holds only a hint) and its bytes.
    private func files(_ directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where !name.hasSuffix(".lock") {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        return files
    }

    @Test func aTitleOrAnAttachmentNameWithABidiOverrideIsRefusedAndNothingIsStored() throws {
        let scratch = try TemporaryDirectory()
        let app = uniqueApp()
        let data = scratch.path + "/data"
        let added = try securestore(["--data-dir", data, "tasks", "add", "Receipts"], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        let task = String(added.stdout.prefix(8))
        let before = try files(data)

        // `invoice‮exe.pdf` shows as "invoicefdp.exe" reversed: the one rule for names and titles refuses it.
        let title = try securestore(["--data-dir", data, "tasks", "add", "invoice\u{202E}fdp.exe"], app: app)
        #expect(title.status == 64)
        #expect(
            title.stderr == "securestore: a task title cannot contain invisible formatting characters such as bidirectional "
                + "overrides, which reorder what a terminal shows (found U+202E)\n")
        // Other format characters too (an isolate, a zero-width space); the zero-width joiner of emoji is a character.
        for scalar in ["\u{2066}", "\u{200B}", "\u{FEFF}"] {
            #expect(try securestore(["--data-dir", data, "tasks", "add", "a\(scalar)b"], app: app).status == 64, "\(scalar)")
        }
        let name = try securestore(
            ["--data-dir", data, "tasks", "attach", task, "--as", "invoice\u{202E}fdp.exe"], app: app, input: "%PDF")
        #expect(name.status == 64)
        #expect(
            name.stderr == "securestore: an attachment name must be one line without control characters, invisible "
                + "formatting characters (such as bidirectional overrides) or '/'\n")
        let after = try files(data)
        #expect(after == before, "a refused title or name changes no file: \(after.keys.filter { after[$0] != before[$0] })")
        #expect(try securestore(["--data-dir", data, "tasks", "list"], app: app).stdout.hasSuffix("  [ ]  Receipts\n"))

        let family = try securestore(["--data-dir", data, "tasks", "add", "family \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}"], app: app)
        #expect(family.status == 0, "\(family.stderr)")
    }

    @Test func taskTitlesFromElsewhereAreEscapedInTheListing() throws {
        let app = uniqueApp()
        // A title stored by another program (an import keeps an existing task's title as it was): listed escaped.
        let id = UUID().uuidString
        let imported = try securestore(
            ["tasks", "import"], app: app,
            input: "{\"createdAt\":\"2026-11-23T17:19:34.123456Z\",\"done\":false,\"id\":\"\(id)\",\"title\":\"invoice\\u202efdp.exe\"}\n")
        #expect(imported.status == 0, "\(imported.stderr)")
        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.status == 0)
        expectNoRawControls(list.stdout)
        #expect(list.stdout.contains("invoice\\u{202E}fdp.exe"))
        // The data is unchanged: JSON carries the title as it was.
        let json = try securestore(["--json", "tasks", "list"], app: app)
        #expect(json.stdout.contains("\\u202e") || json.stdout.contains("\u{202E}"))
    }

    @Test func tokenNamesAndLabelsFromOtherClientsAreEscaped() throws {
        let app = uniqueApp()
        // Another client (secret-tool) stores an item under the tool's token service.
        #expect(try StoreClient.store("value", service: app, account: "name\u{1B}]0;title\u{07}", label: "label\u{9B}31m red"))
        let list = try securestore(["token", "list"], app: app)
        #expect(list.status == 0, "\(list.stderr)")
        expectNoRawControls(list.stdout)
        #expect(!list.stdout.contains("\u{07}"))
        #expect(list.stdout.contains("name\\u{1B}]0;title\\u{7}"))
        #expect(list.stdout.contains("label\\u{9B}31m red"))
    }

    @Test func preferenceKeysAndValuesAreOneLineEach() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "k\u{1B}[2J", "two\nlines"], app: app).status == 0)
        let list = try securestore(["prefs", "list"], app: app)
        #expect(list.status == 0)
        expectNoRawControls(list.stdout)
        #expect(list.stdout == "k\\u{1B}[2J (String) = two\\u{A}lines\n")
        // Piped, `prefs get` prints the value as stored, for scripts.
        #expect(try securestore(["prefs", "get", "k\u{1B}[2J"], app: app).stdout == "two\nlines\n")
    }
}

/// Habits users bring from taskwarrior and todo.sh, and messages that talk about secrets only where one is read.
@Suite struct CommandHabitTests {
    init() throws { try Harness.require() }

    @Test func tasksAddJoinsItsWords() throws {
        let app = uniqueApp()
        let added = try securestore(["tasks", "add", "Buy", "milk", "today"], app: app)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.stdout.hasSuffix("  [ ]  Buy milk today\n"))
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("Buy milk today"))
    }

    @Test func onlySecretReadingCommandsTalkAboutSecrets() throws {
        let app = uniqueApp()
        let list = try securestore(["tasks", "count", "extra"], app: app)
        #expect(list.status == 64)
        #expect(list.stderr.hasPrefix("securestore: unexpected argument: this command takes 0, not 1 (the extra one is not shown)"))
        #expect(!list.stderr.contains("secret"))
        let set = try securestore(["token", "set", "name", "ghp_not_here"], app: app)
        #expect(set.status == 64)
        #expect(set.stderr.contains("secrets are read from standard input, never from arguments"))
        #expect(!set.stderr.contains("ghp_not_here"))
    }
}

/// What a `db backup` killed mid-way leaves beside its target (its unfinished temporary copy) is removed by the
/// next backup to that place; a temporary file of a process that still runs is left alone.
@Suite struct BackupLeftoverTests {
    init() throws { try Harness.require() }

    @Test func theNextBackupRemovesWhatAKilledOneLeft() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "backed up"], app: app).status == 0)
        let directory = try #require(Harness.root) + "/backups-\(app)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A process that has ended: its pid names the leftover.
        let ended = try ChildProcess(["/bin/true"])
        ended.wait()
        let stale = directory + "/.tasks-backup.db.tmp-\(ended.pid)-1f2e3d"
        let live = directory + "/.tasks-backup.db.tmp-\(getpid())-4c5b6a"
        for file in [stale, stale + "-journal", live] { #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8))) }

        let backup = try securestore(["db", "backup", directory + "/tasks-backup.db"], app: app)
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(!FileManager.default.fileExists(atPath: stale + "-journal"))
        #expect(FileManager.default.fileExists(atPath: live), "a live process's file is left alone")
        #expect(FileManager.default.fileExists(atPath: directory + "/tasks-backup.db"))
    }
}
