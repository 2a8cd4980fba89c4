import Foundation
import Glibc
import TestSupport
import Testing

/// What must never leak: plaintext into the database files, secrets into outputs, and files or directories
/// readable by others whatever the umask.
@Suite(.serialized) struct ReliabilityHygieneTests {
    init() throws { try Harness.require() }

    /// Hundreds of tasks whose titles carry a marker, written through the keyed database: the marker is in
    /// no file of the data directory — the database, its -wal (left full by a kill -9, before any checkpoint)
    /// and -shm — and still in none after the WAL is checkpointed into the main file.
    @Test func theDatabaseAndItsWALNeverHoldInsertedPlaintextBeforeOrAfterACheckpoint() throws {
        let directory = try TemporaryDirectory()
        let data = directory.path + "/data", log = directory.path + "/tasks.log"
        let app = uniqueApp()
        // Kill the writer while its -wal holds committed tasks not yet checkpointed (the writer checkpoints
        // now and then, which empties the -wal: try again until the kill lands on a full one).
        var walSize = 0
        for _ in 0..<20 where walSize <= 16384 {
            let pid = try rlSpawn([stressExecutable, "soak", "tasks", data, app, log])
            for _ in 0..<2000 where (rlContents(data + "/tasks.db-wal")?.count ?? 0) <= 16384 { usleep(1000) }
            rlKill(pid)
            walSize = rlContents(data + "/tasks.db-wal")?.count ?? 0
        }
        let marker = Data("soak-plaintext-marker".utf8)
        #expect(rlContents(log)?.range(of: Data("C ".utf8)) != nil, "tasks were committed")
        #expect(walSize > 16384, "the kill left a write-ahead log holding tasks")
        #expect(rlContents(data + "/tasks.db-shm") != nil)
        for file in try FileManager.default.contentsOfDirectory(atPath: data) {
            #expect(rlContents(data + "/" + file)?.range(of: marker) == nil, "\(file) holds plaintext")
        }
        // The checker opens, reads every task (so the titles do carry the marker), and closes: a checkpoint.
        let check = try rlStress(["soak", "check-tasks", data, app, log])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(rlContents(data + "/tasks.db-wal") == nil, "checkpointed and removed on close")
        for file in try FileManager.default.contentsOfDirectory(atPath: data) {
            #expect(rlContents(data + "/" + file)?.range(of: marker) == nil, "\(file) holds plaintext")
        }
    }

    /// A token and the database key are in play while every error path we can reach runs: neither appears
    /// on stdout or stderr of any of them (only `token get` and `db recovery-code` print a secret, by design).
    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring")) func noSecretReachesAnyOutputOrErrorMessage() throws {
        let app = uniqueApp()
        let marker = "SECRETMARKER" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        #expect(try securestore(["token", "set", "t"], app: app, input: marker).status == 0)
        #expect(try securestore(["tasks", "add", "a task"], app: app).status == 0)
        let key = try currentDatabaseKey(app, path: try #require(Harness.root) + "/data/\(app)/tasks.db")
        #expect(key.count == 64)
        let code = try securestore(["db", "recovery-code"], app: app).stdout
        #expect(code.count > 60)
        var noBus = ProcessInfo.processInfo.environment
        noBus["DBUS_SESSION_BUS_ADDRESS"] = nil
        var outputs: [(String, ProcessResult)] = []
        func record(_ what: String, _ result: ProcessResult) { outputs.append((what, result)) }

        record("oversize", try securestore(["token", "set", "t"], app: app, input: String(repeating: marker, count: 6000)))
        record("pref over limit", try securestore(["prefs", "set", "blob", String(repeating: marker, count: 1000)], app: app))
        record("pref secret", try securestore(["prefs", "set", "apiToken", marker], app: app))
        record("audit", try securestore(["prefs", "audit"], app: app))
        record("audit json", try securestore(["--json", "prefs", "audit"], app: app))
        record("token list", try securestore(["--json", "token", "list"], app: app))
        record("no bus", try securestore(["token", "set", "u"], app: app, input: marker, environment: noBus))
        record("git no bus", try securestore(
            ["git-credential", "store"], app: app, input: "protocol=https\nhost=h\nusername=u\npassword=\(marker)\n",
            environment: noBus))
        record("recover garbled", try securestore(["db", "recover"], app: app, input: "ZZZZ" + code.dropFirst(4)))
        record("recover over a working key", try securestore(["db", "recover"], app: app, input: code))
        record("db info", try securestore(["--json", "db", "info"], app: app))
        record("db verify", try securestore(["db", "verify"], app: app))
        try Harness.keyringCtl("lock")
        do {
            defer { _ = try? Harness.keyringCtl("unlock") }
            record("locked set", try securestore(["token", "set", "t"], app: app, input: marker))
            record("locked move", try securestore(["prefs", "move-to-keychain", "apiToken"], app: app))
            record("locked git", try securestore(
                ["git-credential", "store"], app: app, input: "protocol=https\nhost=h\nusername=u\npassword=\(marker)\n"))
            record("locked tasks", try securestore(["tasks", "list"], app: app))
        }
        try Harness.keyringCtl("unlock")
        // A wrong key planted: the error names the item, never the key that failed nor the real one.
        let wrong = String(repeating: "5a", count: 32)
        let databasePath = try #require(Harness.root) + "/data/\(app)/tasks.db"
        let account = try #require(try currentKeyAccount(app, path: databasePath))
        #expect(try StoreClient.store(wrong, service: "\(app).database-key", account: account, label: "x"))
        record("wrong key", try securestore(["tasks", "list"], app: app))
        record("wrong key verify", try securestore(["db", "verify"], app: app))
        record("wrong key rotate", try securestore(["db", "rotate-key"], app: app))
        record("wrong key info", try securestore(["--json", "db", "info"], app: app))

        let codeGroups = code.split(whereSeparator: { $0 == "-" || $0 == "\n" }).map(String.init).filter { $0.count == 4 }
        for (what, result) in outputs {
            let text = result.stdout + result.stderr
            #expect(!text.contains(marker) && !text.contains(String(marker.prefix(20))), "\(what) printed the token")
            #expect(!text.contains(key) && !text.contains(String(key.prefix(16))), "\(what) printed the database key")
            #expect(!text.lowercased().contains(String(wrong.prefix(16))), "\(what) printed the wrong key")
            #expect(codeGroups.dropFirst().filter { text.contains($0) }.count < 3, "\(what) printed the recovery code")
        }
        #expect(outputs.filter { $0.1.status != 0 }.count >= 12, "the error paths were taken")
    }

