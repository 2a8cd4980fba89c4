// Filters, orders, pages and counts of the task list, and the SQL they become.
internal import Foundation
internal import EncryptedDatabase

extension TaskList {
    /// Which tasks a listing or a count covers.
    ///
    /// ```swift
    /// let open = try list.list(.open)
    /// let rent = try list.count(TaskList.Filter(status: .all, titleContains: "rent"))
    /// ```
    public struct Filter: Sendable, Hashable {
        /// Done, open, or both.
        public enum Status: Sendable, Hashable {
            /// Every task.
            case all
            /// Tasks that are done.
            case done
            /// Tasks that are not done.
            case open
        }

        /// Done, open, or both.
        public var status: Status
        /// When set and not empty, only tasks whose title contains this text. `%`, `_` and `\` match
        /// themselves. Case is ignored for ASCII letters only (SQLite's `LIKE`): `a` finds `A`, but `é` does
        /// not find `É` and `ß` does not find `SS`.
        public var titleContains: String?
        /// When set and not empty, only tasks whose title holds, for every word of this text, a word that
        /// begins with it, in any order (`"pay ren"` finds "Pay the rent"): the full-text index, which answers
        /// without reading every task. A word is a run of letters and digits; case and diacritics are ignored
        /// in every script (`e` finds `É`). Text with no word in it (`"%!"`) matches no task. Unlike
        /// ``titleContains``, it finds words by their beginning, not any substring: `"ent"` does not find
        /// "rent" (Docs/tasks.md, "Searching").
        public var titleMatches: String?

        /// A filter on `status` and, when given, title text (a substring, ``titleContains``) or words
        /// (``titleMatches``).
        public init(status: Status = .all, titleContains: String? = nil, titleMatches: String? = nil) {
            self.status = status
            self.titleContains = titleContains
            self.titleMatches = titleMatches
        }

        /// Every task.
        public static let all = Filter()
        /// Tasks that are done.
        public static let done = Filter(status: .done)
        /// Tasks that are not done.
        public static let open = Filter(status: .open)

        /// The title text to search for, or `nil` when the filter does not search.
        var search: String? {
            guard let text = titleContains, !text.isEmpty else { return nil }
            return text
        }

        /// The words to search for, or `nil` when the filter does not search words.
        var words: String? {
            guard let text = titleMatches, !text.isEmpty else { return nil }
            return text
        }

        /// Whether the filter looks at titles (so counting needs more than the stored counts).
        var searchesTitles: Bool { search != nil || words != nil }
    }

    /// The order of a listing: by creation date, ties broken by ID, so the order is total and stable.
    public enum Order: Sendable, Hashable {
        /// Newest first (descending creation date, then descending ID).
        case newestFirst
        /// Oldest first (ascending creation date, then ascending ID).
        case oldestFirst
    }

    /// One page of a listing and the number of tasks the filter matches, read in one snapshot.
    public struct Page: Sendable, Hashable {
        /// The tasks of the page, in the requested order.
        public let items: [TaskItem]
        /// How many tasks match the filter in all (not only on this page).
        public let total: Int

        /// A page of `items` out of `total`.
        public init(items: [TaskItem], total: Int) {
            self.items = items
            self.total = total
        }
    }

    /// The number of tasks, done and open.
    public struct Counts: Sendable, Hashable {
        /// Every task.
        public let total: Int
        /// Tasks that are done.
        public let done: Int
        /// Tasks that are not done.
        public var open: Int { total - done }

        /// Counts of `total` tasks of which `done` are done.
        public init(total: Int, done: Int) {
            self.total = total
            self.done = done
        }
    }
}

extension TaskList.Filter {
    /// This filter as `db` can run it. A list made before the search index and opened where it may not be written
    /// (so the index could not be built) has no index: a word search there is the substring search of the version
    /// that made it (Docs/tasks.md, "Searching").
    func runnable(in db: Database) throws -> TaskList.Filter {
        guard let words, titleContains == nil else { return self }
        let indexed = try db.scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", [TaskList.searchIndex.name], as: Int.self)
        guard indexed == 0 else { return self }
        var filter = self
        filter.titleMatches = nil
        filter.titleContains = words
        return filter
    }
}

