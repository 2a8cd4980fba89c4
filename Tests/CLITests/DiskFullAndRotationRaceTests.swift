import Foundation
import TestSupport
import Testing

/// A full disk and two rotations at once, for real: a small tmpfs mounted by the test (root only) and two
/// `securestore` processes.
@Suite(.serialized, .enabled(if: Prerequisites.isRoot, "mounting a tmpfs needs root"))
struct DiskFullAndRotationRaceTests {
    init() throws { try Harness.require() }

    /// A plaintext SQLite database of about `kilobytes` KiB (python3's sqlite3, another real client).
    private func plaintextDatabase(at path: String, kilobytes: Int) throws {
        let script = """
            import sqlite3, os, sys
            c = sqlite3.connect(sys.argv[1]); c.execute('create table t(b blob)')
            for i in range(int(sys.argv[2]) // 4): c.execute('insert into t values(?)', (os.urandom(4000),))
            c.commit()
            """
        #expect(try run(["python3", "-c", script, path, String(kilobytes)]).status == 0)
    }

    /// Mounts a tmpfs of `size` (e.g. `1m`) at a new directory (the suite runs as root only).
    private func mountTmpfs(size: String) throws -> String {
        let directory = NSTemporaryDirectory() + "securestore-full-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let mounted = try run(["mount", "-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", directory])
        try #require(mounted.status == 0, "mount: \(mounted.stderr)")
        return directory
    }

