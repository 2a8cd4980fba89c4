// Full-text search inside the encrypted database: an FTS4 (or FTS5) index kept in step with a content table by
// generated triggers, patterns built safely from user input, and `matching` on queries.

/// The SQLite full-text engine of an index.
public enum FullTextEngine: String, Sendable, Hashable {
    /// FTS4: in every SQLite this library runs on (Debian 12's SQLite 3.15.2 has no FTS5).
    case fts4
    /// FTS5: Debian 13's engine and newer. A file holding an FTS5 index cannot be searched (or written, where the
    /// triggers touch the index) by an engine without FTS5, such as Debian 12's.
    case fts5

    /// FTS5 where the linked engine has it (``Database/supports(_:)``), FTS4 otherwise.
    public static var best: FullTextEngine { Database.supports(.fts5) ? .fts5 : .fts4 }
}

/// How an index splits text into words.
public enum FullTextTokenizer: String, Sendable, Hashable {
    /// Words of letters and digits of any script, case folded, diacritics removed (`é` matches `e`, `É`).
    case unicode61
    /// `unicode61`, then English stemming (`running` matches `run`).
    case porter

    func argument(for engine: FullTextEngine) -> String {
        switch (self, engine) {
        case (.unicode61, .fts4): "tokenize=unicode61"
        case (.porter, .fts4): "tokenize=porter"
        case (.unicode61, .fts5): "tokenize='unicode61'"
        case (.porter, .fts5): "tokenize='porter unicode61'"
        }
    }
}

/// A full-text index of some text columns of a table, kept in step with the table by triggers that SQLite runs in
/// the same transaction as every insert, update and delete — whoever writes (this library, the `sqlcipher` tool,
/// another program). The index is a table of the encrypted database: the words are encrypted like the rest.
///
/// ```swift
/// import EncryptedDatabase
///
/// struct Note: Codable, FetchableRecord, PersistableRecord {
///     var id: Int64?
///     var title: String
///     var body: String
/// }
///
/// let noteSearch = FullTextIndex(name: "note_search", table: "note", columns: ["title", "body"])
///
/// func register(_ migrator: inout DatabaseMigrator) {
///     migrator.registerMigration("notes") { db in
///         try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL)")
///         try db.create(fullTextIndex: noteSearch)
///     }
/// }
///
/// func search(_ text: String, in db: Database) throws -> [Note] {
///     let pattern = FullTextPattern(matchingAllPrefixesIn: text)   // nil when the text holds no word
///     return try Note.all().matching(pattern, in: noteSearch).fetchAll(db)
/// }
/// ```
///
/// A table with a rowid is indexed as FTS's "external content": the index holds the words only, and the text
/// stays in the table. A `WITHOUT ROWID` table has no integer key for the index to point at: give `key` (its
/// primary key, or columns of a unique index); the index then keeps its own copy of the text and a table
/// `<name>_keys` that gives each row a number. The SQL generated for given arguments never changes once
/// released, so a migration that calls ``Database/create(fullTextIndex:)`` always builds the same schema.
public struct FullTextIndex: Sendable, Hashable {
    /// The name of the FTS virtual table (and the prefix of its triggers).
    public let name: String
    /// The content table.
    public let table: String
    /// The indexed columns of the content table.
    public let columns: [String]
    /// The columns that identify a row of a `WITHOUT ROWID` content table; empty: the table's rowid.
    public let key: [String]
    /// The full-text engine.
    public let engine: FullTextEngine
    /// How text is split into words.
    public let tokenizer: FullTextTokenizer

    /// An index named `name` of `columns` of `table`.
    ///
    /// The engine is FTS4 by default, which every engine this library runs on has, so the file can move between
    /// Debian 12 and 13; pass ``FullTextEngine/best`` or `.fts5` when it never goes to an engine without FTS5.
    public init(
        name: String, table: String, columns: [String], key: [String] = [], engine: FullTextEngine = .fts4,
        tokenizer: FullTextTokenizer = .unicode61
    ) {
        self.name = name
        self.table = table
        self.columns = columns
        self.key = key
        self.engine = engine
        self.tokenizer = tokenizer
    }

    /// The table that numbers the rows of a `WITHOUT ROWID` content table.
    var keysTable: String { name + "_keys" }

