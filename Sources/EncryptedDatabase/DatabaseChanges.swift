// In-process change notification: SQLite's update, commit and rollback hooks on a handle's connection name the
// tables each access changed; after the access releases the connection, the handle's change center wakes the
// observers whose tables were touched. Other processes' commits are found by polling (DatabaseObservation.swift).
internal import CSQLCipher
internal import Synchronization
internal import Glibc

/// What one access to a connection committed: the tables the update hook named, and whether some changed rows
/// were not named (a `WITHOUT ROWID` table, a `DELETE` without `WHERE`: the update hook does not see those).
package struct DatabaseChanges: Sendable, Equatable {
    /// The tables named by the update hook, lowercased.
    package var tables: Set<String> = []
    /// Whether rows changed that the update hook did not name: every observer is woken.
    package var includesUnnamedTables = false

    /// Every table changed, named or not: what a new file in place of the old one (a restore into a live handle) is
    /// to an observer.
    package static let everything = DatabaseChanges(includesUnnamedTables: true)

    /// Whether an observer of `observed` (nil: every table) must fetch again.
    package func touches(_ observed: Set<String>?) -> Bool {
        if includesUnnamedTables { return true }
        guard let observed else { return !tables.isEmpty }
        return !tables.isDisjoint(with: observed)
    }
}

/// Where a handle's observers wait for its own commits. `Sendable`: subscribers are kept under a mutex and
/// woken after it is released (never while the connection's lock is held).
package final class DatabaseChangeCenter: Sendable {
    private struct Subscriber: Sendable {
        let tables: Set<String>?
        let wake: @Sendable () -> Void
    }

    private struct State: Sendable {
        var next: UInt64 = 0
        var subscribers: [UInt64: Subscriber] = [:]
        /// A center that also gets every notification: a keyed database's, for the queue it has open now.
        var forward: DatabaseChangeCenter?
    }

    private let state = Mutex(State())

    package init() {}

    /// Calls `wake` after every commit of this handle that touched `tables` (nil: any table), until
    /// ``unsubscribe(_:)``. `wake` runs on the writer's thread, after the write: keep it short.
    package func subscribe(tables: Set<String>?, wake: @escaping @Sendable () -> Void) -> UInt64 {
        let tables = tables.map { Set($0.map { $0.lowercased() }) }
        return state.withLock { state in
            state.next += 1
            state.subscribers[state.next] = Subscriber(tables: tables, wake: wake)
            return state.next
        }
    }

    /// Changes the tables the subscriber `id` is woken for (nil: any table).
    package func update(_ id: UInt64, tables: Set<String>?) {
        let tables = tables.map { Set($0.map { $0.lowercased() }) }
        state.withLock { state in
            guard let subscriber = state.subscribers[id] else { return }
            state.subscribers[id] = Subscriber(tables: tables, wake: subscriber.wake)
        }
    }

    /// Stops waking the subscriber `id`.
    package func unsubscribe(_ id: UInt64) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    /// Whether anyone listens: a subscriber here or in the center this one forwards to. An access that starts
    /// unobserved does not name tables (the update hook returns at once for each row).
    package var isObserved: Bool {
        let (subscribed, forward) = state.withLock { (!$0.subscribers.isEmpty, $0.forward) }
        return subscribed || (forward?.isObserved ?? false)
    }

    /// Passes every later notification on to `center` as well (nil: to no other center).
    package func forward(to center: DatabaseChangeCenter?) {
        state.withLock { $0.forward = center }
    }

    /// Wakes the subscribers `changes` concern, and those of the center this one forwards to.
    package func notify(_ changes: DatabaseChanges) {
        let (wakes, forward) = state.withLock { state in
            (state.subscribers.values.filter { changes.touches($0.tables) }.map(\.wake), state.forward)
        }
        for wake in wakes { wake() }
        forward?.notify(changes)
    }
}

/// The hooks' record for one connection. Not `Sendable`: used only by the thread that holds the connection
/// (the hooks run on it, inside `sqlite3_step`).
final class ChangeTracker {
    /// Whether the update hook names tables in this access (someone observed the handle when it began).
    private var naming = false
    private var tables: Set<String> = []
    /// The table the update hook named last, as SQLite spells it: a run of rows of one table costs one
    /// `strcmp` each, not a `String`.
    private var lastTable = ""
    private var namedChanges: Int64 = 0
    private var totalChangesAtStart: Int64 = 0
    private var committed = false

