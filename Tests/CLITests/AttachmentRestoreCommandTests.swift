import Foundation
import TestSupport
import Testing

/// `db backup` then `db restore` with attachments, through the built tool: the restored tasks' attachments read back
/// byte-identical (by SHA-256), the attachments that were there are kept aside with the database that was there.
@Suite(.serialized) struct AttachmentRestoreCommandTests {
    init() throws { try Harness.require() }

    private func sha256(_ path: String) throws -> String { String(try run(["sha256sum", path]).stdout.prefix(64)) }

    @Test func aRestoredDatabaseBringsItsAttachmentsBackAndKeepsTheCurrentOnesAside() throws {
        let app = uniqueApp()
        let work = try TemporaryDirectory()
        let data = work.path + "/data"
        func tool(_ arguments: [String]) throws -> ProcessResult { try securestore(["--data-dir", data] + arguments, app: app) }
        let task = String(try tool(["tasks", "add", "Receipts"]).stdout.prefix(8))
        for (name, size) in [("scan.pdf", 2_500_000), ("later.jpg", 300_000)] {
            #expect(try run(["sh", "-c", "head -c \(size) /dev/urandom > '\(work.path)/\(name)'"]).status == 0)
        }
        let scan = String(try tool(["tasks", "attach", task, work.path + "/scan.pdf"]).stdout.prefix(8))
        let backup = try tool(["db", "backup", work.path + "/backups/tasks.db"])
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path + "/backups").sorted()
            == ["tasks.attachments.db", "tasks.db"])
        #expect(try tool(["tasks", "attach", task, work.path + "/later.jpg"]).status == 0)
        #expect(try tool(["tasks", "detach", scan]).status == 0)

        let restore = try tool(["db", "restore", work.path + "/backups/tasks.db"])
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(restore.stdout.contains("attachments: 1 (2.4 MiB), each read back in full with its SHA-256 digest"))
        let listing = try tool(["tasks", "attachments", task]).stdout
        #expect(listing.contains("scan.pdf") && !listing.contains("later.jpg"))
        #expect(try tool(["tasks", "attachment", "get", scan, "--output", work.path + "/scan.back"]).status == 0)
        #expect(try sha256(work.path + "/scan.back") == (try sha256(work.path + "/scan.pdf")))

        let asideLine = try #require(restore.stdout.split(separator: "\n").first { $0.hasPrefix("the database that was there is kept at: ") })
        let aside = URL(fileURLWithPath: String(asideLine.split(separator: " ").last ?? "")).deletingPathExtension().lastPathComponent
        #expect(restore.stdout.contains("its attachments are kept at: \(data)/\(aside).attachments.db"))
        let kept = try tool(["tasks", "attachments", task, "--name", aside]).stdout
        #expect(kept.contains("later.jpg") && !kept.contains("scan.pdf"))
        let later = String(kept.prefix(8))
        #expect(try tool(["tasks", "attachment", "get", later, "--name", aside, "--output", work.path + "/later.back"]).status == 0)
        #expect(try sha256(work.path + "/later.back") == (try sha256(work.path + "/later.jpg")))
        let verify = try tool(["db", "verify"])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).filter { $0.hasPrefix(".") && !$0.hasSuffix(".lock") }.isEmpty)

        // The same restore again, for scripts: --json carries the attachments too.
        let again = try tool(["--json", "db", "restore", work.path + "/backups/tasks.db"])
        #expect(again.status == 0, "\(again.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
        #expect(object["attachments"] as? Int == 1)
        #expect(object["attachmentBytes"] as? Int == 2_500_000)
        #expect((object["attachmentsKeptAside"] as? String)?.hasSuffix(".attachments.db") == true)
    }
}
