// Several processes: kill -9 in the middle of saves, concurrent writers. Runs the built securestore-stress.
import Foundation
import TestSupport
import Glibc
import Testing
@testable import Preferences

@Suite("Processes", .serialized)
struct ProcessTests {
    @Test func killingAWriterAtAnyMomentLeavesAValidFile() throws {
        let executable = try #require(stressExecutable(), "securestore-stress must be built (swift build --build-tests)")
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            var lastCounter = 0
            var killedMidSave = 0
            for round in 0..<30 {
                let process = try ChildProcess(
                    [executable.path, "prefs", "hammer", dir.path, "test"], captureOutput: true)
                // Wait for the first completed save, then kill at a random moment of the following ones.
                let ready = process.read(upTo: 6)
                #expect(String(decoding: ready, as: UTF8.self) == "ready\n", "round \(round)")
                usleep(UInt32.random(in: 0...40_000))
                process.kill(SIGKILL)
                #expect(process.wait() == .signaled(SIGKILL))

                let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path)
                    .filter { $0.hasPrefix(".test.json.tmp-") }
                if !leftovers.isEmpty { killedMidSave += 1 }

                // The file is always a whole version: it opens, and the counter never goes back.
                let prefs = try Preferences(location: location, limits: PreferencesLimits(hardTotalSize: 4 << 20))
                let counter = prefs.get("counter", default: 0)
                #expect(counter > lastCounter, "round \(round): counter \(counter) after \(lastCounter)")
                lastCounter = counter
                let blob = prefs.get("blob-\(counter % 8)", default: "")
                #expect(blob.count >= 10_000 && blob.allSatisfy { $0 == Character(String(counter % 10)) })
            }
            // Leftover temporary files of killed saves are removed by the next writer, under the lock.
            let prefs = try Preferences(location: location, limits: PreferencesLimits(hardTotalSize: 4 << 20))
            try prefs.set(true, forKey: "done")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path)
                .filter { $0.hasPrefix(".test.json.tmp-") }
            #expect(leftovers.isEmpty)
            // Not an assertion of luck, a record of coverage: how often the kill landed inside a save.
            print("kill -9 rounds: 30, killed with a temporary file in flight: \(killedMidSave), last counter \(lastCounter)")
        }
    }

    @Test func concurrentProcessesLoseNoKeys() throws {
        let executable = try #require(stressExecutable(), "securestore-stress must be built (swift build --build-tests)")
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let observer = try Preferences(location: location)
            var processes: [ChildProcess] = []
            for writer in 0..<4 {
                processes.append(
                    try ChildProcess([executable.path, "prefs", "writer", dir.path, "test", "w\(writer)", "100"]))
            }
            for process in processes {
                #expect(process.wait() == .exited(0))
            }
            // The handle opened before the writers sees all their keys without reopening.
            let keys = Set(observer.keys)
            #expect(keys.count == 400)
            for writer in 0..<4 {
                for index in 0..<100 {
                    #expect(observer.get("w\(writer)-\(index)", default: -1) == index)
                }
            }
        }
    }

    @Test func threadsSharingOneHandleLoseNoKeys() async throws {
        try await withTemporaryDirectoryAsync { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        for index in 0..<25 { try prefs.set(index, forKey: "t\(writer)-\(index)") }
                    }
                }
                try await group.waitForAll()
            }
            #expect(prefs.keys.count == 100)
            #expect(try Preferences(location: testLocation(dir)).keys.count == 100)
        }
    }
}
