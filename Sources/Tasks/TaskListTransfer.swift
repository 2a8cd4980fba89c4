// Streaming over every task (export) and importing tasks from a stream, at a memory cost that does not depend
// on the number of tasks.
internal import EncryptedDatabase
internal import SecureStore
public import Foundation

extension TaskList {
    /// What an import does with a task whose ID is already in the list (or earlier in the same import).
    public enum DuplicatePolicy: String, Sendable, Hashable, CaseIterable {
        /// Keep the task in the list; the imported one is counted in ``ImportSummary/skipped``.
        case skip
        /// Overwrite the title, done and creation date of the task in the list with the imported ones.
        case replace
        /// Stop with ``SecureStoreError/alreadyExists`` naming the ID; the current transaction is rolled back.
        case fail
    }

    /// What ``importTasks(onDuplicate:batchSize:progress:next:)`` did.
    public struct ImportSummary: Sendable, Hashable {
        /// Tasks added.
        public var inserted = 0
        /// Tasks whose ID was already there and that were replaced (``DuplicatePolicy/replace``).
        public var replaced = 0
        /// Tasks whose ID was already there and that were left alone (``DuplicatePolicy/skip``).
        public var skipped = 0
        /// Every task read: `inserted + replaced + skipped`.
        public var read: Int { inserted + replaced + skipped }

        /// An empty summary.
        public init() {}
    }

    /// Calls `body` with every task in `order`, one at a time, inside one read transaction (one consistent
    /// snapshot). A single statement is stepped row by row: memory does not grow with the number of tasks.
    ///
    /// ```swift
    /// try tasks.forEachTask { task in writer.write(line(for: task)) }
    /// ```
    ///
    /// `body` runs while the database's connection is held: it must not use the task list itself. An error
    /// thrown by `body` stops the iteration and is rethrown. During the scan the connection's page cache is
    /// 2 MiB (a single pass gains nothing from more); its size is restored afterwards.
    public func forEachTask(order: Order = .oldestFirst, _ body: (TaskItem) throws -> Void) throws {
        try database.read { db in
            // One pass over the table gains nothing from a big page cache, and would fill it (64 MiB by default):
            // a small one for the scan keeps the peak RSS flat; the connection's own size comes back after.
            let saved = try db.scalar("PRAGMA cache_size", as: Int.self)
            try db.execute("PRAGMA cache_size = -\(Self.scanCacheKiB)")
            defer { if let saved { try? db.execute("PRAGMA cache_size = \(saved)") } }
            try db.forEachRow("SELECT \(Self.columns) FROM tasks\(order.orderBySQL)") { row in
                try body(try Self.decode(row))
            }
        }
    }

    /// Adds the tasks `next` returns until it returns `nil`, in one transaction (`batchSize` nil) or in
    /// transactions of `batchSize` tasks, handling tasks whose ID exists as `onDuplicate` says.
    ///
    /// ```swift
    /// var lines = input.makeIterator()
    /// let summary = try tasks.importTasks(onDuplicate: .skip) { try lines.next().map(parse) }
    /// ```
    ///
    /// Titles are validated and trimmed as in ``create(title:done:createdAt:id:)``. Only the tasks of the
    /// current transaction are in memory (none are collected), so importing a million tasks takes the memory
    /// of one. An error — thrown by `next` (a bad line), an invalid title, or a duplicate under
    /// ``DuplicatePolicy/fail`` — rolls back the current transaction: in one transaction nothing is imported;
    /// with batches, the batches committed before stay (the error does not say otherwise; callers report
    /// `progress`). `progress` is called after each commit with the number of tasks read so far.
    ///
    /// - Throws: ``SecureStoreError/invalidArgument`` for an invalid title or a `batchSize` below 1,
    ///   ``SecureStoreError/alreadyExists`` naming the first duplicate ID under ``DuplicatePolicy/fail``, and
    ///   whatever `next` throws.
    @discardableResult
    public func importTasks(
        onDuplicate policy: DuplicatePolicy = .fail, batchSize: Int? = nil,
        progress: (ImportSummary) -> Void = { _ in }, next: () throws -> TaskItem?
    ) throws -> ImportSummary {
        if let batchSize, batchSize < 1 {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a batch size must be at least 1 (\(batchSize))")
        }
        let limit = batchSize ?? Int.max
        var summary = ImportSummary()
        var finished = false
        while !finished {
            summary = try database.write { db in
                var batch = summary
                // Under fail, the statement every insert uses (OR ROLLBACK: no statement journal); skip and replace
                // need to go on after a duplicate, so they insert OR IGNORE and look at `changes`.
                let insert = try db.cachedStatement(policy == .fail ? Self.insertSQL : Self.insertIgnoringSQL)
                let replace = policy == .replace ? try db.cachedStatement(Self.replaceSQL) : nil
                var count = 0
                while count < limit {
                    guard let task = try next() else {
                        finished = true
                        break
                    }
                    count += 1
                    let title: String
                    do {
                        title = try Self.validatedTitle(task.title)
                    } catch let error as SecureStoreError {
                        throw SecureStoreError(error.code, "task \(batch.read + 1): \(error.message)")
                    }
                    do {
                        try insert.execute([task.createdAtMicroseconds, task.id, title, task.done])
                    } catch DatabaseError.Code.constraint where policy == .fail {
                        throw Self.duplicate(task, at: batch.read + 1)
                    }
                    if policy == .fail || db.changes == 1 {
                        batch.inserted += 1
                        continue
                    }
                    switch policy {
                    case .skip:
                        batch.skipped += 1
                    case .replace:
                        try replace?.execute([task.createdAtMicroseconds, title, task.done, task.id])
                        batch.replaced += 1
                    case .fail:
                        throw Self.duplicate(task, at: batch.read + 1)
                    }
                }
                return batch
            }
            progress(summary)
        }
        return summary
    }

    private static func duplicate(_ task: TaskItem, at position: Int) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.alreadyExists,
            "task \(position): a task with the ID \(task.id.uuidString.lowercased()) already exists")
    }

    /// The page cache of a ``forEachTask(order:_:)`` scan, in KiB.
    static let scanCacheKiB = 2_048

    /// Adds a task unless its ID (or its (created_at, id) key) is taken: `changes` is 0 then. IGNORE rather than
    /// ROLLBACK so that skip and replace can go on; no constraint of this statement can abort half-way, so it
    /// runs without a statement journal, as the other writes do.
    static let insertIgnoringSQL = "INSERT OR IGNORE INTO tasks (created_at, id, title, done) VALUES (?, ?, ?, ?)"

    /// Overwrites a task by ID. An UPDATE, not INSERT OR REPLACE: REPLACE's implicit delete does not fire
    /// the delete trigger (recursive triggers are off), which would leave the counts wrong.
    static let replaceSQL = "UPDATE OR ROLLBACK tasks SET created_at = ?, title = ?, done = ? WHERE id = ?"
}

extension TaskItem {
    /// Microseconds since 1970-01-01 00:00:00 UTC, the stored creation date: exact, unlike ``createdAt``'s
    /// `Double` seconds.
    public var createdAtMicrosecondsSince1970: Int64 { createdAtMicroseconds }

    /// A task value with its creation date given in whole microseconds since 1970 (exact).
    public init(id: UUID, title: String, done: Bool, createdAtMicrosecondsSince1970 microseconds: Int64) {
        self.init(id: id, title: title, done: done, microseconds: microseconds)
    }
}
