import Foundation
import TestSupport
import Testing

private func object(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

private func array(_ text: String) -> [[String: Any]] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]) ?? []
}

/// `securestore sync` with attachments, end to end: the built tool, devices with their own keyrings, a real folder
/// and a real bare git repository (Docs/sync.md, "Attachments").
@Suite(.serialized) struct SyncAttachmentCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// A file of `size` bytes: a marker string, then deterministic noise (so that no run of it repeats).
    func makeFile(_ name: String, size: Int, marker: String, seed: UInt64 = 1) throws -> String {
        var bytes = [UInt8](marker.utf8)
        var state = seed &* 0x9E37_79B9_7F4A_7C15
        while bytes.count < size {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes.append(UInt8(truncatingIfNeeded: state))
        }
        let path = work.path + "/" + name
        try Data(bytes.prefix(size)).write(to: URL(fileURLWithPath: path))
        return path
    }

    func sha256(_ path: String) throws -> String { String(try run(["sha256sum", path]).stdout.prefix(64)) }

    /// The attachment files (chunks and manifests) under a folder remote.
    func remoteAttachmentFiles(_ root: String) -> [String] {
        filesUnder(root).map(\.path).filter { $0.contains("/attachments/") }
    }

    /// The IDs of a task's attachments, as `tasks attachments --json` lists them.
    func attachmentIDs(_ device: SyncCLIDevice, task: String) throws -> [String] {
        array(try device.ok(["--json", "tasks", "attachments", task]).stdout).compactMap { $0["id"] as? String }
    }

    /// Through a folder: a large (chunked) and a small (inline) attachment added on A reach B (eager) with identical
    /// bytes; C (lazy) lists them without their bytes until it reads one; the same file attached again, on A or on
    /// B, adds no chunk to the remote; a detach and an owner's delete propagate; no byte of the files, nor their
    /// names, is readable in the folder.
    @Test func attachmentsTravelThroughAFolderEagerAndLazy() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path), c = SyncCLIDevice("c", under: work.path)
        let big = try makeFile("report-big.bin", size: 2_500_000, marker: "MARKER-BIG-ATTACHMENT-7f3a")
        let small = try makeFile("note-small.txt", size: 3_000, marker: "MARKER-SMALL-ATTACHMENT-91c2", seed: 2)
        let task = try #require(object(try a.ok(["--json", "tasks", "add", "Taxes"]).stdout)["id"] as? String)
        try a.ok(["tasks", "attach", task, big, small])
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        // The first sync of A sent both attachments' bytes: the big one in three 1 MiB chunks, plus two manifests.
        #expect(remoteAttachmentFiles(folder).count == 3 + 1 + 2)

        let joinedB = object(try b.ok(["--json", "sync", "join", "--folder", folder], input: code + "\n").stdout)
        #expect(joinedB["fetchedAttachments"] as? Int == 2)
        #expect(joinedB["missingAttachments"] as? Int == 0)
        let joinedC = object(try c.ok(["--json", "sync", "join", "--folder", folder, "--attachments", "lazy"], input: code + "\n").stdout)
        #expect(joinedC["fetchedAttachments"] as? Int == 0)
        #expect(joinedC["missingAttachments"] as? Int == 2)
        #expect(object(try c.ok(["--json", "sync", "status"]).stdout)["attachments"] as? String == "lazy")
        #expect(object(try b.ok(["--json", "sync", "status"]).stdout)["attachments"] as? String == "eager")

        let ids = try attachmentIDs(a, task: task)
        #expect(ids.count == 2)
        for device in [b, c] { #expect(try attachmentIDs(device, task: task) == ids) }
        // B has the bytes; C fetches the big one when it is read, and still lacks the small one.
        for (device, index, source) in [(b, 0, big), (b, 1, small), (c, 0, big)] {
            let out = work.path + "/out-\(device.app)-\(index)"
            try device.ok(["tasks", "attachment", "get", ids[index], "--output", out])
            #expect(try sha256(out) == sha256(source), "\(device.app) read other bytes")
        }
        #expect(object(try c.ok(["--json", "sync", "now"]).stdout)["missingAttachments"] as? Int == 1)

        // The same file again, on A (another task) and on B: no new chunk, no new manifest on the remote.
        let before = remoteAttachmentFiles(folder).count
        let other = try #require(object(try a.ok(["--json", "tasks", "add", "Copy"]).stdout)["id"] as? String)
        try a.ok(["tasks", "attach", other, big])
        try b.ok(["sync", "now"])
        try b.ok(["tasks", "attach", task, big])
        for device in [a, b] {
            let report = object(try device.ok(["--json", "sync", "now"]).stdout)
            #expect(report["sentAttachmentChunks"] as? Int == 0)
            #expect(report["sentAttachments"] as? Int == 0)
        }
        #expect(remoteAttachmentFiles(folder).count == before)
        try c.ok(["sync", "now"])
        #expect(try attachmentIDs(c, task: task).count == 3)
        #expect(try attachmentIDs(c, task: other).count == 1)

        // A detach on A, and a delete of the owner task on B, reach every device.
        try a.ok(["sync", "now"])
        try a.ok(["tasks", "detach", ids[1]])
        try b.ok(["tasks", "delete", other])
        for device in [a, b, c, a, b, c] { try device.ok(["sync", "now"]) }
        for device in [a, b, c] {
            let listed = try attachmentIDs(device, task: task)
            #expect(listed.count == 2 && listed[0] == ids[0] && !listed.contains(ids[1]), "\(device.app): \(listed)")
            #expect(try device.run(["tasks", "attachments", other]).status != 0)  // the task is gone
        }

        // C switches to eager: the copy B attached (same bytes, its own id) is fetched now, and the choice is kept.
        let switched = object(try c.ok(["--json", "sync", "now", "--attachments", "eager"]).stdout)
        #expect(switched["fetchedAttachments"] as? Int == 1 && switched["missingAttachments"] as? Int == 0)
        #expect(object(try c.ok(["--json", "sync", "status"]).stdout)["attachments"] as? String == "eager")

        // Nothing readable in the folder: neither the files' bytes nor their names.
        var everything = Data()
        for file in filesUnder(folder) { everything += file.data + Data(file.path.utf8) }
        #expect(everything.count > 2_500_000)  // the sealed bytes are there
        for needle in ["MARKER-BIG-ATTACHMENT", "MARKER-SMALL-ATTACHMENT", "report-big", "note-small", ids[0]] {
            #expect(everything.range(of: Data(needle.utf8)) == nil, "'\(needle)' is readable in the remote")
        }
        // No plain digest either: of the files, or of the big file's first 1 MiB (a chunk), in hex or in bytes.
        let firstMiB = work.path + "/first-mib"
        try FileManager.default.contents(atPath: big)!.prefix(1 << 20).write(to: URL(fileURLWithPath: firstMiB))
        for digest in [try sha256(big), try sha256(small), try sha256(firstMiB)] {
            let raw = Data(stride(from: 0, to: 64, by: 2).map { UInt8(digest.dropFirst($0).prefix(2), radix: 16)! })
            #expect(everything.range(of: Data(digest.utf8)) == nil && everything.range(of: raw) == nil, "a plain SHA-256 is in the remote")
        }
    }

    /// Through a bare git repository: a chunk tampered with, then truncated, by someone who can push to the remote
    /// is refused by name (exit 65), by an eager sync and by a read, and nothing of the attachment is stored (B's
    /// files are unchanged, no output file is left); once the genuine chunk is back, B reads identical bytes. A lazy
    /// device whose remote copy lacks a chunk names what is missing (exit 66). Nothing readable in the repository
    /// or its history.
    @Test func tamperedAndMissingChunksThroughABareGitRepository() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path), c = SyncCLIDevice("c", under: work.path)
        let big = try makeFile("scan-big.bin", size: 1_200_000, marker: "MARKER-GIT-ATTACHMENT-55d0")
        let task = try #require(object(try a.ok(["--json", "tasks", "add", "Scan"]).stdout)["id"] as? String)
        let code = try #require(object(try a.ok(["--json", "sync", "init", "--git", remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        try c.ok(["sync", "join", "--git", remote, "--attachments", "lazy"], input: code + "\n")
        try a.ok(["tasks", "attach", task, big])
        #expect(object(try a.ok(["--json", "sync", "now"]).stdout)["sentAttachmentChunks"] as? Int == 2)
        let id = try #require(try attachmentIDs(a, task: task).first)

        // An attacker's clone replaces the larger chunk with a flipped byte, then with a truncated copy.
        let attacker = work.path + "/attacker"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, attacker]).status == 0)
        let chunk = try #require(
            filesUnder(attacker).filter { $0.path.contains("/attachments/") }.max { $0.data.count < $1.data.count })
        let relative = String(chunk.path.dropFirst(attacker.count + 1))
        func push(_ data: Data, _ message: String) throws {
            try data.write(to: URL(fileURLWithPath: chunk.path))
            #expect(try git(["-C", attacker, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "--quiet", "-am", message]).status == 0)
            // The devices push too (their seen vectors: Docs/sync.md, "Snapshots and pruning"): on top of theirs.
            #expect(try git(["-C", attacker, "-c", "user.name=x", "-c", "user.email=x@x", "pull", "--quiet", "--rebase", "origin", "main"]).status == 0)
            #expect(try git(["-C", attacker, "push", "--quiet", "origin", "HEAD:main"]).status == 0)
        }
        var flipped = chunk.data
        flipped[flipped.count / 2] ^= 0x01
        let out = work.path + "/out-b"
        var digests: [String] = []
        for (bad, label) in [(flipped, "tampered"), (chunk.data.prefix(chunk.data.count - 100), "truncated")] {
            try push(Data(bad), label)
            let synced = try b.run(["sync", "now"])
            #expect(synced.status == 65, "\(label): \(synced.stderr)")
            #expect(synced.stderr.contains(relative), "\(label): \(synced.stderr)")
            #expect(synced.stderr.contains("nothing of the attachment was stored"))
            let attachmentsFile = b.data + "/" + b.app + "/tasks.attachments.db"
            let digest = try b.databaseDigest() + (try sha256(attachmentsFile))
            let read = try b.run(["tasks", "attachment", "get", id, "--output", out])
            #expect(read.status == 65, "\(label): \(read.stderr)")
            #expect(read.stderr.contains(relative), "\(label): \(read.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out))
            #expect(try b.run(["sync", "now"]).status == 65)
            #expect(try b.databaseDigest() + (try sha256(attachmentsFile)) == digest, "\(label): B's files changed")
            digests.append(digest)
            #expect(object(try b.ok(["--json", "sync", "status"]).stdout)["attachments"] as? String == "eager")
        }
        try push(chunk.data, "genuine again")
        #expect(object(try b.ok(["--json", "sync", "now"]).stdout)["fetchedAttachments"] as? Int == 1)
        try b.ok(["tasks", "attachment", "get", id, "--output", out])
        #expect(try sha256(out) == sha256(big))

        // C is lazy: its copy of the remote loses the chunk; its read names the missing chunk and writes nothing.
        try c.ok(["sync", "now"])
        let clone = c.data + "/" + c.app + "/tasks.sync/" + relative
        try FileManager.default.removeItem(atPath: clone)
        let outC = work.path + "/out-c"
        let missing = try c.run(["tasks", "attachment", "get", id, "--output", outC])
        #expect(missing.status == 66, "\(missing.stderr)")
        #expect(missing.stderr.contains("chunk 2 of 2") || missing.stderr.contains("chunk 1 of 2"), "\(missing.stderr)")
        #expect(missing.stderr.contains("scan-big.bin"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: outC))
        #expect(try git(["-C", c.data + "/" + c.app + "/tasks.sync", "checkout", "--quiet", "--", "."]).status == 0)
        try c.ok(["tasks", "attachment", "get", id, "--output", outC])
        #expect(try sha256(outC) == sha256(big))

        // Nothing readable: every file of the bare repository, every object decompressed, the history as patches.
        let inspect = work.path + "/inspect"
        #expect(try git(["clone", "--quiet", "--branch", "main", remote, inspect]).status == 0)
        var everything = Data()
        for file in filesUnder(remote) + filesUnder(inspect) { everything += file.data + Data(file.path.utf8) }
        everything += Data(try git(["-C", inspect, "log", "-p", "--all", "--format=%H %an %ae %s"]).stdout.utf8)
        everything += Data(try run(["bash", "-c", "git -C \"$0\" cat-file --batch-all-objects --batch", remote]).stdout.utf8)
        for needle in ["MARKER-GIT-ATTACHMENT", "scan-big", id] {
            #expect(everything.range(of: Data(needle.utf8)) == nil, "'\(needle)' is readable in the remote")
        }
    }
    /// After `sync remove-device` (a new key generation), the device that rotated writes the bytes again under the
    /// new key, and a lazy device that took the new key reads them from the new generation.
    @Test func attachmentsFollowAKeyRotation() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path), c = SyncCLIDevice("c", under: work.path)
        let big = try makeFile("plan-big.bin", size: 1_500_000, marker: "MARKER-ROTATION-ATTACHMENT-0b1e", seed: 3)
        let task = try #require(object(try a.ok(["--json", "tasks", "add", "Plan"]).stdout)["id"] as? String)
        try a.ok(["tasks", "attach", task, big])
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--folder", folder, "--attachments", "lazy"], input: code + "\n")
        try c.ok(["sync", "join", "--folder", folder], input: code + "\n")
        try a.ok(["sync", "now"])
        let removed = object(try a.ok(["--json", "sync", "remove-device", try c.deviceID()]).stdout)
        let newCode = try #require(removed["pairingCode"] as? String)
        #expect(filesUnder(folder + "/generation-2/attachments").count == 2 + 1)  // two chunks and the manifest
        try b.ok(["sync", "rekey"], input: newCode + "\n")
        let id = try #require(try attachmentIDs(b, task: task).first)
        let out = work.path + "/out-rotated"
        try b.ok(["tasks", "attachment", "get", id, "--output", out])
        #expect(try sha256(out) == sha256(big))
    }

    /// An attachment added on A to a task that B deletes at the same time: after both sync, no device lists an
    /// attachment without its task, and every sync succeeds.
    @Test func anAttachmentAddedToATaskDeletedElsewhereMeanwhile() throws {
        let folder = work.path + "/shared"
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let task = try #require(object(try a.ok(["--json", "tasks", "add", "Doomed"]).stdout)["id"] as? String)
        let code = try a.ok(["sync", "init", "--folder", folder]).stdout.trimmingCharacters(in: .newlines)
        try b.ok(["sync", "join", "--folder", folder], input: code + "\n")
        let file = try makeFile("late.bin", size: 200_000, marker: "MARKER-LATE", seed: 4)
        let attached = array(try a.ok(["--json", "tasks", "attach", task, file]).stdout)
        let id = try #require(attached.first?["id"] as? String)
        try b.ok(["tasks", "delete", task])
        // Before the fix, A's next bundle carried the attachment's cells without its row or a tombstone, and B's
        // sync failed on it ("NOT NULL constraint failed: securestore_attachments.owner_table").
        for device in [b, a, b, a] { try device.ok(["sync", "now"]) }
        for device in [a, b] {
            #expect(try device.tasks().isEmpty)
            let read = try device.run(["tasks", "attachment", "get", id, "--output", work.path + "/late-out"])
            #expect(read.status == 66, "\(device.app): \(read.stderr)")
            #expect(object(try device.ok(["--json", "sync", "now"]).stdout)["missingAttachments"] as? Int == 0)
        }
    }
}
