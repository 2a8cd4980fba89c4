import Foundation
import Tasks
import TestSupport
import Testing

/// `securestore tasks …` and `securestore db …` on real encrypted files with the key in the real keyring.
@Suite(.serialized) struct TaskAndDatabaseCommandTests {
    init() throws { try Harness.require() }

    private func databasePath(_ app: String) throws -> String {
        try #require(Harness.root) + "/data/\(app)/tasks.db"
    }

    private func ids(_ app: String, _ arguments: [String] = []) throws -> [String] {
        let list = try securestore(["--json", "tasks", "list"] + arguments, app: app)
        let array = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        return array.compactMap { $0["id"] as? String }
    }

    @Test func addListCompleteRenameDeleteWithIDPrefixes() throws {
        let app = uniqueApp()
        for title in ["first", "second", "third"] {
            let add = try securestore(["tasks", "add", title], app: app)
            #expect(add.status == 0)
            #expect(add.stdout.hasSuffix("[ ]  \(title)\n"))
        }
        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.stdout.split(separator: "\n").map { $0.split(separator: " ").last.map(String.init) } == ["third", "second", "first"])
        let json = try securestore(["--json", "tasks", "list", "--oldest-first"], app: app)
        let tasks = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(tasks.map { $0["title"] as? String } == ["first", "second", "third"])
        #expect(tasks.allSatisfy { ($0["id"] as? String)?.count == 36 && $0["done"] as? Bool == false })

        let firstID = try #require(tasks.first?["id"] as? String)
        #expect(try securestore(["tasks", "done", String(firstID.prefix(8))], app: app).stdout.contains("[x]  first"))
        #expect(try securestore(["tasks", "count", "--done"], app: app).stdout == "1\n")
        #expect(try securestore(["tasks", "count", "--open"], app: app).stdout == "2\n")
        #expect(try ids(app, ["--open"]).contains(firstID) == false)
        #expect(try securestore(["tasks", "undo", firstID], app: app).stdout.contains("[ ]  first"))
        #expect(try securestore(["tasks", "rename", String(firstID.prefix(6)), "renamed"], app: app).stdout.contains("renamed"))
        #expect(try securestore(["tasks", "list", "--search", "REN"], app: app).stdout.contains("renamed"))
        #expect(try securestore(["tasks", "delete", firstID], app: app).status == 0)
        #expect(try securestore(["tasks", "count"], app: app).stdout == "2\n")

