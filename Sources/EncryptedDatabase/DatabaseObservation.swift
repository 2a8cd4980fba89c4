// Observing a query: fresh results after every commit, this process's or another's.
internal import Dispatch
internal import SecureStoreCore

extension DatabaseReader {
    /// The results of `fetch`, first now and then again after every commit that changed rows — through this
    /// handle, another connection of this process, or another process — as an `AsyncSequence`, for as long as
    /// it is iterated.
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// func watchCount(_ database: any DatabaseReader) async throws {
    ///     let counts = database.observe { db in try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0 }
    ///     for try await count in counts { print("items:", count) }
    /// }
    /// ```
    ///
    /// Changes are found by asking the connection, every `interval`, for SQLite's `PRAGMA data_version`
    /// (which moves when another connection or process commits) and `total_changes()` (which moves with this
    /// connection's own writes); a change runs `fetch` again in the same read transaction, so a result is always
    /// one consistent snapshot. Each commit is seen at most `interval` later; several commits within one
    /// interval give one result. Only row changes are seen (a schema change alone is not). The work runs on a
    /// dispatch queue of the observation, never on Swift concurrency's cooperative pool; an error ends the
    /// sequence with that error.
    public func observe<T: Sendable>(
        interval: Duration = .milliseconds(100), _ fetch: @escaping @Sendable (Database) throws -> T
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
