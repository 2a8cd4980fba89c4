// A word search's page from the index's newest matches, checked against the task order (Docs/tasks.md, "Searching").
internal import EncryptedDatabase

/// The matches of a word search nearest the start of a listing's order, by index number: the index numbers tasks
/// (`tasks_search_keys.docid`) in the order they were added, which is the order of their creation unless tasks
/// were imported, synchronized or edited later. Read from the index in that order, up to ``size`` + 1 of them,
/// without counting or sorting the others.
struct WordSearchWindow {
    /// How many matches a window holds: above it a listing scans the tasks in order
    /// (``TaskListClause/scanAboveMatches``), at or below it the window holds every match.
    static let size = TaskListClause.scanAboveMatches

    /// The index numbers in the window.
    let docids: Set<Int64>
    /// Whether the window holds every match of the search.
    let complete: Bool
    /// The last index number in the window: every match past it in the window's direction is outside.
    let boundary: Int64
    /// Whether the window is of the highest index numbers (a newest-first listing) or the lowest.
    let descending: Bool

    /// The window of `filter`'s word search for a listing in `order`, or nil when the filter searches no words.
    init?(_ filter: TaskList.Filter, _ order: TaskList.Order, _ db: Database) throws {
        guard let words = filter.words, let pattern = FullTextPattern(matchingAllPrefixesIn: words) else { return nil }
        descending = order == .newestFirst
        // FTS4 reads its matches in index-number order, either way, and stops at the LIMIT (no sort).
        let numbers = try db.fetch(
            "SELECT docid FROM tasks_search WHERE tasks_search MATCH ? ORDER BY docid \(descending ? "DESC" : "ASC") LIMIT ?",
            [pattern.text(for: TaskList.searchIndex.engine), Self.size + 1]
        ) { try $0.int64(at: 0) }
        complete = numbers.count <= Self.size
        docids = Set(numbers.prefix(Self.size))
        boundary = numbers.prefix(Self.size).last ?? 0
    }

    /// Whether index number `docid` is beyond the window: a task there may match or not, the window cannot say.
    func isBeyond(_ docid: Int64) -> Bool { descending ? docid < boundary : docid > boundary }

    /// The page of `filter` (whose words this window holds) in `order`, from the window alone: the tasks are
    /// scanned in `order` and each is a match when its index number is in the window, and no match when it is
    /// not but lies within the window's range. Returns nil, having kept nothing, as soon as a task lies beyond the
    /// window before the page is full: its being a match is unknown, and the caller lists the page another way.
    func page(
        _ db: Database, _ filter: TaskList.Filter, _ order: TaskList.Order, _ after: TaskItem?, _ offset: Int,
        _ limit: Int
    ) throws -> [TaskItem]? {
        guard !complete, offset + limit <= docids.count else { return nil }
        var others = filter
        others.titleMatches = nil  // the words are this window's; the other conditions stay in SQL
        var clause = TaskListClause(others)
        if clause.matchesNothing { return [] }
        if let after { clause.after(after, order: order) }
        var items: [TaskItem] = []
        items.reserveCapacity(limit)
        var skipped = 0
        var certain = true
        do {
            try db.forEachRow(
                "SELECT \(TaskList.columns), (SELECT docid FROM tasks_search_keys WHERE id = tasks.id) FROM tasks"
                    + "\(clause.whereSQL)\(order.orderBySQL)",
                StatementArguments(clause.arguments)
            ) { row in
                // A task without an index number (none: the triggers number every task) is treated as unknown.
                let docid = try row.isNull(at: 4) ? nil : try row.int64(at: 4)
                guard let docid, !isBeyond(docid) else {
                    certain = false
                    throw StopScan()
                }
                guard docids.contains(docid) else { return }
                if skipped < offset {
                    skipped += 1
                    return
                }
                items.append(try TaskList.decode(row))
                if items.count == limit { throw StopScan() }
            }
        } catch is StopScan {}
        return certain ? items : nil
    }

    /// Thrown by a scan's closure to stop it.
    private struct StopScan: Error {}
}
