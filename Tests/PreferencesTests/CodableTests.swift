// Codable values in a domain: stored as the values their JSON reads as, within the limits; a readable
// PreferenceValue; changes as an AsyncSequence (from another process).
import Foundation
import TestSupport
import Testing
@testable import Preferences

private struct Window: Codable, Equatable {
    enum Mode: String, Codable { case normal, maximized }
    var width: Int
    var height: Int
    var scale: Double
    var mode: Mode
    var title: String?
    var opened: Date
    var recent: [String]
}

@Suite struct CodableTests {
    @Test func aCodableValueRoundTripsAndIsStoredAsOrdinaryValues() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let window = Window(
                width: 1200, height: 800, scale: 1.5, mode: .maximized, title: nil,
                opened: Date(timeIntervalSince1970: 1_700_000_000), recent: ["a.txt", "b.txt"])
            let prefs = try Preferences(location: location)
            try prefs.set(encoding: window, forKey: "window")
            // Another handle reads it back (from the file), and sees ordinary typed values.
            let reopened = try Preferences(location: location)
            #expect(try reopened.value(decoding: Window.self, forKey: "window") == window)
            guard case .dictionary(let stored)? = reopened.value(forKey: "window") else {
                Issue.record("not stored as a dictionary")
                return
            }
            #expect(stored["width"] == .int(1200))
            #expect(stored["scale"] == .double(1.5))
            #expect(stored["mode"] == .string("maximized"))
            #expect(stored["recent"] == .array([.string("a.txt"), .string("b.txt")]))
            #expect(stored["title"] == nil)
            #expect(try reopened.value(decoding: Window.self, forKey: "absent") == nil)
        }
    }

    @Test func aCodableValueOverTheLimitIsRefusedAndTheFileUnchanged() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let prefs = try Preferences(location: location, limits: PreferencesLimits(maxValueSize: 1024))
            try prefs.set(encoding: ["small"], forKey: "list")
            let before = try Data(contentsOf: location.fileURL)
            let error = #expect(throws: PreferencesError.self) {
                try prefs.set(encoding: Array(repeating: "xxxxxxxxxx", count: 200), forKey: "list")
            }
            #expect(error?.code == .limitExceeded)
            #expect(try Data(contentsOf: location.fileURL) == before)
        }
    }

    @Test func aValueThatDoesNotDecodeIsATypeMismatchNamingTheKey() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: try testLocation(dir))
            try prefs.set("dark", forKey: "window")
            let error = #expect(throws: PreferencesError.self) { try prefs.value(decoding: Window.self, forKey: "window") }
            #expect(error?.code == .typeMismatch)
            #expect(error?.message == "the value for \"window\" (String) does not decode as Window")
        }
    }

    @Test func aPreferenceValuePrintsAsCompactJSON() {
        #expect(PreferenceValue.string("dark").description == "\"dark\"")
        #expect(PreferenceValue.int(1200).description == "1200")
        #expect(PreferenceValue.array([.int(1), .bool(true)]).description == "[1,true]")
        #expect("\(PreferenceValue.dictionary(["w": .int(800)]))" == "{\"w\":800}")
    }

    @Test func changesArriveAsAnAsyncSequenceFromAnotherProcess() async throws {
        let executable = try #require(stressExecutable(), "securestore-stress must be built")
        try await withTemporaryDirectoryAsync { dir in
            let prefs = try Preferences(location: try testLocation(dir))
            let changes = try prefs.changes()
            let writer = try ChildProcess([executable.path, "prefs", "writer", dir.path, "test", "remote", "3"])
            #expect(writer.wait() == .exited(0))
            var seen: Set<String> = []
            for await keys in changes {
                seen.formUnion(keys)
                if seen.isSuperset(of: ["remote-0", "remote-1", "remote-2"]) { break }
            }
            #expect(seen.isSuperset(of: ["remote-0", "remote-1", "remote-2"]))
        }
    }
}