    private var docid: String { engine == .fts4 ? "docid" : "rowid" }

    /// A condition on rows of ``table``: the row matches the pattern, with one `?` for
    /// ``FullTextPattern/text(for:)``.
    public var conditionSQL: String {
        let index = quoteIdentifier(name)
        let matches = "SELECT \(docid) FROM \(index) WHERE \(index) MATCH ?"
        guard !key.isEmpty else { return "rowid IN (\(matches))" }
        let columns = key.map(quoteIdentifier).joined(separator: ", ")
        let row = key.count == 1 ? columns : "(\(columns))"
        return "\(row) IN (SELECT \(columns) FROM \(quoteIdentifier(keysTable)) WHERE docid IN (\(matches)))"
    }

    /// The statements ``Database/create(fullTextIndex:)`` runs, in order: the index, its triggers, the table that
    /// numbers the rows of a `WITHOUT ROWID` table, and the statements that index the rows already there.
    public var creationSQL: [String] {
        let index = quoteIdentifier(name)
        let content = quoteIdentifier(table)
        let quotedColumns = columns.map(quoteIdentifier)
        let list = quotedColumns.joined(separator: ", ")
        let new = quotedColumns.map { "NEW." + $0 }.joined(separator: ", ")
        let old = quotedColumns.map { "OLD." + $0 }.joined(separator: ", ")
        let trigger = { (suffix: String) in quoteIdentifier(name + "_" + suffix) }
        guard !key.isEmpty else {
            // External content: the index reads the text from the table's rowid.
            let options =
                engine == .fts4
                ? "content=\(content), \(list), \(tokenizer.argument(for: engine))"
                : "\(list), content=\(content), content_rowid='rowid', \(tokenizer.argument(for: engine))"
            let remove =
                engine == .fts4
                ? "DELETE FROM \(index) WHERE docid = OLD.rowid;"
                : "INSERT INTO \(index) (\(index), rowid, \(list)) VALUES ('delete', OLD.rowid, \(old));"
            let add = "INSERT INTO \(index) (\(docid), \(list)) VALUES (NEW.rowid, \(new));"
            // FTS4 reads the old text from the table to remove its words: before the change. FTS5 is told it.
            let when = engine == .fts4 ? "BEFORE" : "AFTER"
            return [
                "CREATE VIRTUAL TABLE \(index) USING \(engine.rawValue)(\(options))",
                "CREATE TRIGGER \(trigger("insert")) AFTER INSERT ON \(content) BEGIN \(add) END",
                "CREATE TRIGGER \(trigger("delete")) \(when) DELETE ON \(content) BEGIN \(remove) END",
                "CREATE TRIGGER \(trigger("update_old")) \(when) UPDATE OF \(list) ON \(content) BEGIN \(remove) END",
                "CREATE TRIGGER \(trigger("update_new")) AFTER UPDATE OF \(list) ON \(content) BEGIN \(add) END",
                "INSERT INTO \(index) (\(index)) VALUES ('rebuild')",
            ]
        }
        // WITHOUT ROWID: rows are numbered in <name>_keys; the index keeps its own copy of the text.
        let keys = quoteIdentifier(keysTable)
        let quotedKey = key.map(quoteIdentifier)
        let keyList = quotedKey.joined(separator: ", ")
        let matchOld = quotedKey.map { "\($0) = OLD.\($0)" }.joined(separator: " AND ")
        let matchNew = quotedKey.map { "\($0) = NEW.\($0)" }.joined(separator: " AND ")
        let setKey = quotedKey.map { "\($0) = NEW.\($0)" }.joined(separator: ", ")
        let numberOf = { (match: String) in "(SELECT docid FROM \(keys) WHERE \(match))" }
        // OR ROLLBACK: a statement that cannot fail half-way needs no statement journal (Docs/database.md).
        return [
            "CREATE TABLE \(keys) (docid INTEGER PRIMARY KEY, \(keyList), UNIQUE (\(keyList)))",
            "CREATE VIRTUAL TABLE \(index) USING \(engine.rawValue)(\(list), \(tokenizer.argument(for: engine)))",
            """
            CREATE TRIGGER \(trigger("insert")) AFTER INSERT ON \(content) BEGIN
                INSERT OR ROLLBACK INTO \(keys) (\(keyList)) VALUES (\(quotedKey.map { "NEW." + $0 }.joined(separator: ", ")));
                INSERT INTO \(index) (\(docid), \(list)) VALUES (last_insert_rowid(), \(new));
            END
            """,
            """
            CREATE TRIGGER \(trigger("delete")) AFTER DELETE ON \(content) BEGIN
                DELETE FROM \(index) WHERE \(docid) = \(numberOf(matchOld));
                DELETE FROM \(keys) WHERE \(matchOld);
            END
            """,
            """
            CREATE TRIGGER \(trigger("update")) AFTER UPDATE OF \(([list] + quotedKey).joined(separator: ", ")) ON \(content) BEGIN
                UPDATE OR ROLLBACK \(keys) SET \(setKey) WHERE \(matchOld);
                UPDATE \(index) SET \(quotedColumns.map { "\($0) = NEW.\($0)" }.joined(separator: ", ")) WHERE \(docid) = \(numberOf(matchNew));
            END
            """,
            "INSERT INTO \(keys) (\(keyList)) SELECT \(keyList) FROM \(content)",
            "INSERT INTO \(index) (\(docid), \(list)) SELECT k.docid, \(quotedColumns.map { "c." + $0 }.joined(separator: ", ")) "
                + "FROM \(keys) AS k JOIN \(content) AS c ON "
                + quotedKey.map { "c.\($0) = k.\($0)" }.joined(separator: " AND "),
        ]
    }
}

