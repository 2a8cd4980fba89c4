import Foundation
import TestSupport
import Testing

/// The titles of a device's tasks, sorted.
private func titles(_ device: SyncCLIDevice) throws -> [String] {
    try device.tasks().compactMap { $0["title"] }.sorted()
}

private func jsonObject(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

/// 64 hexadecimal digits: a name of the shape of a bundle's hash.
private func fakeHash(_ seed: Character) -> String { String(repeating: String(seed), count: 64) }

/// A remote that someone with write access and no keys turns against the group (issue 32): planted files, a remote
/// restored from an older copy, deleted bundles, rewritten git history. Each case: the message and exit status,
/// nothing wrong applied, nothing lost, and the group syncing again afterwards.
@Suite(.serialized) struct SyncHostileRemoteCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// A symbolic link, a folder and a FIFO named like bundles, a FIFO named like a seen vector, a symbolic link named
    /// like a device folder and a device folder of garbage: every sync skips and lists them (exit 0), A's new task
    /// still goes out and arrives, `sync clean` goes on around them, and `remove-device` of the garbage folder says what
    /// it is (66) and changes nothing.
    @Test func plantedFilesAreSkippedListedAndStopNobody() throws {
        let (a, b, remote, _, _) = try syncedPair(under: work.path)
        try a.ok(["sync", "now"])
        let idA = try a.deviceID(), idB = try b.deviceID()
        let garbageID = String(repeating: "e", count: 32)
        let planted = [
            "devices/\(idB)/0000000009-\(fakeHash("a"))",  // a symbolic link to a file of this machine
            "devices/\(idA)/0000000010-\(fakeHash("b"))",  // a folder
            "devices/\(idB)/0000000011-\(fakeHash("c"))",  // a FIFO: a reader that opened it would hang
            "seen/\(idB)/0000000099",  // a FIFO named like a seen vector
            "devices/" + String(repeating: "d", count: 32),  // a symbolic link named like a device folder
        ]
        try FileManager.default.createSymbolicLink(atPath: remote + "/" + planted[0], withDestinationPath: "/etc/passwd")
        try FileManager.default.createDirectory(atPath: remote + "/" + planted[1], withIntermediateDirectories: true)
        #expect(try TestSupport.run(["mkfifo", remote + "/" + planted[2]]).status == 0)
        try FileManager.default.createDirectory(atPath: remote + "/seen/\(idB)", withIntermediateDirectories: true)
        #expect(try TestSupport.run(["mkfifo", remote + "/" + planted[3]]).status == 0)
        try FileManager.default.createSymbolicLink(atPath: remote + "/" + planted[4], withDestinationPath: work.path)
        let garbage = Data("not a bundle at all".utf8)
        let digest = try TestSupport.run(["bash", "-c", "printf %s \"$0\" | sha256sum", "not a bundle at all"]).stdout.prefix(64)
        let garbageFile = "devices/\(garbageID)/0000000001-\(digest)"
        try FileManager.default.createDirectory(atPath: remote + "/devices/\(garbageID)", withIntermediateDirectories: true)
        try garbage.write(to: URL(fileURLWithPath: remote + "/" + garbageFile))

        try a.ok(["tasks", "add", "sent past the planted files"])
        let now = try a.run(["--json", "sync", "now"])
        #expect(now.status == 0, "\(now.stderr)")
        let skipped = Set(jsonObject(now.stdout)["skippedFiles"] as? [String] ?? [])
        #expect(skipped == Set(planted + ["devices/\(garbageID)"]), "\(now.stdout)")
        #expect((jsonObject(now.stdout)["sentBundles"] as? Int ?? 0) >= 1)
        let text = try b.run(["sync", "now"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stderr.contains("skipped 6 file(s) on the remote that are not what their names say"), "\(text.stderr)")
        #expect(text.stderr.contains("devices/\(garbageID)"))
        #expect(try titles(b).contains("sent past the planted files"))
        #expect(try titles(a) == (try titles(b)))

        // The cleanup goes on around them, and removes none in another device's folder (B replaced the FIFO in its own
        // seen folder as it replaces its own older vectors: a device only ever removes its own files).
        try a.ok(["sync", "snapshot"])
        let clean = try a.run(["--json", "sync", "clean"])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect((jsonObject(clean.stdout)["waitingFor"] as? [String] ?? []).allSatisfy { $0 != garbageID }, "\(clean.stdout)")
        #expect(!FileManager.default.fileExists(atPath: remote + "/" + planted[3]))
        for path in planted.filter({ $0 != planted[3] }) + [garbageFile] {
            #expect((try? FileManager.default.attributesOfItem(atPath: remote + "/" + path)) != nil, "\(path)")
        }

        // remove-device of the garbage folder: a clear error, nothing changed (the key stays: no new generation).
        let before = try remoteDigest(remote)
        let removal = try a.run(["sync", "remove-device", String(garbageID.prefix(8))])
        #expect(removal.status == 66, "\(removal.stderr)")
        #expect(removal.stderr.contains("is not a device of the group"), "\(removal.stderr)")
        #expect(removal.stderr.contains("devices/\(garbageID)"), "\(removal.stderr)")
        #expect(try remoteDigest(remote) == before)
        #expect(!FileManager.default.fileExists(atPath: remote + "/generation-2"))

        // The group syncs on.
        try b.ok(["tasks", "add", "after the cleanup"])
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        #expect(try titles(a).contains("after the cleanup"))
        #expect(try titles(a) == (try titles(b)))
    }

    /// The same through git: a symbolic link named like A's next bundle, committed and pushed by someone with access,
    /// is skipped and listed (not followed: /etc/passwd is never read as a bundle), and both devices go on.
    @Test func aSymbolicLinkCommittedToGitIsSkipped() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        try a.ok(["tasks", "add", "first"])
        let code = try a.ok(["sync", "init", "--git", remote]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        let idA = try a.deviceID()
        let attacker = work.path + "/attacker"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, attacker]).status == 0)
        let link = "devices/\(idA)/0000000002-\(fakeHash("f"))"
        try FileManager.default.createSymbolicLink(atPath: attacker + "/" + link, withDestinationPath: "/etc/passwd")
        #expect(try git(["-C", attacker, "add", "-A"]).status == 0)
        #expect(try git(["-C", attacker, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-m", "plant"]).status == 0)
        #expect(try git(["-C", attacker, "push", "--quiet", "origin", "HEAD:main"]).status == 0)

        try a.ok(["tasks", "add", "second"])
        let now = try a.run(["--json", "sync", "now"])
        #expect(now.status == 0, "\(now.stderr)")
        #expect(jsonObject(now.stdout)["skippedFiles"] as? [String] == [link], "\(now.stdout)")
        let joined = try b.run(["--json", "sync", "now"])
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(try titles(b) == ["first", "second"])
        #expect(try titles(a) == (try titles(b)))
    }

    /// `sync join` on a device that syncs already refuses (73) before it fetches or clones anything: the other group's
    /// remote is not cloned, the database is unchanged, and the device syncs with its own group as before.
    @Test func joinOnASyncingDeviceRefusesAndChangesNothing() throws {
        let (a, b, _, _, _) = try syncedPair(under: work.path)
        let other = SyncCLIDevice("other", under: work.path)
        let otherRemote = work.path + "/other.git"
        #expect(try git(["init", "--quiet", "--bare", otherRemote]).status == 0)
        let otherCode = try other.ok(["sync", "init", "--git", otherRemote]).stdout.trimmingCharacters(in: .newlines)
        let digest = try b.databaseDigest()
        let refused = try b.run(["sync", "join", "--git", otherRemote], input: otherCode + "\n")
        #expect(refused.status == 73, "\(refused.stderr)")
        #expect(refused.stderr.contains("sync is already set up on database 'tasks'"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b.data + "/" + b.app + "/tasks.sync"))
        #expect(try b.databaseDigest() == digest)
        try a.ok(["tasks", "add", "still one group"])
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        #expect(try titles(b).contains("still one group"))
    }

    // MARK: A remote that rolls back or deletes

    /// Adds a task and returns its ID.
    private func add(_ device: SyncCLIDevice, _ title: String) throws -> String {
        let out = try device.ok(["--json", "tasks", "add"] + title.split(separator: " ").map(String.init)).stdout
        return try #require(jsonObject(out)["id"] as? String)
    }

    /// The hostile remote owner's first try: the folder restored from an older copy after B deleted a task. No device
    /// shows the deleted task again; A (which had applied B's bundle) exits 65 naming B's missing bundle; a device that
    /// joins meanwhile applies nothing of the stale state and lists B's bundle; B sends its lost bundle again (65,
    /// saying so) from its copies; then everyone exits 0 with the same tasks, and the group syncs on.
    @Test func aFolderRestoredFromAnOlderCopyBringsNothingBack() throws {
        let remote = work.path + "/remote", older = work.path + "/older-copy"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let victim = try add(a, "victim task")
        let code = try a.ok(["sync", "init", "--folder", remote]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--folder", remote], input: code + "\n")
        try a.ok(["sync", "now"])
        #expect(try TestSupport.run(["cp", "-a", remote, older]).status == 0)
        try b.ok(["tasks", "delete", victim])
        _ = try add(b, "added by B after")
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        let idB = try b.deviceID()
        let expected = ["added by B after"]
        #expect(try titles(a) == expected)

        // The remote's owner restores the older copy.
        try FileManager.default.removeItem(atPath: remote)
        #expect(try TestSupport.run(["cp", "-a", older, remote]).status == 0)

        let seenByA = try a.run(["--json", "sync", "now"])
        #expect(seenByA.status == 65, "\(seenByA.stderr)")
        #expect(seenByA.stderr.contains("the remote is missing device \(idB.prefix(8))'s bundle"), "\(seenByA.stderr)")
        #expect(seenByA.stderr.contains("restored from an older copy"), "\(seenByA.stderr)")
        let missing = jsonObject(seenByA.stdout)["missingBundles"] as? [String] ?? []
        #expect(missing.contains { $0.hasPrefix("devices/\(idB)/") }, "\(seenByA.stdout)")
        #expect(try titles(a) == expected)

        // A device that joins now learns B's head from A's seen vector: it applies nothing and lists B's bundle.
        let d = SyncCLIDevice("d", under: work.path)
        let joined = try d.run(["--json", "sync", "join", "--folder", remote], input: code + "\n")
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect((jsonObject(joined.stdout)["missingBundles"] as? [String] ?? []).contains { $0.hasPrefix("devices/\(idB)/") }, "\(joined.stdout)")
        #expect((jsonObject(joined.stdout)["appliedBundles"] as? Int) == 0, "\(joined.stdout)")
        #expect(try titles(d).isEmpty)

        // B finds its own bundle gone and sends it again.
        let resent = try b.run(["--json", "sync", "now"])
        #expect(resent.status == 65, "\(resent.stderr)")
        #expect(resent.stderr.contains("of this device's own bundle(s) had vanished from the remote"), "\(resent.stderr)")
        #expect((jsonObject(resent.stdout)["resentBundles"] as? Int ?? 0) >= 1, "\(resent.stdout)")

        // Everyone converges, exit 0, and the deleted task stays deleted.
        for device in [a, d, b, a, d] { try device.ok(["sync", "now"]) }
        for device in [a, b, d] { #expect(try titles(device) == expected, "\(device.app)") }
        try d.ok(["tasks", "done-all", "--yes"])
        _ = try add(d, "added by D")
        for device in [d, a, b, d] { try device.ok(["sync", "now"]) }
        for device in [a, b, d] {
            #expect(try titles(device) == ["added by B after", "added by D"], "\(device.app)")
            #expect(try device.tasks().allSatisfy { $0["id"] != victim })
        }
    }

    /// The same through a bare git repository, the old tree restored by an ordinary commit or by a force-push of the
    /// old commit: A exits 65 naming B's bundle, a device that joins exits 65 too (git delivers whole trees: not a late
    /// delivery) and applies nothing, B sends its bundle again, and all converge without the deleted task.
    @Test(arguments: ["commit", "force-push"]) func aGitRemoteRolledBackBringsNothingBack(_ how: String) throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let victim = try add(a, "victim task")
        let code = try a.ok(["sync", "init", "--git", remote]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        try a.ok(["sync", "now"])
        let old = try git(["-C", remote, "rev-parse", "main"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try b.ok(["tasks", "delete", victim])
        _ = try add(b, "added by B after")
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        let idB = try b.deviceID()

        let attacker = work.path + "/attacker"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, attacker]).status == 0)
        let identity = ["-c", "user.name=x", "-c", "user.email=x@x"]
        if how == "commit" {
            #expect(try git(["-C", attacker, "rm", "-rq", "."]).status == 0)
            #expect(try git(["-C", attacker, "checkout", old, "--", "."]).status == 0)
            #expect(try git(["-C", attacker] + identity + ["commit", "--quiet", "-m", "restore"]).status == 0)
            #expect(try git(["-C", attacker, "push", "--quiet", "origin", "HEAD:main"]).status == 0)
        } else {
            #expect(try git(["-C", attacker, "push", "--quiet", "--force", "origin", old + ":main"]).status == 0)
        }

        let seenByA = try a.run(["sync", "now"])
        #expect(seenByA.status == 65, "\(how): \(seenByA.stderr)")
        #expect(seenByA.stderr.contains("the remote is missing device \(idB.prefix(8))'s bundle"), "\(how): \(seenByA.stderr)")
        #expect(try titles(a) == ["added by B after"])

        let d = SyncCLIDevice("d", under: work.path)
        let joined = try d.run(["--json", "sync", "join", "--git", remote], input: code + "\n")
        #expect(joined.status == 65, "\(how): \(joined.stderr)")
        #expect(joined.stderr.contains("a verified seen vector says its chain reached"), "\(how): \(joined.stderr)")
        #expect((jsonObject(joined.stdout)["appliedBundles"] as? Int) == 0, "\(how): \(joined.stdout)")
        #expect(try titles(d).isEmpty)

        let resent = try b.run(["sync", "now"])
        #expect(resent.status == 65, "\(how): \(resent.stderr)")
        #expect(resent.stderr.contains("had vanished from the remote"), "\(how): \(resent.stderr)")
        for device in [a, d, b, a, d] { try device.ok(["sync", "now"]) }
        for device in [a, b, d] { #expect(try titles(device) == ["added by B after"], "\(how): \(device.app)") }
        _ = try add(d, "added by D")
        for device in [d, a, b] { try device.ok(["sync", "now"]) }
        for device in [a, b] { #expect(try titles(device) == ["added by B after", "added by D"], "\(how)") }
    }

    /// A bundle deleted from the middle of B's chain in git (2 gone while 3 is there): a device that joins exits 65
    /// naming it and applies nothing of B's chain; B sends it again; then the device holds every task.
    @Test func aHoleInsideAChainIsReportedAtOnceOnGit() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let code = try a.ok(["sync", "init", "--git", remote]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        for title in ["b two", "b three"] {
            _ = try add(b, title)
            try b.ok(["sync", "now"])
        }
        let idB = try b.deviceID()
        let attacker = work.path + "/attacker"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, attacker]).status == 0)
        let second = try #require(
            try FileManager.default.contentsOfDirectory(atPath: attacker + "/devices/" + idB).first { $0.hasPrefix("0000000002-") })
        #expect(try git(["-C", attacker, "rm", "-q", "devices/\(idB)/\(second)"]).status == 0)
        #expect(try git(["-C", attacker, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-m", "hole"]).status == 0)
        #expect(try git(["-C", attacker, "push", "--quiet", "origin", "HEAD:main"]).status == 0)

        let d = SyncCLIDevice("d", under: work.path)
        let joined = try d.run(["--json", "sync", "join", "--git", remote], input: code + "\n")
        #expect(joined.status == 65, "\(joined.stderr)")
        #expect(joined.stderr.contains("the remote is missing device \(idB.prefix(8))'s bundle 2"), "\(joined.stderr)")
        #expect(joined.stderr.contains("deleted from the middle of the chain"), "\(joined.stderr)")
        #expect((jsonObject(joined.stdout)["missingBundles"] as? [String] ?? []).contains("devices/\(idB)/0000000002-…"), "\(joined.stdout)")
        #expect(try titles(d).isEmpty)

        let resent = try b.run(["sync", "now"])
        #expect(resent.status == 65, "\(resent.stderr)")
        try d.ok(["sync", "now"])
        #expect(try titles(d) == ["b three", "b two"])
        try a.ok(["sync", "now"])
        #expect(try titles(a) == ["b three", "b two"])
    }

    // MARK: A git transport that cannot be jammed

    /// Two devices through a bare git repository, A holding "first"; returns them and the repository.
    private func gitPair() throws -> (a: SyncCLIDevice, b: SyncCLIDevice, remote: String) {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        _ = try add(a, "first")
        let code = try a.ok(["sync", "init", "--git", remote]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        try a.ok(["sync", "now"])
        return (a, b, remote)
    }

    private func attackerClone(_ remote: String) throws -> String {
        let attacker = work.path + "/attacker-\(UUID().uuidString.prefix(8))"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, attacker]).status == 0)
        return attacker
    }

    private let identity = ["-c", "user.name=x", "-c", "user.email=x@x"]

    /// A clone left in the middle of a rebase (as an earlier version left it after a rewritten commit: every sync then
    /// exited 69 "git rebase failed"): the next sync abandons the rebase, exits 0, and its task arrives.
    @Test func aCloneLeftMidRebaseSyncsAgain() throws {
        let (a, b, _) = try gitPair()
        let clone = a.data + "/" + a.app + "/tasks.sync"
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_SEQUENCE_EDITOR"] = "sed -i s/^pick/edit/"
        let stopped = try git(["-C", clone] + identity + ["rebase", "-i", "HEAD~1"], environment: environment)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(FileManager.default.fileExists(atPath: clone + "/.git/rebase-merge"))
        _ = try add(a, "after the rebase")
        let now = try a.run(["sync", "now"])
        #expect(now.status == 0, "\(now.stderr)")
        #expect(!FileManager.default.fileExists(atPath: clone + "/.git/rebase-merge"))
        try b.ok(["sync", "now"])
        #expect(try titles(b) == ["after the rebase", "first"])
    }

    /// An already-fetched commit rewritten and force-pushed (same files, another history): taken as it is, nothing lost,
    /// both devices go on (exit 0), and no merge or replayed commit appears.
    @Test func rewrittenHistoryIsTakenAsItIs() throws {
        let (a, b, remote) = try gitPair()
        let attacker = try attackerClone(remote)
        #expect(try git(["-C", attacker] + identity + ["commit", "--quiet", "--amend", "-m", "rewritten"]).status == 0)
        #expect(try git(["-C", attacker, "push", "--quiet", "--force", "origin", "HEAD:main"]).status == 0)
        let rewritten = try git(["-C", remote, "rev-parse", "main"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try add(a, "after the rewrite")
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        #expect(try titles(b) == ["after the rewrite", "first"])
        #expect(try titles(a) == (try titles(b)))
        #expect(try git(["-C", remote, "merge-base", "--is-ancestor", rewritten, "main"]).status == 0, "built on the rewritten history")
        #expect(try git(["-C", remote, "rev-list", "--merges", "--count", "main"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }

    /// A tampering commit (B's newest bundle flipped) that A fetched and refused (65), then the last good commit
    /// force-pushed back: A takes the good history (B's task applied; its own bundle pushed meanwhile, which the
    /// force-push dropped, sent again: 65 saying so), pushes nothing of the attack back, and the remote's bundle is B's
    /// genuine one; then all exit 0.
    @Test func aTamperingCommitUndoneByAForcePushStaysUndone() throws {
        let (a, b, remote) = try gitPair()
        _ = try add(b, "from B")
        try b.ok(["sync", "now"])
        let good = try git(["-C", remote, "rev-parse", "main"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let idB = try b.deviceID()
        let attacker = try attackerClone(remote)
        let folder = attacker + "/devices/" + idB
        let newest = try #require(try FileManager.default.contentsOfDirectory(atPath: folder).sorted().last)
        let genuine = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + newest))
        var flipped = genuine
        flipped[flipped.count / 2] ^= 0x01
        try flipped.write(to: URL(fileURLWithPath: folder + "/" + newest))
        #expect(try git(["-C", attacker] + identity + ["commit", "--quiet", "-am", "tamper"]).status == 0)
        #expect(try git(["-C", attacker, "push", "--quiet", "origin", "HEAD:main"]).status == 0)
        let tamper = try git(["-C", remote, "rev-parse", "main"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        _ = try add(a, "from A meanwhile")
        let refused = try a.run(["sync", "now"])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("refused the bundle"), "\(refused.stderr)")
        #expect(!(try titles(a)).contains("from B"))

        // The force-push also dropped A's bundle pushed on top of the attack: A sends it again, saying so.
        #expect(try git(["-C", attacker, "push", "--quiet", "--force", "origin", good + ":main"]).status == 0)
        let back = try a.run(["sync", "now"])
        #expect(back.status == 65, "\(back.stderr)")
        #expect(back.stderr.contains("had vanished from the remote"), "\(back.stderr)")
        #expect(try titles(a).contains("from B"))
        try b.ok(["sync", "now"])
        try a.ok(["sync", "now"])
        #expect(try titles(a) == ["first", "from A meanwhile", "from B"])
        #expect(try titles(b) == (try titles(a)))
        #expect(try git(["-C", remote, "merge-base", "--is-ancestor", tamper, "main"]).status != 0, "the attack was not pushed back")
        let inspect = try attackerClone(remote)
        #expect(try Data(contentsOf: URL(fileURLWithPath: inspect + "/devices/" + idB + "/" + newest)) == genuine)
    }

    // MARK: Small things

    /// The process id of a process that has ended (its temporary files are a dead process's leftovers).
    private func deadProcessID() throws -> String {
        try TestSupport.run(["sh", "-c", "sh -c 'echo $$' "]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A killed sync's empty temporary files in this device's seen and bundle folders of a folder remote: `sync clean`
    /// removes them (`removedTemporaryFiles`), and nobody else's.
    @Test func aKilledSyncsTemporaryFilesAreRemovedByClean() throws {
        let (a, b, remote, _, _) = try syncedPair(under: work.path)
        try a.ok(["sync", "now"])
        let idA = try a.deviceID(), idB = try b.deviceID()
        let pid = try deadProcessID()
        let mine = ["seen/\(idA)/.0000000007.tmp-\(pid)-1f2e", "devices/\(idA)/.0000000009-\(fakeHash("a")).tmp-\(pid)-3c4d"]
        let theirs = "seen/\(idB)/.0000000007.tmp-\(pid)-5e6f"
        for path in mine + [theirs] {
            try FileManager.default.createDirectory(atPath: remote + "/" + directoryOf(path), withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: remote + "/" + path, contents: Data()))
        }
        try a.ok(["sync", "snapshot"])
        let clean = try a.run(["--json", "sync", "clean"])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(jsonObject(clean.stdout)["removedTemporaryFiles"] as? Int == 2, "\(clean.stdout)")
        for path in mine { #expect(!FileManager.default.fileExists(atPath: remote + "/" + path), "\(path)") }
        #expect(FileManager.default.fileExists(atPath: remote + "/" + theirs), "another device's folder is its own")
        try b.ok(["sync", "now"])
    }

    private func directoryOf(_ path: String) -> String { path.split(separator: "/").dropLast().joined(separator: "/") }

    /// Through git: a killed sync's temporary file in the clone is never committed, and every commit's title is
    /// "sync" (issue 35: titles named the device, the bundle number and the kind of change).
    @Test func gitCommitsHoldNoTemporaryFileAndSayWhatTheyPublish() throws {
        let (a, b, remote) = try gitPair()
        let idA = try a.deviceID()
        let clone = a.data + "/" + a.app + "/tasks.sync"
        let leftover = "seen/\(idA)/.0000000007.tmp-\(try deadProcessID())-1f2e"
        try FileManager.default.createDirectory(atPath: clone + "/seen/" + idA, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: clone + "/" + leftover, contents: Data()))
        _ = try add(a, "second")
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])  // applies A's bundle: publishes only its seen vector
        let tree = try git(["-C", remote, "ls-tree", "-r", "--name-only", "main"]).stdout
        #expect(!tree.contains(".tmp-"), "\(tree)")
        // Every commit says "sync": nothing a listing of the files does not (no device, bundle number or kind of change).
        let titles = try git(["-C", remote, "log", "--format=%s", "main"]).stdout
        let lines = titles.split(separator: "\n")
        #expect(lines.count >= 3 && lines.allSatisfy { $0 == "sync" }, "\(titles)")
        #expect(!titles.contains(String(idA.prefix(8))), "\(titles)")
    }
}
