// Observing a query: fresh results after every commit, this process's or another's.
internal import Dispatch
internal import SecureStoreCore
internal import Synchronization

extension DatabaseReader {
    /// The results of `fetch`, first now and then again after every commit that changed rows of `tables` —
    /// through this handle, another connection of this process, or another process — as an `AsyncSequence`,
    /// for as long as it is iterated.
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// func watchCount(_ database: any DatabaseReader) async throws {
    ///     let counts = database.observe(tables: ["item"]) { db in
    ///         try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
    ///     }
    ///     for try await count in counts { print("items:", count) }
    /// }
    /// ```
    ///
    /// How a commit is seen:
    /// - **This handle's own commits** (a ``DatabaseQueue``, a ``DatabasePool``, SecureStore's `KeyedDatabase`,
    ///   also across its key rotations) wake the observation at once, through SQLite's update and commit hooks:
    ///   right after the write that committed, the query runs again. Only commits that changed rows of `tables`
    ///   do so (names compared without regard to case; `nil`, the default, means any table). The update hook does
    ///   not name the rows of `WITHOUT ROWID` tables: a commit that changed such rows (they are counted) wakes
    ///   every observation of the handle, whatever its tables. So that every deleted row is seen, a `DELETE`
    ///   without `WHERE` deletes row by row instead of emptying the table at once (SQLite's truncate
    ///   optimization is turned off, as GRDB does).
    /// - **Other connections and processes**: every `interval`, the observation asks the handle's writing
    ///   connection for SQLite's `PRAGMA data_version`, which moves when another connection commits; then the
    ///   query runs again (whatever tables the commit touched: another process's tables are not known here).
    ///   Such a commit is seen at most `interval` later.
    ///
    /// Several commits close together may give one result, which is always one consistent snapshot (the query
    /// runs in one read transaction). Only row changes are seen (a schema change alone is not). The work runs on
    /// a dispatch queue of the observation, never on Swift concurrency's cooperative pool; an error ends the
    /// sequence with that error. A handle of your own that conforms to ``DatabaseReader`` is observed by
    /// polling alone (`data_version` and `total_changes()`), and `tables` is not used.
    public func observe<T: Sendable>(
        tables: Set<String>? = nil, interval: Duration = .milliseconds(100),
        _ fetch: @escaping @Sendable (Database) throws -> T
    ) -> AsyncThrowingStream<T, any Error> {
        if let source = self as? any DatabaseChangeSource {
            return observeWithHooks(source, tables: tables, interval: interval, fetch)
        }
        return observeByPolling(interval: interval, fetch)
    }

    /// Polls `data_version` and `total_changes()` in a read transaction every `interval`.
    private func observeByPolling<T: Sendable>(
        interval: Duration, _ fetch: @escaping @Sendable (Database) throws -> T
    ) -> AsyncThrowingStream<T, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: T.self, throwing: (any Error).self)
        let queue = DispatchQueue(label: "securestore.database-observation")
        let task = Task.detached { [self] in
            var last: [Int64]? = nil
            while !Task.isCancelled {
                let previous = last
                do {
                    let (token, value): ([Int64], T?) = try await runBlocking(on: queue) {
                        try self.read { db in
                            let token = [
                                try db.scalar("PRAGMA data_version", as: Int64.self) ?? 0,
                                try db.scalar("SELECT total_changes()", as: Int64.self) ?? 0,
                            ]
                            return (token, token == previous ? nil : try fetch(db))
                        }
                    }
                    if let value {
                        last = token
                        continuation.yield(value)
                    }
                } catch {
                    continuation.finish(throwing: error)
                    return
                }
                try? await Task.sleep(for: interval)
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

/// Set by the change center when a commit of the handle touched the observed tables; read and cleared by the
/// observation before it reads.
private final class WakeFlag: Sendable {
    let raised = Atomic<Bool>(true)
}

/// Wakes on the handle's own commits (its change center) and on a timer (for other connections' commits).
private func observeWithHooks<T: Sendable>(
    _ source: any DatabaseChangeSource, tables: Set<String>?, interval: Duration,
    _ fetch: @escaping @Sendable (Database) throws -> T
) -> AsyncThrowingStream<T, any Error> {
    let (stream, continuation) = AsyncThrowingStream.makeStream(of: T.self, throwing: (any Error).self)
    // One pending wake-up is enough: a read after it sees every commit before it.
    let (wakeups, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    let flag = WakeFlag()
    let subscription = source.changeCenter.subscribe(tables: tables) {
        flag.raised.store(true, ordering: .releasing)
        wake.yield()
    }
    let queue = DispatchQueue(label: "securestore.database-observation")
    let timer = Task.detached {
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            wake.yield()
        }
    }
    let task = Task.detached {
        var last: Int64? = nil
        wake.yield()  // the first result, at once
        for await _ in wakeups {
            if Task.isCancelled { break }
            let previous = last
            let raised = flag.raised.exchange(false, ordering: .acquiringAndReleasing)
            do {
                let (version, value): (Int64, T?) = try await runBlocking(on: queue) {
                    try source.readWithExternalVersion { version, db in
                        (version, raised || version != previous ? try fetch(db) : nil)
                    }
                }
                last = version
                if let value { continuation.yield(value) }
            } catch {
                continuation.finish(throwing: error)
                break
            }
        }
        continuation.finish()
    }
    continuation.onTermination = { _ in
        source.changeCenter.unsubscribe(subscription)
        timer.cancel()
        task.cancel()
        wake.finish()
    }
    return stream
}