        #expect(try securestore(["tasks", "done-all", "--yes"], app: app).stdout == "marked 2 task(s) done\n")
        #expect(try securestore(["tasks", "clear-done", "--yes"], app: app).stdout == "deleted 2 done task(s)\n")
        #expect(try securestore(["tasks", "count"], app: app).stdout == "0\n")
    }

    @Test func paginationAndBadArguments() throws {
        let app = uniqueApp()
        for index in 1...7 { #expect(try securestore(["tasks", "add", "task \(index)"], app: app).status == 0) }
        let page1 = try ids(app, ["--limit", "3"])
        let page2 = try ids(app, ["--limit", "3", "--offset", "3"])
        let page3 = try ids(app, ["--limit", "3", "--offset", "6"])
        #expect(page1.count == 3 && page2.count == 3 && page3.count == 1)
        #expect(Set(page1 + page2 + page3).count == 7)

        let badLimit = try securestore(["tasks", "list", "--limit", "-1"], app: app)
        #expect(badLimit.status == 64)
        #expect(badLimit.stderr.hasPrefix("securestore: --limit takes a whole number of at least 0, or none, not '-1'"))
        let both = try securestore(["tasks", "list", "--done", "--open"], app: app)
        #expect(both.status == 64)
        let notHex = try securestore(["tasks", "done", "xyz"], app: app)
        #expect(notHex.status == 64)
        #expect(notHex.stderr.contains("not a task ID"))
        let missing = try securestore(["tasks", "done", "0000000000"], app: app)
        #expect(missing.status == 66)
        let badTitle = try securestore(["tasks", "add", "line\nbreak"], app: app)
        #expect(badTitle.status != 0)
        #expect(try securestore(["tasks", "count"], app: app).stdout == "7\n", "nothing changed")
    }

    @Test func theDatabaseFileIsEncryptedAndSqlite3RefusesIt() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "PlaintextMarkerTitle"], app: app).status == 0)
        let path = try databasePath(app)
        let sqlite = try run(["sqlite3", path, "select * from sqlite_master"])
        #expect(sqlite.status != 0)
        #expect(sqlite.stderr.contains("not a database"))
        #expect(filesContaining("PlaintextMarkerTitle", under: try #require(Harness.root)).isEmpty)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        let info = try securestore(["--json", "db", "info"], app: app)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(object["path"] as? String == path)
        let cipher = try #require(object["cipher"] as? [String: Any])
        #expect(cipher["format"] as? String == "securestore-1")
        #expect(cipher["pageSize"] as? Int == 4096)
        #expect(cipher["hmacAlgorithm"] as? String == "HMAC_SHA1")
        #expect(cipher["kdfAlgorithm"] as? String == "PBKDF2_HMAC_SHA1")
        let version = try #require(cipher["sqlcipherVersion"] as? String)
        #expect(version.hasPrefix("3.") || version.hasPrefix("4."))
        #expect((cipher["sqliteVersion"] as? String)?.hasPrefix("3.") == true)
        // The same profile, as a person reads it, from info and from verify.
        for command in [["db", "info"], ["db", "verify"]] {
            let text = try securestore(command, app: app)
            #expect(text.stdout.contains("format: securestore-1 (SQLCipher 3 algorithms with 4096-byte pages)"))
            #expect(text.stdout.contains("cipher: AES-256-CBC, 4096-byte pages, HMAC_SHA1, KDF PBKDF2_HMAC_SHA1"))
            #expect(text.stdout.contains("library: SQLCipher \(version), SQLite 3."))
        }
        #expect((object["key"] as? [String: Any])?["service"] as? String == "\(app).database-key")
        // The key itself is never printed: the stored hex key is not in the output.
        let key = try currentDatabaseKey(app, path: try databasePath(app))
        #expect(key.count == 64)
        #expect(!info.stdout.contains(key))
        #expect(try securestore(["db", "verify"], app: app).status == 0)
    }

    @Test func missingKeyIsAClearErrorNamingRecoveryAndTheFileIsUnchanged() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "keep me"], app: app).status == 0)
        let code = try securestore(["db", "recovery-code"], app: app).stdout
        let path = try databasePath(app)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let account = try #require(try currentKeyAccount(app, path: path))
        #expect(try StoreClient.clear(service: "\(app).database-key", account: account))

        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.status == 66)
        #expect(list.stderr.hasPrefix("securestore: no key for database 'tasks'"))
        #expect(list.stderr.contains("securestore db recover --name tasks"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try databaseKeyAccounts(app).isEmpty, "no new key was made")

        let typo = try securestore(["db", "recover"], app: app, input: "AAAA-" + code.dropFirst(5))
        #expect(typo.status != 0)
        #expect(!typo.stderr.contains(String(code.prefix(20))))
        let recover = try securestore(["db", "recover"], app: app, input: code)
        #expect(recover.status == 0)
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("keep me"))
    }

    @Test func wrongKeyIsAClearErrorAndTheFileIsUnchanged() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "keep me"], app: app).status == 0)
        let path = try databasePath(app)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let wrong = String(repeating: "ab", count: 32)
        let account = try #require(try currentKeyAccount(app, path: path))
        #expect(try StoreClient.store(wrong, service: "\(app).database-key", account: account, label: "wrong"))
        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.status == 65)
        #expect(list.stderr.hasPrefix("securestore: the key stored for database 'tasks'"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func rotateBackupAndImport() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "survives rotation"], app: app).status == 0)
        let oldKey = try currentDatabaseKey(app, path: try databasePath(app))
        let rotate = try securestore(["db", "rotate-key"], app: app)
        #expect(rotate.status == 0)
        #expect(rotate.stderr.contains("rotated the key"))
        let newKey = try currentDatabaseKey(app, path: try databasePath(app))
        #expect(newKey.count == 64 && newKey != oldKey)
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("survives rotation"))
        // The reference tool opens the file with the new key, and not with the old one.
        let path = try databasePath(app)
        let withNew = try sqlcipher(path, key: .raw(hex: newKey), pageSize: 4096, "SELECT title FROM tasks;\n")
        #expect(withNew.stdout.contains("survives rotation"))
        let withOld = try sqlcipher(path, key: .raw(hex: oldKey), pageSize: 4096, "SELECT title FROM tasks;\n")
        #expect(!withOld.stdout.contains("survives rotation"))

        let directory = try TemporaryDirectory()
        let backup = directory.path + "/backup.db"
        #expect(try securestore(["db", "backup", backup], app: app).status == 0)
        let again = try securestore(["db", "backup", backup], app: app)
        #expect(again.status == 73)

        let plain = directory.path + "/plain.db"
        #expect(try run(["sqlite3", plain, "CREATE TABLE notes(text); INSERT INTO notes VALUES ('imported row'); PRAGMA user_version = 7;"]).status == 0)
        let importApp = uniqueApp()
        let imported = try securestore(["db", "import-plaintext", plain, "--name", "notes"], app: importApp)
        #expect(imported.status == 0)
        let info = try securestore(["--json", "db", "info", "--name", "notes"], app: importApp)
        #expect(info.stdout.contains("\"exists\":true"))
        let again2 = try securestore(["db", "import-plaintext", plain, "--name", "notes"], app: importApp)
        #expect(again2.status == 73)
    }
}

