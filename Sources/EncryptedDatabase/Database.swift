// One SQLCipher connection: confined, not Sendable.
internal import CSQLCipher

/// One connection to an encrypted database.
///
/// A `Database` is not `Sendable`: you never create one yourself, you borrow it inside
/// ``DatabaseQueue/read(_:)`` or ``DatabaseQueue/write(_:)``, which serialize access to it. Do not keep it
/// (or a ``Statement`` or ``Row``) after the closure returns.
public final class Database {
    /// The path of the database file.
    public let path: String
    var connection: OpaquePointer?
    private var statementCache: [String: Statement] = [:]
    private var uncachedStatements: [WeakStatement] = []
    private var savepointDepth = 0
    /// True once the closure that lent this connection (``DatabaseQueue/read(_:)``, ``DatabaseQueue/write(_:)``…)
    /// has returned, until the next one: a `Database` kept and used after its closure throws `misuse`.
    var lendingEnded = false
    /// The records layer's insert and update statements, per record type (see `recordStatement`).
    var recordStatements: [RecordStatementKey: RecordStatement] = [:]

    /// The number of statements this connection has prepared (compiled) since it opened. Running the same SQL
    /// again through the statement cache does not prepare it again.
    public internal(set) var preparedStatementCount = 0

    /// The file this connection has open, registered so that the preflight of another connection of this
    /// process knows its side files are live.
    private let identity: FileIdentity?

    /// The connection's authorizer: the tables each statement reads, and the truncate optimization turned off
    /// where commits are observed (DatabaseChanges.swift).
    let authorizer = ConnectionAuthorizer()

    /// While an observation's fetch runs: the tables its statements read (nil inside: some statement's tables
    /// are unknown). Nil outside: nothing is recorded.
    var observedRegion: Set<String>??

    /// The connection reads without a `-shm` for lack of space (``DatabaseQueue/isReadOnlyForLackOfSpace``).
    var readOnlyForLackOfSpace = false

    /// The error of a write on a connection opened for reading only for lack of space.
    static func writesNeedSpace(_ path: String) -> DatabaseError {
        DatabaseError(
            .diskFull,
            "the disk holding the database '\(path)' is full: it was opened for reading only, without the 32 KiB "
                + "shared-memory index (-shm) SQLite needs beside it; writes need space: free some there and try "
                + "again; nothing was changed", extendedResultCode: SQLITE_FULL)
    }

    init(path: String, connection: OpaquePointer) {
        self.path = path
        self.connection = connection
        authorizer.install(on: connection)
        identity = FileIdentity(path)
        if let identity { OpenFiles.insert(identity) }
    }

    deinit {
        finalizeStatements()
        if let connection {
            sqlite3_close_v2(connection)
            if let identity { OpenFiles.remove(identity) }
        }
    }

    // MARK: Statements

    /// Returns the cached prepared statement for `sql`, preparing it on first use.
    ///
    /// The cache lives as long as the connection. A statement that is being stepped when the same SQL is run
    /// again (a nested query) is not reused: a second one is prepared for the nested use.
    ///
    /// The corresponding C function is `sqlite3_prepare_v2`.
    public func cachedStatement(_ sql: String) throws -> Statement {
        if let statement = statementCache[sql], !statement.isBusy, !lendingEnded { return statement }
        let statement = try Statement(database: try checkedOpen(), sql: sql)
        if statementCache[sql] == nil { statementCache[sql] = statement }
        return statement
    }

    /// Prepares a statement that is not cached; it is finalized when released or when the connection closes.
    ///
    /// The corresponding C function is `sqlite3_prepare_v2`.
    public func makeStatement(_ sql: String) throws -> Statement {
        let statement = try Statement(database: try checkedOpen(), sql: sql)
        uncachedStatements.removeAll { $0.statement == nil }
        uncachedStatements.append(WeakStatement(statement))
        return statement
    }

    private func checkedOpen() throws -> Database {
        guard connection != nil else {
            throw DatabaseError(.misuse, "the database '\(path)' is closed")
        }
        if lendingEnded {
            throw DatabaseError(
                .misuse,
                "a Database was used after the read or write closure that gave it had returned; use the db only "
                    + "inside its closure, and keep values, not the db")
        }
        return self
    }

    // MARK: Running SQL

    /// Runs SQL with `arguments`, ignoring any rows it returns.
    ///
    /// ```swift
    /// try db.execute("INSERT INTO item(id, title) VALUES (?, ?)", [UUID(), "Pay rent"])
    /// try db.execute("INSERT INTO tag(name) VALUES (?); UPDATE item SET tagged = 1 WHERE id = ?", ["home", 7])
    /// ```
    ///
    /// Several `;`-separated statements run one after the other, as GRDB runs them: positional arguments are
    /// taken in order, each statement its own number of them; named arguments go to the statements that name
    /// them. Every argument must be used.
    public func execute(_ sql: String, _ arguments: StatementArguments = .none) throws {
        let statement: Statement
        do {
            statement = try cachedStatement(sql)
        } catch let error as DatabaseError where error.code == .misuse && error.message == Statement.severalStatements {
            try executeStatements(sql, arguments)
            return
        }
        try statement.execute(arguments)
    }

