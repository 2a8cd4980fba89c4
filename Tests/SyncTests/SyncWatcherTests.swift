import Dispatch
import Foundation
import Synchronization
import Testing
import TestSupport
import Tasks
@testable import Sync

/// What a watcher reported, by name, as another thread reads it.
private final class EventLog: Sendable {
    private let names = Mutex<[String]>([])

    func append(_ event: SyncWatchEvent) {
        let name =
            switch event {
            case .started: "started"
            case .synced(let report, _): report.appliedBundles > 0 ? "applied" : report.sentBundles > 0 ? "sent" : "synced"
            case .failed: "failed"
            case .recovered: "recovered"
            case .snapshotted: "snapshotted"
            case .cleaned: "cleaned"
            case .stopped: "stopped"
            }
        names.withLock { $0.append(name) }
    }

    var all: [String] { names.withLock { $0 } }
}

/// Runs `watcher` on a thread of its own; the returned semaphore is signalled when `run` returns.
private func start(_ watcher: SyncWatcher, _ log: EventLog) -> DispatchSemaphore {
    let ended = DispatchSemaphore(value: 0)
    Thread {
        do {
            try watcher.run { log.append($0) }
        } catch {
            Issue.record("run threw \(error)")
        }
        ended.signal()
    }.start()
    return ended
}

private func eventually(seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    } while Date() < deadline
    return false
}

/// `SyncWatcher`, the library's `sync watch` (Docs/sync.md, "Syncing by itself").
@Suite(.serialized) struct SyncWatcherTests {
    /// Two programs, each with a watcher on its own thread: a task one of them adds through its task list reaches the
    /// other's database with no call to `sync()`; `stop()` from another thread ends `run` (its last event `.stopped`),
    /// and a watcher stopped that way syncs nothing more.
    @Test func aTaskAddedByTheProgramReachesTheOtherDeviceAndStopEndsTheWatcher() throws {
        let folder = try TemporaryDirectory()
        let a = try SyncDevice_(), b = try SyncDevice_()
        let code = try a.initialize(.folder(folder.path))
        try b.join(.folder(folder.path), code)
        try b.sync()
        let watchA = try SyncWatcher(engine: a.engine), watchB = try SyncWatcher(engine: b.engine)
        let logA = EventLog(), logB = EventLog()
        let endedA = start(watchA, logA), endedB = start(watchB, logB)
        #expect(eventually { logA.all.count >= 2 && logB.all.count >= 2 }, "\(logA.all) \(logB.all)")

        let added = try a.tasks.create(title: "Written by the program").id
        #expect(try eventually { try b.tasks.task(id: added)?.title == "Written by the program" }, "\(logA.all) \(logB.all)")
        // (B's watcher reports its sync when the sync returns, a little after the row it applied is in the database.)
        #expect(eventually { logA.all.contains("sent") && logB.all.contains("applied") }, "\(logA.all) \(logB.all)")

        for watcher in [watchA, watchB] { watcher.stop() }
        #expect(endedA.wait(timeout: .now() + 30) == .success && endedB.wait(timeout: .now() + 30) == .success)
        #expect(logA.all.last == "stopped" && logB.all.last == "stopped")
        let countA = logA.all.count
        _ = try a.tasks.create(title: "After the stop")
        Thread.sleep(forTimeInterval: 1)
        #expect(logA.all.count == countA)
        #expect(try b.tasks.task(id: added) != nil)
    }
}