/// Found in review: maintenance commands must not create a database (and a key) that does not exist.
@Suite(.serialized) struct MaintenanceOnAMissingDatabaseTests {
    init() throws { try Harness.require() }

    @Test(arguments: [["db", "verify"], ["db", "recovery-code"], ["db", "rotate-key"], ["db", "backup"]])
    func maintenanceOfAMissingDatabaseIsNotFoundAndCreatesNothing(command: [String]) throws {
        let app = uniqueApp()
        let elsewhere = try TemporaryDirectory()
        let backup = elsewhere.path + "/never-written.db"
        let result = try securestore(command + (command.last == "backup" ? [backup] : []) + ["--name", "typo"], app: app)
        #expect(result.status == 66)
        #expect(result.stderr.hasPrefix("securestore: there is no database 'typo' at "))
        #expect(result.stdout.isEmpty, "no recovery code for a database that does not exist")
        let root = try #require(Harness.root)
        #expect(!FileManager.default.fileExists(atPath: root + "/data/\(app)/typo.db"))
        #expect(try StoreClient.lookup(service: "\(app).database-key", account: "typo") == nil, "no key was made")
        #expect(!FileManager.default.fileExists(atPath: backup))
    }

    @Test func importingAMissingFileIsNotFound() throws {
        let result = try securestore(["db", "import-plaintext", "/nonexistent/plain.db"], app: uniqueApp())
        #expect(result.status == 66)
        #expect(result.stderr == "securestore: there is no file '/nonexistent/plain.db' to import\n")
    }

    @Test(arguments: ["myapp.database-key", "myapp.git", "myapp.sync-key", "myapp.sync-signing-key", "myapp.sync-join-key"])
    func applicationNamesThatWouldReachAnotherAppsKeysAreRefused(app: String) throws {
        let result = try securestore(["token", "list"], app: app)
        #expect(result.status == 64)
        #expect(result.stderr.contains("must not end in"))
    }
}

/// Options and forms Docs/cli.md promises that the other tests do not reach.
@Suite(.serialized) struct CLIOptionTests {
    init() throws { try Harness.require() }

    @Test func dataDirPutsTheDatabaseWhereAsked() throws {
        let app = uniqueApp()
        let directory = try TemporaryDirectory()
        let dataDir = directory.path + "/store"
        #expect(try securestore(["--data-dir", dataDir, "tasks", "add", "here"], app: app).status == 0)
        #expect(FileManager.default.fileExists(atPath: dataDir + "/tasks.db"))
        #expect(!FileManager.default.fileExists(atPath: try #require(Harness.root) + "/data/\(app)/tasks.db"))
        #expect(try securestore(["--data-dir", dataDir, "tasks", "list"], app: app).stdout.contains("here"))
        let attributes = try FileManager.default.attributesOfItem(atPath: dataDir)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
    }

    @Test func doubleDashLetsATitleStartWithADash() throws {
        let app = uniqueApp()
        let add = try securestore(["tasks", "add", "--", "--not-an-option"], app: app)
        #expect(add.status == 0)
        #expect(add.stdout.hasSuffix("[ ]  --not-an-option\n"))
        let without = try securestore(["tasks", "add", "--not-an-option"], app: app)
        #expect(without.status == 64)
        #expect(without.stderr.hasPrefix("securestore: unknown option '--not-an-option'"))
        #expect(try securestore(["tasks", "count"], app: app).stdout == "1\n")
    }

    @Test func listShowsFiftyByDefaultAndSaysHowManyThereAre() throws {
        let app = uniqueApp()
        for index in 0..<52 { #expect(try securestore(["tasks", "add", "task \(index)"], app: app).status == 0) }
        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.stdout.split(separator: "\n").count == 50)
        #expect(list.stderr == "(1–50 of 52)\n")
    }

