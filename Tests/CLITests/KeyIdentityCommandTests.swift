// One key per database, through the built tool: other folders, copies handed to `db recover`, retired
// keys and their listing and pruning.
import Foundation
import TestSupport
import Testing

/// Every file under `directory` with its contents, to compare before and after a refusal. The lock
/// file (`.<name>.db.lock`, Docs/key-lifecycle.md) is left out: an open takes it before it can know
/// whether it will refuse; it holds at most the id hint.
func fileSnapshot(_ directory: String) -> [String: Data] {
    Dictionary(
        filesUnder(directory).filter { !$0.path.hasSuffix(".lock") }.map { ($0.path, $0.data) },
        uniquingKeysWith: { first, _ in first })
}

/// What another Secret Service client sees of the database key items of `app`: accounts, labels,
/// secrets and modification times (so a rewrite with the same value shows too).
func keyringSnapshot(_ app: String) throws -> String {
    if Harness.isKeyFile {
        // The key file: each account with its secret (a rewrite is a new file, compared by the caller).
        return try StoreClient.accounts(service: "\(app).database-key").map {
            "\($0) = \(try StoreClient.lookup(service: "\(app).database-key", account: $0) ?? "")"
        }.joined(separator: "\n")
    }
    let result = try run(["secret-tool", "search", "--all", "service", "\(app).database-key"])
    return (result.stdout + "\n" + result.stderr).split(separator: "\n").sorted().joined(separator: "\n")
}

@Suite(.serialized) struct KeyIdentityCommandTests {
    init() throws { try Harness.require() }

    /// 0.1 shared one key between `--data-dir` folders, and rotating in one lost the other.
    @Test func twoDataDirectoriesHaveTwoKeysAndRotatingOneKeepsTheOther() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        let one = directory.path + "/one", two = directory.path + "/two"
        #expect(try securestore(["--data-dir", one, "tasks", "add", "in one"], app: app).status == 0)
        #expect(try securestore(["--data-dir", two, "tasks", "add", "in two"], app: app).status == 0)
        let accounts = try databaseKeyAccounts(app)
        #expect(accounts.count == 2, "\(accounts)")
        #expect(try currentDatabaseKey(app, path: one + "/tasks.db") != currentDatabaseKey(app, path: two + "/tasks.db"))

        let rotate = try securestore(["--data-dir", one, "db", "rotate-key"], app: app)
        #expect(rotate.status == 0)
        #expect(rotate.stderr.contains("the previous key is kept as the retired key '"))
        #expect(rotate.stderr.contains("backups and recovery codes made before now need it"))
        let list = try securestore(["--data-dir", two, "tasks", "list"], app: app)
        #expect(list.status == 0)
        #expect(list.stdout.contains("in two"))

        let keys = try securestore(["db", "keys", "list"], app: app)
        #expect(keys.status == 0)
        let lines = keys.stdout.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines.filter { $0.hasPrefix("current ") }.count == 2)
        #expect(lines.filter { $0.hasPrefix("retired ") && $0.contains("opens older backups") }.count == 1)
        #expect(keys.stdout.contains(canonicalPath(one + "/tasks.db")) && keys.stdout.contains(canonicalPath(two + "/tasks.db")))
    }

    /// The 0.1 data loss: a backup copied into a restore folder and `db recover` with an old code replaced
    /// the live database's key. Now refused in one line; no file and no keyring item changes.
    @Test func recoverOnACopyNeverReplacesTheLiveKey() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "live task"], app: app).status == 0)
        let code = try securestore(["db", "recovery-code"], app: app).stdout
        let live = try #require(Harness.root) + "/data/\(app)/tasks.db"
        let restore = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: live, toPath: restore.path + "/tasks.db")
        let liveFiles = fileSnapshot(try #require(Harness.root) + "/data/\(app)")
        let restoreFiles = fileSnapshot(restore.path)
        let keyring = try keyringSnapshot(app)

        let recover = try securestore(["--data-dir", restore.path, "db", "recover"], app: app, input: code)
        #expect(recover.status == 65)
        #expect(recover.stderr.hasPrefix(
            "securestore: '\(restore.path)/tasks.db' is a copy of the database at '\(canonicalPath(live))'"))
        #expect(recover.stderr.split(separator: "\n").count == 1)
        let list = try securestore(["--data-dir", restore.path, "tasks", "list"], app: app)
        #expect(list.status == 65)
        #expect(list.stderr.contains("is a copy of the database at"))

        #expect(fileSnapshot(try #require(Harness.root) + "/data/\(app)") == liveFiles)
        #expect(fileSnapshot(restore.path) == restoreFiles)
        #expect(try keyringSnapshot(app) == keyring)
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("live task"))
    }

    @Test func pruneNeedsADateAndDeletesOnlyOlderRetiredKeys() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 0)
        #expect(try securestore(["db", "rotate-key"], app: app).status == 0)
        let keyring = try keyringSnapshot(app)
        let missing = try securestore(["db", "keys", "prune"], app: app)
        #expect(missing.status == 64)
        #expect(missing.stderr.hasPrefix("securestore: give --before DATE"))
        let bad = try securestore(["db", "keys", "prune", "--before", "yesterday"], app: app)
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: --before takes a date such as 2026-11-23"))
        let old = try securestore(["db", "keys", "prune", "--before", "2020-01-01", "--yes"], app: app)
        #expect(old.status == 0)
        #expect(old.stderr == "deleted 0 retired key(s); backups made under them no longer open\n")
        #expect(try keyringSnapshot(app) == keyring, "nothing was deleted")

        let all = try securestore(["--json", "db", "keys", "prune", "--before", "2999-01-01", "--yes"], app: app)
        #expect(all.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(all.stdout.utf8)) as? [String: Any])
        #expect(object["deleted"] as? Int == 1)
        #expect((object["accounts"] as? [String])?.count == 1)
        #expect(try databaseKeyAccounts(app).count == 1)
        #expect(try securestore(["tasks", "count"], app: app).stdout == "1\n")
    }
}
