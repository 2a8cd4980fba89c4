import Foundation
import Glibc
import TestSupport
import Testing

/// Bad input through the built tool: each case gets one clear line on stderr and a documented exit status,
/// and the data is byte-identical afterwards. (Library-level cases are in EncryptedDatabaseTests/OpeningTests,
/// PreferencesTests/DamagedFileTests and KeychainTests; wrong and missing keys in TaskAndDatabaseCommandTests.)
@Suite(.serialized) struct ReliabilityBadInputTests {
    init() throws { try Harness.require() }

    private func dataDirectory(_ app: String) throws -> String { try #require(Harness.root) + "/data/\(app)" }

    private func storedKey(_ app: String) throws -> String? {
        let key = try currentDatabaseKey(app, path: try dataDirectory(app) + "/tasks.db")
        return key.isEmpty ? nil : key
    }

    enum Damage: String, CaseIterable, Sendable {
        case empty, truncated, randomBytes, plaintextSQLite
    }

    /// The task database replaced by something that is not it: every command refuses with exit 65 and one
    /// line naming the file; the file, the stored key and the directory stay as they were.
    @Test(arguments: Damage.allCases)
    func aDamagedDatabaseIsRefusedByEveryCommandAndStaysByteIdentical(_ damage: Damage) throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "before the damage"], app: app).status == 0)
        let directory = try dataDirectory(app)
        let path = directory + "/tasks.db"
        let good = try #require(rlContents(path))
        switch damage {
        case .empty: try Data().write(to: URL(fileURLWithPath: path))
        case .truncated: try good.prefix(5000).write(to: URL(fileURLWithPath: path))
        case .randomBytes: try Data((0..<8192).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: path))
        case .plaintextSQLite:
            try FileManager.default.removeItem(atPath: path)
            #expect(try run(["sqlite3", path, "CREATE TABLE t(x); INSERT INTO t VALUES ('plain');"]).status == 0)
        }
        let before = try #require(rlContents(path))
        let key = try storedKey(app)
        let listing = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        let expected: String =
            switch damage {
            case .empty: "is empty (0 bytes)"
            case .truncated: "is damaged"
            case .randomBytes: "does not open"
            case .plaintextSQLite: "is a plaintext SQLite database"
            }
        for command in [["tasks", "list"], ["tasks", "add", "after"], ["tasks", "count"], ["db", "verify"], ["db", "rotate-key"]] {
            let result = try securestore(command, app: app)
            #expect(result.status == 65, "\(command): \(result.stderr)")
            #expect(result.stderr.hasPrefix("securestore: "), "\(command)")
            #expect(result.stderr.contains(path) && result.stderr.contains(expected), "\(command): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        #expect(rlContents(path) == before, "byte-identical")
        #expect(try storedKey(app) == key, "the key was neither replaced nor deleted")
        #expect(try !databaseKeyAccounts(app).contains { $0.hasSuffix(".pending") }, "no rotation was started")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == listing, "no file appeared")
    }

    /// Every file of the directory with its bytes.
    private func files(_ directory: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            result[name] = rlContents(directory + "/" + name) ?? Data()
        }
        return result
    }

    /// Another app's database left its `-wal` (written by the reference tool, copied while that database is
    /// open, as a sync tool or a careless `cp` does) beside this app's database: every command refuses with
    /// exit 65 and one line naming the log; no byte of any file changes and the key stays. Moved away, the
    /// database opens with everything it had.
    @Test func aLogLeftByAnotherDatabaseIsRefusedByEveryCommandAndNothingChanges() throws {
        let app = uniqueApp()
        let other = uniqueApp()
        #expect(try securestore(["tasks", "add", "mine"], app: app).status == 0)
        #expect(try securestore(["tasks", "add", "theirs"], app: other).status == 0)
        let directory = try dataDirectory(app)
        let path = directory + "/tasks.db"
        let otherPath = try dataDirectory(other) + "/tasks.db"
        let otherKey = try #require(try storedKey(other))
        let script = "INSERT INTO tasks (id, title, done, created_at) "
            + "SELECT randomblob(16), 'theirs too', 0, 0;\n.shell cp \(otherPath)-wal \(path)-wal\n"
        let wrote = try sqlcipher(otherPath, key: .raw(hex: otherKey), pageSize: 4096, script)
        #expect(wrote.status == 0, "\(wrote.stderr)")
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        let before = try files(directory)
        let key = try storedKey(app)

        for command in [["tasks", "list"], ["tasks", "add", "after"], ["tasks", "count"], ["db", "verify"], ["db", "info"]] {
            let result = try securestore(command, app: app)
            #expect(result.status == 65, "\(command): \(result.stderr)")
            #expect(result.stderr.hasPrefix("securestore: '\(path)-wal' beside '\(path)' does not belong to it"),
                    "\(command): \(result.stderr)")
            #expect(result.stderr.contains("nothing was changed"))
            #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
        }
        #expect(try files(directory) == before, "no byte of the database or its side files changed")
        #expect(try storedKey(app) == key)

        try FileManager.default.moveItem(atPath: path + "-wal", toPath: directory + "/foreign.wal")
        let list = try securestore(["tasks", "list"], app: app)
        #expect(list.status == 0)
        #expect(list.stdout.contains("mine") && !list.stdout.contains("theirs"))
    }

    /// A database a newer version migrated (a migration this version does not know) is refused by the task
    /// commands and left byte-identical.
    @Test func aDatabaseFromANewerSchemaIsRefusedAndStaysByteIdentical() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "from this version"], app: app).status == 0)
        let path = try dataDirectory(app) + "/tasks.db"
        let key = try #require(try storedKey(app))
        let script = "INSERT INTO securestore_migrations (id, applied_at) VALUES ('tasks v99 from the future', 0);\n"
        #expect(try sqlcipher(path, key: .raw(hex: key), pageSize: 4096, script).status == 0)
        let before = try #require(rlContents(path))
        for command in [["tasks", "list"], ["tasks", "add", "x"], ["tasks", "done-all", "--yes"]] {
            let result = try securestore(command, app: app)
            #expect(result.status == 65, "\(command)")
            #expect(result.stderr.hasPrefix("securestore: the database '\(path)' was migrated by a newer version"))
            #expect(result.stderr.contains("tasks v99 from the future") && result.stderr.contains("left unchanged"))
        }
        #expect(rlContents(path) == before)
    }

    /// Preference files that are not ours: the wrong shape, another program's JSON, and a file far over the
    /// size any domain may have. Refused with the path, byte-identical, also after a refused set.
    @Test(arguments: ["wrong shape", "other program", "huge"])
    func aPreferencesFileThatIsNotOursIsRefusedAndStaysByteIdentical(_ kind: String) throws {
        let app = uniqueApp()
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app).status == 0)
        let path = try #require(Harness.root) + "/config/\(app)/preferences.json"
        let contents: Data =
            switch kind {
            case "wrong shape": Data("[1, 2, 3]\n".utf8)
            case "other program": Data("{\"editor.fontSize\": 14, \"workbench.colorTheme\": \"Dark\"}\n".utf8)
            default: Data(repeating: UInt8(ascii: " "), count: 17 * 1024 * 1024)
            }
        try contents.write(to: URL(fileURLWithPath: path))
        let get = try securestore(["prefs", "get", "theme"], app: app)
        #expect(get.status == 65)
        #expect(get.stderr.hasPrefix("securestore: \(path) "), "\(get.stderr)")
        #expect(get.stderr.contains(kind == "huge" ? "more than the" : "damaged"))
        let set = try securestore(["prefs", "set", "theme", "light"], app: app)
        #expect(set.status == 65)
        #expect(rlContents(path) == contents, "byte-identical after a refused get and set")
    }

    /// The database key lives in the keyring: with the Secret Service chosen and no session bus, the task
    /// commands say how to start one and create nothing; with the collection locked they exit 77 and leave the
    /// database byte-identical. (With no bus and no choice the key file is used: KeyFileStoreTests.)
    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring")) func noSessionBusOrALockedKeyringLeavesTheDatabaseAlone() throws {
        let app = uniqueApp()
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["SECURESTORE_KEYSTORE"] = "secret-service"
        let noBus = try securestore(["tasks", "add", "x"], app: app, environment: environment)
        #expect(noBus.status == 69)
        #expect(noBus.stderr.hasPrefix("securestore: no D-Bus session bus"))
        #expect(!FileManager.default.fileExists(atPath: try dataDirectory(app) + "/tasks.db"), "no database without a key")

        #expect(try securestore(["tasks", "add", "kept"], app: app).status == 0)
        let path = try dataDirectory(app) + "/tasks.db"
        let before = try #require(rlContents(path))
        let noBusExisting = try securestore(["tasks", "list"], app: app, environment: environment)
        #expect(noBusExisting.status == 69)
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }
        for command in [["tasks", "list"], ["tasks", "add", "y"], ["db", "rotate-key"]] {
            let locked = try securestore(command, app: app)
            #expect(locked.status == 77, "\(command): \(locked.stderr)")
            #expect(locked.stderr.hasPrefix("securestore: the keyring collection 'default' is locked"))
        }
        try Harness.keyringCtl("unlock")
        #expect(rlContents(path) == before)
        #expect(try securestore(["tasks", "list"], app: app).stdout.contains("kept"))
    }

    /// Arguments: empty, enormous and non-UTF-8 titles are refused and change nothing. (An argument cannot
    /// carry a NUL byte: execve takes C strings, so argv ends each argument at the first NUL — nothing to test
    /// through the tool; the library refuses NUL in titles, names and keys, tested in their modules.)
    @Test func emptyEnormousAndNonUTF8TitlesAreRefusedAndChangeNothing() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "only one"], app: app).status == 0)
        let empty = try securestore(["tasks", "add", ""], app: app)
        #expect(empty.status == 64)
        #expect(empty.stderr.hasPrefix("securestore: "))
        let enormous = try securestore(["tasks", "add", String(repeating: "t", count: 120_000)], app: app)
        #expect(enormous.status == 64 || enormous.status == 65, "\(enormous.stderr)")
        #expect(enormous.stderr.hasPrefix("securestore: ") && enormous.stderr.count < 500, "no echo of the argument")
        let notUTF8 = try run(["bash", "-c", "\"$0\" --app \"$1\" tasks add \"$(printf 'ab\\377')\"", product("securestore"), app])
        #expect(notUTF8.status == 64)
        #expect(notUTF8.stderr.contains("not valid UTF-8"))
        #expect(try securestore(["tasks", "count"], app: app).stdout == "1\n")
    }
}