extension Database {
    /// Creates `index`: the FTS table, the triggers that keep it in step with its content table, and (for a
    /// `WITHOUT ROWID` table) the table that numbers the rows; then indexes the rows already there. Run it in a
    /// migration.
    ///
    /// Throws ``DatabaseError/Code/misuse`` when the table does not exist, when a column is not one of its
    /// columns, when the table has no rowid and `key` is empty, or when `key` is not its primary key nor a
    /// unique index's columns.
    public func create(fullTextIndex index: FullTextIndex) throws {
        guard !index.columns.isEmpty else {
            throw DatabaseError(.misuse, "the full-text index '\(index.name)' names no column to index")
        }
        // PRAGMA, not the pragma_table_info() function: that one is SQLite 3.16, Debian 12's engine is 3.15.2.
        let info = try fetch("PRAGMA table_info(\(quoteIdentifier(index.table)))") {
            (try $0.string(at: 1), try $0.int(at: 5))
        }
        guard !info.isEmpty else {
            throw DatabaseError(.misuse, "no such table: '\(index.table)' (full-text index '\(index.name)')")
        }
        let names = Set(info.map { $0.0.lowercased() })
        for column in index.columns + index.key where !names.contains(column.lowercased()) {
            throw DatabaseError(.misuse, "the table '\(index.table)' has no column '\(column)'")
        }
        if index.key.isEmpty {
            guard (try? makeStatement("SELECT rowid FROM \(quoteIdentifier(index.table))")) != nil else {
                throw DatabaseError(
                    .misuse,
                    "the table '\(index.table)' is WITHOUT ROWID: give the full-text index '\(index.name)' a key "
                        + "(its primary key or the columns of a unique index)")
            }
        } else if try !isUniqueKey(index.key, of: index.table, primaryKey: info) {
            throw DatabaseError(
                .misuse,
                "the columns \(index.key) of '\(index.table)' are neither its primary key nor a unique index")
        }
        for sql in index.creationSQL { try execute(sql) }
    }

