import Foundation
import Testing
import TestSupport

/// A device offline while another makes 100 000 changes catches up, and the memory it takes to do so does not grow
/// with the number of changes (issue 26). Each side is its own process of the stress helper (`securestore-stress sync
/// offline|catch-up`, key files under public test passphrases), so that the peak RSS read is the catching-up
/// device's alone.
@Suite(.serialized) struct SyncOfflineTests {
    /// Runs the two steps for `count` changes and returns the catching-up process's peak RSS in kB.
    private func catchUp(_ count: Int) throws -> Int {
        let folder = try TemporaryDirectory()
        let made = try run([stressExecutable, "sync", "offline", folder.path, String(count)])
        #expect(made.status == 0, "offline \(count): \(made.stderr)")
        let caught = try run([stressExecutable, "sync", "catch-up", folder.path, String(count)])
        #expect(caught.status == 0, "catch-up \(count): \(caught.stderr)")
        // "caught up: N tasks in B bundles, peak RSS K kB"
        #expect(caught.stdout.hasPrefix("caught up: \(count) tasks"), "\(caught.stdout)")
        let words = caught.stdout.split(separator: " ")
        guard let index = words.firstIndex(of: "RSS"), index + 1 < words.count, let peak = Int(words[index + 1]) else {
            throw HarnessFailure(description: "no peak RSS in '\(caught.stdout)'")
        }
        return peak
    }

    /// 20 000 changes (the engine's window of ten bundles is full already) and 100 000: the device ends with every
    /// task, and its peak RSS is the same within 8 MiB and under 96 MiB for both (61 MB measured for both on
    /// Debian 12; a device that held the changes in memory would need tens of MB more per 100 000).
    @Test func aDeviceOfflineFor100000ChangesCatchesUpInBoundedMemory() throws {
        let small = try catchUp(20_000)
        let large = try catchUp(100_000)
        #expect(large <= small + 8 * 1024, "peak RSS \(large) kB after 100 000 changes, \(small) kB after 20 000")
        #expect(large < 96 * 1024 && small < 96 * 1024, "peak RSS \(small) kB / \(large) kB")
    }
}
