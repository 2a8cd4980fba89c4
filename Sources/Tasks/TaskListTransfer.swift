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
        /// Stop with ``SecureStoreError/Code/alreadyExists`` naming the ID; the current transaction is rolled back.
        case fail
    }

    /// What ``importTasks(onDuplicate:batchSize:titles:progress:next:)`` did.
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
            try Self.withScanCache(db) {
                try db.forEachRow("SELECT \(Self.columns) FROM tasks\(order.orderBySQL)") { row in
                    try body(try Self.authenticated(Self.decodeForExport(row), db))
                }
            }
        }
    }

    /// `task`, once SQLCipher has authenticated every page it was read from. A title long enough to spill onto
    /// overflow pages may end on a page that failed its HMAC check, which SQLCipher hands back as zeros and reports
    /// only at the next page read (issue 21): before such a task leaves the process (a streamed listing or export
    /// writes each task as it is read), the pending error is asked for. Short titles live inside their b-tree page,
    /// which is checked when the cursor reaches it, so they cost nothing.
    static func authenticated(_ task: TaskItem, _ db: Database) throws -> TaskItem {
        if task.title.utf8.count > 900 { try db.checkPagesAuthenticated() }
        return task
    }

    /// What ``importTasks(onDuplicate:batchSize:titles:progress:next:)`` does with titles.
    public enum ImportTitles: Sendable, Hashable {
        /// Trimmed and checked as ``create(title:done:createdAt:id:)`` does (``validatedTitle(_:)``): for new
        /// tasks, made by a person or a program.
        case validated
        /// Stored exactly as given, whatever text they are (empty, control characters, line breaks, any
        /// length): for tasks restored from an export, which writes whatever the table holds (Docs/tasks.md,
        /// "What a title may hold").
        case exact
    }

    /// Adds the tasks `next` returns until it returns `nil`, in one transaction (`batchSize` nil) or in
    /// transactions of `batchSize` tasks, handling tasks whose ID exists as `onDuplicate` says.
    ///
    /// ```swift
    /// var lines = input.makeIterator()
    /// let summary = try tasks.importTasks(onDuplicate: .skip) { try lines.next().map(parse) }
    /// ```
    ///
    /// Titles are validated and trimmed as in ``create(title:done:createdAt:id:)`` unless `titles` is
    /// ``ImportTitles/exact``. Memory does not depend on the number of tasks: tasks are read in chunks of
    /// at most ``importChunkCount`` (and about ``importChunkBytes`` of titles), each chunk is inserted in the
    /// order of its IDs (so that the ID index is written in one sweep rather than at random places, which a
    /// small page cache could not hold), and the page cache stays at ``importCacheKiB`` during the import.
    /// The outcome is the same as inserting one task after the other: under ``DuplicatePolicy/skip`` the
    /// first of several tasks with one ID stays, under ``DuplicatePolicy/replace`` the last wins, and an
    /// error names the first task (in the order `next` gave them) that is a duplicate or has a bad title, or
    /// is what `next` threw — whichever comes first.
    ///
    /// An error — thrown by `next` (a bad line), an invalid title, or a duplicate under
    /// ``DuplicatePolicy/fail`` — rolls back the current transaction: in one transaction nothing is imported;
    /// with batches, the batches committed before stay (the error does not say otherwise; callers report
    /// `progress`). `progress` is called after each commit with the number of tasks read so far.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` for an invalid title or a `batchSize` below 1,
    ///   ``SecureStoreError/Code/alreadyExists`` naming the first duplicate ID under ``DuplicatePolicy/fail``, and
    ///   whatever `next` throws.
    @discardableResult
    public func importTasks(
        onDuplicate policy: DuplicatePolicy = .fail, batchSize: Int? = nil, titles: ImportTitles = .validated,
        progress: (ImportSummary) -> Void = { _ in }, next: () throws -> TaskItem?
    ) throws -> ImportSummary {
        if let batchSize, batchSize < 1 {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a batch size must be at least 1 (\(batchSize))")
        }
        let limit = batchSize ?? Int.max
        var summary = ImportSummary()
        var finished = false
        // The chunk, reused: the tasks read and their positions in the input (1 = the first task `next` gave).
        var chunk: [(task: TaskItem, position: Int)] = []
        chunk.reserveCapacity(Self.importChunkCount)
        while !finished {
            summary = try database.write { db in
                try Self.withCache(db, kib: Self.importCacheKiB) { try db.deferringFullTextIndexing(Self.searchIndex) {
                    var batch = summary
                    // Every policy inserts OR IGNORE and looks at `changes` (no constraint of this statement can
                    // abort half-way, so it runs without a statement journal, as the other writes do): a chunk is
                    // inserted in ID order, and the duplicate to name is the first in the input, found once the
                    // whole chunk is in.
                    let insert = try db.cachedStatement(Self.insertIgnoringSQL)
                    let replace = policy == .replace ? try db.cachedStatement(Self.replaceSQL) : nil
                    var remaining = limit
                    while remaining > 0 && !finished {
                        chunk.removeAll(keepingCapacity: true)
                        var titleBytes = 0
                        var stop: (any Error)? = nil
                        let position = batch.read
                        while chunk.count < min(remaining, Self.importChunkCount), titleBytes < Self.importChunkBytes {
                            do {
                                guard var task = try next() else {
                                    finished = true
                                    break
                                }
                                let at = position + chunk.count + 1
                                if titles == .validated {
                                    do {
                                        task.title = try Self.validatedTitle(task.title)
                                    } catch let error as SecureStoreError {
                                        throw SecureStoreError(error.code, "task \(at): \(error.message)")
                                    }
                                }
                                titleBytes += task.title.utf8.count
                                chunk.append((task, at))
                            } catch {
                                // Tasks before the bad one go in first: a duplicate among them comes first.
                                stop = error
                                break
                            }
                        }
                        remaining -= chunk.count
                        // Stable: tasks with one ID keep their input order (skip keeps the first, replace the last).
                        chunk.sort { a, b in
                            let order = Self.compareIDs(a.task.id, b.task.id)
                            return order != 0 ? order < 0 : a.position < b.position
                        }
                        var firstDuplicate: (task: TaskItem, position: Int)? = nil
                        for (task, at) in chunk {
                            try insert.execute([task.createdAtMicroseconds, task.id, task.title, task.done])
                            if db.changes == 1 {
                                batch.inserted += 1
                                continue
                            }
                            switch policy {
                            case .skip:
                                batch.skipped += 1
                            case .replace:
                                try replace?.execute([task.createdAtMicroseconds, task.title, task.done, task.id])
                                batch.replaced += 1
                            case .fail:
                                if at < firstDuplicate?.position ?? Int.max { firstDuplicate = (task, at) }
                            }
                        }
                        if let firstDuplicate { throw Self.duplicate(firstDuplicate.task, at: firstDuplicate.position) }
                        if let stop { throw stop }
                    }
                    return batch
                } }
            }
            progress(summary)
        }
        return summary
    }

    /// `a` against `b` by their 16 bytes: negative, zero or positive (the order of the ID index).
    @inline(__always)
    static func compareIDs(_ a: UUID, _ b: UUID) -> Int {
        withUnsafeBytes(of: a.uuid) { x in
            withUnsafeBytes(of: b.uuid) { y in
                let x0 = UInt64(bigEndian: x.loadUnaligned(as: UInt64.self))
                let y0 = UInt64(bigEndian: y.loadUnaligned(as: UInt64.self))
                if x0 != y0 { return x0 < y0 ? -1 : 1 }
                let x1 = UInt64(bigEndian: x.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                let y1 = UInt64(bigEndian: y.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                return x1 == y1 ? 0 : x1 < y1 ? -1 : 1
            }
        }
    }

    /// The most tasks an import holds in memory at once (one chunk, inserted in ID order).
    public static let importChunkCount = 32_768
    /// About the most bytes of titles an import holds in memory at once: a chunk ends when its titles reach it.
    public static let importChunkBytes = 2 << 20
    /// The page cache of an import, in KiB: with chunks in ID order a small one is enough, and the peak memory
    /// stays the same whatever the number of tasks.
    public static let importCacheKiB = 4_096

    private static func duplicate(_ task: TaskItem, at position: Int) -> SecureStoreError {
        SecureStoreError(
            SecureStoreError.Code.alreadyExists,
            "task \(position): a task with the ID \(task.id.uuidString.lowercased()) already exists")
    }

    /// A row selected with ``columns`` as ``decode(_:)`` reads it, refusing a creation date that is not stored as
    /// an integer: SQLite would read it as some integer, but the export's order is the stored one, so the task
    /// would not come back in the same place (Docs/tasks.md, "What a title may hold").
    static func decodeForExport(_ row: Row) throws -> TaskItem {
        // The type first: SQLite's answer about a column's type is undefined once a read has converted it.
        let stored = try row.value(at: 3)
        let task = try decode(row)
        guard case .integer = stored else {
            let what: String
            switch stored {
            case .real(let value): what = "the real number \(value)"
            case .text: what = "text"
            case .blob: what = "a blob"
            default: what = "NULL"
            }
            throw SecureStoreError(
                SecureStoreError.Code.invalidData,
                "the task \(task.id.uuidString.lowercased()) has a creation date stored as \(what), not as integer "
                    + "microseconds (another program wrote it); it cannot be exported so that it imports back equal")
        }
        return task
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
