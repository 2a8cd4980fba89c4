// `db backup` while another process writes (issue 34 part 2): the other process's writes go on, the backup verifies
// and holds a prefix of its sequence with every task committed before the backup began; a backup killed mid-way
// leaves nothing at its destination.
import Foundation
import Glibc
import TestSupport
import Testing

@Suite(.serialized) struct OnlineBackupCommandTests {
    init() throws { try Harness.require() }

    /// A fresh data directory with `count` tasks titled `bulk <i>`, imported in one process.
    private func tasks(_ count: Int, app: String) throws -> String {
        let work = NSTemporaryDirectory() + "securestore-online-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: false)
        let lines = (0..<count).map { "bulk \($0)" }.joined(separator: "\n") + "\n"
        let imported = try securestore(
            ["--data-dir", work + "/data", "tasks", "import", "--format", "lines"], app: app, input: lines)
        try #require(imported.status == 0, "\(imported.stderr)")
        return work
    }

    private func lineCount(_ path: String) -> Int {
        (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n").count ?? 0
    }

    @Test func anotherProcessWritesDuringDbBackupAndTheBackupHoldsAPrefixOfItsTasks() throws {
        let app = uniqueApp()
        let work = try tasks(20_000, app: app)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let data = work + "/data"
        // The writer: one `tasks add` after another, each logged once it exited 0 (committed).
        let script = """
            i=0
            while [ ! -e "$1/stop" ]; do
                "$2" --app "$3" --data-dir "$1/data" tasks add "w $i" >/dev/null || exit 1
                echo $i >> "$1/committed"
                i=$((i+1))
            done
            """
        let writer = try rlSpawn(["sh", "-c", script, "writer", work, product("securestore"), app])
        for _ in 0..<500 where lineCount(work + "/committed") < 2 { usleep(20_000) }
        let before = lineCount(work + "/committed")
        let backup = try securestore(["--data-dir", data, "db", "backup", work + "/backups/tasks.db"], app: app)
        // One more add may have committed without its log line yet.
        let after = lineCount(work + "/committed") + 1
        _ = FileManager.default.createFile(atPath: work + "/stop", contents: nil)
        #expect(waitForProcess(writer) == .exited(0), "every write of the other process succeeded")
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.stdout.contains("integrity check: ok"), "\(backup.stdout)")
        let written = lineCount(work + "/committed")
        #expect(written > before, "the other process went on writing")

        // What the backup holds: restored, as a user would.
        let restored = try securestore(["--data-dir", data, "db", "restore", work + "/backups/tasks.db"], app: app)
        #expect(restored.status == 0, "\(restored.stderr)")
        let exported = try securestore(["--data-dir", data, "tasks", "export", "--format", "csv"], app: app)
        #expect(exported.status == 0, "\(exported.stderr)")
        let titles = exported.stdout.split(separator: "\n").compactMap { line -> String? in
            line.split(separator: ",").first { $0.hasPrefix("bulk ") || $0.hasPrefix("w ") }.map(String.init)
        }
        #expect(titles.filter { $0.hasPrefix("bulk ") }.count == 20_000)
        let sequence = titles.filter { $0.hasPrefix("w ") }.compactMap { Int($0.dropFirst(2)) }.sorted()
        #expect(sequence == Array(0..<sequence.count), "a prefix of the writer's tasks")
        #expect(sequence.count >= before && sequence.count <= after, "\(before) ≤ \(sequence.count) ≤ \(after)")
    }

    @Test func aDbBackupKilledMidWayLeavesNothingAtItsDestination() throws {
        let app = uniqueApp()
        let work = try tasks(60_000, app: app)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let data = work + "/data"
        let folder = work + "/backups"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        var killedMidWay = false
        for _ in 0..<5 where !killedMidWay {
            let pid = try rlSpawn([product("securestore"), "--app", app, "--data-dir", data, "db", "backup", folder + "/tasks.db"])
            // Killed as soon as its temporary copy has pages in it.
            for _ in 0..<2_000 {
                let partial = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).contains { name in
                    name.hasPrefix(".tasks.db.tmp-")
                        && ((try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.size] as? Int) ?? 0) > 0
                }
                if partial { break }
                usleep(500)
            }
            _ = rlKill(pid)
            killedMidWay = !FileManager.default.fileExists(atPath: folder + "/tasks.db")
            #expect(!FileManager.default.fileExists(atPath: folder + "/tasks.attachments.db"))
            if !killedMidWay { try FileManager.default.removeItem(atPath: folder + "/tasks.db") }
        }
        #expect(killedMidWay, "one backup was killed before it finished")
        #expect(!FileManager.default.fileExists(atPath: folder + "/tasks.db"), "no half file at the destination")
        // The next backup sweeps what the killed one left and writes a complete, verified copy.
        let next = try securestore(["--data-dir", data, "db", "backup", folder + "/tasks.db"], app: app)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["tasks.db"])
        #expect(try securestore(["--data-dir", data, "db", "verify"], app: app).status == 0)
    }
}
