// Merges of an application's own: a function per table that combines two concurrent edits of one value instead of
// keeping the later one (and logging the other).
public import EncryptedDatabase
internal import Synchronization

/// Two concurrent edits of one value of a synced table — each made by a device that had not seen the other — given
/// to the table's merge function (``SyncEngine/setMerge(forTable:_:)``).
///
/// The two are ordered by their clocks, so every device hands the function the same two values in the same order,
/// whichever arrived first: a function that depends only on its input gives the same result everywhere.
public struct SyncConcurrentEdit: Sendable, Equatable {
    /// The table.
    public let table: String
    /// The column.
    public let column: String
    /// The row's key.
    public let key: DatabaseValue
    /// The value of the earlier edit (by hybrid logical clock, then device id).
    public let earlier: DatabaseValue
    /// The value of the later edit: the one that is kept when there is no merge.
    public let later: DatabaseValue
}

/// A table's merge: the merged value, or nil to keep the rule of every other table (the later edit wins and the
/// earlier one goes to the conflict log). It runs inside the sync's write transaction: keep it quick, and do not
/// touch the database from it.
public typealias SyncMergeFunction = @Sendable (SyncConcurrentEdit) -> DatabaseValue?

/// The merge functions an engine was given, by lower-cased table name.
final class SyncMergeFunctions: Sendable {
    private let functions = Mutex<[String: SyncMergeFunction]>([:])

    func set(_ function: SyncMergeFunction?, for table: String) {
        functions.withLock { $0[table.lowercased()] = function }
    }

    func function(for table: String) -> SyncMergeFunction? {
        functions.withLock { $0[table.lowercased()] }
    }
}

extension SyncEngine {
    /// Gives `table` a merge of its own for concurrent edits of one value (a set of tags merged as a union, the
    /// larger of two numbers) instead of "the later edit wins, the earlier one is logged".
    ///
    /// ```swift
    /// import EncryptedDatabase
    /// import Sync
    ///
    /// func mergeTags(_ engine: SyncEngine) {
    ///     engine.setMerge(forTable: "notes") { edit in
    ///         guard edit.column == "tags", case .text(let a) = edit.earlier, case .text(let b) = edit.later else { return nil }
    ///         let union = Set(a.split(separator: ",")).union(b.split(separator: ","))
    ///         return .text(union.sorted().joined(separator: ","))
    ///     }
    /// }
    /// ```
    ///
    /// When a sync finds two concurrent edits of a value of `table`, the function gets both (``SyncConcurrentEdit``).
    /// A merged value different from the later edit's is written as a new edit of this device, which the next
    /// ``sync()`` sends; a device that merges the same two edits writes the same value, so the devices converge.
    /// Nothing goes to the conflict log for a value the function merged. A device may meet a merged value before
    /// the later edit it came from, and merge it with the earlier edit again: the function must give the same
    /// result then (`merge(a, merge(a, b)) == merge(a, b)`, as a union or a maximum does; a sum does not — two
    /// values without their common base cannot add increments). Register it on every device, before
    /// ``sync()``, on each engine you make (it is not stored); nil removes it. A delete still wins over the edits it
    /// is newer than, as for every table.
    public func setMerge(forTable table: String, _ merge: SyncMergeFunction?) {
        merges.set(merge, for: table)
    }
}