    /// One encoding of a task: every `tasks` command prints TaskItem's keys, and TaskItem decodes what it prints.
    @Test func taskJSONHasTaskItemsKeysAndDecodesAsATaskItem() throws {
        let app = uniqueApp()
        let add = try securestore(["--json", "tasks", "add", "pay rent"], app: app)
        let list = try securestore(["--json", "tasks", "list"], app: app)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(add.stdout.utf8)) as? [String: Any])
        #expect(object.keys.sorted() == ["createdAt", "done", "id", "title"])
        let id = try #require(object["id"] as? String)
        #expect(id == id.lowercased() && id.count == 36)
        let createdAt = try #require(object["createdAt"] as? String)
        // The stored precision, as export writes it (issue 22: a list re-imported with replace keeps its dates).
        #expect(createdAt.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/) != nil, "createdAt: \(createdAt)")
        #expect(add.stdout.hasPrefix("{\"createdAt\":\"\(createdAt)\",\"done\":false,\"id\":\"\(id)\",\"title\":\"pay rent\"}"))

        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return try #require(formatter.date(from: text))
        }
        let added = try decoder.decode(TaskItem.self, from: Data(add.stdout.utf8))
        let listed = try decoder.decode([TaskItem].self, from: Data(list.stdout.utf8))
        #expect(added.id.uuidString.lowercased() == id && added.title == "pay rent" && !added.done)
        #expect(listed == [added])
    }

    @Test func anAmbiguousPrefixIsAUsageErrorThatSaysHowManyMatch() throws {
        let app = uniqueApp()
        var ids: [String] = []
        // 17 tasks: two of them share their first hex digit (pigeonhole over 16 digits).
        for index in 0..<17 {
            let add = try securestore(["--json", "tasks", "add", "task \(index)"], app: app)
            let object = try JSONSerialization.jsonObject(with: Data(add.stdout.utf8)) as? [String: Any]
            ids.append(try #require(object?["id"] as? String))
        }
        let byDigit = Dictionary(grouping: ids, by: { $0.prefix(1) })
        let (digit, sharing) = try #require(byDigit.first { $0.value.count > 1 })
        let result = try securestore(["tasks", "done", String(digit)], app: app)
        #expect(result.status == 64)
        #expect(result.stderr.hasPrefix("securestore: "))
        #expect(result.stderr.contains("\(sharing.count)"))
        #expect(try securestore(["tasks", "count", "--done"], app: app).stdout == "0\n", "nothing was marked done")
    }

    @Test func prefsTakeDatesAndBase64Data() throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "--date", "lastSync", "2026-11-21T10:00:00Z"], app: app).status == 0)
        #expect(try securestore(["prefs", "get", "lastSync"], app: app).stdout == "2026-11-21T10:00:00Z\n")
        #expect(try securestore(["prefs", "set", "--data", "icon", "AAEC/w=="], app: app).status == 0)
        #expect(try securestore(["--json", "prefs", "get", "icon"], app: app).stdout
            == "{\"key\":\"icon\",\"type\":\"Data\",\"value\":\"AAEC/w==\"}\n")
        let bad = try securestore(["prefs", "set", "--date", "lastSync", "yesterday"], app: app)
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("securestore: VALUE is not a date such as 2026-11-23 (midnight UTC), 2026-11-23T16:15:02Z or 2026-11-23T16:15:02.250+01:00: 'yesterday'"))
        #expect(try securestore(["prefs", "get", "lastSync"], app: app).stdout == "2026-11-21T10:00:00Z\n", "unchanged")
    }
}

/// `db verify` is a check: a problem it finds is exit status 1 (Docs/cli.md), and it changes nothing.
@Suite(.serialized) struct VerifyCommandTests {
    init() throws { try Harness.require() }

    @Test func aDamagedPageFailsVerifyWithStatusOneAndTheFileIsLeftAsItIs() throws {
        let app = uniqueApp()
        // Titles of 1000 characters spread the tasks over several pages.
        for index in 0..<24 {
            let title = String(repeating: "\(index % 10)", count: 1000)
            #expect(try securestore(["tasks", "add", title], app: app).status == 0)
        }
        let path = try #require(Harness.root) + "/data/\(app)/tasks.db"
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the last connection checkpointed")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.count >= 4096 * 6)
        // Flip bytes in the middle of the last page: page 1 (the schema) still opens, the HMAC of the last
        // page no longer matches.
        for offset in (bytes.count - 2048)..<(bytes.count - 2040) { bytes[offset] ^= 0xFF }
        try bytes.write(to: URL(fileURLWithPath: path))

        let verify = try securestore(["db", "verify"], app: app)
        #expect(verify.status == 1)
        #expect(verify.stderr.hasPrefix("securestore: '\(path)' failed the integrity check"))
        #expect(verify.stderr.split(separator: "\n").count == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "verify changed nothing")
    }
}
