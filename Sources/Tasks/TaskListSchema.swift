// The task list's schema: the migration, its SQL, and the row decoder.
public import EncryptedDatabase

extension TaskList {
    /// The identifiers of the task list's migrations, in order. Shipped migrations are never edited.
    public static let migrationIDs = ["create tasks", "tasks search index"]

    /// Registers the task list's migrations with `migrator`, after any already registered.
    ///
    /// Use this when the database holds other components' tables too: register every component's migrations
    /// in one ``DatabaseMigrator`` (it refuses databases that hold migrations it does not know), migrate, and
    /// open the list with ``TaskList/init(migratedDatabase:)``.
    public static func registerMigrations(in migrator: inout DatabaseMigrator) {
        // "create tasks": see Docs/tasks.md for the measurements behind this schema.
        //
        // - The table is clustered by (created_at, id) (WITHOUT ROWID): new tasks append at the end of the
        //   B-tree, the first page newest-first is the last leaf page, and keyset paging is a primary-key range.
        //   Ties on created_at are broken by id, so the order is total and a page boundary is (created_at, id).
        // - tasks_id: lookups by ID and ID-prefix ranges; it holds (id, created_at). Random UUIDs make this the
        //   one index whose inserts scatter.
        // - tasks_done: a WITHOUT ROWID index holds the primary key, so this is (done, created_at, id): the
        //   done/open listings in both directions and their keyset ranges, without sorting.
        // - task_counts: one row (total, done), kept exact by triggers in the same transaction as every
        //   change, so counting a million tasks reads one row instead of decrypting every page of an index.
        // - Every INSERT and UPDATE (the triggers' too) uses OR ROLLBACK; DELETE has no constraint that can fail
        //   once the triggers' updates cannot abort. With the default ABORT, a
        //   statement that can fail half-way after changing several rows (triggers, unique index, CHECK) runs
        //   with a statement journal, and SQLCipher encrypts every page copied into it: a bulk insert was 8x
        //   slower. Each of our writes is its own transaction, so rolling the whole transaction back on a
        //   constraint failure is what we want anyway.
        migrator.registerMigration(migrationIDs[0]) { db in try db.executeScript(createSQL) }
        // "tasks search index": the full-text index of titles (Docs/tasks.md, "Searching"), built for the tasks
        // already there. FTS4, which Debian 12's and 13's engines both have, so the file moves between them.
        // The SQL that FullTextIndex generates for these arguments never changes (FullTextSearch.swift).
        migrator.registerMigration(migrationIDs[1]) { db in try db.create(fullTextIndex: searchIndex) }
    }

    /// The full-text index of task titles: FTS4, words of letters and digits, case and diacritics ignored. The
    /// tasks table is `WITHOUT ROWID`, so the index numbers tasks by their ID in `tasks_search_keys`.
    public static let searchIndex = FullTextIndex(
        name: "tasks_search", table: "tasks", columns: ["title"], key: ["id"], engine: .fts4, tokenizer: .unicode61)

    /// The whole schema of the current version: ``createSQL`` and the search index's statements, for the
    /// benchmark baseline (which runs the same schema on plain SQLite).
    public static var schemaSQL: String {
        createSQL + ";\n" + searchIndex.creationSQL.joined(separator: ";\n") + ";\n"
    }

    /// The SQL of the migration "create tasks": tables, indexes and the triggers that keep the counts. Shipped
    /// SQL is never edited. Public so that the benchmark baseline, which links plain SQLite and so cannot use this
    /// module, runs the very same schema (one source of truth, not a copy).
    public static let createSQL = """
        CREATE TABLE tasks (
            created_at INTEGER NOT NULL,
            id BLOB NOT NULL CHECK (typeof(id) = 'blob' AND length(id) = 16),
            title TEXT NOT NULL,
            done INTEGER NOT NULL CHECK (done IN (0, 1)),
            PRIMARY KEY (created_at, id)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX tasks_id ON tasks (id);
        CREATE INDEX tasks_done ON tasks (done);
        CREATE TABLE task_counts (
            singleton INTEGER PRIMARY KEY,
            total INTEGER NOT NULL,
            done INTEGER NOT NULL
        );
        INSERT INTO task_counts (singleton, total, done) VALUES (0, 0, 0);
        CREATE TRIGGER tasks_count_insert AFTER INSERT ON tasks BEGIN
            UPDATE OR ROLLBACK task_counts SET total = total + 1, done = done + NEW.done WHERE singleton = 0;
        END;
        CREATE TRIGGER tasks_count_delete AFTER DELETE ON tasks BEGIN
            UPDATE OR ROLLBACK task_counts SET total = total - 1, done = done - OLD.done WHERE singleton = 0;
        END;
        CREATE TRIGGER tasks_count_done AFTER UPDATE OF done ON tasks WHEN OLD.done <> NEW.done BEGIN
            UPDATE OR ROLLBACK task_counts SET done = done + NEW.done - OLD.done WHERE singleton = 0;
        END;
        """

    /// A migrator holding only the task list's migrations.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        registerMigrations(in: &migrator)
        // Migrations that are not the task list's belong to the application sharing the database.
        migrator.isOtherComponentsMigration = { !ownsMigration($0) }
        return migrator
    }

    /// The selected columns, in the order ``decode(_:)`` reads them.
    static let columns = "id, title, done, created_at"

    static let insertSQL = "INSERT OR ROLLBACK INTO tasks (created_at, id, title, done) VALUES (?, ?, ?, ?)"

    /// Reads a row selected with ``columns``, by column index (no name lookups, no Codable).
    @inline(__always)
    static func decode(_ row: Row) throws -> TaskItem {
        TaskItem(
            id: try row.uuid(at: 0), title: try row.string(at: 1), done: try row.bool(at: 2),
            microseconds: try row.int64(at: 3))
    }
}
