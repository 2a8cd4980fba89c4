import Foundation
import TestSupport
import Testing

/// `securestore tasks attachment get` on an attachments file damaged in each page in turn (issue 21): what reaches
/// standard output is always the original's first bytes, as many as the message says; `--output` leaves either
/// the whole file or none. The built tool, a throw-away keyring, a real SQLCipher file damaged by hand.
@Suite(.serialized) struct AttachmentDamageCommandTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    @Test func aPageDamagedAnywhereNeverPutsAWrongByteOnStandardOutputOrInAFile() throws {
        let app = uniqueApp()
        let data = work.path + "/data"
        let added = try securestore(["--data-dir", data, "tasks", "add", "Receipts"], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        let original = work.path + "/scan.pdf"
        // Four chunks of 256 KiB and a short one: about 35 pages of 32 KiB.
        #expect(try run(["sh", "-c", "head -c 1100000 /dev/urandom > '\(original)'"]).status == 0)
        let attached = try securestore(["--data-dir", data, "tasks", "attach", String(added.stdout.prefix(8)), original], app: app)
        try #require(attached.status == 0, "\(attached.stderr)")
        let id = String(attached.stdout.prefix(8))
        let expected = try #require(FileManager.default.contents(atPath: original))
        let file = data + "/tasks.attachments.db"
        let pristine = try #require(FileManager.default.contents(atPath: file))
        let pages = pristine.count / (32 * 1024)
        #expect(pages >= 34)

        var failed = 0
        for page in 1..<pages {
            var damaged = pristine
            let offset = page * 32 * 1024 + 2000 + (page * 4099) % 25_000
            damaged[offset] ^= 0x40
            try damaged.write(to: URL(fileURLWithPath: file))

            // Standard output, through a shell redirect (the bytes as a pipe reader gets them).
            let out = work.path + "/out.bin"
            let got = try run(
                ["sh", "-c", "\"$0\" \"$@\" > '\(out)'", product("securestore"), "--app", app, "--data-dir", data,
                 "tasks", "attachment", "get", id])
            let written = try #require(FileManager.default.contents(atPath: out))
            #expect(written == expected.prefix(written.count), "page \(page + 1): wrong bytes on standard output")
            if got.status == 0 {
                #expect(written == expected, "page \(page + 1)")
            } else {
                failed += 1
                #expect(got.status == 65, "page \(page + 1): \(got.stderr)")
                #expect(!got.stderr.contains("SQL logic error"), "page \(page + 1): \(got.stderr)")
                #expect(
                    got.stderr.contains(written.isEmpty ? "no byte was delivered" : "its first \(written.count) bytes were delivered"),
                    "page \(page + 1): \(got.stderr)")
            }

            // A file: whole and right, or not there.
            let copy = work.path + "/copy.pdf"
            try? FileManager.default.removeItem(atPath: copy)
            let toFile = try securestore(
                ["--data-dir", data, "tasks", "attachment", "get", id, "--output", copy], app: app)
            if toFile.status == 0 {
                #expect(FileManager.default.contents(atPath: copy) == expected, "page \(page + 1)")
            } else {
                #expect(!FileManager.default.fileExists(atPath: copy), "page \(page + 1): \(toFile.stderr)")
                #expect(toFile.stderr.contains("was not written"), "page \(page + 1): \(toFile.stderr)")
            }
            #expect(toFile.status == got.status, "page \(page + 1)")
        }
        #expect(failed >= pages - 4, "a flip in a page of the attachment's chunks fails the read")
        // Reading never changed the file: it is as damaged as it was written, no more.
        try pristine.write(to: URL(fileURLWithPath: file))
        let whole = try securestore(["--data-dir", data, "tasks", "attachment", "get", id, "--output", work.path + "/final"], app: app)
        #expect(whole.status == 0, "\(whole.stderr)")
    }
}
