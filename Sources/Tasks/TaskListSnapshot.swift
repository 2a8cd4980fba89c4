// A listing of any length streamed row by row, with the counts that go with it, in one read transaction.
internal import EncryptedDatabase

extension TaskList {
    /// The task list as one read transaction sees it: counts and listings that agree with each other.
    ///
    /// Get one from ``snapshot(_:)``; it is valid only inside that closure (it uses the database's connection,
    /// which the closure holds), and must not be kept or passed to another thread.
    ///
    /// ```swift
    /// try tasks.snapshot { snapshot in
    ///     let total = try snapshot.count(.open)
    ///     try snapshot.forEachTask(.open) { task in print(task.title) }   // every open task, newest first
    ///     print("\(total) open")
    /// }
    /// ```
    public struct Snapshot {
        let db: Database

        /// How many tasks match `filter`: one row without a title search, a scan of the titles with one.
        public func count(_ filter: Filter = .all) throws -> Int {
            try TaskList.count(db, filter)
        }

        /// How many tasks there are, done and open, from one row.
        public func counts() throws -> Counts {
            try TaskList.counts(db)
        }

        /// Calls `body` with the tasks matching `filter` in `order`, after skipping `offset` of them, at most
        /// `limit` (every one when `limit` is nil), one at a time; returns how many it called `body` with.
        ///
        /// One statement is stepped row by row and no task is kept: memory does not depend on how many tasks
        /// there are, and the first task reaches `body` as soon as SQLite finds it. During the scan the
        /// connection's page cache is 2 MiB (a single pass gains nothing from more); its size is restored
        /// afterwards. A word search with many matches keeps the connection's cache (it looks each task up in the
        /// index's numbering, in random order). A page (`limit`) of a word with many matches is known whole, at
        /// most `limit` tasks kept, before its first task reaches `body` (Docs/tasks.md, "Searching"). `offset`
        /// makes SQLite step over the skipped tasks. An error thrown by `body` stops the scan and is rethrown.
        ///
        /// - Throws: ``SecureStoreError/Code/invalidArgument`` for a negative `limit` or `offset`.
        @discardableResult
        public func forEachTask(
            _ filter: Filter = .all, order: Order = .newestFirst, offset: Int = 0, limit: Int? = nil,
            _ body: (TaskItem) throws -> Void
        ) throws -> Int {
            try TaskList.checkPaging(offset: offset, limit: limit ?? 0)
            if limit == 0 { return 0 }
            let filter = try filter.runnable(in: db)
            let window = try WordSearchWindow(filter, order, db)
            // A page (not a whole listing) of a common word: from the window when it can say (no sort, no scan
            // of every match); the tasks are handed over once the page is known.
            if let window, let limit, let page = try window.page(db, filter, order, nil, offset, limit) {
                for task in page { try body(try TaskList.authenticated(task, db)) }
                return page.count
            }
            var clause = TaskListClause(listing: filter, window: window)
            if clause.matchesNothing { return 0 }
            // LIMIT -1: no limit (SQLite's spelling); the statement is the same text either way, so it is cached once.
            clause.arguments.append(limit ?? -1)
            clause.arguments.append(offset)
            var count = 0
            func scan() throws {
                try db.forEachRow(
                    "SELECT \(TaskList.columns) FROM tasks\(clause.whereSQL)\(order.orderBySQL) LIMIT ? OFFSET ?",
                    StatementArguments(clause.arguments)
                ) { row in
                    try body(try TaskList.authenticated(TaskList.decode(row), db))
                    count += 1
                }
            }
            // A word search with more matches than its window checks each task against the matches through the
            // index's numbering, looked up by ID: pages in random order, which a 2 MiB cache decrypts again for
            // nearly every task (1M tasks, "pay": 8.5 s; 1.7 s with the connection's own cache, `sqlcipher` shell).
            if let window, !window.complete { try scan() } else { try TaskList.withScanCache(db, scan) }
            return count
        }
    }

    /// Runs `body` with a ``Snapshot`` of the task list: one read transaction, so that the counts and the
    /// listings read inside it agree, however many tasks other processes add or delete meanwhile.
    ///
    /// ```swift
    /// let shown = try tasks.snapshot { snapshot in
    ///     try snapshot.forEachTask(.all, order: .oldestFirst) { try writer.encode($0) }
    /// }
    /// ```
    ///
    /// `body` runs while the database's connection is held: it must not use the task list itself (a nested
    /// call waits for the connection it holds).
    public func snapshot<T>(_ body: (Snapshot) throws -> T) throws -> T {
        try database.read { db in try body(Snapshot(db: db)) }
    }

    /// Runs `body` with the connection's page cache at ``scanCacheKiB`` (a single pass gains nothing from the
    /// connection's 64 MiB, which it would fill), then gives the cache its size back.
    static func withScanCache<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        try withCache(db, kib: scanCacheKiB, body)
    }

    /// Runs `body` with the connection's page cache at `kib` KiB, then gives the cache its size back.
    static func withCache<T>(_ db: Database, kib: Int, _ body: () throws -> T) throws -> T {
        let saved = try db.scalar("PRAGMA cache_size", as: Int.self)
        try db.execute("PRAGMA cache_size = -\(kib)")
        defer { if let saved { try? db.execute("PRAGMA cache_size = \(saved)") } }
        return try body()
    }
}
