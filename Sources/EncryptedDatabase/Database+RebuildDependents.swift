// The views and the other tables' triggers that name a table being rebuilt (SQLite's twelve steps on an engine
// without RENAME/DROP COLUMN): dropped before the rebuild and created again after it from sqlite_master's SQL,
// with the renamed column renamed where it is this table's, in the caller's transaction. SQLite 3.25+ does the
// same for a native RENAME COLUMN; 3.15.2 rewrites nothing.

/// A view or trigger stored in `sqlite_master` that names the table being rebuilt, or a trigger of such a view.
struct RebuildDependent {
    let type: String
    let name: String
    /// The table or view a trigger is on (a view's own name).
    let table: String
    let sql: String
}

extension Database {
    /// The views and triggers of other tables (and the triggers of those views) whose SQL names `table`, in the
    /// order they were created (each may need the ones before it).
    func rebuildDependents(of table: String) throws -> [RebuildDependent] {
        let stored = try fetch(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('view', 'trigger') AND sql IS NOT NULL "
                + "AND tbl_name <> ? COLLATE NOCASE ORDER BY rowid", [table]
        ) { row in (type: try row.string(at: 0), name: try row.string(at: 1), on: try row.string(at: 2),
                    sql: try row.string(at: 3)) }
        var views: Set<String> = []
        var dependents: [RebuildDependent] = []
        for item in stored {
            // A view's own triggers (INSTEAD OF) go with it: dropping a view drops them.
            let onDroppedView = item.type == "trigger" && views.contains(item.on.lowercased())
            guard onDroppedView || SQLTokens.mentions(item.sql, table) else { continue }
            if item.type == "view" { views.insert(item.name.lowercased()) }
            dependents.append(RebuildDependent(type: item.type, name: item.name, table: item.on, sql: item.sql))
        }
        return dependents
    }

    /// `dependents` as they must be after `table`'s column `old` is renamed to `new` (or dropped when `new` is
    /// `nil`: a dependent that uses it is refused, as SQLite's `DROP COLUMN` refuses it).
    func rewritten(
        _ dependents: [RebuildDependent], table: String, renaming old: String, to new: String?
    ) throws -> [RebuildDependent] {
        guard !dependents.isEmpty else { return [] }
        let tables = try fetch("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')") { try $0.string(at: 0) }
        var columns: [String: Set<String>] = [:]
        for name in tables {
            columns[name.lowercased()] = Set(
                try fetch("PRAGMA table_info(\(quoteIdentifier(name)))") { try $0.string(at: 1).lowercased() })
        }
        return try dependents.map { dependent in
            // The dependent's own columns (a view's, or those of a trigger's table, reached through NEW and OLD)
            // are not the ones its statements read.
            var others = columns
            others[dependent.name.lowercased()] = nil
            if dependent.table.lowercased() != table.lowercased() { others[dependent.table.lowercased()] = nil }
            let ranges = SQLTokens.columnReferences(
                old, ofTable: table, in: dependent.sql, columns: others, isView: dependent.type == "view",
                triggerTable: dependent.type == "trigger" ? dependent.table : nil)
            guard !ranges.isEmpty else { return dependent }
            guard let new else {
                throw DatabaseError(
                    .misuse,
                    "column '\(old)' of table '\(table)' is used by \(dependent.type) '\(dependent.name)': drop or "
                        + "change the \(dependent.type) first (in the same migration), then drop the column")
            }
            var sql = dependent.sql
            for range in ranges.reversed() { sql.replaceSubrange(range, with: quoteIdentifier(new)) }
            return RebuildDependent(type: dependent.type, name: dependent.name, table: dependent.table, sql: sql)
        }
    }

    /// Drops `dependents` (before the table is dropped).
    func drop(_ dependents: [RebuildDependent]) throws {
        for dependent in dependents.reversed() where try tableExists(dependent.name, type: dependent.type) {
            try executeScript("DROP \(dependent.type == "view" ? "VIEW" : "TRIGGER") \(quoteIdentifier(dependent.name))")
        }
    }

    /// Creates `dependents` again, then reads every view once, so that a view the rebuild broke fails here, in the
    /// transaction, and not at its first use.
    func create(_ dependents: [RebuildDependent]) throws {
        for dependent in dependents { try executeScript(dependent.sql) }
        for dependent in dependents where dependent.type == "view" {
            try executeScript("SELECT * FROM \(quoteIdentifier(dependent.name)) LIMIT 0")
        }
    }

