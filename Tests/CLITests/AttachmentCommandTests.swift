import Foundation
import TestSupport
import Testing

/// `securestore tasks attach | attachments | attachment get | detach` and the attachments' part of `db verify`, run
/// as a user runs them: the built tool, a throw-away keyring, real SQLCipher files.
@Suite(.serialized) struct AttachmentCommandTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }
    private var data: String { work.path + "/data" }

    private func tool(_ arguments: [String], app: String, input: String = "") throws -> ProcessResult {
        try securestore(["--data-dir", data] + arguments, app: app, input: input)
    }

    private func randomFile(_ name: String, bytes: Int) throws -> String {
        let path = work.path + "/" + name
        #expect(try run(["sh", "-c", "head -c \(bytes) /dev/urandom > '\(path)'"]).status == 0)
        return path
    }

    private func sha256(_ path: String) throws -> String {
        String(try run(["sha256sum", path]).stdout.prefix(64))
    }

    private func newTask(_ app: String) throws -> String {
        let added = try tool(["tasks", "add", "Receipts"], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        return String(added.stdout.prefix(8))
    }

    @Test func anIDPrefixIsASCIIHexadecimalDigitsAndNothingElse() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let attached = try tool(["tasks", "attach", task, "--as", "note.txt"], app: app, input: "hello\n")
        try #require(attached.status == 0, "\(attached.stderr)")
        let id = String(attached.stdout.prefix(8))
        #expect(try tool(["tasks", "attachment", "get", id, "--output", work.path + "/ok.txt"], app: app).status == 0)
        // Fullwidth digits are "hexadecimal" to Swift's Character.isHexDigit: they were skipped when decoded, so a
        // prefix of them matched every attachment. An ID prefix is ASCII 0-9, a-f, A-F (and dashes).
        for prefix in ["\u{FF41}\u{FF42}", "\u{FF10}", id + "\u{FF41}", "g1"] {
            let got = try tool(["tasks", "attachment", "get", prefix, "--output", work.path + "/bad.txt"], app: app)
            #expect(got.status == 64, "\(prefix): \(got.stderr)")
            #expect(got.stderr == "securestore: an attachment ID is 1 to 32 hexadecimal digits\n", "\(prefix)")
            #expect(!FileManager.default.fileExists(atPath: work.path + "/bad.txt"))
        }
        #expect(try tool(["tasks", "attachment", "get", id.uppercased(), "--output", work.path + "/upper.txt"], app: app).status == 0)
    }

    @Test func filesAndStandardInputAreAttachedListedAndReadBackByteForByte() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let photo = try randomFile("photo.jpg", bytes: 3_000_123)
        let attached = try tool(["tasks", "attach", task, photo], app: app)
        #expect(attached.status == 0, "\(attached.stderr)")
        #expect(attached.stdout.contains("image/jpeg  photo.jpg"))
        let piped = try tool(["tasks", "attach", task, "--as", "note.txt"], app: app, input: "hello, attachments\n")
        #expect(piped.status == 0, "\(piped.stderr)")

        let listing = try tool(["--json", "tasks", "attachments", task], app: app)
        let items = try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(items.map { $0["name"] as? String } == ["photo.jpg", "note.txt"])
        #expect(items.first?["size"] as? Int == 3_000_123)
        #expect(items.first?["sha256"] as? String == (try sha256(photo)))
        #expect(items.first?["mediaType"] as? String == "image/jpeg")

        let id = try #require(items.first?["id"] as? String)
        let copy = work.path + "/copy.jpg"
        let got = try tool(["tasks", "attachment", "get", String(id.prefix(6)), "--output", copy], app: app)
        #expect(got.status == 0, "\(got.stderr)")
        #expect(try sha256(copy) == (try sha256(photo)))
        let mode = try FileManager.default.attributesOfItem(atPath: copy)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let noteID = try #require(items.last?["id"] as? String)
        #expect(try tool(["tasks", "attachment", "get", noteID], app: app).stdout == "hello, attachments\n")
        #expect(items.map { $0["inline"] as? Bool } == [false, true], "the 19-byte note is kept inside the database")
        let info = try tool(["db", "info"], app: app).stdout
        #expect(info.contains("attachments: 2 (2.9 MiB), 1 of them (19 bytes) inside the database, the rest in '\(data)/tasks.attachments.db' ("),
            "\(info)")

        // Files: 0600, the attachments file beside the database, never the bytes in plain text.
        let attachmentsFile = data + "/tasks.attachments.db"
        #expect(try FileManager.default.attributesOfItem(atPath: attachmentsFile)[.posixPermissions] as? Int == 0o600)
        let raw = try Data(contentsOf: URL(fileURLWithPath: attachmentsFile))
        #expect(raw.range(of: Data("hello, attachments".utf8)) == nil)

        let detached = try tool(["tasks", "detach", String(noteID.prefix(8))], app: app)
        #expect(detached.status == 0)
        #expect(try tool(["tasks", "attachments", task], app: app).stdout.contains("note.txt") == false)
        let verified = try tool(["db", "verify"], app: app)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("attachments: 1 (2.9 MiB) read back in full, every chunk authenticated"))
    }

    @Test func badInputIsRefusedWithAClearErrorAndLosesNothing() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let kept = try randomFile("kept.bin", bytes: 700_000)
        #expect(try tool(["tasks", "attach", task, kept], app: app).status == 0)
        let keptHash = try sha256(kept)
        let big = try randomFile("big.bin", bytes: 2_000_000)
        let bigHash = try sha256(big)

        let missing = try tool(["tasks", "attach", task, work.path + "/nothing.bin"], app: app)
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("does not exist; nothing was attached"))

        let tooLarge = try tool(["tasks", "attach", task, kept, big, "--max-size", "1M"], app: app)
        #expect(tooLarge.status == 65)
        #expect(tooLarge.stderr.contains("big.bin is larger than the attachment limit of 1 MiB; nothing was attached"))

        let unnamed = try tool(["tasks", "attach", task], app: app, input: "data")
        #expect(unnamed.status == 64)
        #expect(unnamed.stderr.contains("--as NAME"))

        let noTask = try tool(["tasks", "attach", "ffffffff", kept], app: app)
        #expect(noTask.status == 66)

        // All or none: the batch with one file over the limit attached neither; the earlier attachment is intact.
        let listing = try tool(["tasks", "attachments", task], app: app).stdout
        #expect(listing.split(separator: "\n").count == 1)
        #expect(listing.contains("kept.bin"))
        let copy = work.path + "/kept.copy"
        #expect(try tool(["tasks", "attachment", "get", String(listing.prefix(8)), "--output", copy], app: app).status == 0)
        #expect(try sha256(copy) == keptHash)
        #expect(try sha256(big) == bigHash)
        #expect(try sha256(kept) == keptHash)
    }

    @Test func aDamagedChunkIsNamedAndNoWrongBytesAreWritten() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let file = try randomFile("scan.pdf", bytes: 1_500_000)
        let attached = try tool(["tasks", "attach", task, file], app: app)
        let id = String(attached.stdout.prefix(8))
        // Flip one byte in the middle of the attachments file (a page of chunk data).
        let path = data + "/tasks.attachments.db"
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        let byte = try handle.read(upToCount: 1) ?? Data([0])
        try handle.seek(toOffset: size / 2)
        try handle.write(contentsOf: Data([byte[0] ^ 0x5a]))
        try handle.close()

        let output = work.path + "/scan-copy.pdf"
        let got = try tool(["tasks", "attachment", "get", id, "--output", output], app: app)
        #expect(got.status == 65)
        #expect(got.stderr.contains("the attachment 'scan.pdf' (\(id)"))
        #expect(got.stderr.contains("is damaged: chunk"))
        #expect(got.stderr.contains("was not written"))
        #expect(!FileManager.default.fileExists(atPath: output))

        let verified = try tool(["db", "verify"], app: app)
        #expect(verified.status == 1)
        #expect(verified.stderr.contains("'scan.pdf'"))
    }

    @Test func deletingATaskDeletesItsAttachments() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let other = try newTask(app)
        #expect(try tool(["tasks", "attach", task, try randomFile("a.bin", bytes: 400_000)], app: app).status == 0)
        #expect(try tool(["tasks", "attach", other, try randomFile("b.bin", bytes: 1_000)], app: app).status == 0)
        #expect(try tool(["tasks", "delete", task], app: app).status == 0)
        let verified = try tool(["db", "verify"], app: app)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("attachments: 1 (1000 bytes) read back in full"))
        #expect(try tool(["tasks", "attachments", other], app: app).stdout.contains("b.bin"))
    }

    /// A small file (up to 64 KiB) is kept inside the database: `--json` says `inline`, `db info` says where, no
    /// file of the data folder holds its bytes in plain text, a backup and a restore bring it back byte for byte;
    /// deleting its task deletes it.
    @Test func aSmallFileIsKeptInsideTheDatabaseAndBackedUpAndRestoredWithIt() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let note = work.path + "/note.txt"
        let text = "the door code is " + UUID().uuidString + "\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: note))
        let attached = try tool(["tasks", "attach", task, note], app: app)
        #expect(attached.status == 0, "\(attached.stderr)")
        let listing = try tool(["--json", "tasks", "attachments", task], app: app)
        let items = try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(items.count == 1 && items.first?["inline"] as? Bool == true)
        let id = try #require(items.first?["id"] as? String)
        let files = try FileManager.default.contentsOfDirectory(atPath: data)
        #expect(files.contains("tasks.db") && files.contains("tasks.attachments.db"), "\(files)")
        for file in files {
            let raw = try #require(FileManager.default.contents(atPath: data + "/" + file))
            #expect(raw.range(of: Data("the door code".utf8)) == nil, "\(file) holds the text in plain")
        }
        let info = try tool(["db", "info"], app: app)
        #expect(info.stdout.contains("attachments: 1 (\(text.utf8.count) bytes), all inside the database; attachments file '"),
            "\(info.stdout)")
        #expect(try tool(["tasks", "attachment", "get", id], app: app).stdout == text)

        let backup = try tool(["db", "backup", work.path + "/backups/tasks.db"], app: app)
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path + "/backups").sorted()
            == ["tasks.attachments.db", "tasks.db"])
        #expect(try tool(["tasks", "detach", String(id.prefix(8))], app: app).status == 0)
        let restore = try tool(["--json", "db", "restore", work.path + "/backups/tasks.db"], app: app)
        #expect(restore.status == 0, "\(restore.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(restore.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(object["attachments"] as? Int == 1 && object["attachmentBytes"] as? Int == text.utf8.count)
        #expect(try tool(["tasks", "attachment", "get", id], app: app).stdout == text)
        let verified = try tool(["db", "verify"], app: app)
        #expect(verified.status == 0 && verified.stdout.contains("attachments: 1 ("), "\(verified.stderr)")

        #expect(try tool(["tasks", "delete", task], app: app).status == 0)
        let gone = try tool(["tasks", "attachment", "get", id], app: app)
        #expect(gone.status != 0 && gone.stderr.contains("no attachment has an ID starting with"), "\(gone.stderr)")
    }

    @Test func aKillDuringAnAttachLeavesNoAttachmentAndItsChunksAreCollected() throws {
        let app = uniqueApp()
        let task = try newTask(app)
        let before = try tool(["tasks", "attach", task, try randomFile("before.bin", bytes: 300_000)], app: app)
        #expect(before.status == 0)
        // 24 MB arrive at once, then the pipe stays open: the tool is killed while the upload is under way.
        let command = "(head -c 24000000 /dev/urandom; sleep 6) | timeout -s KILL 3 '\(product("securestore"))' "
            + "--app \(app) --data-dir '\(data)' tasks attach \(task) --as killed.bin"
        let killed = try run(["sh", "-c", command])
        #expect(killed.status != 0)
        #expect(try tool(["tasks", "attachments", task], app: app).stdout.contains("killed.bin") == false)
        let verified = try tool(["db", "verify"], app: app)
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(verified.stdout.contains("attachments: 1 (293 KiB) read back in full"))
        // Collected: a new attachment reuses the freed pages instead of growing the file by 24 MB again.
        let size = try FileManager.default.attributesOfItem(atPath: data + "/tasks.attachments.db")[.size] as? Int ?? 0
        #expect(try tool(["tasks", "attach", task, try randomFile("after.bin", bytes: 20_000_000)], app: app).status == 0)
        let grown = try FileManager.default.attributesOfItem(atPath: data + "/tasks.attachments.db")[.size] as? Int ?? 0
        #expect(grown <= max(size, 21_000_000 + 1_000_000))
    }
}
