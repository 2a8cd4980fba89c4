import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// kill -9 at random moments, and several processes at once. The CI-sized version of `make soak`
/// (Tests/Soak/run-soak.sh), using the same `securestore-stress soak` writers and checkers.
@Suite(.serialized) struct ReliabilityCrashTests {
    init() throws { try Harness.require() }

    /// A writer adds tasks in batches (one transaction each), flips done flags and checkpoints; a rotator
    /// rotates the key in a loop. Each is killed at a random moment (mid-transaction, mid-checkpoint,
    /// mid-rotation, mid-open). After every kill the database opens with the stored key, passes
    /// integrity_check, and holds every committed task, no uncommitted one, and no part of a batch.
    @Test func writersAndRotationsKilledAtRandomMomentsLoseNoCommittedTask() throws {
        let directory = try TemporaryDirectory()
        let data = directory.path + "/data", log = directory.path + "/tasks.log"
        let app = uniqueApp()
        var killed = 0
        for round in 0..<12 {
            let rotating = round % 3 == 2
            let pid = try rlSpawn(
                [stressExecutable, "soak"] + (rotating ? ["rotate", data, app] : ["tasks", data, app, log]))
            rlSleep(milliseconds: rotating ? 60...400 : 30...300)
            if rlKill(pid) { killed += 1 }
            let check = try rlStress(["soak", "check-tasks", data, app, log])
            #expect(check.status == 0, "round \(round) (\(rotating ? "rotate" : "tasks")): \(check.stdout) \(check.stderr)")
            #expect(check.stdout.hasPrefix("check-tasks opened=1 "))
        }
        #expect(killed >= 10, "the writers were killed while running, not after they stopped")
        let summary = try rlStress(["soak", "check-tasks", data, app, log])
        let committed = summary.stdout.split(separator: " ").first { $0.hasPrefix("committed=") }.flatMap { Int($0.dropFirst(10)) }
        // Rounds are short (30–300 ms) and a loaded machine starts processes slowly: require writes, not a quota.
        #expect((committed ?? 0) > 0, "something was committed and checked: \(summary.stdout)")
        let names = try FileManager.default.contentsOfDirectory(atPath: data)
        #expect(!names.contains { $0.contains("rotating") || $0.contains(".tmp-") }, "no leftovers: \(names)")
    }

    /// A process saving preferences in a loop is killed at random moments; each time the file opens and
    /// holds the last acknowledged save or the one in flight — never older, never damaged.
    @Test func aPreferencesSaverKilledAtRandomMomentsLeavesTheOldOrTheNewFile() throws {
        let directory = try TemporaryDirectory()
        let log = directory.path + "/prefs.log"
        for round in 0..<8 {
            let pid = try rlSpawn([stressExecutable, "soak", "prefs", directory.path, "soak", log])
            rlSleep(milliseconds: 20...200)
            rlKill(pid)
            let check = try rlStress(["soak", "check-prefs", directory.path, "soak", log])
            #expect(check.status == 0, "round \(round): \(check.stdout) \(check.stderr)")
        }
    }

    /// Four `securestore` processes add tasks while two set preferences, all at once on one new database
    /// and one preferences file: every write is there at the end and no process saw a busy or lock error.
    @Test func concurrentCLIProcessesLoseNoWriteAndNeverReportBusy() throws {
        let app = uniqueApp()
        let writers = 6, perWriter = 8
        let results = Mutex<[(Int, Int32, String)]>([])
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            for n in 0..<perWriter {
                let arguments =
                    writer < 4
                    ? ["tasks", "add", "writer \(writer) task \(n)"] : ["prefs", "set", "w\(writer)-\(n)", "\(n)"]
                let result = try? securestore(arguments, app: app)
                results.withLock { $0.append((writer, result?.status ?? -1, result?.stderr ?? "could not run")) }
            }
        }
        let all = results.withLock { $0 }
        #expect(all.count == writers * perWriter)
        for (writer, status, stderr) in all {
            #expect(status == 0, "writer \(writer): \(stderr)")
            #expect(stderr.isEmpty, "writer \(writer): \(stderr)")
        }
        let titles = try securestore(["--json", "tasks", "list", "--limit", "1000"], app: app)
        let tasks = try #require(try JSONSerialization.jsonObject(with: Data(titles.stdout.utf8)) as? [[String: Any]])
        let expected = Set((0..<4).flatMap { w in (0..<perWriter).map { "writer \(w) task \($0)" } })
        #expect(Set(tasks.compactMap { $0["title"] as? String }) == expected)
        let keys = try securestore(["prefs", "list"], app: app).stdout
        for writer in 4..<writers {
            for n in 0..<perWriter { #expect(keys.contains("w\(writer)-\(n) (Int) = \(n)\n") || keys.contains("w\(writer)-\(n) (String) = \(n)\n")) }
        }
        #expect(try securestore(["db", "verify"], app: app).status == 0)
    }
}
