// Full-text indexes read back from a database's schema, for code that writes a table without knowing which
// indexes an application gave it (the sync engine's merge): it can still defer their indexing in a bulk write.

extension Database {
    /// The full-text indexes made by ``create(fullTextIndex:)`` whose content table is `table`, read back from
    /// the schema: an index is found only when the statements it would create today are exactly the ones the
    /// database holds (its virtual table and its insert trigger), so what is returned can be used as if the
    /// application had passed it. Indexes made some other way are not returned.
    ///
    /// ```swift
    /// try queue.write { db in
    ///     let indexes = try db.fullTextIndexes(on: "note")        // [noteSearch], found in the schema
    ///     try db.deferringFullTextIndexing(of: indexes) {
    ///         for title in titles { try db.execute("INSERT INTO note (title, body) VALUES (?, '')", [title]) }
    ///     }
    /// }
    /// ```
    public func fullTextIndexes(on table: String) throws -> [FullTextIndex] {
        let triggers = try fetch(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? AND name LIKE '%\\_insert' ESCAPE '\\'",
            [table]
        ) { (try $0.string(at: 0), try $0.string(at: 1)) }
        var found: [FullTextIndex] = []
        for (trigger, triggerSQL) in triggers {
            let name = String(trigger.dropLast("_insert".count))
            guard
                let tableSQL = try fetchOne(
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? AND sql LIKE 'CREATE VIRTUAL TABLE %'",
                    [name], { try $0.string(at: 0) })
            else { continue }
            let columns = try fetch("PRAGMA table_info(\(quoteIdentifier(name)))") { try $0.string(at: 1) }
            let keysTable = name + "_keys"
            let hasKeys = try fetchOne(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [keysTable], { _ in true }) ?? false
            let key = hasKeys
                ? try fetch("PRAGMA table_info(\(quoteIdentifier(keysTable)))") { try $0.string(at: 1) }.filter { $0 != "docid" }
                : []
            candidates: for engine in [FullTextEngine.fts4, .fts5] {
                for tokenizer in [FullTextTokenizer.unicode61, .porter] {
                    let index = FullTextIndex(
                        name: name, table: table, columns: columns, key: key, engine: engine, tokenizer: tokenizer)
                    let sql = index.creationSQL
                    if sql.contains(tableSQL), sql.contains(triggerSQL) {
                        found.append(index)
                        break candidates
                    }
                }
            }
        }
        return found
    }

    /// Runs `body` with the indexing of every index of `indexes` deferred, as
    /// ``deferringFullTextIndexing(_:_:)`` does for one.
    public func deferringFullTextIndexing<T>(of indexes: [FullTextIndex], _ body: () throws -> T) throws -> T {
        guard let first = indexes.first else { return try body() }
        return try deferringFullTextIndexing(first) { try deferringFullTextIndexing(of: Array(indexes.dropFirst()), body) }
    }
}
