// Two threads per large attachment read: SQLCipher's work (reading, decrypting and authenticating pages) on one,
// SHA-256 and the caller's bytes on the other, joined by a small bounded channel so memory stays a few chunks
// whatever the size. Writes stay on one thread: the same split measured no faster there (Docs/attachments.md,
// "Making it faster").
internal import Dispatch
internal import Foundation
internal import Synchronization

/// A bounded, single-producer single-consumer channel of values, for handing chunks from one thread to another.
///
/// The producer ``send(_:)``s values and ends with ``finish(_:)``; it waits while `capacity` values are
/// queued. The consumer ``receive()``s them in order. Either side may stop early: the consumer with ``cancel()``
/// (a waiting or later ``send(_:)`` returns false), the producer by finishing with an error.
final class ChunkChannel<Element: Sendable>: Sendable {
    /// What the consumer gets.
    enum Message: Sendable {
        case value(Element)
        case end
        case failure(any Error)
    }

    private struct State {
        var queue: [Message] = []
        var head = 0
        var cancelled = false
    }

    private let state = Mutex(State())
    /// Free places for values; the end message does not need one.
    private let places: DispatchSemaphore
    private let messages = DispatchSemaphore(value: 0)

    init(capacity: Int) {
        // Made at 0 and raised, not made at `capacity`: Dispatch traps when a semaphore is released below the value
        // it was made with, which is where a channel whose consumer stopped early leaves `places`.
        places = DispatchSemaphore(value: 0)
        for _ in 0..<max(1, capacity) { places.signal() }
    }

    /// Queues `value`, waiting for a free place; false when the consumer cancelled (the value is dropped).
    func send(_ value: Element) -> Bool {
        places.wait()
        let accepted = state.withLock { state -> Bool in
            guard !state.cancelled else { return false }
            state.queue.append(.value(value))
            return true
        }
        if accepted { messages.signal() } else { places.signal() }
        return accepted
    }

    /// Queues the end: nothing more (`error` nil) or a failure the consumer rethrows after the values before it.
    func finish(_ error: (any Error)?) {
        state.withLock { $0.queue.append(error.map { .failure($0) } ?? .end) }
        messages.signal()
    }

    /// The next message, waiting for it.
    func receive() -> Message {
        messages.wait()
        let message = state.withLock { state -> Message in
            let message = state.queue[state.head]
            state.head += 1
            if state.head == state.queue.count {
                state.queue.removeAll(keepingCapacity: true)
                state.head = 0
            }
            return message
        }
        if case .value = message { places.signal() }
        return message
    }

    /// Tells the producer to stop: its waiting or next ``send(_:)`` returns false.
    func cancel() {
        state.withLock { $0.cancelled = true }
        places.signal()
    }
}

/// Runs `work` on another thread and lets the caller wait for it to end.
///
/// The work runs on a serial queue of its own, which Dispatch serves from its overcommitting pool: it gets a thread
/// even when every worker of the global queues is busy, so the caller, which blocks until the work sends its first
/// chunk, can never wait for a thread that does not come. (A new `Thread` per read did the same but cost ~10 % on
/// reads of 300 KB to 1 MB.)
struct ChunkWorker: Sendable {
    private let ended = DispatchSemaphore(value: 0)

    /// Starts `work` now.
    init(_ work: @escaping @Sendable () -> Void) {
        let ended = ended
        DispatchQueue(label: "securestore.attachment-reader", qos: .userInitiated).async {
            work()
            ended.signal()
        }
    }

    /// Waits until the work has returned.
    func join() { ended.wait() }
}

/// Thrown inside the producer when the consumer cancelled, to leave the database transaction; never escapes.
struct ChunkChannelCancelled: Error {}

/// Thrown by the chunk reader when a chunk is damaged, missing or of the wrong size; the read turns it into a
/// `verificationFailed` error that also says how many bytes were delivered before it.
struct ChunkDamage: Error {
    let reason: String
    /// Whether SQLCipher found a page that does not authenticate (or a structure broken by one), so that the page can
    /// be named.
    var isAuthentication = false
    /// Whether the chunk is not there at all (damage, or an attachment deleted while it was read).
    var isMissing = false
}

extension AttachmentStore {
    /// Whether an attachment of `chunkCount` chunks is read on two threads: only when there is more than one
    /// chunk (a thread hand-off costs more than hashing one small chunk) and the read-ahead depth is not 0.
    static func pipelines(chunkCount: Int, depth: Int) -> Bool { chunkCount > 1 && depth > 0 }
}
