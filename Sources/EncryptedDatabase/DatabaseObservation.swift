// Observing a query: fresh results after every commit, this process's or another's.
internal import CSQLCipher
internal import Dispatch
internal import SecureStoreCore
internal import Synchronization

extension DatabaseReader {
    /// The results of `fetch`, first now and then again after every commit that changed rows of the tables it
    /// reads — through this handle, another connection of this process, or another process — as an
    /// `AsyncSequence`, for as long as it is iterated.
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// func watchCount(_ database: any DatabaseReader) async throws {
    ///     let counts = database.observe { db in
    ///         try db.scalar("SELECT count(*) FROM item WHERE done = 0", as: Int.self) ?? 0
    ///     }
    ///     for try await count in counts.removeDuplicates() { print("open items:", count) }
    /// }
    /// ```
    ///
    /// Which tables: with `tables` nil (the default), the tables `fetch` read the last time it ran, learned from
    /// SQLite's authorizer while its statements were prepared (views and joins give their underlying tables; a
    /// query that reads different tables on different runs is followed). Two cases observe every table: SQL
    /// run with `executeScript`, and `SELECT count(*) FROM t` without a column on SQLite before 3.19 (Debian
    /// 12's 3.15.2 does not report that read). Pass `tables` to name them yourself (compared without regard to
    /// case): a name that is neither a table nor a view of the database ends the sequence with
    /// ``DatabaseError/Code/misuse`` at once, instead of never firing.
    ///
    /// How a commit is seen:
    /// - **This handle's own commits** (a ``DatabaseQueue``, a ``DatabasePool``, SecureStore's `KeyedDatabase`,
    ///   also across its key rotations) wake the observation at once, through SQLite's update and commit hooks:
    ///   right after the write that committed, the query runs again. Only commits that changed rows of the
    ///   observed tables do so. The update hook does
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
    /// runs in one read transaction). A result equal to the previous one is delivered again unless you iterate
    /// ``AsyncThrowingStream/removeDuplicates()``. Only row changes are seen (a schema change alone is not). The
    /// work runs on a dispatch queue of the observation, never on Swift concurrency's cooperative pool; values
    /// reach the task that iterates, on its actor (`for try await` in a `@MainActor` function runs on the main
    /// actor). An error ends the sequence with that error. A handle of your own that conforms to
    /// ``DatabaseReader`` is observed by polling alone (`data_version` and `total_changes()`).
    public func observe<T: Sendable>(
        tables: Set<String>? = nil, interval: Duration = .milliseconds(100),
        _ fetch: @escaping @Sendable (Database) throws -> T
    ) -> AsyncThrowingStream<T, any Error> {
        if let source = self as? any DatabaseChangeSource {
            return observeWithHooks(source, tables: tables, interval: interval, fetch)
        }
        return observeByPolling(interval: interval) { db in
            try checkObservedTables(tables, db)
            return try fetch(db)
        }
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

/// Throws ``DatabaseError/Code/misuse`` naming the first of `tables` that is neither a table nor a view of `db`.
private func checkObservedTables(_ tables: Set<String>?, _ db: Database) throws {
    for table in (tables ?? []).sorted() {
        let exists = try db.scalar(
            "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE", [table],
            as: Int.self)
        if exists == nil {
            throw DatabaseError(
                .misuse,
                "observe(tables:) names '\(table)', which is neither a table nor a view of '\(db.path)': the "
                    + "observation would never fire; leave tables out to observe the tables the query reads")
        }
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
        var checked = false
        wake.yield()  // the first result, at once
        for await _ in wakeups {
            if Task.isCancelled { break }
            let previous = last
            let raised = flag.raised.exchange(false, ordering: .acquiringAndReleasing)
            // While the query runs and learns its tables, any commit wakes the observation: a commit of a table
            // this run reads for the first time is not missed between its snapshot and the narrowing below.
            if tables == nil, raised || last == nil { source.changeCenter.update(subscription, tables: nil) }
            let check = !checked
            do {
                let (version, value, read): (Int64, T?, Set<String>?) = try await runBlocking(on: queue) {
                    try source.readWithExternalVersion { version, db in
                        if check { try checkObservedTables(tables, db) }
                        guard raised || version != previous else { return (version, nil, nil) }
                        let (value, read) = try db.recordingReadTables { try fetch(db) }
                        return (version, value, read)
                    }
                }
                checked = true
                last = version
                if tables == nil, value != nil { source.changeCenter.update(subscription, tables: read) }
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

extension AsyncThrowingStream where Element: Equatable & Sendable, Failure == any Error {
    /// The same values, without those equal to the value just before them (GRDB's `removeDuplicates()`).
    ///
    /// ```swift
    /// import EncryptedDatabase
    ///
    /// func watchTitles(_ database: any DatabaseReader) async throws {
    ///     let titles = database.observe { db in try db.fetch("SELECT title FROM item ORDER BY title") { try $0.string(at: 0) } }
    ///     for try await list in titles.removeDuplicates() { print(list) }
    /// }
    /// ```
    ///
    /// Iterating the result iterates this sequence; ending it (or cancelling the task) ends this one.
    public func removeDuplicates() -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self, throwing: (any Error).self)
        let task = Task {
            var previous: Element?
            do {
                for try await value in self where value != previous {
                    previous = value
                    continuation.yield(value)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

extension Statement {
    /// The tables an observation of this statement watches: ``readTables`` and, on SQLite before 3.19, the tables
    /// of the b-trees its program opens for reading (`EXPLAIN`'s `OpenRead`, root page → `sqlite_master`), since
    /// that authorizer reports no read for `count(*)`, alone or as a subquery of a query that reads columns of
    /// other tables. Nil: unknown (observe every table). Computed once per statement, when an observation first
    /// runs it.
    func observedTables() -> Set<String>? {
        if let cached = observedTablesCache { return cached }
        var tables = readTables
        if Database.sqliteVersion < SQLiteVersion(3, 19, 0), let connection = database.connection {
            let opened = openedTables(connection)
            if let opened, !opened.isEmpty { tables = (tables ?? []).union(opened) }
            if opened == nil { tables = nil }
        }
        observedTablesCache = .some(tables)
        return tables
    }

    /// The tables (an index counts as its table) whose b-trees the statement's program opens for reading; nil
    /// when that cannot be told.
    private func openedTables(_ connection: OpaquePointer) -> Set<String>? {
        var pages: Set<Int64> = []
        guard rawStep(connection, "EXPLAIN " + sql, { statement in
            // addr, opcode, p1, p2 (the root page), p3 (the database: 0 is main), …
            guard let opcode = sqlite3_column_text(statement, 1) else { return }
            if String(cString: opcode) == "OpenRead", sqlite3_column_int64(statement, 4) == 0 {
                pages.insert(sqlite3_column_int64(statement, 3))
            }
        }) else { return nil }
        var tables: Set<String> = []
        for page in pages {
            guard rawStep(connection, "SELECT tbl_name FROM sqlite_master WHERE rootpage = \(page)", { statement in
                if let name = sqlite3_column_text(statement, 0) { tables.insert(String(cString: name).lowercased()) }
            }) else { return nil }
        }
        return tables
    }

    /// Prepares and steps `sql` on `connection` outside the statement cache (and so outside any recording),
    /// calling `row` for each row; false on an error.
    private func rawStep(_ connection: OpaquePointer, _ sql: String, _ row: (OpaquePointer) -> Void) -> Bool {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK, let statement else { return false }
        defer { sqlite3_finalize(statement) }
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: row(statement)
            case SQLITE_DONE: return true
            default: return false
            }
        }
    }
}