    /// Runs the statements of `sql` one by one: each is prepared only after the previous one ran (it may create
    /// the table the next one uses).
    private func executeStatements(_ sql: String, _ arguments: StatementArguments) throws {
        guard let connection = try checkedOpen().connection else { return }
        var positional: ArraySlice<DatabaseValue> = []
        var named: [String: DatabaseValue] = [:]
        var usedNames: Set<String> = []
        switch arguments.storage {
        case .positional(let values): positional = values[...]
        case .named(let values): named = values
        }
        var remaining = Array(sql.utf8)
        while true {
            var length = 0
            var parameters: [String?] = []
            remaining.append(0)
            let result = remaining.withUnsafeBufferPointer { buffer -> Int32 in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { base in
                    var statement: OpaquePointer?
                    var tail: UnsafePointer<CChar>?
                    let result = sqlite3_prepare_v2(connection, base, -1, &statement, &tail)
                    defer { sqlite3_finalize(statement) }
                    length = tail.map { $0 - base } ?? buffer.count - 1
                    guard result == SQLITE_OK else { return result }
                    guard let statement else { return -1 }
                    for index in 0..<sqlite3_bind_parameter_count(statement) {
                        parameters.append(sqlite3_bind_parameter_name(statement, index + 1).map { String(cString: $0) })
                    }
                    return SQLITE_OK
                }
            }
            remaining.removeLast()
            if result == -1 { break }  // only spaces, comments or semicolons were left
            guard result == SQLITE_OK else { throw DatabaseError.sqlite(result, connection: connection, sql: sql) }
            let text = String(decoding: remaining[..<length], as: UTF8.self)
            remaining.removeFirst(length)
            let statementArguments: StatementArguments
            if case .named = arguments.storage {
                var values: [String: DatabaseValue] = [:]
                for case let name? in parameters {
                    let key = String(name.dropFirst())
                    values[key] = named[key]
                    usedNames.insert(key)
                }
                statementArguments = StatementArguments(storage: .named(values))
            } else {
                guard positional.count >= parameters.count else {
                    throw DatabaseError(
                        .misuse, "the statements have more parameters than the \(arguments.count) arguments given",
                        sql: sql)
                }
                statementArguments = StatementArguments(storage: .positional(Array(positional.prefix(parameters.count))))
                positional = positional.dropFirst(parameters.count)
            }
            try makeStatement(text).execute(statementArguments)
        }
        if !positional.isEmpty || usedNames.count != named.count {
            throw DatabaseError(
                .misuse, "the statements have fewer parameters than the \(arguments.count) arguments given", sql: sql)
        }
    }

    /// Runs several `;`-separated SQL statements without arguments (for schema definitions).
    ///
    /// The corresponding C function is `sqlite3_exec`.
    public func executeScript(_ sql: String) throws {
        guard let connection = try checkedOpen().connection else { return }
        if observedRegion != nil { observedRegion = .some(nil) }  // not prepared here: its tables are unknown
        let result = sqlite3_exec(connection, sql, nil, nil, nil)
        guard result == SQLITE_OK else {
            throw DatabaseError.sqlite(result, connection: connection, sql: sql)
        }
    }

    /// Runs a query and returns each row mapped by `transform`.
    ///
    /// ```swift
    /// let titles = try db.fetch("SELECT title FROM item WHERE done = ?", [false]) { try $0.string(at: 0) }
    /// ```
    @inlinable
    public func fetch<T>(
        _ sql: String, _ arguments: StatementArguments = .none, _ transform: (Row) throws -> T
    ) throws -> [T] {
        var results: [T] = []
        try stepRows(sql, arguments) { row in
            results.append(try transform(row))
            return true
        }
        return results
    }

    /// Runs a query and returns its first row mapped by `transform`, or `nil` when there is no row.
    @inlinable
    public func fetchOne<T>(
        _ sql: String, _ arguments: StatementArguments = .none, _ transform: (Row) throws -> T
    ) throws -> T? {
        var result: T?
        try stepRows(sql, arguments) { row in
            result = try transform(row)
            return false
        }
        return result
    }

    /// Runs a query and calls `body` with each row, without collecting them.
    public func forEachRow(
        _ sql: String, _ arguments: StatementArguments = .none, _ body: (Row) throws -> Void
    ) throws {
        try stepRows(sql, arguments) { row in
            try body(row)
            return true
        }
    }

