// The encrypted task list: create, read, list, filter, count, change and delete tasks in SQL.
public import EncryptedDatabase
internal import SecureStore
public import Foundation

/// A to-do list stored in an encrypted database: fast and small at a million tasks.
///
/// ```swift
/// let tasks = try TaskList(database: keyed)         // applies the "create tasks" migration if needed
/// let rent = try tasks.create(title: "Pay rent")
/// try tasks.toggle(id: rent.id)
/// let page = try tasks.page(.open, limit: 50)      // first 50 open tasks, newest first, and how many in all
/// let item = try tasks.resolve(prefix: "3f2a")     // like git: any unique prefix of the hex ID
/// ```
///
/// The database is any `DatabaseWriter`: give it a `KeyedDatabase` (it keeps working across the keyed
/// database's key rotations) or a `DatabaseQueue`. Keep the `KeyedDatabase`, not its `queue`: a task list
/// made on the queue fails with `misuse` once a rotation has closed that queue.
///
/// Every operation is one transaction of the database (a `read` or a `write`), so each sees and
/// leaves a consistent database; batch operations (``markAllDone()``, ``deleteAllDone()``) are single SQL
/// statements that never load rows into memory. Listings are ordered by creation date with ties broken by ID,
/// so the order is total: pages never overlap or skip, and ``list(_:order:after:offset:limit:)`` continues
/// after any task (even one deleted since) in constant time however deep the page.
///
/// Counts by status are read from one row kept exact by triggers, so ``count(_:)`` and ``counts()`` do not
/// depend on the number of tasks unless the filter searches titles.
public struct TaskList: Sendable {
    /// The database the tasks are in: a `KeyedDatabase`, a `DatabaseQueue` or another `DatabaseWriter`.
    public let database: any DatabaseWriter

    /// The database the tasks are in (the name from when it could only be a queue).
    @available(*, deprecated, renamed: "database")
    public var queue: any DatabaseWriter { database }

    /// Opens the task list of `queue`: the same as ``init(database:createIfMissing:)``. Prefer that one with
    /// the `KeyedDatabase` that owns the queue, which follows its key rotations.
    public init(queue: DatabaseQueue, createIfMissing: Bool = true) throws {
        try self.init(database: queue, createIfMissing: createIfMissing)
    }

    /// Opens the task list of `database`, applying the task list's migrations (``migrationIDs``) that the
    /// database does not have yet.
    ///
    /// ```swift
    /// let database = try KeyedDatabase(paths: paths, name: "tasks", keychain: Keychain())
    /// let tasks = try TaskList(database: database)
    /// try database.rotateKey()
    /// try tasks.create(title: "Still works")   // the list uses the keyed database's new connection
    /// ```
    ///
    /// The task list owns the migrations ``migrationIDs`` and any whose id starts with `tasks ` (its future
    /// ones); other migrations recorded in the database belong to the application that shares it and are left
    /// alone, so an app's own migrations and the task list live side by side. A task-list migration this
    /// version does not know (a newer version's) is refused with `DatabaseError.Code.unknownMigration`.
    ///
    /// A database is never turned into a task list by accident: when it has no task list yet, the schema is
    /// added only if `createIfMissing` is true *and* the database is empty or managed by migrations (an app that
    /// registers migrations chose to share it); a database with tables of its own and no migrations — for
    /// example one made by ``KeyedDatabase/importPlaintext(from:paths:name:keychain:configuration:)`` — is
    /// refused with ``SecureStoreError/Code/notATaskList`` and left unchanged.
    ///
    /// When the database is up to date this is one read transaction (no write lock is taken), so it works on
    /// a read-only database and does not wait for another process that is writing.
    ///
    /// - Throws: ``SecureStoreError/Code/notATaskList``; ``SecureStoreError/Code/notFound`` when the database has no task
    ///   list and `createIfMissing` is false; `DatabaseError.Code.unknownMigration` for a newer task list.
    public init(database: any DatabaseWriter, createIfMissing: Bool = true) throws {
        let migrator = TaskList.migrator
        let applied = try migrator.appliedMigrations(database)
        let own = applied.filter(Self.ownsMigration)
        if own != TaskList.migrationIDs {
            if own.isEmpty {
                let tables = try database.read { db in try Self.ownTables(db) }
                if applied.isEmpty, !tables.isEmpty {
                    throw SecureStoreError(
                        SecureStoreError.Code.notATaskList,
                        "the database '\(database.path)' is not a task list (it holds "
                            + tables.prefix(3).map { "'\($0)'" }.joined(separator: ", ") + (tables.count > 3 ? ", …" : "")
                            + "); task commands never add tables to it, and nothing was changed")
                }
                guard createIfMissing else {
                    throw SecureStoreError(
                        SecureStoreError.Code.notFound,
                        "the database '\(database.path)' has no task list yet; nothing was changed")
                }
            }
            do {
                try migrator.migrate(database)
            } catch let error as DatabaseError where error.code == .readOnly && own == [TaskList.migrationIDs[0]] {
                // A list made before the search index, on a file this process may only read (a read-only mount, a
                // read-only open): it opens as it is, and a word search is the substring search of that version
                // (TaskList.Filter.runnable(in:)); the index is built by the next open that may write.
            }
        }
        self.database = database
    }