    /// No command takes a secret from the command line: an extra argument where a secret could go is a
    /// usage error, and the recovery code is read only from standard input.
    @Test func secretsAreNeverTakenFromArguments() throws {
        let app = uniqueApp()
        #expect(try securestore(["tasks", "add", "x"], app: app).status == 0)
        let code = try securestore(["db", "recovery-code"], app: app).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let recover = try securestore(["db", "recover", code], app: app)
        #expect(recover.status == 64)
        #expect(recover.stderr.hasPrefix("securestore: unexpected argument"))
        #expect(!recover.stderr.contains(String(code.prefix(14))), "the refused argument is not echoed")
        for command in [["token", "set", "name", "s3cret-value"], ["git-credential", "store", "s3cret-value"]] {
            let result = try securestore(command, app: app, input: "protocol=https\nhost=h\n")
            #expect(result.status == 64, "\(command)")
            #expect(result.stderr.hasPrefix("securestore: unexpected argument"), "\(command)")
            #expect(!result.stderr.contains("s3cret-value"), "\(command)")
        }
        #expect(try securestore(["token", "get", "name"], app: app).status == 66)
    }

    /// Under umask 000, 022 and 077 every file the tool creates — database, -wal, -shm, lock files,
    /// preferences, backups, rotation results — is 0600 and every directory it creates 0700.
    @Test(arguments: ["000", "022", "077"])
    func everyCreatedFileIs0600AndEveryDirectory0700UnderAnyUmask(_ umask: String) throws {
        let root = try TemporaryDirectory()
        let environment = rlEnvironment(root: root.path)
        let app = uniqueApp()
        // With no D-Bus (with-keyfile) the key file of this HOME is made too, with a passphrase on a descriptor.
        let passphrase = root.path + "/passphrase"
        try "umask test passphrase\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        let unlock = Harness.isKeyFile ? "--passphrase-fd 3 3<'\(passphrase)'" : ""
        func tool(_ arguments: [String], input: String = "") throws -> ProcessResult {
            try run(["bash", "-c", "umask \(umask); exec \"$@\" \(unlock)", "umask", product("securestore"), "--app", app] + arguments,
                input: Data(input.utf8), environment: environment)
        }
        #expect(try tool(["tasks", "add", "first"]).status == 0)
        #expect(try tool(["prefs", "set", "theme", "dark"]).status == 0)
        #expect(try tool(["prefs", "set", "theme", "light"], input: "").status == 0)
        #expect(try tool(["db", "rotate-key"]).status == 0)
        #expect(try tool(["db", "backup", root.path + "/backups/nested/tasks-backup.db"]).status == 0)
        #expect(try tool(["db", "import-plaintext", "--name", "notes", try plaintextDatabase(root.path)]).status == 0)
        // A writer killed while open leaves its -wal and -shm: they are 0600 too.
        let pid = try rlSpawn(
            ["/bin/bash", "-c", "umask \(umask); exec \"$@\"", "umask", stressExecutable, "soak", "tasks",
             root.path + "/data/\(app)", app, root.path + "/soak.log"], environment: environment)
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: root.path + "/data/\(app)/tasks.db-shm") { usleep(20_000) }
        usleep(100_000)
        rlKill(pid)
        let entries = rlModes(under: root.path).filter {
            !$0.path.hasSuffix("plain.db") && !$0.path.hasSuffix("soak.log") && $0.path != passphrase
        }
        #expect(entries.contains { $0.path.hasSuffix("tasks.db-wal") } && entries.contains { $0.path.hasSuffix("tasks.db-shm") })
        #expect(entries.contains { $0.path.hasSuffix("preferences.json.lock") } && entries.contains { $0.path.hasSuffix(".tasks.db.lock") })
        #expect(entries.contains { $0.path.hasSuffix("notes.db") } && entries.contains { $0.path.hasSuffix("tasks-backup.db") })
        for entry in entries where entry.path != root.path + "/home" {
            #expect(entry.mode == (entry.isDirectory ? 0o700 : 0o600), "umask \(umask): \(entry.path) is \(String(entry.mode, radix: 8))")
        }
    }

    private func plaintextDatabase(_ directory: String) throws -> String {
        let path = directory + "/plain.db"
        #expect(try run(["sqlite3", path, "CREATE TABLE notes(text); INSERT INTO notes VALUES ('n');"]).status == 0)
        return path
    }
}
