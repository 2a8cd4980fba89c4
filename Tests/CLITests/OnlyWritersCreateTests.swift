// Only commands that write create: readers on an application or name with no database (or no preferences)
// create no file, no directory and no keyring item, and exit 66 with a hint naming the command that creates
// it; task commands on a database that is not a task list refuse instead of adding tables.
import Foundation
import TestSupport
import Testing

@Suite(.serialized) struct OnlyWritersCreateTests {
    init() throws { try Harness.require() }

    @Test(arguments: [
        ["tasks", "list"], ["tasks", "count"], ["tasks", "done", "abc"], ["tasks", "clear-done", "--yes"],
        ["db", "info"], ["db", "verify"], ["db", "backup", "/tmp/never-written-by-securestore.db"],
        ["db", "recovery-code"], ["db", "rotate-key"],
    ])
    func readersOnAMissingDatabaseCreateNothing(_ command: [String]) throws {
        let app = uniqueApp()
        let root = try #require(Harness.root)
        let result = try securestore(command, app: app)
        #expect(result.status == 66, "\(command): \(result.stderr)")
        #expect(result.stderr == "securestore: there is no database 'tasks' at '\(root)/data/\(app)/tasks.db' "
            + "(hint: check --app and --data-dir; 'securestore tasks add TITLE' creates it)\n")
        #expect(result.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: root + "/data/\(app)"), "no directory was made")
        #expect(!FileManager.default.fileExists(atPath: "/tmp/never-written-by-securestore.db"))
        #expect(try databaseKeyAccounts(app).isEmpty, "no key was made")
    }

    @Test func anotherNameHintsAtBothCreators() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 0)
        let accounts = try databaseKeyAccounts(app)
        let result = try securestore(["tasks", "list", "--name", "notes"], app: app)
        #expect(result.status == 66)
        #expect(result.stderr.hasSuffix(
            "(hint: check --app, --name and --data-dir; 'securestore tasks add --name notes TITLE' or "
                + "'securestore db import-plaintext --name notes FILE' creates it)\n"))
        #expect(!FileManager.default.fileExists(atPath: try #require(Harness.root) + "/data/\(app)/notes.db"))
        #expect(try databaseKeyAccounts(app) == accounts)
    }

    @Test(arguments: [["prefs", "get", "theme"], ["prefs", "list"], ["prefs", "audit"]])
    func preferenceReadersOnAMissingFileCreateNothing(_ command: [String]) throws {
        let app = uniqueApp()
        let root = try #require(Harness.root)
        let result = try securestore(command, app: app)
        #expect(result.status == 66, "\(command): \(result.stderr)")
        #expect(result.stderr == "securestore: there are no preferences for application '\(app)' (no file "
            + "'\(root)/config/\(app)/preferences.json') (hint: check --app; 'securestore prefs set KEY VALUE' creates them)\n")
        #expect(!FileManager.default.fileExists(atPath: root + "/config/\(app)"), "no directory was made")
    }

    /// 0.1 added the task tables to whatever database `--name` named, e.g. an imported one.
    @Test func taskCommandsRefuseADatabaseThatIsNotATaskList() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        let plain = directory.path + "/recipes.db"
        #expect(try run(["sqlite3", plain, "CREATE TABLE recipes(name); INSERT INTO recipes VALUES ('soup');"]).status == 0)
        #expect(try securestore(["db", "import-plaintext", plain, "--name", "recipes"], app: app).status == 0)
        let data = try #require(Harness.root) + "/data/\(app)"
        let files = fileSnapshot(data)
        let keyring = try keyringSnapshot(app)
        for command in [["tasks", "list"], ["tasks", "add", "x"], ["tasks", "count"]] {
            let result = try securestore(command + ["--name", "recipes"], app: app)
            #expect(result.status == 65, "\(command)")
            #expect(result.stderr == "securestore: the database '\(data)/recipes.db' is not a task list (it holds "
                + "'recipes'); task commands never add tables to it, and nothing was changed\n")
        }
        #expect(fileSnapshot(data) == files)
        #expect(try keyringSnapshot(app) == keyring)
        #expect(try securestore(["db", "verify", "--name", "recipes"], app: app).stdout.contains("contents: 1 tables, 1 rows"))
    }
}