    /// Runs `body`, which inserts many rows into `index`'s table, with the index's per-row insert trigger
    /// replaced by a cheaper one, then indexes the inserted rows in one statement and puts the trigger back —
    /// all inside the current transaction (call it inside `write`), so other connections never see the
    /// index behind. An index with a key (on a `WITHOUT ROWID` table) defers updates the same way: the updated
    /// rows are indexed again at the end, in two statements. Deletes in `body`, and updates on an index without
    /// a key, keep the index in step as usual.
    ///
    /// Why: a trigger that writes an FTS table makes SQLite run each insert with a statement journal (a virtual
    /// table's write may abort half-way), and SQLCipher encrypts every page copied into it; a bulk insert of
    /// tasks through the per-row trigger was about 13 times slower than without the index (Docs/tasks.md).
    ///
    /// ```swift
    /// try queue.write { db in
    ///     try db.deferringFullTextIndexing(noteSearch) {
    ///         for title in titles { try db.execute("INSERT INTO note (title, body) VALUES (?, '')", [title]) }
    ///     }
    /// }
    /// ```
    public func deferringFullTextIndexing<T>(_ index: FullTextIndex, _ body: () throws -> T) throws -> T {
        guard isInsideTransaction else {
            throw DatabaseError(.misuse, "deferringFullTextIndexing runs inside a transaction: call it inside write")
        }
        let insertTrigger = quoteIdentifier(index.name + "_insert")
        guard let create = index.creationSQL.first(where: { $0.hasPrefix("CREATE TRIGGER \(insertTrigger) ") }) else {
            return try body()
        }
        let content = quoteIdentifier(index.table)
        let pending = quoteIdentifier(index.name + "_deferred")
        let columns = index.columns.map(quoteIdentifier)
        let docid = index.engine == .fts4 ? "docid" : "rowid"
        let replacement = quoteIdentifier(index.name + "_deferred_insert")
        // A keyed index (its own copy of the text, found by number) defers updates too: the rows' numbers are noted
        // and their text indexed again at the end. An external-content index (rowid tables) cannot: FTS4 reads the
        // old text from the table to remove its words, so the update trigger stays.
        let updateTrigger = quoteIdentifier(index.name + "_update")
        let updateCreate = index.key.isEmpty
            ? nil : index.creationSQL.first(where: { $0.hasPrefix("CREATE TRIGGER \(updateTrigger) ") })
        let updated = quoteIdentifier(index.name + "_deferred_updated")
        let updateReplacement = quoteIdentifier(index.name + "_deferred_update")
        // The triggers below note a row's number in a table without a key, once per insert or update (the same number
        // may be noted twice: a row inserted again after a delete reuses it), and the end reads the numbers DISTINCT.
        // Neither `OR IGNORE` nor a key would do: the conflict clause of the statement that fires a trigger overrides
        // the trigger's own, so a number noted twice under an `INSERT OR ROLLBACK` would fail and roll back; and a
        // trigger that looked first (`… WHERE NOT EXISTS (SELECT … FROM` the table it writes`)`) makes SQLite build a
        // temporary table for that SELECT on every row (two page-sized allocations: 20 % more instructions for each
        // task of `TaskList.insert`, callgrind).
        // A TEMP trigger may write tables of any database, named without qualifier (SQLite refuses `main.` in a
        // trigger's INSERT): `pending` is found in temp, the keys table in main.
        if index.key.isEmpty {
            // The new rowids, in a temporary table of this connection.
            try execute("CREATE TEMP TABLE IF NOT EXISTS \(pending) (docid INTEGER)")
            try execute(
                "CREATE TEMP TRIGGER \(replacement) AFTER INSERT ON main.\(content) BEGIN "
                    + "INSERT INTO \(pending) (docid) VALUES (NEW.rowid); END")
        } else {
            // The rows are numbered as usual; only the index's write waits.
            let keys = quoteIdentifier(index.keysTable)
            let key = index.key.map(quoteIdentifier)
            try execute("CREATE TEMP TABLE IF NOT EXISTS \(pending) (docid INTEGER)")
            try execute(
                "CREATE TEMP TRIGGER \(replacement) AFTER INSERT ON main.\(content) BEGIN "
                    + "INSERT OR ROLLBACK INTO \(keys) (\(key.joined(separator: ", "))) VALUES ("
                    + key.map { "NEW." + $0 }.joined(separator: ", ") + "); "
                    + "INSERT INTO \(pending) (docid) VALUES (last_insert_rowid()); END")
            if updateCreate != nil {
                // As the index's own update trigger, on the same columns: the keys follow a changed key, and the
                // row's number is noted instead of its text written.
                let matchOld = key.map { "\($0) = OLD.\($0)" }.joined(separator: " AND ")
                let matchNew = key.map { "k.\($0) = NEW.\($0)" }.joined(separator: " AND ")
                try execute("CREATE TEMP TABLE IF NOT EXISTS \(updated) (docid INTEGER)")
                try execute(
                    "CREATE TEMP TRIGGER \(updateReplacement) AFTER UPDATE OF \((columns + key).joined(separator: ", ")) "
                        + "ON main.\(content) BEGIN "
                        + "UPDATE OR ROLLBACK \(keys) SET \(key.map { "\($0) = NEW.\($0)" }.joined(separator: ", ")) WHERE \(matchOld); "
                        + "INSERT INTO \(updated) (docid) SELECT k.docid FROM \(keys) AS k WHERE \(matchNew); END")
                try execute("DROP TRIGGER \(updateTrigger)")
            }
        }
        try execute("DROP TRIGGER \(insertTrigger)")
        let value: T
        do {
            value = try body()
        } catch {
            // The enclosing transaction rolls back the schema change; the temporary objects go here.
            try? execute("DROP TRIGGER IF EXISTS temp.\(replacement)")
            try? execute("DROP TABLE IF EXISTS temp.\(pending)")
            try? execute("DROP TRIGGER IF EXISTS temp.\(updateReplacement)")
            try? execute("DROP TABLE IF EXISTS temp.\(updated)")
            throw error
        }
        try execute("DROP TRIGGER temp.\(replacement)")
        // CROSS JOIN keeps the new rows the outer loop: without it SQLite 3.15's planner, which has no statistics
        // of the temporary table, scans the whole content table by its key index to find them, so that each
        // deferred transaction cost time in proportion to the table (a 1 000 000-task sync join spent 19 of its 37 s
        // here, each 20 000-row transaction slower than the one before).
        let source: String
        if index.key.isEmpty {
            source = "SELECT c.rowid, \(columns.map { "c." + $0 }.joined(separator: ", ")) FROM "
                + "(SELECT DISTINCT docid FROM temp.\(pending)) AS p CROSS JOIN main.\(content) AS c ON c.rowid = p.docid"
        } else {
            // Updated rows: their old text leaves the index (a row inserted in `body` was never in it), and they are
            // indexed with the new rows, each once.
            let rows: String
            if updateCreate != nil {
                try execute("DROP TRIGGER temp.\(updateReplacement)")
                try execute("DELETE FROM main.\(quoteIdentifier(index.name)) WHERE \(docid) IN (SELECT docid FROM temp.\(updated))")
                rows = "(SELECT docid FROM temp.\(pending) UNION SELECT docid FROM temp.\(updated))"
            } else {
                rows = "(SELECT DISTINCT docid FROM temp.\(pending))"
            }
            source = "SELECT k.docid, \(columns.map { "c." + $0 }.joined(separator: ", ")) FROM \(rows) AS p "
                + "CROSS JOIN main.\(quoteIdentifier(index.keysTable)) AS k ON k.docid = p.docid CROSS JOIN main.\(content) AS c ON "
                + index.key.map(quoteIdentifier).map { "c.\($0) = k.\($0)" }.joined(separator: " AND ")
        }
        try execute("INSERT INTO main.\(quoteIdentifier(index.name)) (\(docid), \(columns.joined(separator: ", "))) \(source)")
        try execute("DROP TABLE temp.\(pending)")
        try execute(create)
        if let updateCreate {
            try execute("DROP TABLE temp.\(updated)")
            try execute(updateCreate)
        }
        return value
    }

