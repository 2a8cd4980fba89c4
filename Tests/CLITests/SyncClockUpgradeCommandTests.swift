import Foundation
import Testing
import TestSupport

/// Issue 35 part 1: a database synced by the version before one clock entry per row (one `sync_clock` row per cell)
/// upgrades at its first sync command — killed at any moment, it still opens, syncs and loses nothing.
///
/// Each fixture (Keys/fixtures/<name>.tar.gz, made by `make-sync-clock-v1.sh` with that version's tool) holds two
/// devices synced through a folder, a conflict logged on A, and unsent edits on both: on A a new task, a rename and a
/// delete; on B a done mark. Its key file is sealed under a public test passphrase. `sync-clock-v1` was made by the
/// tool before issue 32; `sync-clock-v1-trust32` by the tool of issue 32 (its `sync_clock` keeps the bundle each
/// version came in, beside sync_sources, sync_preimages and sync_delete_views).
@Suite(.serialized) struct SyncClockUpgradeCommandTests {
    static let fixtures = ["sync-clock-v1", "sync-clock-v1-trust32"]

    /// What both devices hold once the unsent edits of both have crossed: the same three tasks.
    static let expected = [
        "made on A, unsent|false",
        "water the plants (B)|true",
        "write the report, unsent rename|true",
    ]

    /// One fixture, unpacked at `/tmp/securestore-<name>`.
    struct Fixture {
        let name: String
        var root: String { "/tmp/securestore-" + name }

        /// Unpacks a fresh copy of the fixture where it was made (the databases record the folder's absolute path).
        func unpack() throws {
            try? FileManager.default.removeItem(atPath: root)
            let archive = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Keys/fixtures/\(name).tar.gz").path
            let result = try run(["/bin/tar", "-xzf", archive, "-C", "/tmp"])
            try #require(result.status == 0, "\(result.stderr)")
        }

        /// The tool on one of the fixture's devices, its key file unsealed with the passphrase given on a descriptor.
        func command(_ device: String, _ arguments: [String]) -> [String] {
            ["/bin/sh", "-c", "exec \"$0\" --keystore file --passphrase-fd 3 \"$@\" 3<\(root)/passphrase", product("securestore"),
             "--app", "fixture-\(device)"] + arguments
        }

        var environment: [String: String] {
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_DATA_HOME"] = root + "/data"
            environment["SECURESTORE_PROMPT"] = "never"
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            return environment
        }

        func tool(_ device: String, _ arguments: [String]) throws -> ProcessResult {
            try run(command(device, arguments), environment: environment)
        }

        /// The device's tasks as "title|done", sorted.
        func tasks(_ device: String) throws -> [String] {
            let result = try tool(device, ["--json", "tasks", "list", "--limit", "none"])
            try #require(result.status == 0, "\(result.stderr)")
            let list = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
            return list.map { "\($0["title"] as? String ?? "?")|\(($0["done"] as? Bool) == true)" }.sorted()
        }

        /// Syncs A, B, A (each sends its unsent edits; the last brings B's to A) and checks what both devices hold.
        func syncAndCheck(_ note: String) throws {
            for device in ["a", "b", "a"] {
                let result = try tool(device, ["sync", "now"])
                #expect(result.status == 0, "\(note): sync now on \(device): \(result.stderr)")
            }
            #expect(try tasks("a") == SyncClockUpgradeCommandTests.expected, "\(note)")
            #expect(try tasks("b") == SyncClockUpgradeCommandTests.expected, "\(note)")
            // The conflict the earlier version logged is still there, restorable.
            let conflicts = try tool("a", ["sync", "conflicts"])
            #expect(conflicts.status == 0 && conflicts.stdout.contains("water the plants (A)"), "\(note): \(conflicts.stdout)")
        }
    }