    private func tableExists(_ name: String, type: String) throws -> Bool {
        try fetchOne("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ? COLLATE NOCASE", [type, name]) { _ in true }
            ?? false
    }
}

extension SQLTokens {
    /// The ranges of the identifiers of a view's or trigger's `sql` that are column `column` of table `table`:
    /// `table.column`, `alias.column` where `alias` names `table` (`FROM note n`, `note AS n`), `NEW.column` and
    /// `OLD.column` in a trigger on `table` (`triggerTable`), and a bare `column` when no other table or view
    /// `sql` names has a column of that name (`columns`: each table's lower-cased column names, by lower-cased
    /// table name, without the view's own). A reference made ambiguous by a subquery over two such tables is left
    /// as it is. In a trigger on `table`, its head (`UPDATE OF column`, `WHEN NEW.column`) names `table`'s columns.
    static func columnReferences(
        _ column: String, ofTable table: String, in sql: String, columns: [String: Set<String>],
        isView: Bool, triggerTable: String? = nil
    ) -> [Range<String.Index>] {
        let tokens = identifiers(sql)
        let column = column.lowercased()
        let table = table.lowercased()
        // Table names and aliases, each to the lower-cased table it stands for.
        var names: [String: String] = [:]
        for (index, token) in tokens.enumerated() where columns[token.name.lowercased()] != nil {
            let named = token.name.lowercased()
            names[named] = named
            var next = index + 1
            if next < tokens.count, tokens[next].name.uppercased() == "AS" { next += 1 }
            guard next < tokens.count, !aliasStoppers.contains(tokens[next].name.uppercased()),
                  follows(tokens, next, sql)
            else { continue }
            names[tokens[next].name.lowercased()] = named
        }
        let trigger = triggerTable?.lowercased()
        if let trigger { (names["new"], names["old"]) = (trigger, trigger) }
        let othersHaveIt = Set(names.values).contains { $0 != table && columns[$0]?.contains(column) == true }
        // A view's own column list and name come before its first AS; a trigger's head before its BEGIN.
        let start = isView ? tokens.firstIndex { $0.name.uppercased() == "AS" } ?? 0 : 0
        let head = trigger == table ? tokens.firstIndex { $0.name.uppercased() == "BEGIN" } ?? 0 : 0
        var ranges: [Range<String.Index>] = []
        for (index, token) in tokens.enumerated() where index > start && token.name.lowercased() == column {
            if isQualifier(tokens, index, sql) { continue }                     // `title.x`: a table or alias
            if tokens[index - 1].name.uppercased() == "AS", follows(tokens, index, sql) { continue }  // an alias
            if sql[..<token.range.lowerBound].last(where: { !$0.isWhitespace }) == "." {
                // Qualified: this table's column when the qualifier stands for this table; an unknown qualifier
                // is read as a bare name.
                let qualifier = tokens[index - 1].name.lowercased()
                if names[qualifier].map({ $0 == table }) ?? !othersHaveIt { ranges.append(token.range) }
            } else if index < head || !othersHaveIt {
                ranges.append(token.range)
            }
        }
        return ranges
    }

    /// Whether the identifier at `index` comes right after the one before it, with only spaces between.
    private static func follows(
        _ tokens: [(range: Range<String.Index>, name: String)], _ index: Int, _ sql: String
    ) -> Bool {
        sql[tokens[index - 1].range.upperBound..<tokens[index].range.lowerBound].allSatisfy(\.isWhitespace)
    }

    /// Whether the identifier at `index` is followed by `.` (a table or alias, not a column).
    private static func isQualifier(
        _ tokens: [(range: Range<String.Index>, name: String)], _ index: Int, _ sql: String
    ) -> Bool {
        sql[tokens[index].range.upperBound...].first { !$0.isWhitespace } == "."
    }

    /// Words that may follow a table name and are no alias of it.
    private static let aliasStoppers: Set<String> = [
        "ON", "USING", "WHERE", "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL", "GROUP",
        "ORDER", "LIMIT", "UNION", "EXCEPT", "INTERSECT", "SET", "VALUES", "SELECT", "FROM", "BEGIN", "END", "AND",
        "OR", "NOT", "WHEN", "THEN", "ELSE", "FOR", "EACH", "ROW", "INDEXED", "HAVING", "WINDOW", "DEFAULT",
        "RETURNING", "OFFSET", "IS", "IN", "LIKE", "BETWEEN", "DO", "INSTEAD", "OF", "AFTER", "BEFORE", "AS",
    ]
}