    /// Whether the migration `id` is the task list's: one of ``migrationIDs``, or a later one (`tasks …`).
    static func ownsMigration(_ id: String) -> Bool {
        migrationIDs.contains(id) || id.hasPrefix("tasks ")
    }

    /// The database's tables other than SQLite's and SecureStore's own bookkeeping, sorted.
    static func ownTables(_ db: Database) throws -> [String] {
        try db.fetch(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                + "AND name NOT IN (?, ?) ORDER BY name",
            [DatabaseMigrator.tableName, "securestore_identity"]
        ) { try $0.string(at: 0) }
    }

    /// The task list of `database`, which the caller has already migrated with ``registerMigrations(in:)``.
    public init(migratedDatabase database: any DatabaseWriter) {
        self.database = database
    }

    /// The task list of `queue`, which the caller has already migrated: the same as
    /// ``init(migratedDatabase:)``.
    public init(migratedQueue queue: DatabaseQueue) {
        self.init(migratedDatabase: queue)
    }

    // MARK: Creating

    /// Adds a task and returns it as stored (title trimmed, date rounded to the microsecond).
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` for an invalid title (see ``validatedTitle(_:)``) or an
    ///   `id` that is already taken; the database is unchanged.
    @discardableResult
    public func create(title: String, done: Bool = false, createdAt: Date = Date(), id: UUID = UUID()) throws
        -> TaskItem
    {
        let item = TaskItem(id: id, title: try Self.validatedTitle(title), done: done, createdAt: createdAt)
        try insert(CollectionOfOne(item))
        return item
    }

    /// Adds many tasks in one transaction with one prepared statement, for imports and seeding. Returns how
    /// many were added.
    ///
    /// Titles are validated and trimmed as in ``create(title:done:createdAt:id:)``. Either every task is added
    /// or, when one is invalid or its ID is taken, none is. For the fastest inserts give increasing creation
    /// dates (the table is ordered by them) and few, large batches: each batch is a commit. A million tasks
    /// in one call take about 6.5 s (Docs/tasks.md).
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` naming the first bad task; the database is unchanged.
    @discardableResult
    public func insert(_ tasks: some Sequence<TaskItem>) throws -> Int {
        // A batch of some size defers its indexing to one statement at the end (TaskListSchema.swift).
        let defers = !(1..<64).contains(tasks.underestimatedCount)
        return try database.write { db in try Self.maybeDeferringIndexing(db, defers) {
            let statement = try db.cachedStatement(Self.insertSQL)
            var count = 0
            // An array (or any contiguous collection) is walked through a typed buffer: a loop over the generic
            // sequence calls its iterator through witness tables on every task.
            let walked: Void? = try tasks.withContiguousStorageIfAvailable { buffer in
                for task in buffer { try Self.insert(task, statement, &count) }
            }
            if walked == nil {
                for task in tasks { try Self.insert(task, statement, &count) }
            }
            return count
        } }
    }

