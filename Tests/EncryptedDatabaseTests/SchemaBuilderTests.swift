// The schema builder in migrations: tables, columns, constraints, indexes; renaming and dropping a column by the
// table rebuild on SQLite 3.15.2 (and natively where the engine can), keeping rows, indexes, triggers and the
// rows of tables that refer to it.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

private struct Author: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var country: String
}

private func libraryMigrator() -> DatabaseMigrator {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("v1") { db in
        try db.create(table: "author") { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("name", .text).notNull().collate(.nocase)
            t.column("country", .text).notNull().defaults(to: "it's unknown")
        }
        try db.create(table: "book") { t in
            t.autoIncrementedPrimaryKey("id")
            t.belongsTo("author", onDelete: .cascade)
            t.column("title", .text).notNull().indexed()
            t.column("pages", .integer).notNull().defaults(to: 0).check(sql: "pages >= 0")
            t.uniqueKey(["authorId", "title"])
        }
        try db.create(index: "author_on_country", on: "author", columns: ["country"])
        try db.execute(
            "CREATE TRIGGER author_renamed AFTER UPDATE OF name ON author BEGIN "
                + "UPDATE book SET title = title WHERE authorId = NEW.id; END")
    }
    return migrator
}

/// Everything a user would compare: the rows of both tables, and the names of the indexes and triggers.
private func contents(_ db: Database) throws -> [String] {
    try db.fetch("SELECT * FROM author ORDER BY id") { row in
        (0..<row.count).map { "\(row.columnNames[$0])=\((try? row.value(at: $0)) ?? .null)" }.joined(separator: ",")
    } + db.fetch("SELECT id, authorId, title, pages FROM book ORDER BY id") { row in
        "book \(try row.int(at: 0)) \(try row.int(at: 1)) \(try row.string(at: 2)) \(try row.int(at: 3))"
    } + db.fetch(
        "SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL "
            + "ORDER BY name"
    ) { try $0.string(at: 0) }
}

private func makeLibrary(_ directory: TemporaryDirectory, _ name: String) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.file(name), key: try testKey())
    try libraryMigrator().migrate(queue)
    try queue.write { (db: Database) throws in
        try db.execute("INSERT INTO author (name) VALUES ('Ursula')")
        try db.execute("INSERT INTO author (name, country) VALUES ('Italo', 'Italy')")
        try db.execute("INSERT INTO book (authorId, title, pages) VALUES (1, 'Lathe', 184), (2, 'Cosmicomics', 153)")
    }
    return queue
}

