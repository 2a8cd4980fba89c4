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

/// Joining a sync group without its pairing code (issue 32): `sync request` on the new device, `sync approve` on a
/// device of the group, `sync join --approved-by` on the new device; and what someone who can write the remote
/// without the keys, or a removed device, can do against it.
@Suite(.serialized) struct SyncApproveCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    private func directoryOf(_ path: String) -> String { path.split(separator: "/").dropLast().joined(separator: "/") }

    /// A and B in a group through `kind` ("folder" or "git"), each holding a task.
    private func group(_ kind: String) throws -> (a: SyncCLIDevice, b: SyncCLIDevice, option: [String], remote: String) {
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let remote = work.path + (kind == "git" ? "/remote.git" : "/remote")
        if kind == "git" { #expect(try TestSupport.run(["git", "init", "--quiet", "--bare", remote]).status == 0) }
        let option = ["--" + kind, remote]
        try a.ok(["tasks", "add", "from A"])
        let code = try a.ok(["sync", "init"] + option).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["tasks", "add", "from B"])
        try b.ok(["sync", "join"] + option, input: code + "\n")
        try a.ok(["sync", "now"])
        return (a, b, option, remote)
    }

    /// The files of the remote as a device sees them (the folder, or a fresh clone of the bare repository).
    private func remoteFiles(_ remote: String) throws -> String {
        guard remote.hasSuffix(".git") else { return try remoteDigest(remote) }
        let clone = work.path + "/look-\(UUID().uuidString.prefix(8))"
        #expect(try TestSupport.run(["git", "clone", "--quiet", "--branch", "main", remote, clone]).status == 0)
        defer { try? FileManager.default.removeItem(atPath: clone) }
        try? FileManager.default.removeItem(atPath: clone + "/.git")
        return try remoteDigest(clone)
    }

    /// C asks, A approves C's fingerprint, C joins with A's fingerprint; then a task added on each device reaches all
    /// three, and the request and grant are gone from the remote. Before the approval, C's join says there is no grant
    /// yet (66) and sets nothing up.
    @Test(arguments: ["folder", "git"]) func anApprovedDeviceJoinsAndAllThreeConverge(_ kind: String) throws {
        let (a, b, option, remote) = try group(kind)
        let c = SyncCLIDevice("c", under: work.path)
        try c.ok(["tasks", "add", "from C"])
        let request = jsonObject(try c.ok(["--json", "sync", "request"] + option).stdout)
        let fingerprint = try #require(request["fingerprint"] as? String)
        #expect(fingerprint.range(of: "^[0-9A-Z]{4}(-[0-9A-Z]{4}){5}$", options: .regularExpression) != nil, "\(fingerprint)")
        // Run again, the same request.
        #expect(try c.ok(["sync", "request"] + option).stdout == fingerprint + "\n")
        #expect(try remoteFiles(remote).contains("requests/" + fingerprint.replacingOccurrences(of: "-", with: "")))
        #expect(try c.run(["sync", "status"]).status == 66)

        let early = try c.run(["sync", "join"] + option + ["--approved-by", fingerprint])
        #expect(early.status == 66, "\(early.stderr)")
        #expect(early.stderr.contains("no grant for this device's request (\(fingerprint))"), "\(early.stderr)")
        #expect(try c.run(["sync", "status"]).status == 66)

        // Lower case and without dashes is the same fingerprint.
        let approval = jsonObject(try a.ok(["--json", "sync", "approve", fingerprint.lowercased().replacingOccurrences(of: "-", with: "")]).stdout)
        #expect(approval["approved"] as? String == fingerprint)
        #expect(approval["generation"] as? Int == 1)
        let approver = try #require(approval["approver"] as? String)
        #expect(try c.ok(["sync", "join"] + option + ["--approved-by", approver]).stderr.contains("joined the sync group"))
        #expect(!(try remoteFiles(remote)).contains("requests/"))
        #expect(!(try remoteFiles(remote)).contains("grants/"))

        try a.ok(["tasks", "add", "second from A"])
        try b.ok(["tasks", "add", "second from B"])
        try c.ok(["tasks", "add", "second from C"])
        for device in [a, b, c, a, b] { try device.ok(["sync", "now"]) }
        let all = ["from A", "from B", "from C", "second from A", "second from B", "second from C"]
        for device in [a, b, c] { #expect(try titles(device) == all, "\(device.app)") }
        // C is a device of the group like any other: its own changes are signed and believed.
        #expect(try a.ok(["--json", "sync", "devices"]).stdout.contains(try c.deviceID()))
    }

    /// A fingerprint with one character changed: 66 with a message that says so, and neither the remote nor A's
    /// database changes. A malformed one: 64. A request planted by someone who can write the remote, named as if it
    /// had some fingerprint but holding another key, is never approved under that name.
    @Test func aWrongFingerprintChangesNothing() throws {
        let (a, _, option, remote) = try group("folder")
        let c = SyncCLIDevice("c", under: work.path)
        let fingerprint = try c.ok(["sync", "request"] + option).stdout.trimmingCharacters(in: .newlines)
        var letters = Array(fingerprint)
        letters[0] = letters[0] == "Z" ? "Y" : "Z"
        let typo = String(letters)
        // A planted request: named like the typo's fingerprint, holding C's key (the file name is not what counts).
        let planted = remote + "/requests/" + typo.replacingOccurrences(of: "-", with: "")
        try FileManager.default.copyItem(
            atPath: remote + "/requests/" + fingerprint.replacingOccurrences(of: "-", with: ""), toPath: planted)
        // A FIFO and a symbolic link among the requests: never opened (no hang), never followed.
        #expect(try TestSupport.run(["mkfifo", remote + "/requests/FIFO"]).status == 0)
        try FileManager.default.createSymbolicLink(atPath: remote + "/requests/LINK", withDestinationPath: "/etc/passwd")
        let remoteBefore = try remoteDigest(remote), databaseBefore = try a.databaseDigest()

        let wrong = try a.run(["sync", "approve", typo])
        #expect(wrong.status == 66, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("no join request on the remote has the fingerprint \(typo)"), "\(wrong.stderr)")
        #expect(wrong.stdout == "")
        let malformed = try a.run(["sync", "approve", String(fingerprint.dropLast())])
        #expect(malformed.status == 64, "\(malformed.stderr)")
        #expect(malformed.stderr.contains("is not a request's fingerprint"), "\(malformed.stderr)")
        // A pairing code typed in the wrong place: refused, and not repeated in the message (stderr ends up in logs).
        let codeLike = "7XQ4-M2KD-9ZAE-H3PV-Q8WN-4TJX-7G2M-KD0R-5CMR-XV1B-8D3K-QNT6-0YFA-J7WE"
        let misplaced = try a.run(["sync", "approve", codeLike])
        #expect(misplaced.status == 64, "\(misplaced.stderr)")
        #expect(!misplaced.stderr.contains("7XQ4") && !misplaced.stderr.contains("J7WE"), "\(misplaced.stderr)")
        #expect(try remoteDigest(remote) == remoteBefore)
        #expect(try a.databaseDigest() == databaseBefore)
        #expect(!FileManager.default.fileExists(atPath: remote + "/grants"))

        // The right fingerprint: one grant, for C's request alone (the planted copy under another name gets none).
        try a.ok(["sync", "approve", fingerprint])
        let grants = try TestSupport.run(["find", remote + "/grants", "-type", "f"]).stdout.split(separator: "\n")
        #expect(grants.count == 1 && grants[0].hasSuffix("/" + fingerprint.replacingOccurrences(of: "-", with: "")), "\(grants)")
    }

    /// A grant nobody on the roster signed is refused by name (65), and nothing is stored on the new device:
    /// - one made by someone with no key of the group (a group of their own, whose device approved C's request
    ///   copied there), named with the group's device's fingerprint or with its own, also with their key check put in
    ///   place of the group's;
    /// - A's real grant with its signature altered (believed without the signature check);
    /// - A's real grant copied to another requester D (it cannot open it).
    /// Afterwards A's real grant still admits C.
    @Test func aGrantNoDeviceOfTheGroupSignedIsRefusedAndStoresNothing() throws {
        let (a, _, option, remote) = try group("folder")
        let c = SyncCLIDevice("c", under: work.path), d = SyncCLIDevice("d", under: work.path)
        try c.ok(["tasks", "add", "from C"])
        let fingerprint = try c.ok(["sync", "request"] + option).stdout.trimmingCharacters(in: .newlines)
        let compact = fingerprint.replacingOccurrences(of: "-", with: "")

        // The attacker's own group, and its device's grant for C's request.
        let attacker = SyncCLIDevice("attacker", under: work.path), elsewhere = work.path + "/attacker-remote"
        try attacker.ok(["sync", "init", "--folder", elsewhere])
        try FileManager.default.createDirectory(atPath: elsewhere + "/requests", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: remote + "/requests/" + compact, toPath: elsewhere + "/requests/" + compact)
        let attackerFingerprint = try attacker.ok(["sync", "approve", fingerprint]).stdout.trimmingCharacters(in: .newlines)
        let attackerDevice = try attacker.deviceID()
        try FileManager.default.createDirectory(atPath: remote + "/grants/" + attackerDevice, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: elsewhere + "/grants/\(attackerDevice)/\(compact)", toPath: remote + "/grants/\(attackerDevice)/\(compact)")

        // A symbolic link in place of a grant: refused as not a regular file, never followed.
        let linked = "grants/" + String(repeating: "0", count: 32) + "/" + compact
        try FileManager.default.createDirectory(atPath: remote + "/" + directoryOf(linked), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: remote + "/" + linked, withDestinationPath: "/etc/passwd")
        let approverA = try a.ok(["sync", "approve", fingerprint]).stdout.trimmingCharacters(in: .newlines)
        let grantA = remote + "/grants/\(try a.deviceID())/\(compact)"
        let genuine = try #require(FileManager.default.contents(atPath: grantA))
        var altered = genuine
        altered[8 + 32 + 10] ^= 0x01  // a byte of the Ed25519 signature
        try altered.write(to: URL(fileURLWithPath: grantA))

        let databaseBefore = try c.databaseDigest(), remoteBefore = try remoteDigest(remote)
        let joinKeys = try StoreClient.accounts(service: c.app + ".sync-join-key", dataHome: c.data)
        #expect(joinKeys.count == 1)
        for named in [approverA, attackerFingerprint] {
            let refused = try c.run(["sync", "join"] + option + ["--approved-by", named])
            #expect(refused.status == 65, "\(refused.stderr)")
            #expect(refused.stderr.contains("refused every grant for this device's request"), "\(refused.stderr)")
            #expect(refused.stderr.contains("grants/\(attackerDevice)/\(compact)"), "\(refused.stderr)")
            #expect(refused.stderr.contains("no key was stored"), "\(refused.stderr)")
            #expect(try c.run(["sync", "status"]).status == 66)
            #expect(try c.databaseDigest() == databaseBefore)
            #expect(try remoteDigest(remote) == remoteBefore)
            #expect(try StoreClient.accounts(service: c.app + ".sync-key", dataHome: c.data) == [])
            #expect(try StoreClient.accounts(service: c.app + ".sync-join-key", dataHome: c.data) == joinKeys)
        }
        let byA = try c.run(["sync", "join"] + option + ["--approved-by", approverA])
        #expect(byA.stderr.contains("'\(linked)' is not a regular file"), "\(byA.stderr)")
        #expect(byA.stderr.contains("grants/\(try a.deviceID())/\(compact)' does not carry a valid signature"), "\(byA.stderr)")
        #expect(byA.stderr.contains("not by the one named (\(approverA))"), "\(byA.stderr)")
        let byAttacker = try c.run(["sync", "join"] + option + ["--approved-by", attackerFingerprint])
        #expect(byAttacker.stderr.contains("holds a key that does not open the key check of generation 1"), "\(byAttacker.stderr)")
        // The attacker's key check put in place of the group's as well: its device is on no roster of this remote.
        let check = try #require(FileManager.default.contents(atPath: remote + "/key-check"))
        try FileManager.default.removeItem(atPath: remote + "/key-check")
        try FileManager.default.copyItem(atPath: elsewhere + "/key-check", toPath: remote + "/key-check")
        let replaced = try c.run(["sync", "join"] + option + ["--approved-by", attackerFingerprint])
        #expect(replaced.status == 65, "\(replaced.stderr)")
        #expect(replaced.stderr.contains("is signed by a device that is not on the group's roster of generation 1"), "\(replaced.stderr)")
        #expect(try c.run(["sync", "status"]).status == 66)
        #expect(try c.databaseDigest() == databaseBefore)
        try check.write(to: URL(fileURLWithPath: remote + "/key-check"))

        // A's grant replayed to D's request: D cannot open it.
        try genuine.write(to: URL(fileURLWithPath: grantA))
        let other = try d.ok(["sync", "request"] + option).stdout.trimmingCharacters(in: .newlines).replacingOccurrences(of: "-", with: "")
        try genuine.write(to: URL(fileURLWithPath: remote + "/grants/\(try a.deviceID())/\(other)"))
        let replayed = try d.run(["sync", "join"] + option + ["--approved-by", approverA])
        #expect(replayed.status == 65, "\(replayed.stderr)")
        #expect(replayed.stderr.contains("is sealed to another request's key"), "\(replayed.stderr)")
        #expect(try d.run(["sync", "status"]).status == 66)
        // D gives up: deleting its database with its keys deletes its request's private key too.
        #expect(try StoreClient.accounts(service: d.app + ".sync-join-key", dataHome: d.data).count == 1)
        try d.ok(["db", "delete", "--delete-keys", "--yes"])
        #expect(try StoreClient.accounts(service: d.app + ".sync-join-key", dataHome: d.data) == [])

        // The real grant, untouched, admits C; its request's private key is then deleted from the key store.
        try c.ok(["sync", "join"] + option + ["--approved-by", approverA])
        #expect(try StoreClient.accounts(service: c.app + ".sync-join-key", dataHome: c.data) == [])
        #expect(try StoreClient.accounts(service: c.app + ".sync-key", dataHome: c.data).count == 1)
        try a.ok(["sync", "now"])
        #expect(try titles(a) == ["from A", "from B", "from C"])
    }

    /// C is approved in generation 1; then A removes B (generation 2). The old grant admits nobody: refused (65) with
    /// the reason, also when someone who can write the remote withholds generation 2 (A's removal in generation 1's
    /// roster says it is closed), or A's statement naming the removal (generation 2's key check, signed by A, says the
    /// group moved on). A new approval, of generation 2, admits C; B reads none of C's tasks.
    @Test func aGrantOfAnOlderGenerationDoesNotAdmit() throws {
        let (a, b, option, remote) = try group("folder")
        let c = SyncCLIDevice("c", under: work.path)
        try c.ok(["tasks", "add", "from C"])
        let fingerprint = try c.ok(["sync", "request"] + option).stdout.trimmingCharacters(in: .newlines)
        let approver = try a.ok(["sync", "approve", fingerprint]).stdout.trimmingCharacters(in: .newlines)
        try a.ok(["sync", "remove-device", String(try b.deviceID().prefix(8))])

        let databaseBefore = try c.databaseDigest()
        let stale = try c.run(["sync", "join"] + option + ["--approved-by", approver])
        #expect(stale.status == 65, "\(stale.stderr)")
        #expect(stale.stderr.contains("is of generation 1, in which device \(try b.deviceID().prefix(8)) was removed"), "\(stale.stderr)")
        #expect(try c.databaseDigest() == databaseBefore)
        #expect(try c.run(["sync", "status"]).status == 66)

        // The remote's newer generation withheld (moved away): the old grant is still refused.
        try FileManager.default.moveItem(atPath: remote + "/generation-2", toPath: work.path + "/withheld")
        let withheld = try c.run(["sync", "join"] + option + ["--approved-by", approver])
        #expect(withheld.status == 65, "\(withheld.stderr)")
        #expect(try c.run(["sync", "status"]).status == 66)
        try FileManager.default.moveItem(atPath: work.path + "/withheld", toPath: remote + "/generation-2")
        // A's statement of generation 1 that names the removal withheld instead (its older one left): generation 2,
        // proven by A's signed key check, still makes the grant stale.
        let statements = remote + "/roster/" + (try a.deviceID())
        let newest = try #require(try FileManager.default.contentsOfDirectory(atPath: statements).filter { !$0.hasPrefix(".") }.max())
        #expect(newest != "0000000001")
        try FileManager.default.moveItem(atPath: statements + "/" + newest, toPath: work.path + "/withheld-statement")
        let rolledBack = try c.run(["sync", "join"] + option + ["--approved-by", approver])
        #expect(rolledBack.status == 65, "\(rolledBack.stderr)")
        #expect(rolledBack.stderr.contains("is of generation 1, but the group has moved to generation 2"), "\(rolledBack.stderr)")
        #expect(try c.run(["sync", "status"]).status == 66)
        try FileManager.default.moveItem(atPath: work.path + "/withheld-statement", toPath: statements + "/" + newest)

        let renewed = jsonObject(try a.ok(["--json", "sync", "approve", fingerprint]).stdout)
        #expect(renewed["generation"] as? Int == 2)
        try c.ok(["sync", "join"] + option + ["--approved-by", approver])
        try a.ok(["sync", "now"])
        #expect(try titles(a) == ["from A", "from B", "from C"])
        #expect(try titles(c) == ["from A", "from B", "from C"])
        #expect(try titles(b) == ["from A", "from B"])
    }
}