    /// Installs the hooks on `connection`. The tracker must stay alive until ``uninstall(from:)`` or until the
    /// connection is closed.
    ///
    /// The corresponding C functions are `sqlite3_update_hook`, `sqlite3_commit_hook` and `sqlite3_rollback_hook`.
    func install(on connection: OpaquePointer) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = sqlite3_update_hook(
            connection,
            { context, _, _, table, _ in
                guard let context, let table else { return }
                let tracker = Unmanaged<ChangeTracker>.fromOpaque(context).takeUnretainedValue()
                guard tracker.naming else { return }
                tracker.namedChanges += 1
                if tracker.lastTable.withCString({ strcmp($0, table) }) != 0 {
                    tracker.lastTable = String(cString: table)
                    tracker.record(tracker.lastTable.lowercased())
                }
            }, context)
        _ = sqlite3_commit_hook(
            connection,
            { context in
                guard let context else { return 0 }
                Unmanaged<ChangeTracker>.fromOpaque(context).takeUnretainedValue().committed = true
                return 0  // 0: let the commit go on
            }, context)
        _ = sqlite3_rollback_hook(
            connection,
            { context in
                guard let context else { return }
                let tracker = Unmanaged<ChangeTracker>.fromOpaque(context).takeUnretainedValue()
                // Nothing committed in this access yet: what was recorded is undone.
                if !tracker.committed { tracker.tables.removeAll() }
            }, context)
    }

    /// Records a change of `table`; a change of a full-text index's own tables (`note_search_content`,
    /// `tasks_search_keys`…: the update hook never names the FTS virtual table itself) is also a change of the
    /// index (`note_search`), so that an observation that reads the index is woken.
    private func record(_ table: String) {
        tables.insert(table)
        for suffix in ConnectionAuthorizer.fullTextShadowSuffixes where table.hasSuffix(suffix) {
            tables.insert(String(table.dropLast(suffix.count)))
        }
    }

    /// Removes the hooks, before the connection is closed or the tracker released.
    func uninstall(from connection: OpaquePointer) {
        _ = sqlite3_update_hook(connection, nil, nil)
        _ = sqlite3_commit_hook(connection, nil, nil)
        _ = sqlite3_rollback_hook(connection, nil, nil)
    }

    /// Starts recording one access; tables are named only when the handle is `observed` now.
    func begin(_ connection: OpaquePointer, observed: Bool) {
        naming = observed
        tables.removeAll(keepingCapacity: true)
        lastTable = ""
        namedChanges = 0
        committed = false
        totalChangesAtStart = Int64(sqlite3_total_changes(connection))
    }

    /// Ends the access: what it committed, or nil when it committed no row change. A change counted by
    /// `sqlite3_total_changes` that the update hook did not name (it is silent for `WITHOUT ROWID` tables)
    /// makes the result concern every table. A
    /// rolled-back savepoint's tables are kept: a spurious wake-up costs one fetch, a lost one a missed change.
    ///
    /// An access that began unobserved named no table: if the handle is `observed` by the time it ends (an
    /// observation subscribed meanwhile, whose first read may have taken its snapshot before this commit), a
    /// commit that changed rows concerns every table.
    func end(_ connection: OpaquePointer, observed: Bool) -> DatabaseChanges? {
        defer {
            tables.removeAll(keepingCapacity: true)
            committed = false
        }
        guard committed else { return nil }
        let counted = Int64(sqlite3_total_changes(connection)) - totalChangesAtStart
        guard naming else {
            return observed && counted > 0 ? DatabaseChanges(includesUnnamedTables: true) : nil
        }
        let changes = DatabaseChanges(tables: tables, includesUnnamedTables: counted > namedChanges)
        return changes.tables.isEmpty && !changes.includesUnnamedTables ? nil : changes
    }
}

/// A handle whose own commits are announced by a change center, so that its observers wake at once and only
/// for the tables they read; other connections' commits are found by polling `PRAGMA data_version`.
package protocol DatabaseChangeSource: DatabaseReader {
    /// The center that announces this handle's own commits.
    var changeCenter: DatabaseChangeCenter { get }

    /// Runs `body` in one read transaction, with the `PRAGMA data_version` of the connection this handle writes
    /// with: it moves with every commit of another connection or process, never with this handle's own.
    func readWithExternalVersion<T>(_ body: (_ externalVersion: Int64, Database) throws -> T) throws -> T
}

