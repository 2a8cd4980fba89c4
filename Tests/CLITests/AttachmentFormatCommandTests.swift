import Foundation
import TestSupport
import Testing

/// The attachments file's format as a user meets it: `db info` names it, and a backup's attachments copy keeps it.
@Suite(.serialized) struct AttachmentFormatCommandTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }
    private var data: String { work.path + "/data" }

    private func tool(_ arguments: [String], app: String) throws -> ProcessResult {
        try securestore(["--data-dir", data] + arguments, app: app)
    }

    @Test func dbInfoNamesTheAttachmentsFormatAndABackupKeepsIt() throws {
        let app = uniqueApp()
        let added = try tool(["tasks", "add", "Scans"], app: app)
        try #require(added.status == 0, "\(added.stderr)")
        let file = work.path + "/scan.pdf"
        #expect(try run(["sh", "-c", "head -c 700000 /dev/urandom > '\(file)'"]).status == 0)
        let attached = try tool(["tasks", "attach", String(added.stdout.prefix(8)), file], app: app)
        #expect(attached.status == 0, "\(attached.stderr)")

        let info = try tool(["db", "info"], app: app)
        #expect(info.status == 0, "\(info.stderr)")
        #expect(info.stdout.contains("attachments: 1 ("), "\(info.stdout)")
        #expect(info.stdout.contains(", format securestore-attachments-1; its key is kept inside the database)"), "\(info.stdout)")
        // The record database keeps its own format.
        #expect(info.stdout.contains("securestore-1"), "\(info.stdout)")

        let backup = work.path + "/backup.db"
        let made = try tool(["db", "backup", backup], app: app)
        #expect(made.status == 0, "\(made.stderr)")
        let copy = work.path + "/backup.attachments.db"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: copy)[.size] as? Int)
        #expect(size > 700_000 && size % 32_768 == 0)
        #expect(try tool(["db", "verify"], app: app).status == 0)
    }
}