    private func unmount(_ directory: String) {
        _ = try? run(["umount", directory])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A task writer (the stress helper's soak) killed a moment after it began: its -wal and -shm stay in `data`.
    private func killedWriter(data: String, app: String, log: String) throws {
        let pid = try rlSpawn([stressExecutable, "soak", "tasks", data, app, log])
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: data + "/tasks.db-shm") { usleep(20_000) }
        // Committed frames first (a -wal longer than its header and one frame), then more: on a loaded machine the
        // writer may not have committed 300 ms after its -shm appeared.
        func walSize() -> Int { (try? FileManager.default.attributesOfItem(atPath: data + "/tasks.db-wal")[.size] as? Int) ?? 0 }
        // Up to 30 s: in the key-file pass the writer derives its key first, and the machine may be loaded. The size
        // is checked again just before the kill, as a checkpoint may have reset the -wal meanwhile.
        for _ in 0..<1_500 where walSize() <= 4096 { usleep(20_000) }
        usleep(300_000)
        for _ in 0..<1_500 where walSize() <= 4096 { usleep(20_000) }
        rlKill(pid)
    }

    private func sha256(_ path: String) throws -> String {
        try run(["sha256sum", path]).stdout
    }

    @Test func aFullDiskDuringRotationAndBackupExits74NamingTheFileAndChangesNothing() throws {
        let mount = try mountTmpfs(size: "1m")
        defer { unmount(mount) }
        let app = uniqueApp()
        let work = NSTemporaryDirectory() + "securestore-plain-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: work) }
        // 600 KiB fits once in 1 MiB, not twice: the rotation's copy and a backup beside it cannot be written.
        try plaintextDatabase(at: work + "/plain.db", kilobytes: 600)
        let data = mount + "/data"
        #expect(try securestore(["--data-dir", data, "db", "import-plaintext", work + "/plain.db"], app: app).status == 0)
        let database = data + "/tasks.db"
        let hash = try sha256(database)
        let keys = try databaseKeyAccounts(app)
        let listing = try FileManager.default.contentsOfDirectory(atPath: data).sorted()

        let rotation = try securestore(["--data-dir", data, "db", "rotate-key"], app: app)
        #expect(rotation.status == 74)
        #expect(rotation.stderr.hasPrefix("securestore: the disk is full: cannot write '\(data)/.tasks.db.rotating'"))
        #expect(rotation.stderr.contains("(the copy needs about 6"))
        #expect(rotation.stderr.contains("KiB is free there)"))
        #expect(rotation.stderr.split(separator: "\n").count == 1)

        let backup = try securestore(["--data-dir", data, "db", "backup", mount + "/backup.db"], app: app)
        #expect(backup.status == 74)
        #expect(backup.stderr.hasPrefix("securestore: the disk is full: cannot write '\(mount)/backup.db'"))
        #expect(backup.stderr.contains("the copy needs about"))
        #expect(!FileManager.default.fileExists(atPath: mount + "/backup.db"))

        #expect(try sha256(database) == hash)
        #expect(try databaseKeyAccounts(app) == keys, "no pending key left, no key retired")
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).sorted() == listing)
        let verify = try securestore(["--data-dir", data, "db", "verify"], app: app)
        #expect(verify.status == 0, "the database still opens with its key: \(verify.stderr)")
    }

    @Test func aFullDiskUnderThePreferencesExits74NamingTheFileAndKeepsTheOldValues() throws {
        let mount = try mountTmpfs(size: "64k")
        defer { unmount(mount) }
        let app = uniqueApp()
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = mount
        #expect(try securestore(["prefs", "set", "theme", "dark"], app: app, environment: environment).status == 0)
        let file = mount + "/\(app)/preferences.json"
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        // Fill the file system to the last block.
        #expect(FileManager.default.createFile(atPath: mount + "/filler", contents: nil))
        let filler = FileHandle(forWritingAtPath: mount + "/filler")
        for _ in 0..<64 { try? filler?.write(contentsOf: Data(count: 4096)) }
        try? filler?.close()

        let full = try securestore(
            ["prefs", "set", "blob", String(repeating: "x", count: 6000)], app: app, environment: environment)
        #expect(full.status == 74)
        #expect(full.stderr.hasPrefix("securestore: cannot write \(mount)/\(app)/.preferences.json.tmp-"))
        #expect(full.stderr.hasSuffix(": No space left on device\n"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: mount + "/\(app)").filter { $0.contains(".tmp-") }
            .isEmpty, "no temporary file left")
    }

    /// Side files left by a writer that was killed, on a full disk (issue 21's check of a leftover -wal needs a copy):
    /// with TMPDIR full too, exit 74 says how much to free and where, and no file changes; with room in TMPDIR the
    /// check goes there and the count is read.
    @Test func leftoverSideFilesOnAFullDiskAreCheckedInTheTemporaryDirectoryOrTheErrorSaysWhatToFree() throws {
        let mount = try mountTmpfs(size: "3m")
        defer { unmount(mount) }
        let app = uniqueApp()
        let data = mount + "/data/\(app)"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try killedWriter(data: data, app: app, log: mount + "/soak.log")
        try #require(FileManager.default.fileExists(atPath: data + "/tasks.db-wal"), "the killed writer left its -wal")
        #expect(FileManager.default.createFile(atPath: mount + "/filler", contents: nil))
        let filler = FileHandle(forWritingAtPath: mount + "/filler")
        for _ in 0..<800 { try? filler?.write(contentsOf: Data(count: 4096)) }
        try? filler?.close()
        let names = ["tasks.db", "tasks.db-wal", "tasks.db-shm"]

        let fullTemporary = mount + "/tmp"
        try FileManager.default.createDirectory(atPath: fullTemporary, withIntermediateDirectories: false)
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = fullTemporary
        let unchecked = names.map { rlContents(data + "/" + $0) }
        let refused = try securestore(["--data-dir", data, "tasks", "count"], app: app, environment: environment)
        #expect(refused.status == 74, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("securestore: the disk is full: '\(data)/tasks.db' has '\(data)/tasks.db-wal'"), "\(refused.stderr)")
        #expect(refused.stderr.contains("in '\(data)' or in the temporary directory '\(fullTemporary)' (TMPDIR) and try again; nothing was changed"),
            "\(refused.stderr)")
        #expect(names.map { rlContents(data + "/" + $0) } == unchecked, "no file changed")
        // With the temporary directory usable again, the check runs there and the count is read (the close may then
        // replay the -wal into the file).
        let counted = try securestore(["--data-dir", data, "tasks", "count"], app: app)
        #expect(counted.status == 0, "checked in the temporary directory: \(counted.stderr)")
        #expect(Int(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0, "\(counted.stdout)")
    }

    /// Issue 34 part 6: a disk too full for the 32 KiB shared-memory index (-shm) of a WAL database. A killed writer
    /// left committed tasks in the -wal only, and its -shm is gone (as after a copy of the folder, or a cleaner):
    /// `tasks list` and `tasks count` still read everything (the -wal's frames included), say once that writes need
    /// space, and leave the file and its -wal byte-identical; a write says the same and exits 74; once space is freed,
    /// writes work again.
    @Test func aDiskWithNoRoomForTheSharedMemoryIndexStillListsAndSaysWritesNeedSpace() throws {
        let mount = try mountTmpfs(size: "8m")
        defer { unmount(mount) }
        let app = uniqueApp()
        let data = mount + "/data/\(app)"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try killedWriter(data: data, app: app, log: mount + "/soak.log")
        let wal = data + "/tasks.db-wal"
        try #require((try FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int ?? 0) > 4096, "frames in the -wal")
        try FileManager.default.removeItem(atPath: data + "/tasks.db-shm")
        #expect(FileManager.default.createFile(atPath: mount + "/filler", contents: nil))
        let filler = FileHandle(forWritingAtPath: mount + "/filler")
        while (try? filler?.write(contentsOf: Data(count: 4096))) != nil {}
        try? filler?.close()
        let hashes = try [data + "/tasks.db", wal].map(sha256)

        let needSpace = "securestore: the disk holding '\(data)/tasks.db' is full: opened for reading only (SQLite cannot "
            + "make its 32 KiB shared-memory index, -shm, beside it); writes need space: free some there\n"
        let count = try securestore(["--data-dir", data, "tasks", "count"], app: app)
        #expect(count.status == 0, "\(count.stderr)")
        #expect(count.stderr == needSpace, "said once")
        let listed = try securestore(["--data-dir", data, "tasks", "list", "--limit", "none"], app: app)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stderr == needSpace)
        let added = try securestore(["--data-dir", data, "tasks", "add", "on a full disk"], app: app)
        #expect(added.status == 74)
        #expect(added.stderr.contains("writes need space: free some there and try again; nothing was changed"), "\(added.stderr)")
        #expect(try [data + "/tasks.db", wal].map(sha256) == hashes, "the file and its -wal are byte-identical")

        try FileManager.default.removeItem(atPath: mount + "/filler")
        // With room, a normal open reads the same tasks, and writes work again.
        let again = try securestore(["--data-dir", data, "tasks", "list", "--limit", "none"], app: app)
        #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
        #expect(again.stdout == listed.stdout, "the reading without -shm saw every committed task")
        let tasks = Int(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(tasks > 0)
        let written = try securestore(["--data-dir", data, "tasks", "add", "with room again"], app: app)
        #expect(written.status == 0, "\(written.stderr)")
        let after = try securestore(["--data-dir", data, "tasks", "count"], app: app)
        #expect(Int(after.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == tasks + 1)
    }

    /// The key file (issue 24) on a full disk: a token that does not fit is exit 74 naming the key file, which stays
    /// byte-identical with every item it had; no temporary file is left.
    @Test func aFullDiskUnderTheKeyFileExits74AndKeepsEveryItem() throws {
        let mount = try mountTmpfs(size: "64k")
        defer { unmount(mount) }
        let app = uniqueApp()
        let work = try TemporaryDirectory()
        let passphrase = work.path + "/key-file-passphrase"
        try "full disk passphrase\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = mount
        environment["SECURESTORE_CACHE_TIMEOUT"] = "0"
        func keyFile(_ arguments: [String], input: String) throws -> ProcessResult {
            try run(
                ["bash", "-c", "exec \"$0\" --app \(app) --keystore file --passphrase-fd 3 \"$@\" 3<'\(passphrase)'",
                 product("securestore")] + arguments, input: Data(input.utf8), environment: environment)
        }
        #expect(try keyFile(["token", "set", "kept"], input: "kept-value").status == 0)
        let file = mount + "/securestore/keys.sealed"
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(FileManager.default.createFile(atPath: mount + "/filler", contents: nil))
        let filler = FileHandle(forWritingAtPath: mount + "/filler")
        for _ in 0..<64 { try? filler?.write(contentsOf: Data(count: 4096)) }
        try? filler?.close()

        let full = try keyFile(["token", "set", "big"], input: String(repeating: "y", count: 6000))
        #expect(full.status == 74, "\(full.stderr)")
        #expect(full.stderr.hasPrefix("securestore: cannot write the key file '\(file)': "), "\(full.stderr)")
        #expect(full.stderr.hasSuffix("; it is unchanged\n"), "\(full.stderr)")
        #expect(!full.stderr.contains("yyyy"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: mount + "/securestore").filter { $0 != "keys.sealed" }
            .allSatisfy { !$0.contains(".tmp-") }, "no temporary file left")
        #expect(try keyFile(["token", "get", "kept"], input: "").stdout == "kept-value")
        #expect(try keyFile(["token", "get", "big"], input: "").status == 66)
    }

    /// Issue 21's full-disk run on a 24 MiB tmpfs: a failed attach gives its chunks back (so a later attach fits),
    /// a disk full to the last block says what to free instead of "disk I/O error" and changes nothing, `db info`
    /// says how much of the attachments file no attachment uses.
    @Test func aFullDiskNeverKeepsTheSpaceOfAFailedAttachAndSaysWhatToFree() throws {
        let mount = try mountTmpfs(size: "24m")
        defer { unmount(mount) }
        let app = uniqueApp()
        let data = mount + "/data"
        let files = NSTemporaryDirectory() + "securestore-attach-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: files) }
        for (name, bytes) in [("f5m", 5_000_000), ("f30m", 30_000_000), ("f12m", 12_000_000)] {
            #expect(try run(["sh", "-c", "head -c \(bytes) /dev/urandom > '\(files)/\(name)'"]).status == 0)
        }
        let added = try securestore(["--data-dir", data, "tasks", "add", "Scans"], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        let task = String(added.stdout.prefix(8))
        #expect(try securestore(["--data-dir", data, "tasks", "attach", task, files + "/f5m"], app: app).status == 0)

        let tooBig = try securestore(["--data-dir", data, "tasks", "attach", task, files + "/f30m"], app: app)
        #expect(tooBig.status == 74)
        #expect(tooBig.stderr.contains("the disk is full"), "\(tooBig.stderr)")
        let info = try securestore(["--data-dir", data, "db", "info"], app: app)
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("of it unused and reused by the next attachments"), "\(info.stdout)")

        // Full to the last block: reading says what to free, and nothing changes.
        #expect(FileManager.default.createFile(atPath: mount + "/filler", contents: nil))
        let filler = FileHandle(forWritingAtPath: mount + "/filler")
        while (try? filler?.write(contentsOf: Data(count: 65_536))) != nil {}
        try? filler?.close()
        let before = try sha256(data + "/tasks.db") + sha256(data + "/tasks.attachments.db")
        let listing = try securestore(["--data-dir", data, "tasks", "list"], app: app)
        if listing.status != 0 {
            #expect(listing.status == 74)
            #expect(listing.stderr.contains("is full"), "\(listing.stderr)")
            #expect(listing.stderr.contains("free some space"), "\(listing.stderr)")
            #expect(!listing.stderr.contains("disk I/O error"), "\(listing.stderr)")
        } else {
            #expect(listing.stdout.contains("Scans"))
        }
        #expect(try sha256(data + "/tasks.db") + sha256(data + "/tasks.attachments.db") == before)
        try FileManager.default.removeItem(atPath: mount + "/filler")

        // The failed attach's chunks went back to the file's free pages: 12 MB fits where it did not before.
        let fits = try securestore(["--data-dir", data, "tasks", "attach", task, files + "/f12m"], app: app)
        #expect(fits.status == 0, "\(fits.stderr)")
        let got = try securestore(["--data-dir", data, "--json", "tasks", "attachments", task], app: app)
        #expect(got.stdout.contains("\"f12m\"") && got.stdout.contains("\"f5m\"") && !got.stdout.contains("f30m"))
    }

    @Test func twoRotationsAtOnceSayAnotherSecureStoreProcessIsRotating() throws {
        let app = uniqueApp()
        let work = NSTemporaryDirectory() + "securestore-race-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: work) }
        // Large enough that a rotation takes a while (a copy, a verification).
        try plaintextDatabase(at: work + "/plain.db", kilobytes: 12_000)
        let data = work + "/data"
        #expect(try securestore(["--data-dir", data, "db", "import-plaintext", work + "/plain.db"], app: app).status == 0)
        let script = """
            "$1" --app "$2" --data-dir "$3" db rotate-key >/dev/null 2>"$3/../e1" & a=$!
            "$1" --app "$2" --data-dir "$3" db rotate-key >/dev/null 2>"$3/../e2" & b=$!
            wait $a; echo $?; wait $b; echo $?
            """
        var sawRefusal = false
        for _ in 0..<5 where !sawRefusal {
            let both = try run(["/bin/sh", "-c", script, "sh", product("securestore"), app, data])
            let statuses = both.stdout.split(separator: "\n").map(String.init)
            let errors = [try String(contentsOfFile: work + "/e1", encoding: .utf8),
                          try String(contentsOfFile: work + "/e2", encoding: .utf8)]
            #expect(statuses.contains("0"), "one of them rotates: \(errors)")
            for (status, error) in zip(statuses, errors) where status != "0" {
                #expect(status == "75")
                #expect(error == "securestore: another SecureStore process (or handle) is rotating the key of "
                    + "'\(canonicalPath(data + "/tasks.db"))'; nothing was changed; wait for it to finish\n"
                    || error == "securestore: another SecureStore process (or handle) is rotating the key of "
                    + "'\(data)/tasks.db'; nothing was changed; wait for it to finish\n", "\(error)")
                #expect(!error.contains("another program"))
                sawRefusal = true
            }
        }
        #expect(sawRefusal, "two rotations started together: one refused the other")
        // Whatever happened, the database opens with its current key and no pending key is left.
        #expect(try securestore(["--data-dir", data, "db", "verify"], app: app).status == 0)
        #expect(try databaseKeyAccounts(app).allSatisfy { !$0.contains("pending") })
    }
}
