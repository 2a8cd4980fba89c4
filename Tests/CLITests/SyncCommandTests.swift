import Foundation
import TestSupport
import Testing

/// One device for the tool: its own application name (key items) and its own data directory.
struct SyncCLIDevice {
    let app: String
    let data: String
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = data
        return environment
    }

    /// With no D-Bus (with-keyfile) each device is a machine of its own with its own key file, whose passphrase is here.
    let passphrase: String

    /// Pairs of paths (source, target) bind-mounted for the tool in a mount namespace of its own (root only): to
    /// run it as on another machine. Empty: this machine.
    var binds: [String] = []

    init(_ name: String, under directory: String) {
        app = uniqueApp(name)
        data = directory + "/" + name + "-data"
        passphrase = directory + "/" + name + "-passphrase"
    }

    /// `device` copied to another machine whose id is in the file `machineID`: the same application, key store
    /// and data path (the person copied their home folder), the data a copy of `device`'s at the time of the call
    /// (kept at `copy`, mounted over the data path for this device's commands).
    init(copyOf device: SyncCLIDevice, at copy: String, machineID: String) throws {
        app = device.app
        passphrase = device.passphrase
        data = device.data
        binds = [machineID, "/etc/machine-id", copy, device.data]
        #expect(try TestSupport.run(["cp", "-a", device.data, copy]).status == 0)
    }

    func run(_ arguments: [String], input: String = "") throws -> ProcessResult {
        var command = [product("securestore"), "--app", app] + arguments
        if Harness.isKeyFile {
            if !FileManager.default.fileExists(atPath: passphrase) {
                try "passphrase of \(app)\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
            }
            command = ["bash", "-c", "exec \"$0\" --app \(app) --passphrase-fd 3 \"$@\" 3<'\(passphrase)'", product("securestore")] + arguments
        }
        if !binds.isEmpty {
            let script = "while [ \"$1\" != -- ]; do mount --bind \"$1\" \"$2\" || exit 99; shift 2; done; shift; exec \"$@\""
            command = ["unshare", "--mount", "sh", "-c", script, "sh"] + binds + ["--"] + command
        }
        return try TestSupport.run(command, input: Data(input.utf8), environment: environment)
    }

    /// Runs and expects success.
    @discardableResult
    func ok(_ arguments: [String], input: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
        let result = try run(arguments, input: input)
        #expect(result.status == 0, "\(app) \(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        return result
    }

    func tasks() throws -> [[String: String]] {
        let out = try ok(["--json", "tasks", "list", "--limit", "none"]).stdout
        let rows = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]] ?? []
        return rows.map { row in row.mapValues { "\($0)" } }.sorted { ($0["id"] ?? "") < ($1["id"] ?? "") }
    }

    /// The SHA-256 of the database and its -wal: what "nothing applied" means on disk.
    func databaseDigest() throws -> String {
        let base = data + "/" + app + "/tasks.db"
        var all = Data()
        for path in [base, base + "-wal"] { all += FileManager.default.contents(atPath: path) ?? Data() }
        let file = data + "/digest-input"
        try all.write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        return try TestSupport.run(["sha256sum", file]).stdout.prefix(64).description
    }

    /// What the database holds of what was applied: the tasks, each device's applied bundles (`sync devices`), the
    /// conflict log, this device's sent bundles and unsent rows. A refused sync leaves it the same; the database may
    /// still learn how far the chains reached (`sync_heads`, Docs/sync.md "A remote that lies").
    func appliedState() throws -> String {
        var state = try tasks().map { $0.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") }
            .joined(separator: "\n")
        state += try ok(["--json", "sync", "devices"]).stdout
        state += try ok(["--json", "sync", "conflicts"]).stdout
        let status = try JSONSerialization.jsonObject(with: Data(try ok(["--json", "sync", "status"]).stdout.utf8)) as? [String: Any] ?? [:]
        return state + "\(status["bundles"] ?? "") \(status["unsentRows"] ?? "")"
    }

    /// This device's sync id.
    func deviceID() throws -> String {
        let out = try ok(["--json", "sync", "status"]).stdout
        return (try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])?["device"] as? String ?? ""
    }
}

/// Two devices syncing through a folder under `directory`, A already holding one task ("Water the plants").
func syncedPair(under directory: String) throws -> (a: SyncCLIDevice, b: SyncCLIDevice, remote: String, id: String, code: String) {
    let a = SyncCLIDevice("a", under: directory), b = SyncCLIDevice("b", under: directory)
    let remote = directory + "/remote"
    let added = try JSONSerialization.jsonObject(with: Data(try a.ok(["--json", "tasks", "add", "Water", "the", "plants"]).stdout.utf8))
    let id = try #require((added as? [String: Any])?["id"] as? String)
    let code = try a.ok(["sync", "init", "--folder", remote]).stdout.trimmingCharacters(in: .newlines)
    try b.ok(["sync", "join", "--folder", remote], input: code + "\n")
    return (a, b, remote, id, code)
}

