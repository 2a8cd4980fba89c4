// `db restore` and `db import-plaintext` through the built tool.
import Foundation
import TestSupport
import Testing

@Suite(.serialized) struct RestoreAndImportCommandTests {
    init() throws { try Harness.require() }

    /// A backup, a change, a rotation, then `db restore`: the retired key opens the backup, the current
    /// database is kept aside and still opens under its new name, the backup is unchanged.
    @Test func aBackupRestoresAfterARotationAndTheCurrentDatabaseIsKeptAside() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        #expect(try securestore(["tasks", "add", "in the backup"], app: app).status == 0)
        let backup = try securestore(["db", "backup", directory.path + "/b.db"], app: app)
        #expect(backup.status == 0)
        #expect(backup.stderr.contains("the backup opens with the current key of database 'tasks' (keyring account '"))
        #expect(try securestore(["tasks", "add", "after the backup"], app: app).status == 0)
        #expect(try securestore(["db", "rotate-key"], app: app).status == 0)
        let backupBytes = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/b.db"))

        let restore = try securestore(["db", "restore", directory.path + "/b.db"], app: app)
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(restore.stdout.contains("opened with: the stored key '") && restore.stdout.contains(".retired."))
        // 10 tables: the task list's 3 and its search index (the keys table, the FTS4 table and its 5 own tables).
        #expect(restore.stdout.contains("contents: 10 tables, 10 rows, integrity check ok"))
        let list = try securestore(["tasks", "list"], app: app).stdout
        #expect(list.contains("in the backup") && !list.contains("after the backup"))
        let aside = try #require(restore.stdout.split(separator: "\n").first { $0.hasPrefix("the database that was there is kept at: ") })
        let asideName = String(URL(fileURLWithPath: String(aside.split(separator: " ").last ?? "")).deletingPathExtension().lastPathComponent)
        #expect(try securestore(["tasks", "list", "--name", asideName], app: app).stdout.contains("after the backup"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/b.db")) == backupBytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["b.db"])
    }

    /// A lost keyring: without the recovery code the restore is refused (exit 66, nothing made); with it on
    /// standard input the backup is restored.
    @Test func afterALostKeyringTheRecoveryCodeOnStandardInputRestores() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        #expect(try securestore(["tasks", "add", "only in the backup"], app: app).status == 0)
        let code = try securestore(["db", "recovery-code"], app: app).stdout
        #expect(try securestore(["db", "backup", directory.path + "/b.db"], app: app).status == 0)
        for account in try databaseKeyAccounts(app) {
            #expect(try StoreClient.clear(service: "\(app).database-key", account: account))
        }
        let target = directory.path + "/new-machine"

        let refused = try securestore(["--data-dir", target, "db", "restore", directory.path + "/b.db"], app: app)
        #expect(refused.status == 66)
        #expect(refused.stderr.hasPrefix("securestore: no key in the keyring (service '\(app).database-key'"))
        #expect(refused.stderr.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(try databaseKeyAccounts(app).isEmpty)

        let garbled = try securestore(["--data-dir", target, "db", "restore", directory.path + "/b.db"], app: app, input: "ZZZZ" + code.dropFirst(4))
        #expect(garbled.status != 0)
        #expect(!FileManager.default.fileExists(atPath: target))

        let restored = try securestore(["--data-dir", target, "db", "restore", directory.path + "/b.db"], app: app, input: code)
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.stdout.contains("opened with: the recovery code"))
        #expect(try securestore(["--data-dir", target, "tasks", "list"], app: app).stdout.contains("only in the backup"))
    }

    @Test func restoreRefusalsAreOneLineAndChangeNothing() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 0)
        let data = try #require(Harness.root) + "/data/\(app)"
        let files = fileSnapshot(data)
        let keyring = try keyringSnapshot(app)
        let missing = try securestore(["db", "restore", directory.path + "/none.db"], app: app)
        #expect(missing.status == 66)
        #expect(missing.stderr == "securestore: there is no backup file '\(directory.path)/none.db'\n")
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: directory.path + "/junk.db"))
        let junk = try securestore(["db", "restore", directory.path + "/junk.db"], app: app)
        #expect(junk.status == 66)
        #expect(junk.stderr.split(separator: "\n").count == 1)
        let itself = try securestore(["db", "restore", data + "/tasks.db"], app: app)
        #expect(itself.status == 64)
        #expect(itself.stderr.hasPrefix("securestore: '\(data)/tasks.db' is the database itself"))
        #expect(fileSnapshot(data) == files)
        #expect(try keyringSnapshot(app) == keyring)
    }

    /// 0.1 left -shm and -wal beside a WAL-mode source; now the source is untouched and alone.
    @Test func importLeavesTheSourceAloneAndSaysItStillExists() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        let plain = directory.path + "/plain.db"
        #expect(try run(["sqlite3", plain, "PRAGMA journal_mode=WAL; CREATE TABLE notes(t); INSERT INTO notes VALUES ('imported');"]).status == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: plain))
        let imported = try securestore(["db", "import-plaintext", plain, "--name", "notes"], app: app)
        #expect(imported.status == 0)
        #expect(imported.stderr.contains(
            "the plaintext source \(plain) still exists, unencrypted and unchanged: delete it once you have checked the import\n"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: plain)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["plain.db"], "no -wal or -shm beside it")
        #expect(try securestore(["db", "verify", "--name", "notes"], app: app).stdout.contains("contents: 1 tables, 1 rows"))
    }
}
