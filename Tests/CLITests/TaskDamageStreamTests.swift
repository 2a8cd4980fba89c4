import Foundation
import TestSupport
import Testing

/// A long title spread over overflow pages, each page of the database damaged in turn (a byte flipped), then the task
/// list streamed to standard output (`tasks export`, `--json tasks list --limit none`, the text list): SQLCipher
/// hands back a page that fails its HMAC check as zeros and reports it late (issue 21), and these commands write each
/// task as they read it, so a title with a zeroed tail could reach the reader. Every title printed is whole and
/// right, or the command fails. The built tool, a throw-away keyring, a real file damaged by hand.
@Suite(.serialized) struct TaskDamageStreamTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    @Test func aDamagedPageNeverPutsAWrongTitleOnStandardOutput() throws {
        let app = uniqueApp()
        let data = work.path + "/data"
        var state: UInt32 = 9
        // 1000 characters (the longest title) of four UTF-8 bytes each: 4000 bytes, more than a 4 KiB page keeps in
        // its b-tree cell, so the title's tail is on an overflow page.
        let long = String(String.UnicodeScalarView((0..<1000).map { _ -> Unicode.Scalar in
            state = state &* 1_664_525 &+ 1_013_904_223
            return Unicode.Scalar(0x1F600 + (state >> 24) % 64)!
        }))
        try #require(try securestore(["--data-dir", data, "tasks", "add", "short one"], app: app).status == 0)
        try #require(try securestore(["--data-dir", data, "tasks", "add", long], app: app).status == 0)
        try #require(try securestore(["--data-dir", data, "tasks", "add", "short two"], app: app).status == 0)
        let file = data + "/tasks.db"
        let pristine = try #require(FileManager.default.contents(atPath: file))
        let pages = pristine.count / 4096
        var failed = 0
        for page in 1..<pages {
            var damaged = pristine
            damaged[page * 4096 + 100] ^= 0x20
            try damaged.write(to: URL(fileURLWithPath: file))
            for command in [["tasks", "export"], ["--json", "tasks", "list", "--limit", "none"], ["tasks", "list", "--limit", "none"]] {
                let got = try securestore(["--data-dir", data] + command, app: app)
                if got.status != 0 { failed += 1 }
                // Any line holding part of the long title holds all of it, and nothing else that looks like it.
                for line in got.stdout.split(separator: "\n") where line.contains(String(long.prefix(20))) {
                    #expect(line.contains(long), "page \(page + 1), \(command): a cut or zeroed title")
                    #expect(!line.contains("\\u0000"), "page \(page + 1), \(command): zeros in the title")
                }
            }
        }
        try pristine.write(to: URL(fileURLWithPath: file))
        #expect(failed > 0, "no damaged page made any command fail")
        #expect(try securestore(["--data-dir", data, "tasks", "export"], app: app).stdout.contains(long))
    }
}