/// Every file of a folder remote with its SHA-256: what "the remote is unchanged" means.
func remoteDigest(_ remote: String) throws -> String {
    try TestSupport.run(["bash", "-c", "cd \"$0\" && find . -type f | LC_ALL=C sort | xargs -d '\\n' sha256sum", remote]).stdout
}

private func jsonObject(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

/// `securestore sync` end to end: the built tool, three devices, a real bare git repository and a real folder.
@Suite(.serialized) struct SyncCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// Three devices through a bare git repository: a title changed on A and a done mark on B are both kept, a task
    /// added on C arrives everywhere, an edit against a delete ends the same on every device with the unsent edit in
    /// the conflict log, and nothing readable is in the repository or its history (no title, no key, no code).
    @Test func threeDevicesThroughABareGitRepository() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path), c = SyncCLIDevice("c", under: work.path)
        let id = try #require(jsonObject(try a.ok(["--json", "tasks", "add", "Buy", "milk"]).stdout)["id"] as? String)
        let code = try #require(jsonObject(try a.ok(["--json", "sync", "init", "--git", remote]).stdout)["pairingCode"] as? String)
        #expect(code.count == 69)
        // A's bundle; C also gets B's first, empty bundle (a device announces itself when it joins).
        for (device, bundles) in [(b, 1), (c, 2)] {
            let joined = try device.ok(["--json", "sync", "join", "--git", remote], input: code + "\n")
            #expect(jsonObject(joined.stdout)["appliedBundles"] as? Int == bundles)
        }
        #expect(try b.tasks() == a.tasks())

        try a.ok(["tasks", "rename", id, "Buy", "oat", "milk"])
        try b.ok(["tasks", "done", id])
        try c.ok(["tasks", "add", "Call", "mum"])
        for device in [c, a, b, a, c] { try device.ok(["sync", "now"]) }
        let expected = try a.tasks()
        #expect(expected.count == 2)
        #expect(expected.contains { $0["id"] == id && $0["title"] == "Buy oat milk" && $0["done"] == "1" })
        #expect(try b.tasks() == expected)
        #expect(try c.tasks() == expected)
        for device in [a, b, c] { #expect(try device.ok(["--json", "sync", "conflicts"]).stdout == "[]\n") }

        // Edit against delete: B renames (unsent), then A deletes and syncs; B's edit is older than the delete.
        try b.ok(["tasks", "rename", id, "renamed", "on", "B"])
        Thread.sleep(forTimeInterval: 0.01)
        try a.ok(["tasks", "delete", id])
        for device in [a, b, c, a] { try device.ok(["sync", "now"]) }
        for device in [a, b, c] { #expect(try device.tasks().map { $0["title"] } == ["Call mum"]) }
        let conflicts = try JSONSerialization.jsonObject(with: Data(try b.ok(["--json", "sync", "conflicts"]).stdout.utf8)) as? [[String: Any]]
        #expect(conflicts?.first?["lostValue"] as? String == "renamed on B")
        #expect(conflicts?.first?["rowId"] as? String == id)
        let devices = try JSONSerialization.jsonObject(with: Data(try a.ok(["--json", "sync", "devices"]).stdout.utf8)) as? [[String: Any]]
        #expect(devices?.count == 3)

        // Nothing readable: every file of the bare repository, every object decompressed, and the history as patches.
        let clone = work.path + "/inspect"
        #expect(try git(["clone", "--quiet", remote, clone]).status == 0)
        var everything = Data()
        for file in filesUnder(remote) + filesUnder(clone) { everything += file.data }
        everything += Data(try git(["-C", clone, "log", "-p", "--all", "--format=%H %an %ae %s"]).stdout.utf8)
        everything += Data(try run(["bash", "-c", "git -C \"$0\" cat-file --batch-all-objects --batch", remote]).stdout.utf8)
        #expect(everything.count > 1_000)
        // The sync key as another client of A's store reads it (secret-tool, or A's key file with no D-Bus).
        let keyAccount = try #require(try StoreClient.accounts(service: a.app + ".sync-key", dataHome: a.data).first)
        let syncKey = try StoreClient.lookup(service: a.app + ".sync-key", account: keyAccount, dataHome: a.data) ?? ""
        #expect(syncKey.count == 64)
        var needles = ["Buy", "milk", "Call mum", "renamed on B", code, code.replacingOccurrences(of: "-", with: ""), syncKey, syncKey.uppercased()]
        needles += ["mum", id, id.replacingOccurrences(of: "-", with: "")]
        for needle in needles {
            #expect(everything.range(of: Data(needle.utf8)) == nil, "'\(needle.prefix(12))…' is readable in the remote")
        }
    }

    /// Bad bundles in the folder are refused by name with exit 65, and nothing of them reaches the database (its tasks,
    /// applied bundles, conflict log and unsent rows are unchanged): tampered (renamed to match, or not), truncated, reordered, replayed. Moved to a folder
    /// of an unknown device, or sealed by another sync group in its own folder: that folder is skipped and listed (exit
    /// 0) and nothing of it is applied. The genuine bundle then applies.
    @Test func badBundlesAreRefusedAndNothingIsApplied() throws {
        func namePart(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        try a.ok(["tasks", "add", "first"])
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--folder", folder], input: code + "\n")
        try a.ok(["tasks", "add", "second"])
        try a.ok(["sync", "now"])
        try a.ok(["tasks", "add", "third"])
        try a.ok(["sync", "now"])
        let deviceA = try a.deviceID()
        let dir = folder + "/devices/" + deviceA
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(names.count == 3)
        let genuine = try names.map { try Data(contentsOf: URL(fileURLWithPath: dir + "/" + $0)) }
        func sha(_ data: Data) throws -> String {
            let file = work.path + "/sha-input"
            try data.write(to: URL(fileURLWithPath: file))
            return String(try run(["sha256sum", file]).stdout.prefix(64))
        }
        func name(_ sequence: Int, _ data: Data) throws -> String { String(format: "%010d-", sequence) + (try sha(data)) }
        /// Replaces A's bundles 2 and 3 with `files` (name → bytes).
        func place(_ files: [(String, Data)], in directory: String? = nil) throws {
            for old in try FileManager.default.contentsOfDirectory(atPath: dir) where old != names[0] {
                try FileManager.default.removeItem(atPath: dir + "/" + old)
            }
            let target = directory ?? dir
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
            for (name, data) in files { try data.write(to: URL(fileURLWithPath: target + "/" + name)) }
        }
        let before = try b.tasks()
        #expect(before.map { $0["title"] } == ["first"])
        let digest = try b.appliedState()

        var flipped = genuine[1]
        flipped[flipped.count / 2] ^= 0x01
        let truncated = genuine[1].prefix(genuine[1].count - 20)
        // Sealed by another sync group (another key).
        let other = SyncCLIDevice("x", under: work.path)
        try other.ok(["tasks", "add", "foreign"])
        try other.ok(["sync", "init", "--folder", work.path + "/other"])
        let otherID = try other.deviceID()
        let foreign = try Data(contentsOf: URL(fileURLWithPath: work.path + "/other/devices/" + otherID + "/" + (try FileManager.default.contentsOfDirectory(atPath: work.path + "/other/devices/" + otherID)[0])))
        let stranger = String(repeating: "ab", count: 16)
        let cases: [(String, [(String, Data)], String?, String)] = [
            ("tampered, renamed to match", [(try name(2, flipped), flipped)], nil, try name(2, flipped)),
            ("tampered, name kept", [(names[1], flipped)], nil, names[1]),
            ("truncated", [(try name(2, Data(truncated)), Data(truncated))], nil, try name(2, Data(truncated))),
            ("reordered", [(try name(2, genuine[2]), genuine[2])], nil, try name(2, genuine[2])),
            ("replayed", [(try name(2, genuine[0]), genuine[0])], nil, try name(2, genuine[0])),
            ("moved to another device's folder", [(names[0], genuine[0])], folder + "/devices/" + stranger, names[0]),
            ("from another sync group", [(try name(1, foreign), foreign)], folder + "/devices/" + otherID, try name(1, foreign)),
        ]
        for (label, files, directory, shown) in cases {
            try place(files, in: directory)
            if let directory {
                // In a folder of its own, of a device never applied here, a bundle that does not authenticate as that
                // device's makes the folder a planted one: skipped and listed, not an error (issue 32: a planted
                // folder stops nobody), and nothing of it applied.
                let result = try b.run(["--json", "sync", "now"])
                #expect(result.status == 0, "\(label): \(result.status) \(result.stderr)")
                let skipped = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])?["skippedFiles"]
                #expect(skipped as? [String] == ["devices/" + namePart(directory)], "\(label): \(result.stdout)")
                #expect(try b.tasks() == before, "\(label)")
                try FileManager.default.removeItem(atPath: directory)
                continue
            }
            let result = try b.run(["sync", "now"])
            #expect(result.status == 65, "\(label): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("refused the bundle"), "\(label): \(result.stderr)")
            #expect(result.stderr.contains(shown), "\(label): the error names \(shown): \(result.stderr)")
            #expect(result.stderr.contains("nothing of it was applied"), "\(label)")
            let state = try b.appliedState()
            #expect(state == digest, "\(label): something was applied: \(state) vs \(digest)")
            #expect(try b.tasks() == before, "\(label)")
        }
        // The genuine bundles: applied.
        try place([(names[1], genuine[1]), (names[2], genuine[2])])
        try b.ok(["sync", "now"])
        #expect(try b.tasks().compactMap { $0["title"] }.sorted() == ["first", "second", "third"])
    }

    /// Files that replication engines leave in a folder are ignored: Syncthing's temporaries and conflict copies,
    /// Nextcloud's partial downloads.
    @Test func replicationLeftoversAreIgnored() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        try a.ok(["tasks", "add", "only"])
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        let dir = folder + "/devices/" + (try a.deviceID())
        let name = try #require(try FileManager.default.contentsOfDirectory(atPath: dir).first)
        for junk in [".syncthing.\(name).tmp", "\(name).sync-conflict-20260101-120000-ABCDEFG", ".~\(name)", "\(name).part", "notes.txt"] {
            try Data("junk".utf8).write(to: URL(fileURLWithPath: dir + "/" + junk))
        }
        try FileManager.default.createDirectory(atPath: folder + "/devices/.stfolder", withIntermediateDirectories: true)
        let joined = try b.ok(["--json", "sync", "join", "--folder", folder], input: code + "\n")
        #expect(jsonObject(joined.stdout)["appliedBundles"] as? Int == 1)
        #expect(try b.tasks().map { $0["title"] } == ["only"])
    }

    /// A wrong pairing code: a mistyped one names the group, a well-formed other key is refused against the remote;
    /// nothing is stored either way (no database, no key item).
    @Test func aWrongPairingCodeChangesNothing() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        var typo = Array(code)
        try #require(typo.count > 6, "sync init printed a pairing code")
        typo[6] = typo[6] == "7" ? "8" : "7"
        let mistyped = try b.run(["sync", "join", "--folder", folder], input: String(typo) + "\n")
        #expect(mistyped.status == 65, "\(mistyped.stderr)")
        #expect(mistyped.stderr.contains("pairing code"), "\(mistyped.stderr)")
        #expect(!mistyped.stderr.contains(String(typo)))
        let other = try SyncCLIDevice("x", under: work.path).ok(["sync", "init", "--folder", work.path + "/other"]).stdout
        let wrong = try b.run(["sync", "join", "--folder", folder], input: other)
        #expect(wrong.status == 65, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("not the key of the sync group"), "\(wrong.stderr)")
        let status = try b.run(["sync", "status"])
        #expect(status.status == 66, "\(status.stderr)")
    }

    /// Two devices pushing to one bare repository at the same moment: the loser fetches, puts its commit on top
    /// (never a merge of bundle files) and pushes again; both exit 0 and every change reaches the third device.
    @Test func aGitPushRaceIsResolvedByFetchingAndPushingAgain() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path), c = SyncCLIDevice("c", under: work.path)
        let code = try a.ok(["sync", "init", "--git", remote]).stdout.trimmingCharacters(in: .newlines)
        for device in [b, c] { try device.ok(["sync", "join", "--git", remote], input: code + "\n") }
        for round in 0..<4 {
            try b.ok(["tasks", "add", "from b \(round)"])
            try c.ok(["tasks", "add", "from c \(round)"])
            let racers = try [b, c].map { device in
                try ChildProcess(
                    [product("securestore"), "--app", device.app, "sync", "now"], environment: device.environment)
            }
            for racer in racers { #expect(racer.wait() == .exited(0)) }
        }
        try a.ok(["sync", "now"])
        #expect(try a.tasks().count == 8)
        let merges = try git(["-C", remote, "log", "--merges", "--oneline", "main"]).stdout
        #expect(merges.isEmpty, "merge commits: \(merges)")
    }

    /// `sync now` killed with SIGKILL at a different moment each time, then run again: nothing is lost or applied
    /// twice, and the devices end with the same tasks.
    @Test func aSyncKilledAtAnyMomentLosesNothing() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--folder", folder], input: code + "\n")
        for round in 0..<12 {
            try a.ok(["tasks", "add", "a \(round)"])
            try b.ok(["tasks", "add", "b \(round)"])
            for device in [a, b] {
                let child = try ChildProcess(
                    [product("securestore"), "--app", device.app, "sync", "now"], environment: device.environment)
                usleep(UInt32(round * 4_000))
                child.kill()
                _ = child.wait()
            }
        }
        for device in [a, b, a] { try device.ok(["sync", "now"]) }
        let expected = try a.tasks()
        #expect(expected.count == 24)
        #expect(try b.tasks() == expected)
    }

    /// `sync remove-device` replaces the key: the devices that stay re-key with the new pairing code and go on, the
    /// removed one keeps what it had, is told the key was replaced (77), cannot read what comes after, and its old
    /// code does not re-key it.
    @Test func aRemovedDeviceReadsNothingThatComesAfter() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path), c = SyncCLIDevice("c", under: work.path)
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        for device in [b, c] { try device.ok(["sync", "join", "--folder", folder], input: code + "\n") }
        try c.ok(["tasks", "add", "from c before"])
        for device in [c, a, b] { try device.ok(["sync", "now"]) }
        let deviceA = try a.deviceID(), deviceC = try c.deviceID()
        #expect(try a.run(["sync", "remove-device", String(deviceA.prefix(8))]).status == 66)
        #expect(try a.run(["sync", "remove-device", "0123456789"]).status == 66)

        let removal = jsonObject(try a.ok(["--json", "sync", "remove-device", String(deviceC.prefix(8))]).stdout)
        #expect(removal["removedDevice"] as? String == deviceC)
        let newCode = try #require(removal["pairingCode"] as? String)
        #expect(newCode != code)
        try a.ok(["tasks", "add", "secret", "after", "removal"])
        try a.ok(["sync", "now"])

        let stale = try b.run(["sync", "now"])
        #expect(stale.status == 77, "\(stale.stderr)")
        #expect(stale.stderr.contains("sync rekey"), "\(stale.stderr)")
        try b.ok(["sync", "rekey"], input: newCode + "\n")
        #expect(Set(try b.tasks().compactMap { $0["title"] }) == ["from c before", "secret after removal"])
        try b.ok(["tasks", "add", "b after"])
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        #expect(try a.tasks() == b.tasks())

        #expect(try c.run(["sync", "now"]).status == 77)
        let oldCode = try c.run(["sync", "rekey"], input: code + "\n")
        #expect(oldCode.status == 65, "\(oldCode.stderr)")
        #expect(try c.tasks().compactMap { $0["title"] } == ["from c before"])
        for needle in ["secret after removal", "b after", "from c before", newCode, code] {
            #expect(filesContaining(needle, under: folder).isEmpty, "'\(needle.prefix(8))' readable in the folder")
        }
    }

    /// Several `sync now` of one device at once (a timer and a person) wait for each other: no two bundles share a
    /// number, and the other device applies them all. (The race is narrow: with the lock disabled this test did not
    /// see a fork either in one run; the lock is there by design, this checks that the waiting works.)
    @Test func concurrentSyncsOfOneDeviceNeverForkItsChain() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--folder", folder], input: code + "\n")
        for round in 0..<3 {
            for index in 0..<3 { try a.ok(["tasks", "add", "task \(round).\(index)"]) }
            let racers = try (0..<4).map { _ in
                try ChildProcess([product("securestore"), "--app", a.app, "sync", "now"], environment: a.environment)
            }
            for racer in racers { #expect(racer.wait() == .exited(0)) }
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder + "/devices/" + (try a.deviceID()))
        let numbers = names.map { $0.prefix(10) }
        #expect(Set(numbers).count == numbers.count, "\(names.sorted())")
        try b.ok(["sync", "now"])
        #expect(try b.tasks().count == 9)
    }

    /// This device's folder on the remote replaced by a symbolic link to elsewhere on the machine: nothing is written
    /// through it (exit 69), and the target stays empty.
    @Test func aSymbolicLinkInTheRemoteLeadsNowhere() throws {
        let folder = work.path + "/shared", elsewhere = work.path + "/elsewhere"
        let a = SyncCLIDevice("a", under: work.path)
        try a.ok(["sync", "init", "--folder", folder])
        let mine = folder + "/devices/" + (try a.deviceID())
        try FileManager.default.removeItem(atPath: mine)
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: mine, withDestinationPath: elsewhere)
        try a.ok(["tasks", "add", "not through the link"])
        let result = try a.run(["sync", "now"])
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("symbolic link"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
    }
}