/// The authorizer of one connection, installed when the ``Database`` is made and owned by it. Not `Sendable`: it
/// runs on the thread that holds the connection, inside `sqlite3_prepare` (and while a statement runs).
///
/// - While a ``Statement`` is prepared it records the tables the statement reads (SQLite's `SQLITE_READ`
///   actions), so that an observation learns the tables its query reads (GRDB's `StatementAuthorizer` does the
///   same). SQLite before 3.19 (Debian 12's 3.15.2) reports no read for `SELECT count(*) FROM t`, whose
///   statement reads no column: a read-only statement that reports no table at all is "unknown" and observes
///   every table.
/// - On a connection whose commits are observed (``preventsTruncation``), `DELETE FROM t` without `WHERE`
///   would empty the table at once (the truncate optimization): no update hook and, for a WITHOUT ROWID table,
///   no change count. Answering SQLITE_IGNORE to the delete turns it off, so that the rows are deleted one by
///   one and seen (GRDB does the same). But `DROP TABLE t` (and `DROP VIEW`) asks for a delete from `t` right
///   after asking for the drop, and IGNORE there would skip the drop without a word: that one delete is
///   allowed. SQLite's own tables are always allowed.
final class ConnectionAuthorizer {
    /// Whether deletes without `WHERE` go row by row (set by a queue whose commits are observed).
    var preventsTruncation = false
    /// The table or view a `DROP` statement being compiled asked to drop, for the delete it asks for next.
    private var dropping: String?
    /// While a statement is prepared: the tables it reads, lowercased. Nil: not recording.
    private var reads: Set<String>?
    /// The table recorded last, as SQLite spells it: a run of columns of one table costs one `strcmp` each.
    private var lastRead = ""

    /// The suffixes of the tables an FTS4 or FTS5 index (and a `FullTextIndex`'s keys table) keeps its data in.
    static let fullTextShadowSuffixes = [
        "_content", "_segments", "_segdir", "_docsize", "_stat", "_data", "_idx", "_config", "_keys",
    ]

    /// Installs the authorizer on `connection`; `self` must outlive the connection (its ``Database`` owns both).
    ///
    /// The corresponding C function is `sqlite3_set_authorizer`.
    func install(on connection: OpaquePointer) {
        _ = sqlite3_set_authorizer(
            connection,
            { context, action, first, second, _, _ in
                guard let context else { return SQLITE_OK }
                return Unmanaged<ConnectionAuthorizer>.fromOpaque(context).takeUnretainedValue()
                    .authorize(action, first, second)
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Starts recording the tables read by the statement about to be prepared.
    func beginRecording() {
        reads = []
        lastRead = ""
    }

    /// Ends the recording: the tables read, or nil when a read-only statement named none (unknown).
    func endRecording(readOnly: Bool, hasColumns: Bool) -> Set<String>? {
        defer { reads = nil }
        guard let reads else { return nil }
        return reads.isEmpty && readOnly && hasColumns ? nil : reads
    }

    private func authorize(_ action: Int32, _ first: UnsafePointer<CChar>?, _ second: UnsafePointer<CChar>?) -> Int32 {
        let dropped = dropping
        dropping = nil
        switch action {
        case SQLITE_READ:
            if reads != nil, let first, lastRead.withCString({ strcmp($0, first) }) != 0 {
                lastRead = String(cString: first)
                reads?.insert(lastRead.lowercased())
            }
            return SQLITE_OK
        case SQLITE_DROP_TABLE, SQLITE_DROP_TEMP_TABLE, SQLITE_DROP_VIEW, SQLITE_DROP_TEMP_VIEW, SQLITE_DROP_VTABLE:
            dropping = first.map { String(cString: $0) }
            return SQLITE_OK
        case SQLITE_DELETE:
            guard preventsTruncation, let first, strncmp(first, "sqlite_", 7) != 0 else { return SQLITE_OK }
            if let dropped, dropped.withCString({ strcmp($0, first) }) == 0 { return SQLITE_OK }
            return SQLITE_IGNORE
        default:
            return SQLITE_OK
        }
    }
}