    /// The non-generic core of the fetch functions, so that they can be specialized in the caller's module.
    @usableFromInline
    func stepRows(_ sql: String, _ arguments: StatementArguments, _ body: (Row) throws -> Bool) throws {
        try cachedStatement(sql).run(arguments, body)
    }

    /// Runs a query and returns the first column of its first row as `T`, or `nil` when there is no row or
    /// the value is `NULL`.
    ///
    /// ```swift
    /// let count = try db.scalar("SELECT count(*) FROM item", as: Int.self) ?? 0
    /// ```
    @inlinable
    public func scalar<T: DatabaseValueConvertible>(
        _ sql: String, _ arguments: StatementArguments = .none, as type: T.Type = T.self
    ) throws -> T? {
        try fetchOne(sql, arguments) { row in try row[0] as T? } ?? nil
    }

    /// The number of rows changed by the most recent `INSERT`, `UPDATE` or `DELETE`.
    ///
    /// The corresponding C function is `sqlite3_changes`.
    public var changes: Int {
        connection.map { Int(sqlite3_changes($0)) } ?? 0
    }

    /// The rowid of the most recent successful `INSERT`.
    ///
    /// The corresponding C function is `sqlite3_last_insert_rowid`.
    public var lastInsertRowID: Int64 {
        connection.map { sqlite3_last_insert_rowid($0) } ?? 0
    }

    /// Whether a transaction is open on this connection.
    ///
    /// The corresponding C function is `sqlite3_get_autocommit`.
    public var isInsideTransaction: Bool {
        connection.map { sqlite3_get_autocommit($0) == 0 } ?? false
    }

    /// Whether a table (or view) named `name` exists in the main database.
    public func tableExists(_ name: String) throws -> Bool {
        try scalar(
            "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?", [name], as: Int.self)
            != nil
    }

    /// The database's `user_version` header field.
    public func userVersion() throws -> Int {
        try scalar("PRAGMA user_version", as: Int.self) ?? 0
    }

    /// Sets the database's `user_version` header field.
    public func setUserVersion(_ version: Int32) throws {
        try execute("PRAGMA user_version = \(version)")
    }

    /// The database's `application_id` header field.
    public func applicationID() throws -> Int32 {
        Int32(truncatingIfNeeded: try scalar("PRAGMA application_id", as: Int64.self) ?? 0)
    }

    /// Sets the database's `application_id` header field.
    public func setApplicationID(_ id: Int32) throws {
        try execute("PRAGMA application_id = \(id)")
    }

    /// Runs `body` and returns, with its value, the tables read by the statements it ran: nil when one of them
    /// read tables that are unknown (see ``ConnectionAuthorizer``).
    func recordingReadTables<T>(_ body: () throws -> T) rethrows -> (T, Set<String>?) {
        let outer = observedRegion
        observedRegion = .some([])
        defer { observedRegion = outer }
        let value = try body()
        return (value, observedRegion ?? nil)
    }

    // MARK: Transactions

    /// Runs `body` inside a savepoint: its changes are released (kept) when it returns and rolled back when it
    /// throws, without ending the enclosing transaction. Savepoints nest.
    ///
    /// ```swift
    /// try queue.write { db in
    ///     try db.execute("INSERT INTO item(title) VALUES (?)", ["kept"])
    ///     try? db.inSavepoint {
    ///         try db.execute("INSERT INTO item(title) VALUES (?)", ["rolled back"])
    ///         throw CancellationError()
    ///     }
    /// }
    /// ```
    public func inSavepoint<T>(_ body: () throws -> T) throws -> T {
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let name = "securestore_\(savepointDepth)"
        try execute("SAVEPOINT \(name)")
        let value: T
        do {
            value = try body()
        } catch {
            // Roll back to the savepoint, then release it; report the body's error.
            try? execute("ROLLBACK TO SAVEPOINT \(name)")
            try? execute("RELEASE SAVEPOINT \(name)")
            throw error
        }
        try execute("RELEASE SAVEPOINT \(name)")
        return value
    }

    /// Runs `body` in one transaction (`BEGIN IMMEDIATE` or `BEGIN DEFERRED`), committing when it returns and
    /// rolling back when it throws. Before committing it checks that every page the transaction read was
    /// authenticated (``checkPagesAuthenticated()``), so a value read from a damaged page is never returned.
    func inTransaction<T>(immediate: Bool, _ body: () throws -> T) throws -> T {
        if immediate && readOnlyForLackOfSpace { throw Self.writesNeedSpace(path) }
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        let value: T
        do {
            value = try body()
            try checkPagesAuthenticated()
        } catch let error as DatabaseError where !immediate && error.code == .readOnly {
            // A read transaction is `query_only`: this is a write inside a read, not a file that cannot be written.
            if isInsideTransaction { try? execute("ROLLBACK") }
            throw DatabaseError(
                .readOnly,
                "a write was attempted inside a read { db in … }, which only reads; make the change inside "
                    + "write { db in … }", extendedResultCode: error.extendedResultCode, sql: error.sql)
        } catch {
            if isInsideTransaction { try? execute("ROLLBACK") }
            throw error
        }
        do {
            try execute("COMMIT")
        } catch {
            if isInsideTransaction { try? execute("ROLLBACK") }
            throw error
        }
        return value
    }

