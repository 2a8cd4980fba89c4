// The async forms of the preferences calls: the same files and the same results as the blocking calls, from
// many tasks at once, beside another process writing the same domain.
import Foundation
import Preferences
import TestSupport
import Testing

@Suite struct AsyncTests {
    @Test func asyncWritesAndReadsGoThroughTheFile() async throws {
        try await withTemporaryDirectoryAsync { dir in
            let prefs = try Preferences(location: try testLocation(dir))
            struct Window: Codable, Sendable, Equatable { var width: Int; var height: Int }

            try await prefs.set("dark", forKey: "theme")
            try await prefs.set(encoding: Window(width: 1200, height: 800), forKey: "window")
            try await prefs.update { values in values["count"] = 1 }
            #expect(prefs.get("theme", default: "light") == "dark")
            #expect(try prefs.value(decoding: Window.self, forKey: "window") == Window(width: 1200, height: 800))
            #expect(try await prefs.remove("count"))
            #expect(try await prefs.remove("count") == false)

            // Another handle reads the file, not this handle's memory.
            let other = try Preferences(location: try testLocation(dir))
            #expect(other.storedValues == ["theme": "dark", "window": ["width": 1200, "height": 800]])
        }
    }

    @Test func manyTasksWritingAtOnceLoseNoKey() async throws {
        try await withTemporaryDirectoryAsync { dir in
            let prefs = try Preferences(location: try testLocation(dir))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<40 {
                    group.addTask { try await prefs.set(n, forKey: "key-\(n)") }
                }
                try await group.waitForAll()
            }
            let reread = try Preferences(location: try testLocation(dir))
            #expect(reread.keys.count == 40)
            #expect(reread.get("key-39", default: -1) == 39)
        }
    }

    @Test func anAsyncReadSeesAnotherProcesssWriteAndKeepsItsOwnKeys() async throws {
        let executable = try #require(stressExecutable(), "securestore-stress must be built")
        try await withTemporaryDirectoryAsync { dir in
            let prefs = try Preferences(location: try testLocation(dir))
            try await prefs.set("mine", forKey: "local")
            let writer = try ChildProcess([executable.path, "prefs", "writer", dir.path, "test", "remote", "3"])
            #expect(writer.wait() == .exited(0))
            try await prefs.reload()
            #expect(prefs.get("remote-2", default: -1) == 2, "the other process's value, read from the file")
            try await prefs.set("still mine", forKey: "local")
            let reread = try Preferences(location: try testLocation(dir))
            #expect(reread.get("local", default: "") == "still mine")
            #expect(Set(reread.keys) == ["local", "remote-0", "remote-1", "remote-2"], "no process lost a key")
        }
    }
}
