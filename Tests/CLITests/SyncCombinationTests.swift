import Foundation
import TestSupport
import Testing

/// Sync where it meets the rest of the tool: the database key rotated on a synced device, a keyring locked (and a
/// provider frozen) in the middle of a sync, a word search on a device that got its tasks by sync.
@Suite(.serialized) struct SyncCombinationTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    private func pair() throws -> (a: SyncCLIDevice, b: SyncCLIDevice, remote: String, id: String, code: String) {
        try syncedPair(under: work.path)
    }

    /// The database key of a synced device is rotated (the file re-encrypted under a new key): the device goes on
    /// syncing both ways with the same sync key, the rotation sends nothing (no row changed), and the other device
    /// is not told anything about the database key.
    @Test func rotatingTheDatabaseKeyOfASyncedDeviceKeepsItSyncing() throws {
        let (a, b, remote, id, _) = try pair()
        // A applies B's first bundle and publishes what it has seen (Docs/sync.md, "Snapshots and pruning") first:
        // that is a change of the remote, but not the rotation's.
        try a.ok(["sync", "now"])
        let before = try remoteDigest(remote)
        try a.ok(["db", "rotate-key"])
        let afterRotation = try a.ok(["--json", "sync", "now"]).stdout
        #expect(afterRotation.contains("\"sentRows\":0") || afterRotation.contains("\"sentRows\" : 0"), "\(afterRotation)")
        #expect(try remoteDigest(remote) == before, "a rotation changes no synced row, so nothing is sent")

        try a.ok(["tasks", "rename", id, "Water", "the", "roses"])
        try b.ok(["tasks", "done", id])
        for device in [a, b, a] { try device.ok(["sync", "now"]) }
        let rows = try a.tasks()
        #expect(rows.count == 1 && rows[0]["title"] == "Water the roses" && rows[0]["done"] == "1")
        #expect(try b.tasks() == rows)
        #expect(try a.ok(["db", "verify"]).status == 0)
        #expect(filesContaining("roses", under: remote).isEmpty)
    }

    /// The keyring is locked when `sync now` needs the keys: it stops with the keyring's exit code (77) and a
    /// message naming the lock, before anything is read or written — the database and the remote are unchanged and
    /// the edit waits; unlocked, the same command sends it.
    @Test(.enabled(if: Harness.isGnomeKeyring, "keyring-ctl drives gnome-keyring"))
    func aLockedKeyringStopsSyncBeforeItChangesAnything() throws {
        let (a, b, remote, id, _) = try pair()
        try b.ok(["tasks", "done", id])
        let (database, files) = (try b.databaseDigest(), try remoteDigest(remote))
        try Harness.keyringCtl("lock")
        defer { _ = try? Harness.keyringCtl("unlock") }
        let locked = try b.run(["sync", "now"])
        #expect(locked.status == 77, "\(locked.stderr)")
        #expect(locked.stderr.contains("locked"), "\(locked.stderr)")
        #expect(locked.stderr.split(separator: "\n").count == 1, "one line: \(locked.stderr)")
        #expect(try b.databaseDigest() == database)
        #expect(try remoteDigest(remote) == files)

        try Harness.keyringCtl("unlock")
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        #expect(try a.tasks().first?["done"] == "1")
    }

    /// A device that got its tasks by sync finds them by word (`tasks list --search`), renamed ones by their new
    /// title only, as the device that made them does.
    @Test func aWordSearchFindsWhatSyncBrought() throws {
        let (a, b, _, id, _) = try pair()
        var lines = ""
        for number in 0..<100 { lines += "{\"title\":\"pay invoice \(number)\"}\n" }
        let file = work.path + "/invoices.jsonl"
        try lines.write(toFile: file, atomically: true, encoding: .utf8)
        try a.ok(["tasks", "import", file])
        try a.ok(["tasks", "rename", id, "Water", "the", "orchids"])
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        func search(_ device: SyncCLIDevice, _ words: String) throws -> [String] {
            let out = try device.ok(["--json", "tasks", "list", "--search", words, "--limit", "none"]).stdout
            let rows = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]] ?? []
            return rows.compactMap { $0["id"] as? String }.sorted()
        }
        for words in ["invoice", "pay 42", "orchids", "plants"] {
            #expect(try search(b, words) == search(a, words), "\(words)")
        }
        #expect(try search(b, "invoice").count == 100)
        #expect(try search(b, "orchids") == [id])
        #expect(try search(b, "plants").isEmpty)
    }

    /// A new device that starts from a snapshot gets the attachments too: their descriptions travel in the
    /// snapshot, their bytes as chunks (eager: fetched at the join), identical to the file attached; a lazy device
    /// started from the same snapshot fetches them when read. An attachment detached before the snapshot is not
    /// there, and nothing of the file is readable in the remote.
    @Test func aDeviceStartedFromASnapshotGetsTheAttachments() throws {
        let (a, _, remote, id, code) = try pair()
        var bytes = [UInt8]("MARKER-SNAPSHOT-ATTACHMENT".utf8)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        while bytes.count < 1_500_000 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes.append(UInt8(truncatingIfNeeded: state))
        }
        let file = work.path + "/scan.bin", gone = work.path + "/gone.txt"
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        try "MARKER-DETACHED-BEFORE".write(toFile: gone, atomically: true, encoding: .utf8)
        try a.ok(["tasks", "attach", id, file, gone])
        func attachments(_ device: SyncCLIDevice) throws -> [[String: Any]] {
            try JSONSerialization.jsonObject(with: Data(try device.ok(["--json", "tasks", "attachments", id]).stdout.utf8)) as? [[String: Any]] ?? []
        }
        let goneID = try #require(try attachments(a).first { $0["name"] as? String == "gone.txt" }?["id"] as? String)
        try a.ok(["tasks", "detach", goneID])
        try a.ok(["sync", "snapshot"])

        for mode in ["eager", "lazy"] {
            let device = SyncCLIDevice("new-" + mode, under: work.path)
            let joined = try JSONSerialization.jsonObject(
                with: Data(try device.ok(["--json", "sync", "join", "--folder", remote, "--attachments", mode], input: code + "\n").stdout.utf8)) as? [String: Any]
            #expect((joined?["snapshot"] as? String)?.hasPrefix("snapshots/") == true, "\(String(describing: joined))")
            let listed = try attachments(device)
            #expect(listed.map { $0["name"] as? String } == ["scan.bin"])
            let attachment = try #require(listed.first?["id"] as? String)
            let out = work.path + "/out-" + mode
            try device.ok(["tasks", "attachment", "get", attachment, "--output", out])
            #expect(FileManager.default.contents(atPath: out) == Data(bytes))
        }
        for marker in ["MARKER-SNAPSHOT-ATTACHMENT", "MARKER-DETACHED-BEFORE", "scan.bin", "Water"] {
            #expect(filesContaining(marker, under: remote).isEmpty, "\(marker)")
        }
    }

    /// A device that syncs attachments lazily, where `db verify` and `db backup` meet it: verify does not call the
    /// attachments it has not read yet damaged (exit 0, says they are on the remote); a backup fetches their bytes
    /// first so that it is whole, and restores with identical bytes; when the bytes cannot be fetched (not on the
    /// remote yet) the backup is refused with 66 naming why, no backup file is written and the database is unchanged.
    @Test func aLazyDevicesVerifyAndBackupAreWhole() throws {
        let (a, _, remote, id, code) = try pair()
        let file = work.path + "/scan.bin"
        try Data((0..<1_200_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }).write(to: URL(fileURLWithPath: file))
        try a.ok(["tasks", "attach", id, file])
        try a.ok(["sync", "now"])
        let lazy = SyncCLIDevice("lazy", under: work.path)
        try lazy.ok(["sync", "join", "--folder", remote, "--attachments", "lazy"], input: code + "\n")

        let verified = try lazy.ok(["db", "verify"])
        #expect(verified.stdout.contains("1 not on this device yet"), "\(verified.stdout)")
        #expect(!verified.stdout.contains("damaged") && verified.stderr.isEmpty, "\(verified.stdout) \(verified.stderr)")

        // The bytes not on the remote (say, not replicated here yet): the backup is refused, nothing written.
        let chunks = filesUnder(remote).map(\.path).filter { $0.contains("/attachments/") }
        try #require(!chunks.isEmpty)
        let aside = work.path + "/aside"
        try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
        for (index, path) in chunks.enumerated() { try FileManager.default.moveItem(atPath: path, toPath: aside + "/\(index)") }
        let digest = try lazy.databaseDigest()
        let refused = try lazy.run(["db", "backup", work.path + "/refused.db"])
        #expect(refused.status == 66, "\(refused.stderr)")
        #expect(refused.stderr.contains("only on the sync remote") && refused.stderr.contains("none was written"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.path + "/refused.db"))
        #expect(try lazy.databaseDigest() == digest)
        for (index, path) in chunks.enumerated() { try FileManager.default.moveItem(atPath: aside + "/\(index)", toPath: path) }

        // The sync key gone from the key store (another tool removed it): the backup cannot fetch, says why by its
        // own status and hint (issue 36: one error table — this was exit 70 "unexpected error"), writes nothing.
        let keyService = lazy.app + ".sync-key"
        let keyAccount = try #require(try StoreClient.accounts(service: keyService, dataHome: lazy.data).first)
        let syncKey = try #require(try StoreClient.lookup(service: keyService, account: keyAccount, dataHome: lazy.data))
        #expect(try StoreClient.clear(service: keyService, account: keyAccount, dataHome: lazy.data))
        let keyless = try lazy.run(["db", "backup", work.path + "/keyless.db"])
        #expect(keyless.status == 66, "\(keyless.stderr)")
        #expect(keyless.stderr.contains("sync key") && keyless.stderr.contains("hint: the sync key belongs to the database's id"),
                "\(keyless.stderr)")
        #expect(!keyless.stderr.contains("unexpected error"), "\(keyless.stderr)")
        #expect(!FileManager.default.fileExists(atPath: work.path + "/keyless.db"))
        #expect(try lazy.databaseDigest() == digest)
        #expect(try StoreClient.store(syncKey, service: keyService, account: keyAccount, label: "sync key", dataHome: lazy.data))

        let backup = work.path + "/lazy-backup.db"
        let made = try lazy.ok(["db", "backup", backup])
        #expect(made.stderr.contains("fetched the bytes of 1 attachment(s)"), "\(made.stderr)")
        try lazy.ok(["db", "restore", backup])
        let listed = try JSONSerialization.jsonObject(with: Data(try lazy.ok(["--json", "tasks", "attachments", id]).stdout.utf8)) as? [[String: Any]]
        let attachment = try #require(listed?.first?["id"] as? String)
        try FileManager.default.moveItem(atPath: remote, toPath: remote + "-gone")   // read from the restored file alone
        let out = work.path + "/out.bin"
        try lazy.ok(["tasks", "attachment", "get", attachment, "--output", out])
        #expect(FileManager.default.contents(atPath: out) == FileManager.default.contents(atPath: file))
        #expect(try lazy.ok(["db", "verify"]).stdout.contains("every chunk authenticated and every SHA-256 digest matched"))
    }
}
