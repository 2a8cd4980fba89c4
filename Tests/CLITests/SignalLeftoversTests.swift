import Foundation
import TestSupport
import Testing

/// ^C, SIGTERM, SIGHUP and kill -9 at many moments of the commands that write a new file beside the user's (issue
/// 22, item 2): a signal removes what the command created and ends it with 130/143/129; a backup or an export
/// appears at its path only complete (and, for a backup, verified); what a kill -9 leaves is swept by the next
/// command that writes to that folder; the database itself never changes. Real signals, the built tool, a
/// throw-away keyring.
@Suite(.serialized) struct SignalLeftoversTests {
    private let work: TemporaryDirectory

    init() throws {
        try Harness.require()
        work = try TemporaryDirectory()
    }

    /// Runs the tool with `arguments` and sends `signal` after `delay` seconds (`timeout --preserve-status`).
    private func interrupted(_ arguments: [String], app: String, signal: String, after delay: Double) throws -> ProcessResult {
        try run(["timeout", "--preserve-status", "-s", signal, String(format: "%.3f", delay), product("securestore"), "--app", app] + arguments)
    }

    /// Names in `folder` that start with a dot: temporary files and check folders.
    private func hidden(_ folder: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasPrefix(".") }.sorted()
    }

    @Test func aSignalAtAnyMomentLeavesNoTemporaryFileAndNeverAnUnverifiedBackup() throws {
        let app = uniqueApp()
        let data = work.path + "/data"
        var lines = ""
        for i in 0..<150_000 {
            lines += "{\"createdAt\":\"2026-01-01T00:00:00.000000Z\",\"done\":false,"
                + "\"id\":\"00000000-0000-4000-8000-\(String(format: "%012d", i))\",\"title\":\"task number \(i) to back up\"}\n"
        }
        try lines.write(toFile: work.path + "/tasks.jsonl", atomically: true, encoding: .utf8)
        let imported = try securestore(["--data-dir", data, "tasks", "import", work.path + "/tasks.jsonl"], app: app)
        try #require(imported.status == 0, "\(imported.stderr)")
        let exportBefore = try securestore(["--data-dir", data, "tasks", "export"], app: app).stdout
        let backups = work.path + "/backups"
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: true)

        // A backup made to the end: every complete backup of this database has its size.
        #expect(try securestore(["--data-dir", data, "db", "backup", work.path + "/reference.db"], app: app).status == 0)
        let completeSize = try FileManager.default.attributesOfItem(atPath: work.path + "/reference.db")[.size] as? Int

        var interruptedCount = 0
        let signals: [(String, Int32)] = [("INT", 130), ("TERM", 143), ("HUP", 129)]
        for moment in 0..<20 {
            let (name, status) = signals[moment % signals.count]
            let delay = 0.02 + Double(moment) * 0.025
            let target = backups + "/b\(moment).db"
            let got = try interrupted(["--data-dir", data, "db", "backup", target], app: app, signal: name, after: delay)
            if got.status == 0 {
                // Finished before the signal: complete and verified (it says so).
                #expect(got.stdout.contains("integrity check: ok"), "\(got.stdout)")
                #expect(FileManager.default.fileExists(atPath: target))
            } else {
                interruptedCount += 1
                #expect(got.status == status, "SIG\(name) after \(delay) s: \(got.status) \(got.stderr)")
                // The signal came before the backup was linked into place (no file), or after (the command was
                // done but for its report): then the file is the whole, verified backup.
                if FileManager.default.fileExists(atPath: target) {
                    let size = try FileManager.default.attributesOfItem(atPath: target)[.size] as? Int
                    #expect(size == completeSize, "SIG\(name) after \(delay) s left a partial \(target)")
                }
            }
            #expect(hidden(backups).isEmpty, "SIG\(name) after \(delay) s left \(hidden(backups))")
            #expect(hidden(data).filter { $0.contains(".tmp-") || $0.contains(".check-") }.isEmpty, "\(hidden(data))")
        }
        #expect(interruptedCount >= 5, "the signals came too late to interrupt anything")

        // An export to a file: the file appears only whole.
        for moment in 0..<6 {
            let target = work.path + "/export\(moment).jsonl"
            let got = try interrupted(
                ["--data-dir", data, "tasks", "export", "--output", target], app: app, signal: "INT", after: 0.02 + Double(moment) * 0.04)
            if got.status == 0 {
                #expect(FileManager.default.contents(atPath: target) == Data(exportBefore.utf8))
            } else {
                #expect(got.status == 130, "\(got.stderr)")
                #expect(!FileManager.default.fileExists(atPath: target))
            }
            #expect(hidden(work.path).filter { $0.contains("export\(moment)") }.isEmpty, "\(hidden(work.path))")
        }

        // kill -9: nothing can be removed then; the next backup into the folder sweeps what was left.
        let killed = work.path + "/killed"
        try FileManager.default.createDirectory(atPath: killed, withIntermediateDirectories: true)
        var leftBehind = false
        for moment in 0..<8 {
            _ = try interrupted(
                ["--data-dir", data, "db", "backup", killed + "/k\(moment).db"], app: app, signal: "KILL",
                after: 0.03 + Double(moment) * 0.03)
            if !hidden(killed).isEmpty { leftBehind = true }
        }
        let next = try securestore(["--data-dir", data, "db", "backup", killed + "/after.db"], app: app)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(hidden(killed).isEmpty, "not swept: \(hidden(killed))")
        if !leftBehind { print("note: no kill -9 landed while a temporary file existed") }

        // The database never changed.
        #expect(try securestore(["--data-dir", data, "tasks", "export"], app: app).stdout == exportBefore)
    }
}
