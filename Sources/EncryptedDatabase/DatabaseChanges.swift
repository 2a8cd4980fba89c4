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
                    tracker.tables.insert(tracker.lastTable.lowercased())
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
        // `DELETE FROM t` without `WHERE` empties the table at once (the truncate optimization): no update hook
        // and, for a WITHOUT ROWID table, no change count. An authorizer that answers SQLITE_IGNORE to a delete
        // turns it off, so that the rows are deleted one by one and seen (GRDB does the same). But `DROP TABLE t`
        // (and `DROP VIEW`) asks for a delete from `t` right after asking for the drop, and IGNORE there would
        // skip the drop without a word: that one delete is allowed. SQLite's own tables are always allowed.
        _ = sqlite3_set_authorizer(
            connection,
            { context, action, name, _, _, _ in
                guard let context else { return SQLITE_OK }
                let tracker = Unmanaged<ChangeTracker>.fromOpaque(context).takeUnretainedValue()
                return tracker.authorize(action, name)
            }, context)
    }

    /// The table or view a `DROP` statement being compiled asked to drop, for the delete it asks for next.
    private var dropping: String?

    /// The authorizer's answer (see ``install(on:)``).
    private func authorize(_ action: Int32, _ name: UnsafePointer<CChar>?) -> Int32 {
        let dropped = dropping
        dropping = nil
        switch action {
        case SQLITE_DROP_TABLE, SQLITE_DROP_TEMP_TABLE, SQLITE_DROP_VIEW, SQLITE_DROP_TEMP_VIEW, SQLITE_DROP_VTABLE:
            dropping = name.map { String(cString: $0) }
            return SQLITE_OK
        case SQLITE_DELETE:
            guard let name, strncmp(name, "sqlite_", 7) != 0 else { return SQLITE_OK }
            if let dropped, dropped.withCString({ strcmp($0, name) }) == 0 { return SQLITE_OK }
            return SQLITE_IGNORE
        default:
            return SQLITE_OK
        }
    }

    /// Removes the hooks, before the connection is closed or the tracker released.
    func uninstall(from connection: OpaquePointer) {
        _ = sqlite3_update_hook(connection, nil, nil)
        _ = sqlite3_commit_hook(connection, nil, nil)
        _ = sqlite3_rollback_hook(connection, nil, nil)
        _ = sqlite3_set_authorizer(connection, nil, nil)
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