    /// Unkilled: the upgrade keeps every task, every unsent edit and the conflict log, and the devices converge.
    @Test(arguments: fixtures) func aDatabaseSyncedByTheEarlierVersionUpgradesAndSyncs(_ fixture: String) throws {
        try Harness.require()
        let f = Fixture(name: fixture)
        try f.unpack()
        defer { try? FileManager.default.removeItem(atPath: f.root) }
        // Before anything syncs: the tasks as the earlier version left them, unsent counted per row.
        #expect(try f.tasks("a") == ["made on A, unsent|false", "water the plants (B)|false", "write the report, unsent rename|true"])
        let status = try f.tool("a", ["--json", "sync", "status"])
        #expect(status.status == 0, "\(status.stderr)")
        // A's unsent rows: the new task, the renamed one and the deleted one.
        let unsent = (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["unsentRows"] as? Int
        #expect(unsent == 3, "\(status.stdout)")
        try f.syncAndCheck("upgraded unkilled")
        // A new device joining after the upgrade gets the same tasks.
        let code = try String(contentsOfFile: f.root + "/pairing-code", encoding: .utf8)
            .split(separator: "\n").first.map(String.init) ?? ""
        let join = try run(
            f.command("c", ["sync", "join", "--folder", f.root + "/remote"]), input: Data((code + "\n").utf8), environment: f.environment)
        #expect(join.status == 0, "\(join.stderr)")
        #expect(try f.tasks("c") == Self.expected)
    }

    /// The upgrade runs in one transaction: `sync status` (which upgrades) killed with SIGKILL at moments from its
    /// start to its end leaves a database that opens, syncs and loses nothing, on both devices.
    @Test(arguments: fixtures) func killedAtAnyMomentOfTheUpgradeNothingIsLost(_ fixture: String) throws {
        try Harness.require()
        let f = Fixture(name: fixture)
        defer { try? FileManager.default.removeItem(atPath: f.root) }
        // How long an unkilled upgrade takes here, to spread the kills over it.
        try f.unpack()
        let start = Date()
        #expect(try f.tool("a", ["sync", "status"]).status == 0)
        let whole = Date().timeIntervalSince(start)
        var killedRunning = 0
        for step in 0..<12 {
            try f.unpack()
            let delay = whole * Double(step) / 11
            for device in ["a", "b"] {
                let child = try ChildProcess(f.command(device, ["sync", "status"]), environment: f.environment)
                usleep(UInt32(delay * 1_000_000))
                child.kill(SIGKILL)
                if child.wait() == .signaled(SIGKILL) { killedRunning += 1 }
            }
            // Whatever state the kill left, the next commands open the database and finish the upgrade.
            #expect(try f.tool("a", ["sync", "status"]).status == 0, "killed after \(Int(delay * 1000)) ms")
            try f.syncAndCheck("killed after \(Int(delay * 1000)) ms")
        }
        #expect(killedRunning >= 6, "the upgrades were killed while running, not after they ended")
    }

    /// A group of three (`sync-clock-v1-three`, made by `make-sync-clock-v1-three.sh` with main's tool at 20a3991): B
    /// has applied A's last bundle, C has not, so B keeps the bundle those versions came in. After B's upgrade, C
    /// (which never saw that bundle) removes A: B, reading the removal, undoes A's last bundle — the kept source
    /// survived the upgrade — keeps everything else, and B and C converge in the new generation.
    @Test func aSourceKeptBeforeTheUpgradeIsStillUndoneByALaterRemoval() throws {
        try Harness.require()
        let f = Fixture(name: "sync-clock-v1-three")
        try f.unpack()
        let scratch = try TemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: f.root) }
        let remote = f.root + "/remote"
        let status = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: f.root + "/a-status.json"))) as? [String: Any]
        let deviceA = try #require(status?["device"] as? String)
        #expect(try f.tasks("b") == ["A's last, applied by B only|false", "on every device|false"])
        // B upgrades first (any sync command does), with A's bundle hidden from C for the removal.
        let upgraded = try f.tool("b", ["sync", "status"])
        #expect(upgraded.status == 0, "\(upgraded.stderr)")
        let bundles = try FileManager.default.contentsOfDirectory(atPath: remote + "/devices/" + deviceA).sorted()
        let last = try #require(bundles.last)
        #expect(bundles.count == 2, "\(bundles)")
        try FileManager.default.moveItem(atPath: remote + "/devices/\(deviceA)/" + last, toPath: scratch.path + "/bundle")
        let removal = try f.tool("c", ["--json", "sync", "remove-device", deviceA])
        #expect(removal.status == 0, "\(removal.stderr)")
        let newCode = try #require(
            (try JSONSerialization.jsonObject(with: Data(removal.stdout.utf8)) as? [String: Any])?["pairingCode"] as? String)
        try FileManager.default.moveItem(atPath: scratch.path + "/bundle", toPath: remote + "/devices/\(deviceA)/" + last)
        // B reads the removal before it sees the new generation.
        try FileManager.default.moveItem(atPath: remote + "/generation-2", toPath: scratch.path + "/generation-2")
        let sync = try f.tool("b", ["sync", "now"])
        #expect(sync.status == 0, "\(sync.stderr)")
        #expect(try f.tasks("b") == ["on every device|false"], "A's bundle after the one C accepted is undone on B")
        try FileManager.default.moveItem(atPath: scratch.path + "/generation-2", toPath: remote + "/generation-2")
        let rekey = try run(f.command("b", ["sync", "rekey"]), input: Data((newCode + "\n").utf8), environment: f.environment)
        #expect(rekey.status == 0, "\(rekey.stderr)")
        for device in ["c", "b", "c"] {
            let result = try f.tool(device, ["sync", "now"])
            #expect(result.status == 0, "sync now on \(device): \(result.stderr)")
        }
        #expect(try f.tasks("b") == ["on every device|false"])
        #expect(try f.tasks("c") == ["on every device|false"])
    }
}