    /// Inserts `task` with the prepared ``insertSQL``, as task `count + 1` of a batch, bound straight into SQLite
    /// (``Statement/execute(binding:)``: no `StatementArguments` per task).
    private static func insert(_ task: TaskItem, _ statement: Statement, _ count: inout Int) throws {
        let title: String
        do {
            title = try validatedTitle(task.title)
        } catch let error as SecureStoreError {
            throw SecureStoreError(error.code, "task \(count + 1) of the batch: \(error.message)")
        }
        do {
            try statement.execute { binder in
                try binder.bind(task.createdAtMicroseconds, at: 1)
                try binder.bind(task.id, at: 2)
                try binder.bind(title, at: 3)
                try binder.bind(task.done, at: 4)
            }
        } catch DatabaseError.Code.constraint {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "a task with the ID \(task.id.uuidString.lowercased()) already exists; nothing was added")
        }
        count += 1
    }

    // MARK: Reading

    /// The task with ID `id`, or `nil` when there is none.
    public func task(id: UUID) throws -> TaskItem? {
        try database.read { db in try Self.fetch(db, id: id) }
    }

    /// The one task whose ID starts with the hexadecimal digits `prefix` (either case; dashes are ignored, so
    /// a full UUID string works too). The search is a range of the ID index, not a scan.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when no ID starts with `prefix`,
    ///   ``SecureStoreError/Code/ambiguous`` (saying how many match) when several do, and
    ///   ``SecureStoreError/Code/invalidArgument`` when `prefix` is not 1–32 hexadecimal digits.
    public func resolve(prefix: String) throws -> TaskItem {
        let range = try Self.idRange(prefix: prefix)
        let condition = range.upper == nil ? "id >= ?" : "id >= ? AND id < ?"
        var arguments: [any DatabaseValueConvertible] = [Data(range.lower)]
        if let upper = range.upper { arguments.append(Data(upper)) }
        return try database.read { db in
            let found = try db.fetch(
                "SELECT \(Self.columns) FROM tasks WHERE \(condition) ORDER BY id LIMIT 2",
                StatementArguments(arguments), Self.decode)
            switch found.count {
            case 0:
                throw SecureStoreError(SecureStoreError.Code.notFound, "no task has an ID starting with \(range.digits)")
            case 1:
                return found[0]
            default:
                let count = try db.scalar(
                    "SELECT count(*) FROM tasks WHERE \(condition)", StatementArguments(arguments), as: Int.self) ?? 0
                throw SecureStoreError(
                    SecureStoreError.Code.ambiguous,
                    "the ID prefix \(range.digits) matches \(count) tasks (\(found[0].id.uuidString.lowercased()), \(found[1].id.uuidString.lowercased())"
                        + (count > 2 ? ", …" : "") + "); give more digits")
            }
        }
    }

    /// Tasks matching `filter` in `order`: `limit` of them, after skipping `offset`, and, when `after` is
    /// given, only tasks that come after that task in `order`.
    ///
    /// `after` is keyset pagination: pass the last task of a page to get the next one. It costs the same at
    /// any depth, and stays correct when tasks are added or deleted between pages (the task itself may be
    /// gone). `offset` makes SQLite step over the skipped tasks, so deep offsets are slow (about 0.1 s per
    /// 100 000 skipped at best); prefer `after`.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` for a negative `limit` or `offset`.
    public func list(
        _ filter: Filter = .all, order: Order = .newestFirst, after: TaskItem? = nil, offset: Int = 0,
        limit: Int = 50
    ) throws -> [TaskItem] {
        try Self.checkPaging(offset: offset, limit: limit)
        return try database.read { db in try Self.list(db, filter, order, after, offset, limit) }
    }

    /// One page of tasks, as ``list(_:order:after:offset:limit:)``, together with how many tasks match
    /// `filter` in all, both read in one snapshot: what a screen of the list shows.
    ///
    /// ```swift
    /// let first = try tasks.page(limit: 50)                       // newest first, and the total
    /// let next = try tasks.page(after: first.items.last, limit: 50)
    /// ```
    public func page(
        _ filter: Filter = .all, order: Order = .newestFirst, after: TaskItem? = nil, offset: Int = 0,
        limit: Int = 50
    ) throws -> Page {
        try Self.checkPaging(offset: offset, limit: limit)
        return try database.read { db in
            Page(items: try Self.list(db, filter, order, after, offset, limit), total: try Self.count(db, filter))
        }
    }

    /// How many tasks match `filter`, without reading them. Without a title search this reads one row,
    /// whatever the number of tasks; with one it scans the titles.
    public func count(_ filter: Filter = .all) throws -> Int {
        try database.read { db in try Self.count(db, filter) }
    }

    /// How many tasks there are, done and open, from one row.
    public func counts() throws -> Counts {
        try database.read { db in try Self.counts(db) }
    }

    // MARK: Changing

    /// Marks the task done or not done and returns it.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when no task has this ID.
    @discardableResult
    public func setDone(_ done: Bool, id: UUID) throws -> TaskItem {
        try update(id: id, "UPDATE OR ROLLBACK tasks SET done = ? WHERE id = ?", [done, id])
    }

    /// Flips whether the task is done and returns it.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when no task has this ID.
    @discardableResult
    public func toggle(id: UUID) throws -> TaskItem {
        try update(id: id, "UPDATE OR ROLLBACK tasks SET done = 1 - done WHERE id = ?", [id])
    }

    /// Gives the task a new title (validated and trimmed as in ``create(title:done:createdAt:id:)``) and
    /// returns it.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument`` for an invalid title, ``SecureStoreError/Code/notFound`` when
    ///   no task has this ID; the database is unchanged.
    @discardableResult
    public func rename(id: UUID, to title: String) throws -> TaskItem {
        let title = try Self.validatedTitle(title)
        return try update(id: id, "UPDATE OR ROLLBACK tasks SET title = ? WHERE id = ?", [title, id])
    }

    /// Deletes the task and returns it as it was.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when no task has this ID.
    @discardableResult
    public func delete(id: UUID) throws -> TaskItem {
        try database.write { db in
            guard let item = try Self.fetch(db, id: id) else { throw Self.notFound(id) }
            try db.execute("DELETE FROM tasks WHERE id = ?", [id])
            return item
        }
    }

    /// Marks several tasks done or not done in one transaction and returns them in the order of `ids` (an ID
    /// given twice is changed and returned once): either every task changes or none does.
    ///
    /// ```swift
    /// let ids = try ["3f2a", "9c01"].map { try tasks.resolve(prefix: $0).id }
    /// try tasks.setDone(true, ids: ids)
    /// ```
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` naming the first ID that no task has; the database is unchanged.
    @discardableResult
    public func setDone(_ done: Bool, ids: [UUID]) throws -> [TaskItem] {
        try database.write { db in
            try Self.unique(ids).map { id in
                try db.execute("UPDATE OR ROLLBACK tasks SET done = ? WHERE id = ?", [done, id])
                guard db.changes == 1, let item = try Self.fetch(db, id: id) else { throw Self.notFound(id) }
                return item
            }
        }
    }

    /// Deletes several tasks in one transaction and returns them as they were, in the order of `ids` (an ID
    /// given twice is deleted and returned once): either every task is deleted or none is.
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` naming the first ID that no task has; the database is unchanged.
    @discardableResult
    public func delete(ids: [UUID]) throws -> [TaskItem] {
        try database.write { db in
            try Self.unique(ids).map { id in
                guard let item = try Self.fetch(db, id: id) else { throw Self.notFound(id) }
                try db.execute("DELETE FROM tasks WHERE id = ?", [id])
                return item
            }
        }
    }

    /// Marks every open task done, in one SQL statement. Returns how many tasks changed.
    @discardableResult
    public func markAllDone() throws -> Int {
        try database.write { db in
            try db.execute("UPDATE OR ROLLBACK tasks SET done = 1 WHERE done = 0")
            return db.changes
        }
    }

    /// Deletes every done task, in one SQL statement. Returns how many were deleted.
    @discardableResult
    public func deleteAllDone() throws -> Int {
        try database.write { db in
            try db.execute("DELETE FROM tasks WHERE done = 1")
            return db.changes
        }
    }

    // MARK: Implementation

    private func update(id: UUID, _ sql: String, _ arguments: StatementArguments) throws -> TaskItem {
        try database.write { db in
            try db.execute(sql, arguments)
            guard db.changes == 1, let item = try Self.fetch(db, id: id) else { throw Self.notFound(id) }
            return item
        }
    }

    /// `ids` without repeats, in their first order.
    private static func unique(_ ids: [UUID]) -> [UUID] {
        var seen = Set<UUID>()
        return ids.filter { seen.insert($0).inserted }
    }

    private static func notFound(_ id: UUID) -> SecureStoreError {
        SecureStoreError(SecureStoreError.Code.notFound, "no task has the ID \(id.uuidString.lowercased())")
    }

    /// Runs `body` inside ``Database/deferringFullTextIndexing(_:_:)`` of the search index when `defers`.
    static func maybeDeferringIndexing<T>(_ db: Database, _ defers: Bool, _ body: () throws -> T) throws -> T {
        defers ? try db.deferringFullTextIndexing(searchIndex, body) : try body()
    }

    static func checkPaging(offset: Int, limit: Int) throws {
        guard limit >= 0 else {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a page limit cannot be negative (\(limit))")
        }
        guard offset >= 0 else {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a page offset cannot be negative (\(offset))")
        }
    }

    private static func fetch(_ db: Database, id: UUID) throws -> TaskItem? {
        try db.fetchOne("SELECT \(columns) FROM tasks WHERE id = ?", [id], decode)
    }

    private static func list(
        _ db: Database, _ filter: Filter, _ order: Order, _ after: TaskItem?, _ offset: Int, _ limit: Int
    ) throws -> [TaskItem] {
        if limit == 0 { return [] }
        let filter = try filter.runnable(in: db)
        let window = try WordSearchWindow(filter, order, db)
        if let window, let page = try window.page(db, filter, order, after, offset, limit) { return page }
        var clause = TaskListClause(listing: filter, window: window)
        if clause.matchesNothing { return [] }
        if let after { clause.after(after, order: order) }
        clause.arguments.append(limit)
        clause.arguments.append(offset)
        var items: [TaskItem] = []
        items.reserveCapacity(expectedCount(db, filter, offset, limit))
        try db.forEachRow(
            "SELECT \(columns) FROM tasks\(clause.whereSQL)\(order.orderBySQL) LIMIT ? OFFSET ?",
            StatementArguments(clause.arguments)) { items.append(try decode($0)) }
        return items
    }

    /// At most how many tasks a page of `limit` after `offset` holds, without reading them: `limit` for a small page;
    /// for a large one without a title search, the matching tasks from the one-row counts. Reserving it up front
    /// spares the array its regrowths, whose copies and freshly touched pages cost a 200 000-task list about 15 %
    /// (Docs/performance.md, "Against C"). 0 (no reservation) when only a search would tell.
    private static func expectedCount(_ db: Database, _ filter: Filter, _ offset: Int, _ limit: Int) -> Int {
        if limit <= 1024 { return limit }
        // A database whose counts row is missing still lists (the counts' own readers say it is damaged).
        guard !filter.searchesTitles, let counts = try? counts(db) else { return 0 }
        let matching = switch filter.status {
        case .all: counts.total
        case .done: counts.done
        case .open: counts.open
        }
        return min(limit, max(0, matching - offset))
    }

    static func count(_ db: Database, _ filter: Filter) throws -> Int {
        let filter = try filter.runnable(in: db)
        let clause = TaskListClause(filter)
        if clause.matchesNothing { return 0 }
        if let count = try TaskListClause.indexCount(filter, db) { return count }
        if !filter.searchesTitles {
            let counts = try counts(db)
            switch filter.status {
            case .all: return counts.total
            case .done: return counts.done
            case .open: return counts.open
            }
        }
        return try db.scalar(
            "SELECT count(*) FROM tasks\(clause.whereSQL)", StatementArguments(clause.arguments), as: Int.self) ?? 0
    }

    static func counts(_ db: Database) throws -> Counts {
        let counts = try db.fetchOne("SELECT total, done FROM task_counts WHERE singleton = 0") { row in
            Counts(total: try row.int(at: 0), done: try row.int(at: 1))
        }
        guard let counts else {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed, "the task counts are missing from the database '\(db.path)'; it is damaged")
        }
        return counts
    }
}
