// Change observation: changes through another handle or another process reach an observer.
import Dispatch
import Foundation
import TestSupport
import Synchronization
import Testing
@testable import Preferences

/// Collects what an observer is told, and waits for it.
private final class Reports: Sendable {
    private let keys = Mutex<[Set<String>]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func record(_ changed: Set<String>) {
        keys.withLock { $0.append(changed) }
        arrived.signal()
    }

    /// Waits until the reports so far satisfy `condition`, at most `seconds`; returns them.
    func wait(seconds: Double = 10, until condition: ([Set<String>]) -> Bool) -> [Set<String>] {
        let deadline = DispatchTime.now() + seconds
        while true {
            let now = keys.withLock { $0 }
            if condition(now) { return now }
            if arrived.wait(timeout: deadline) == .timedOut { return keys.withLock { $0 } }
        }
    }

    var all: [Set<String>] { keys.withLock { $0 } }
}

@Suite("Change observation")
struct ObservationTests {
    @Test func anotherHandlesChangesAreReportedByKeyAndUnchangedWritesAreNot() throws {
        try withTemporaryDirectory { dir in
            let watched = try Preferences(location: testLocation(dir))
            watched.register(defaults: ["defaulted": true])
            try watched.set("dark", forKey: "theme")
            let reports = Reports()
            let observation = try watched.observe { reports.record($0) }
            defer { observation.cancel() }

            let other = try Preferences(location: testLocation(dir))
            try other.set(1280, forKey: "width")
            #expect(reports.wait { $0.contains(["width"]) }.contains(["width"]))

            try other.set("dark", forKey: "theme")  // the same value: the file is rewritten, nothing changed
            _ = try other.remove("width")
            let afterRemove = reports.wait { $0.count >= 2 }
            #expect(afterRemove == [["width"], ["width"]], "the removal, and nothing for the unchanged theme")
            #expect(!afterRemove.joined().contains("defaulted"))
        }
    }

    @Test func anotherProcessesChangesAreReported() throws {
        let executable = try #require(stressExecutable(), "securestore-stress must be built (swift build --build-tests)")
        try withTemporaryDirectory { dir in
            let watched = try Preferences(location: testLocation(dir))
            let reports = Reports()
            let observation = try watched.observe { reports.record($0) }
            defer { observation.cancel() }
            let process = try ChildProcess([executable.path, "prefs", "writer", dir.path, "test", "remote", "3"])
            #expect(process.wait() == .exited(0))
            let seen = reports.wait { Set($0.joined()) == ["remote-0", "remote-1", "remote-2"] }
            #expect(Set(seen.joined()) == ["remote-0", "remote-1", "remote-2"])
            #expect(watched.get("remote-2", default: -1) == 2)
        }
    }

    @Test func aCancelledObservationReportsNothingMore() throws {
        try withTemporaryDirectory { dir in
            let watched = try Preferences(location: testLocation(dir))
            let reports = Reports()
            let observation = try watched.observe { reports.record($0) }
            try watched.set(1, forKey: "before")
            #expect(reports.wait { !$0.isEmpty } == [["before"]])
            observation.cancel()
            try watched.set(2, forKey: "after")
            // A live observation reports within milliseconds; a cancelled one never does.
            #expect(reports.wait(seconds: 1) { $0.count > 1 } == [["before"]])
        }
    }
}