@Suite struct SchemaBuilderTests {
    @Test func createdTablesHaveTheDeclaredConstraintsDefaultsAndIndexes() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory, "create.db")
        try queue.read { (db: Database) throws in
            #expect(try Author.fetchAll(db) == [
                Author(id: 1, name: "Ursula", country: "it's unknown"), Author(id: 2, name: "Italo", country: "Italy"),
            ])
            #expect(try Author.filter(Column("name") == "URSULA").fetchCount(db) == 1)  // COLLATE NOCASE
            #expect(try db.scalar("SELECT sql FROM sqlite_master WHERE name = 'book'", as: String.self) == """
                CREATE TABLE "book" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "authorId" INTEGER REFERENCES \
                "author"("id") ON DELETE CASCADE, "title" TEXT NOT NULL, "pages" INTEGER NOT NULL DEFAULT 0 \
                CHECK (pages >= 0), UNIQUE ("authorId", "title"))
                """)
            let indexes = try db.fetch("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name") {
                try $0.string(at: 0)
            }
            #expect(indexes == ["author_on_country", "book_on_authorId", "book_on_title"])
        }
        expectError(DatabaseError.Code.constraint) { try queue.write { db in try db.execute("INSERT INTO book (authorId, title) VALUES (9, 'x')") } }
        expectError(DatabaseError.Code.constraint) {
            try queue.write { db in try db.execute("INSERT INTO book (authorId, title, pages) VALUES (1, 'x', -1)") }
        }
        try queue.write { db in try db.alter(table: "author") { t in t.add(column: "born", .integer).defaults(to: 1900) } }
        #expect(try queue.read { db in try db.fetch("SELECT born FROM author") { try $0.int(at: 0) } } == [1900, 1900])
    }

    @Test(arguments: [true, false])
    func renamingAndDroppingAColumnKeepRowsIndexesTriggersAndReferringRows(rebuild: Bool) throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory, "alter.db")
        var migrator = libraryMigrator()
        migrator.registerMigration("v2") { db in
            try db.alter(table: "author", rebuild: rebuild) { t in
                t.rename(column: "name", to: "fullName")
                t.add(column: "note", .text)
            }
            try db.alter(table: "author", rebuild: rebuild) { t in t.drop(column: "note") }
        }
        try migrator.migrate(queue)
        let after = try queue.read { (db: Database) throws in try contents(db) }
        // The books of the rebuilt authors are still there (their ON DELETE CASCADE did not run).
        #expect(after == [
            "id=integer(1),fullName=text(\"Ursula\"),country=text(\"it\\'s unknown\")",
            "id=integer(2),fullName=text(\"Italo\"),country=text(\"Italy\")",
            "book 1 1 Lathe 184", "book 2 2 Cosmicomics 153",
            "index author_on_country", "trigger author_renamed", "index book_on_authorId", "index book_on_title",
        ])
        try queue.write { (db: Database) throws in
            // The trigger still runs, the collation is kept, the foreign key still refers to author.
            try db.execute("UPDATE author SET fullName = 'Ursula K.' WHERE id = 1")
            #expect(try db.scalar("SELECT count(*) FROM author WHERE fullName = 'URSULA K.'", as: Int.self) == 1)
            try db.execute("DELETE FROM author WHERE id = 2")
            #expect(try db.scalar("SELECT count(*) FROM book", as: Int.self) == 1)
            try db.integrityCheck()
        }
    }

    @Test func droppingAnIndexedColumnIsRefusedAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory, "refused.db")
        _ = try queue.read { db in try Author.fetchCount(db) }  // sets this connection's read mark in the -shm
        let files = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.misuse) {
            try queue.write { db in try db.alter(table: "author", rebuild: true) { t in t.drop(column: "country") } }
        }
        #expect(error?.message == "column 'country' of table 'author' is used by index 'author_on_country': drop the index first")
        #expect(try snapshot(directory.path) == files)
        // Foreign keys are on outside migrations: rebuilding a table that others refer to says where to do it.
        let outside = expectError(DatabaseError.Code.misuse) {
            try queue.write { db in try db.alter(table: "author", rebuild: true) { t in t.rename(column: "name", to: "n") } }
        }
        #expect(outside?.message.contains("alter it inside a migration") == true)
        #expect(try snapshot(directory.path) == files)
    }

    @Test func aMigrationThatLeavesAnOrphanIsRolledBack() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory, "orphan.db")
        var migrator = libraryMigrator()
        migrator.registerMigration("v2") { db in try db.execute("DELETE FROM author WHERE id = 1") }
        _ = try queue.read { db in try Author.fetchCount(db) }  // sets this connection's read mark in the -shm
        let files = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.constraint) { try migrator.migrate(queue) }
        #expect(error?.message == "the migration 'v2' leaves 1 rows whose foreign key refers to no row (first in table "
            + "'book'); it was rolled back")
        #expect(try snapshot(directory.path) == files)
        #expect(try migrator.appliedMigrations(queue) == ["v1"])
    }

    /// Views and other tables' triggers that name a rebuilt table are created again from sqlite_master, with the
    /// renamed column renamed where it is the table's (not another table's column of the same name, not an alias).
    @Test(arguments: [true, false])
    func aRebuildCarriesTheViewsAndTriggersThatNameTheTable(rebuild: Bool) throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory, "views.db")
        var migrator = libraryMigrator()
        migrator.registerMigration("views") { db in
            try db.executeScript("""
                CREATE TABLE log (what TEXT NOT NULL, title TEXT);
                CREATE VIEW author_names AS SELECT name AS name FROM author WHERE name <> '';
                CREATE VIEW author_books AS
                    SELECT a.name AS name, b.title AS title, "a"."country" AS country,
                        (SELECT count(*) FROM book WHERE book.authorId = a.id) AS books
                    FROM author a JOIN book AS b ON b.authorId = a.id;
                CREATE VIEW book_titles AS SELECT title FROM book;
                CREATE TRIGGER book_logged AFTER INSERT ON book BEGIN
                    INSERT INTO log (what, title) SELECT name || ': ' || NEW.title, NEW.title FROM author
                    WHERE author.id = NEW.authorId;
                END;
                CREATE TRIGGER author_names_insert INSTEAD OF INSERT ON author_names BEGIN
                    INSERT INTO author (name) VALUES (NEW.name);
                END;
                """)
        }
        migrator.registerMigration("v2") { db in
            try db.alter(table: "author", rebuild: rebuild) { t in t.rename(column: "name", to: "fullName") }
            try db.alter(table: "book", rebuild: rebuild) { t in t.rename(column: "title", to: "heading") }
        }
        try migrator.migrate(queue)
        try queue.write { (db: Database) throws in
            #expect(try db.fetch("SELECT * FROM author_names ORDER BY 1") { try $0.string(at: 0) } == ["Italo", "Ursula"])
            #expect(try db.fetch("SELECT name, title, country, books FROM author_books ORDER BY title") { row in
                "\(try row.string(at: 0)) \(try row.string(at: 1)) \(try row.string(at: 2)) \(try row.int(at: 3))"
            } == ["Italo Cosmicomics Italy 1", "Ursula Lathe it's unknown 1"])
            #expect(try db.fetch("SELECT * FROM book_titles ORDER BY 1") { try $0.string(at: 0) } == ["Cosmicomics", "Lathe"])
            // The trigger of book names author's column and NEW.title, the book's own (renamed too).
            try db.execute("INSERT INTO book (authorId, heading, pages) VALUES (1, 'The Word for World', 189)")
            #expect(try db.fetch("SELECT what, title FROM log") { "\(try $0.string(at: 0)) | \(try $0.string(at: 1))" }
                        == ["Ursula: The Word for World | The Word for World"])
            // The view's INSTEAD OF trigger went with its view and came back.
            try db.execute("INSERT INTO author_names (name) VALUES ('Jorge')")
            #expect(try db.scalar("SELECT count(*) FROM author WHERE fullName = 'Jorge'", as: Int.self) == 1)
            #expect(try db.fetch("SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('view', 'trigger') ORDER BY name") {
                try $0.string(at: 0)
            } == ["view author_books", "view author_names", "trigger author_names_insert", "trigger author_renamed",
                  "trigger book_logged", "view book_titles"])
            try db.integrityCheck()
        }
    }

    @Test func droppingAColumnAViewUsesIsRefusedNamingTheViewAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory, "viewdrop.db")
        try queue.write { db in
            try db.execute("DROP INDEX author_on_country")
            try db.execute("CREATE VIEW countries AS SELECT DISTINCT country FROM author")
        }
        var migrator = libraryMigrator()
        migrator.registerMigration("v2") { db in
            try db.alter(table: "author", rebuild: true) { t in t.drop(column: "country") }
        }
        _ = try queue.read { db in try Author.fetchCount(db) }  // sets this connection's read mark in the -shm
        let files = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.misuse) { try migrator.migrate(queue) }
        #expect(error?.message == "column 'country' of table 'author' is used by view 'countries': drop or change the "
            + "view first (in the same migration), then drop the column")
        #expect(try snapshot(directory.path) == files)
    }
}