// MARK: SQL

/// A WHERE clause and its arguments.
struct TaskListClause {
    var conditions: [String] = []
    var arguments: [any DatabaseValueConvertible] = []

    /// Whether no task can match (a search longer than any title).
    var matchesNothing = false

    /// How many tasks a word search matches above which a listing scans the tasks in order and checks each
    /// against the matches, rather than reading every match and sorting them (Docs/tasks.md, "Searching").
    static let scanAboveMatches = 2_000

    /// The clause of `filter` for a listing, given its word search's ``WordSearchWindow`` (nil without words): a
    /// word search with more matches than the window holds is checked task by task in the listing's order, so
    /// that the first page stops early; one whose matches all fit in the window reads them and sorts them.
    init(listing filter: TaskList.Filter, window: WordSearchWindow?) {
        self.init(filter, scanning: window.map { !$0.complete } ?? false)
    }

    /// The total of a word search alone, read from the index without touching the tasks; nil for other filters.
    static func indexCount(_ filter: TaskList.Filter, _ db: Database) throws -> Int? {
        guard filter.status == .all, filter.search == nil, let words = filter.words else { return nil }
        guard let pattern = FullTextPattern(matchingAllPrefixesIn: words) else { return 0 }
        return try db.scalar(
            "SELECT count(*) FROM tasks_search WHERE tasks_search MATCH ?",
            [pattern.text(for: TaskList.searchIndex.engine)], as: Int.self) ?? 0
    }

    init(_ filter: TaskList.Filter, scanning: Bool = false) {
        switch filter.status {
        case .all: break
        case .done: conditions.append("done = 1")
        case .open: conditions.append("done = 0")
        }
        if let text = filter.search {
            // No title is longer than the limit, so a longer search matches nothing; this also keeps the
            // pattern under SQLite's LIKE pattern length limit (50 000 bytes).
            // No title contains NUL either, and SQLite's LIKE would stop reading the pattern at one.
            if text.unicodeScalars.count > TaskList.maximumTitleLength || text.utf8.contains(0) {
                matchesNothing = true
            }
            conditions.append("title LIKE ? ESCAPE '\\'")
            arguments.append("%" + TaskListClause.escapeLike(text) + "%")
        }
        if let words = filter.words {
            if let pattern = FullTextPattern(matchingAllPrefixesIn: words) {
                conditions.append(
                    scanning
                        ? "EXISTS (SELECT 1 FROM tasks_search_keys AS k WHERE k.id = tasks.id AND k.docid IN "
                            + "(SELECT docid FROM tasks_search WHERE tasks_search MATCH ?))"
                        : TaskList.searchIndex.conditionSQL)
                arguments.append(pattern.text(for: TaskList.searchIndex.engine))
            } else {
                matchesNothing = true
            }
        }
    }

    /// `text` with the LIKE wildcards `%` and `_` and the escape character `\` escaped by `\`.
    static func escapeLike(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x25 || $0 == 0x5F || $0 == 0x5C }) else { return text }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count + 8)
        for character in text.unicodeScalars {
            if character == "%" || character == "_" || character == "\\" { escaped.unicodeScalars.append("\\") }
            escaped.unicodeScalars.append(character)
        }
        return escaped
    }

    /// Adds the keyset condition "strictly after `cursor` in `order`".
    mutating func after(_ cursor: TaskItem, order: TaskList.Order) {
        conditions.append(order == .newestFirst ? "(created_at, id) < (?, ?)" : "(created_at, id) > (?, ?)")
        arguments.append(cursor.createdAtMicroseconds)
        arguments.append(cursor.id)
    }

    var whereSQL: String {
        conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
    }
}

extension TaskList.Order {
    var orderBySQL: String {
        switch self {
        case .newestFirst: " ORDER BY created_at DESC, id DESC"
        case .oldestFirst: " ORDER BY created_at ASC, id ASC"
        }
    }
}
