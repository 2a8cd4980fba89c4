import Foundation
import TestSupport
import Testing

private func object(_ text: String) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
}

/// `securestore sync clean` and attachment chunks (issue 35 part 4; Docs/sync.md "Attachment chunks"), with the built
/// tool and a real bare git repository.
@Suite(.serialized) struct SyncAttachmentCleanCommandTests {
    let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// The attachment files on the branch of the bare repository `remote`.
    func attachmentFiles(_ remote: String) throws -> [String] {
        let tree = try git(["-C", remote, "ls-tree", "-r", "--name-only", "main"])
        return tree.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("attachments/") }
    }

    /// A detaches a 1.2 MB attachment (two chunks and a manifest on the remote). `sync clean --attachment-grace 0`
    /// keeps them while B has not synced since (`attachmentsWaitingFor`, and the text says so) and with the default
    /// grace; once B has synced, it removes the three, counted in `--json`, and the repository's branch holds no
    /// attachment file; B and A go on syncing. A grace that is not a duration is a usage error that changes nothing.
    @Test func unneededChunksLeaveABareGitRepository() throws {
        let remote = work.path + "/remote.git"
        #expect(try git(["init", "--quiet", "--bare", remote]).status == 0)
        let a = SyncCLIDevice("a", under: work.path), b = SyncCLIDevice("b", under: work.path)
        let file = work.path + "/scan.bin"
        try Data((0..<1_200_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 10) }).write(to: URL(fileURLWithPath: file))
        let task = try #require(object(try a.ok(["--json", "tasks", "add", "Scan"]).stdout)["id"] as? String)
        try a.ok(["tasks", "attach", task, file])
        let code = try #require(object(try a.ok(["--json", "sync", "init", "--git", remote]).stdout)["pairingCode"] as? String)
        try b.ok(["sync", "join", "--git", remote], input: code + "\n")
        #expect(try attachmentFiles(remote).count == 3)
        let id = try #require(
            (try JSONSerialization.jsonObject(with: Data(try a.ok(["--json", "tasks", "attachments", task]).stdout.utf8)) as? [[String: Any]])?
                .first?["id"] as? String)
        try a.ok(["tasks", "detach", id])
        try a.ok(["sync", "now"])

        let before = try a.databaseDigest()
        let refused = try a.run(["sync", "clean", "--attachment-grace", "soon"])
        #expect(refused.status == 64 && refused.stderr.contains("--attachment-grace"), "\(refused.stderr)")
        #expect(try a.databaseDigest() == before)

        var cleaned = object(try a.ok(["--json", "sync", "clean", "--attachment-grace", "0"]).stdout)
        #expect(cleaned["removedAttachmentFiles"] as? Int == 0, "\(cleaned)")
        #expect(cleaned["unreferencedAttachmentFiles"] as? Int == 3)
        #expect((cleaned["attachmentsWaitingFor"] as? [String])?.count == 1)
        let text = try a.ok(["sync", "clean", "--attachment-grace", "0"]).stderr
        #expect(text.contains("3 attachment file(s) no attachment needs kept for now: waiting for "), "\(text)")
        #expect(try attachmentFiles(remote).count == 3)

        try b.ok(["sync", "now"])
        cleaned = object(try a.ok(["--json", "sync", "clean"]).stdout)
        #expect(cleaned["removedAttachmentFiles"] as? Int == 0, "the default grace is 7 days: \(cleaned)")
        #expect(try attachmentFiles(remote).count == 3)
        cleaned = object(try a.ok(["--json", "sync", "clean", "--attachment-grace", "0s"]).stdout)
        #expect(cleaned["removedAttachmentFiles"] as? Int == 3, "\(cleaned)")
        #expect((cleaned["removedAttachmentBytes"] as? Int ?? 0) > 1_200_000)
        #expect((cleaned["removedBytes"] as? Int ?? 0) >= (cleaned["removedAttachmentBytes"] as? Int ?? 0))
        #expect(try attachmentFiles(remote).isEmpty)
        #expect(object(try b.ok(["--json", "sync", "now"]).stdout)["missingAttachments"] as? Int == 0)
        try a.ok(["tasks", "add", "after the cleanup"])
        try a.ok(["sync", "now"])
        try b.ok(["sync", "now"])
        #expect(try b.tasks().map { $0["title"] ?? "" }.sorted() == ["Scan", "after the cleanup"])
    }
}
