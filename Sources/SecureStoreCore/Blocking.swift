// Blocking work for async callers: on a dispatch queue of the handle's own, never on Swift concurrency's
// cooperative pool (a keyring call or a write waiting for a lock would hold one of its few threads).
package import Dispatch

/// Runs `body` on `queue` and resumes the caller with its result. `body` may block (D-Bus, locks, fsync).
package func runBlocking<T: Sendable>(
    on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        queue.async {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}