    private func isUniqueKey(_ key: [String], of table: String, primaryKey info: [(String, Int)]) throws -> Bool {
        let wanted = Set(key.map { $0.lowercased() })
        let primary = Set(info.filter { $0.1 > 0 }.map { $0.0.lowercased() })
        if primary == wanted { return true }
        let indexes = try fetch("PRAGMA index_list(\(quoteIdentifier(table)))") {
            (try $0.string(at: 1), try $0.int(at: 2))
        }
        for (name, unique) in indexes where unique == 1 {
            let columns = try fetch("PRAGMA index_info(\(quoteIdentifier(name)))") { try $0.string(at: 2) }
            if Set(columns.map { $0.lowercased() }) == wanted { return true }
        }
        return false
    }
}

/// A full-text query built from text a person typed, safe whatever the text: every word is quoted, so no
/// character, quote, `*`, `-`, `AND`, `OR`, `NOT` or `NEAR` of the input is read as query syntax, and no input
/// makes the query fail. A word is a run of letters and digits; everything else separates words.
///
/// ```swift
/// import EncryptedDatabase
///
/// let pattern = FullTextPattern(matchingAllPrefixesIn: "pay ren")   // "pay* ren*": finds "Pay rent"
/// let nothing = FullTextPattern(matchingAllPrefixesIn: "%!")        // nil: no word to look for
/// ```
///
/// `description` gives the kind and the number of words, never the words.
public struct FullTextPattern: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case allPrefixes, allWords, anyWord, phrase
    }

    let kind: Kind
    /// The words, each of letters and digits only.
    let words: [String]

    /// The most words a pattern keeps (FTS4 limits the depth of a query's tree); further words are ignored.
    public static let maximumWordCount = 64

    private init?(_ kind: Kind, _ text: String) {
        var words: [String] = []
        var seen: Set<String> = []
        var word = String.UnicodeScalarView()
        func flush() {
            let text = String(word)
            // Marks alone make no word (a tokenizer gives no token for them, and an empty phrase is not a query).
            let hasBase = word.contains { $0.properties.isAlphabetic || $0.properties.numericType != nil }
            if hasBase, kind == .phrase || seen.insert(text.lowercased()).inserted { words.append(text) }
            word = String.UnicodeScalarView()
        }
        // By Unicode scalar, not by Character: a word can then never hold a quote or a `*`, whatever follows them.
        for scalar in text.unicodeScalars {
            if FullTextPattern.isWordScalar(scalar) { word.append(scalar) } else { flush() }
            if words.count == FullTextPattern.maximumWordCount { break }
        }
        flush()
        guard !words.isEmpty else { return nil }
        self.kind = kind
        self.words = Array(words.prefix(FullTextPattern.maximumWordCount))
    }

    /// Letters, digits and the marks that combine with them.
    static func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        let properties = scalar.properties
        if properties.isAlphabetic || properties.numericType != nil { return true }
        switch properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return false
        }
    }

    /// Rows holding, for every word of `text`, a word that begins with it, in any order (`"pay ren"` finds
    /// "Pay the rent"). Nil when `text` holds no word.
    public init?(matchingAllPrefixesIn text: String) { self.init(.allPrefixes, text) }

    /// Rows holding every word of `text`, in any order. Nil when `text` holds no word.
    public init?(matchingAllWordsIn text: String) { self.init(.allWords, text) }

    /// Rows holding at least one word of `text`. Nil when `text` holds no word.
    public init?(matchingAnyWordIn text: String) { self.init(.anyWord, text) }

    /// Rows holding the words of `text` next to each other, in this order. Nil when `text` holds no word.
    public init?(matchingPhrase text: String) { self.init(.phrase, text) }

    /// The text to bind to `MATCH` for an index of `engine` (FTS4 and FTS5 write prefixes differently).
    public func text(for engine: FullTextEngine) -> String {
        let quoted: (String) -> String
        switch (kind, engine) {
        case (.allPrefixes, .fts4): quoted = { "\"\($0)*\"" }
        case (.allPrefixes, .fts5): quoted = { "\"\($0)\"*" }
        default: quoted = { "\"\($0)\"" }
        }
        switch kind {
        case .allPrefixes, .allWords: return words.map(quoted).joined(separator: " ")
        case .anyWord: return words.map(quoted).joined(separator: " OR ")
        case .phrase: return "\"" + words.joined(separator: " ") + "\""
        }
    }

    /// The kind of pattern and its number of words.
    public var description: String { "FullTextPattern(\(kind), \(words.count) words)" }
}

extension Query {
    /// The rows of `index`'s table that match `pattern`; none when `pattern` is nil (the text held no word).
    ///
    /// ```swift
    /// let found = try Note.all().matching(FullTextPattern(matchingAllPrefixesIn: "rent"), in: noteSearch).fetchAll(db)
    /// ```
    public func matching(_ pattern: FullTextPattern?, in index: FullTextIndex) -> Query {
        guard let pattern else { return filter(SQLExpression(sql: "0")) }
        return filter(SQLExpression(sql: index.conditionSQL, arguments: [pattern.text(for: index.engine)]))
    }
}
