import Foundation
import TestSupport
import Testing

/// Bad input to `securestore tasks attach`, for real: a full disk (a small tmpfs mounted by the test, root only) and
/// attachments over `--max-size` (a file, and a stream on standard input). Each asserts both halves: the one-line
/// message and exit status, and that every file of the data folder (database, its -wal, attachments file, any
/// journal) hashes the same, with the task's attachments listed and read back (by hash) as before. (After a full
/// disk, the attachments file keeps its size and contents but not its bytes: see the test.)
@Suite(.serialized) struct AttachmentBadInputTests {
    init() throws { try Harness.require() }

    private func sha256(_ path: String) throws -> String { String(try run(["sha256sum", path]).stdout.prefix(64)) }

    /// Every file of `directory` (the lock file aside: it holds only a hint) and its SHA-256.
    private func hashes(_ directory: String) throws -> [String: String] {
        var hashes: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where !name.hasSuffix(".lock") {
            hashes[name] = try sha256(directory + "/" + name)
        }
        return hashes
    }

    private func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
    }

    private func randomFile(_ path: String, bytes: Int) throws {
        #expect(try run(["sh", "-c", "head -c \(bytes) /dev/urandom > '\(path)'"]).status == 0)
    }

    /// A task with one attachment, in `data`; the attachments file is settled (an `attachment get` collects the
    /// first attach's upload mark; opening the file writes nothing), so that a refused attach must leave every
    /// byte as it is. Returns the task
    /// prefix, the attachment listing and the attachment's SHA-256.
    private func taskWithAnAttachment(data: String, app: String, scratch: String) throws -> (String, String, String) {
        let added = try securestore(["--data-dir", data, "tasks", "add", "Receipts"], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        let task = String(added.stdout.prefix(8))
        try randomFile(scratch + "/kept.bin", bytes: 100_000)
        let attached = try securestore(["--data-dir", data, "tasks", "attach", task, scratch + "/kept.bin"], app: app)
        try #require(attached.status == 0, "\(attached.stderr)")
        let got = try securestore(
            ["--data-dir", data, "tasks", "attachment", "get", String(attached.stdout.prefix(8)), "--output", scratch + "/settle"],
            app: app)
        try #require(got.status == 0, "\(got.stderr)")
        let listing = try securestore(["--data-dir", data, "tasks", "attachments", task], app: app).stdout
        return (task, listing, try sha256(scratch + "/kept.bin"))
    }

    /// The task's attachments are listed as before and the kept one reads back with its hash.
    private func expectUnchanged(data: String, app: String, task: String, listing: String, hash: String, scratch: String) throws {
        #expect(try securestore(["--data-dir", data, "tasks", "attachments", task], app: app).stdout == listing)
        let copy = scratch + "/read-back-\(UUID().uuidString.prefix(6))"
        let got = try securestore(
            ["--data-dir", data, "tasks", "attachment", "get", String(listing.prefix(8)), "--output", copy], app: app)
        #expect(got.status == 0, "\(got.stderr)")
        #expect(try sha256(copy) == hash)
    }

    @Test(.enabled(if: Prerequisites.isRoot, "mounting a tmpfs needs root"))
    func aFullDiskMidAttachExits74WithOneLineAndChangesNoFile() throws {
        let scratch = try TemporaryDirectory()
        let mount = scratch.path + "/small"
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        let mounted = try run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", mount])
        try #require(mounted.status == 0, "mount: \(mounted.stderr)")
        defer { _ = try? run(["umount", mount]) }
        let app = uniqueApp()
        let data = mount + "/data"
        let (task, listing, hash) = try taskWithAnAttachment(data: data, app: app, scratch: scratch.path)
        let before = try hashes(data)
        #expect(before.keys.contains("tasks.attachments.db") && before.keys.contains("tasks.db"))
        let attachmentsSize = size(data + "/tasks.attachments.db")

        // 3 MB cannot fit in what is left of 2 MiB: the disk fills while the chunks are being written.
        try randomFile(scratch.path + "/video.mp4", bytes: 3_000_000)
        let full = try securestore(["--data-dir", data, "tasks", "attach", task, scratch.path + "/video.mp4"], app: app)
        #expect(full.status == 74, "\(full.stderr)")
        #expect(full.stderr.hasPrefix("securestore: "))
        #expect(full.stderr.contains("full"), "\(full.stderr)")
        #expect(full.stderr.split(separator: "\n").count == 1, "\(full.stderr)")

        // SQLCipher rolls the failed transaction back by writing the journal's pages again, each encrypted under a
        // new IV: the attachments file's bytes differ in those pages, its size and contents do not (read back below).
        var after = try hashes(data)
        #expect(after.removeValue(forKey: "tasks.attachments.db") != nil)
        var expected = before
        expected.removeValue(forKey: "tasks.attachments.db")
        #expect(after == expected, "database, -wal and journals as they were; no file added (no journal left)")
        #expect(size(data + "/tasks.attachments.db") == attachmentsSize)
        try expectUnchanged(data: data, app: app, task: task, listing: listing, hash: hash, scratch: scratch.path)
        let verified = try securestore(["--data-dir", data, "db", "verify"], app: app)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("attachments: 1 (97.7 KiB) read back in full"), "\(verified.stdout)")
    }

    @Test func anAttachmentOverMaxSizeExits65WithOneLineAndChangesNoFile() throws {
        let scratch = try TemporaryDirectory()
        let app = uniqueApp()
        let data = scratch.path + "/data"
        let (task, listing, hash) = try taskWithAnAttachment(data: data, app: app, scratch: scratch.path)
        let before = try hashes(data)

        try randomFile(scratch.path + "/big.bin", bytes: 2_000_000)
        let file = try securestore(
            ["--data-dir", data, "tasks", "attach", task, scratch.path + "/big.bin", "--max-size", "1M"], app: app)
        #expect(file.status == 65)
        #expect(file.stderr == "securestore: \(scratch.path)/big.bin is larger than the attachment limit of 1 MiB; nothing was attached\n")
        #expect(try hashes(data) == before)

        // A stream has no size in advance: it is refused once it passes the limit, with nothing kept of it.
        let stream = try securestore(
            ["--data-dir", data, "tasks", "attach", task, "--as", "stream.bin", "--max-size", "64K"], app: app,
            input: String(repeating: "0123456789abcdef", count: 8_192))
        #expect(stream.status == 65)
        #expect(stream.stderr == "securestore: standard input is larger than the attachment limit of 64 KiB; nothing was attached\n")
        #expect(try hashes(data) == before)
        try expectUnchanged(data: data, app: app, task: task, listing: listing, hash: hash, scratch: scratch.path)
    }
}