    /// Throws ``DatabaseError/Code/corrupt`` when a page that this transaction has read so far failed SQLCipher's
    /// authentication (its HMAC check).
    ///
    /// SQLCipher reports such a page late: the read that decrypts it gets the page as zeros and succeeds, and
    /// only the connection's next page read fails. A row whose value ends on the damaged page (the last
    /// overflow page of a large blob or text) therefore comes back with zeros in its tail and no error. Every
    /// ``DatabaseQueue/read(_:)`` and ``DatabaseQueue/write(_:)`` calls this before it returns; call it yourself
    /// inside a transaction before handing a value on while the transaction continues (a stream of chunks,
    /// say). The pending error lasts until the transaction ends, so call it in the same transaction as the read.
    ///
    /// It costs one step of a cached statement that reads the first page (already in the page cache).
    public func checkPagesAuthenticated() throws {
        try cachedStatement("SELECT 1 FROM sqlite_master LIMIT 1").execute()
    }

    // MARK: Maintenance

    /// Checks the whole database (`PRAGMA integrity_check`); throws ``DatabaseError/Code/corrupt`` listing the
    /// first problems found.
    public func integrityCheck() throws {
        let problems = try fetch("PRAGMA integrity_check") { try $0.string(at: 0) }
        guard problems != ["ok"] else { return }
        throw DatabaseError(
            .corrupt,
            "the database '\(path)' failed its integrity check: "
                + problems.prefix(5).joined(separator: "; "))
    }

    /// Copies every change from the write-ahead log into the database file and empties the log
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), so that the file alone holds the whole database and can be copied
    /// or renamed. Throws ``DatabaseError/Code/busy`` when another connection keeps it from completing.
    public func checkpoint() throws {
        let busy = try fetchOne("PRAGMA wal_checkpoint(TRUNCATE)") { try $0.int(at: 0) }
        if busy == 1 {
            throw DatabaseError(
                .busy, "another connection kept the checkpoint of '\(path)' from completing; try again")
        }
    }

    /// Gives all of the file's free pages back to the file system when there are more than `keeping` of them
    /// (`PRAGMA incremental_vacuum`): SQLite keeps the pages a delete frees for later growth, so a file never
    /// shrinks by itself. Only a file created with ``DatabaseConfiguration/incrementalVacuum`` on (the default) can;
    /// on another this does nothing; a rotation or export keeps the mode of the file it copies. Call it outside a
    /// transaction (it is one write transaction; readers do not stop it, another writer can); returns the pages released.
    @discardableResult
    public func releaseFreePages(keeping: Int = 256) throws -> Int {
        guard try scalar("PRAGMA auto_vacuum", as: Int.self) == 2 else { return 0 }
        let free = try scalar("PRAGMA freelist_count", as: Int.self) ?? 0
        guard free > keeping else { return 0 }
        // One page a step: stepped to the end (`execute` stops at the first row of a statement that returns rows).
        _ = try fetch("PRAGMA incremental_vacuum") { _ in 0 }
        return free - (try scalar("PRAGMA freelist_count", as: Int.self) ?? 0)
    }

    // MARK: Closing

    private func finalizeStatements() {
        for statement in statementCache.values { statement.finalize() }
        statementCache.removeAll()
        recordStatements.removeAll()
        for weak in uncachedStatements { weak.statement?.finalize() }
        uncachedStatements.removeAll()
    }

    /// Finalizes every statement and closes the connection. Closing twice does nothing.
    ///
    /// The corresponding C function is `sqlite3_close`.
    func close() throws {
        guard let connection else { return }
        finalizeStatements()
        let result = sqlite3_close(connection)
        defer { if let identity { OpenFiles.remove(identity) } }
        if result != SQLITE_OK {
            let error = DatabaseError.sqlite(result, connection: connection, path: path)
            sqlite3_close_v2(connection)
            self.connection = nil
            throw error
        }
        self.connection = nil
    }
}

@available(*, unavailable)
extension Database: Sendable {}

@available(*, unavailable)
extension Statement: Sendable {}

@available(*, unavailable)
extension Row: Sendable {}

private struct WeakStatement {
    weak var statement: Statement?
    init(_ statement: Statement) { self.statement = statement }
}
