// The query interface as a GRDB user writes it: column expressions, selections and aggregates, find, and
// associations (joined and prefetched), on real encrypted files.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

private struct Author: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let books = hasMany(Book.self)
    static let profile = hasOne(Profile.self)
    var id: Int64
    var name: String
}

private struct Book: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let author = belongsTo(Author.self)
    var id: Int64
    var authorId: Int64?
    var title: String
    var pages: Int
    var readPages: Int
}

private struct Profile: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64
    var authorId: Int64
    var bio: String
}

private struct BookInfo: Decodable, FetchableRecord, Equatable {
    var book: Book
    var author: Author
}

private struct OptionalBookInfo: Decodable, FetchableRecord, Equatable {
    var book: Book
    var author: Author?
}

private struct AuthorInfo: Decodable, FetchableRecord, Equatable {
    var author: Author
    var books: [Book]
    var profile: Profile?
}

private let librarySchema = """
    CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE book (
        id INTEGER PRIMARY KEY,
        authorId INTEGER REFERENCES author(id),
        title TEXT NOT NULL,
        pages INTEGER NOT NULL,
        readPages INTEGER NOT NULL
    );
    CREATE TABLE profile (id INTEGER PRIMARY KEY, authorId INTEGER NOT NULL REFERENCES author(id), bio TEXT NOT NULL);
    """

private let authors = [Author(id: 1, name: "Ursula"), Author(id: 2, name: "borges"), Author(id: 3, name: "Calvino")]
private let books = [
    Book(id: 1, authorId: 1, title: "The Dispossessed", pages: 387, readPages: 387),
    Book(id: 2, authorId: 1, title: "a Wizard of Earthsea", pages: 183, readPages: 20),
    Book(id: 3, authorId: 2, title: "Ficciones", pages: 174, readPages: 174),
    Book(id: 4, authorId: nil, title: "Beowulf", pages: 120, readPages: 0),
]

private func makeLibrary(_ directory: TemporaryDirectory) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.file("library.db"), key: try testKey())
    try queue.write { (db: Database) throws in
        try db.executeScript(librarySchema)
        for author in authors { try author.insert(db) }
        for book in books { try book.insert(db) }
        try Profile(id: 1, authorId: 2, bio: "Buenos Aires").insert(db)
    }
    return queue
}

@Suite struct QueryInterfaceTests {
    @Test func columnsCompareWithColumnsAndArithmeticAndOrderWithoutAsc() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            let unfinished = try Book.filter(Column("readPages") < Column("pages")).order(Column("title")).fetchAll(db)
            #expect(unfinished.map(\.id) == [4, 2])
            let nearlyDone = try Book.filter(Column("readPages") + 200 >= Column("pages") && Column("readPages") > 0)
                .order(Column("id").desc).fetchAll(db)
            #expect(nearlyDone.map(\.id) == [3, 2, 1])
            let doubled = try Book.select(Column("pages") * 2 - 1, as: Int.self).order(Column("id")).fetchAll(db)
            #expect(doubled == [773, 365, 347, 239])
            #expect(try Book.filter(!(Column("pages") > 150)).fetchAll(db).map(\.id) == [4])
            #expect(try Book.filter(Column("authorId") == nil || Column("id") == 3).fetchCount(db) == 2)
        }
    }

    @Test func collatingLowercasedInAndLikeFindWhatAUserTyped() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            // Binary order puts lower case after upper case; NOCASE does not.
            let binary = try Author.select(Column("name"), as: String.self).order(Column("name")).fetchAll(db)
            #expect(binary == ["Calvino", "Ursula", "borges"])
            let nocase = try Author.select(Column("name"), as: String.self)
                .order(Column("name").collating(.nocase)).fetchAll(db)
            #expect(nocase == ["borges", "Calvino", "Ursula"])
            #expect(try Author.filter(Column("name").collating(.nocase) == "BORGES").fetchCount(db) == 1)
            #expect(try Author.filter(Column("name").lowercased == "ursula").fetchOne(db)?.id == 1)
            #expect(try Author.select(Column("name").uppercased, as: String.self).filter(id: 2).fetchOne(db) == "BORGES")
            #expect(try Book.filter([1, 3].contains(Column("id"))).fetchAll(db).map(\.title)
                == ["The Dispossessed", "Ficciones"])
            #expect(try Book.filter(Column("title").like("%wizard%")).fetchCount(db) == 1)
            // A value that looks like SQL is a value: bound, never interpolated.
            #expect(try Book.filter(Column("title") == "x' OR '1'='1").fetchCount(db) == 0)
            #expect(try Book.filter(Column("title").like("100\\%")).fetchCount(db) == 0)
        }
    }

    @Test func aggregatesGroupsAndHavingDecodeIntoScalarsAndDecodables() throws {
        struct Total: Decodable, Equatable {
            var authorId: Int64
            var count: Int
            var pages: Int
        }
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            #expect(try Book.select(max(Column("pages")), as: Int.self).fetchOne(db) == 387)
            #expect(try Book.select(min(Column("pages")), as: Int.self).fetchOne(db) == 120)
            #expect(try Book.select(sum(Column("pages")), as: Int.self).fetchOne(db) == 864)
            #expect(try Book.select(average(Column("pages")), as: Double.self).fetchOne(db) == 216)
            #expect(try Book.select(count(Column("authorId")), as: Int.self).fetchOne(db) == 3)
            #expect(try Book.select(count(distinct: Column("authorId")), as: Int.self).fetchOne(db) == 2)
            // An aggregate over no rows is NULL: fetchOne says nil, as GRDB does.
            #expect(try Book.filter(Column("pages") > 1000).select(max(Column("pages")), as: Int.self).fetchOne(db) == nil)
            let totals = try Book.select(
                Column("authorId"), count(Column("id")).forKey("count"), sum(Column("pages")).forKey("pages"),
                as: Total.self
            ).filter(Column("authorId") != nil).group(Column("authorId")).having(count(Column("id")) > 1)
                .fetchAll(db)
            #expect(totals == [Total(authorId: 1, count: 2, pages: 570)])
            #expect(try Book.all().group(Column("authorId")).fetchCount(db) == 3)
            let optionalAuthors = try Book.select(Column("authorId"), as: Int64?.self).order(Column("id")).fetchAll(db)
            #expect(optionalAuthors == [1, 1, 2, nil])
            #expect(try Book.select(Column("authorId"), as: Int.self).distinct().fetchCount(db) == 3)
        }
    }

    @Test func findThrowsNotFoundAndKeysExistsAndFilteredDeletes() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            #expect(try Author.find(db, id: 2).name == "borges")
            let error = expectError(DatabaseError.Code.notFound) { try Author.find(db, id: 42) }
            #expect(error?.message == "no row of table 'author' has the id asked for (Author.find)")
            #expect(try Author.fetchOne(db, key: 3)?.name == "Calvino")
            #expect(try Book.fetchOne(db, key: ["title": "Ficciones", "authorId": 2])?.id == 3)
            #expect(try Book.exists(db, key: ["authorId": nil]))
            #expect(try Book.filter(Column("pages") > 1000).isEmpty(db))
            #expect(try !Book.filter(Column("pages") > 100).isEmpty(db))
        }
        let removed = try queue.write { db in try Book.filter(Column("readPages") == Column("pages")).deleteAll(db) }
        #expect(removed == 2)
        #expect(try queue.read { db in try Book.order(Column("id")).fetchAll(db).map(\.id) } == [2, 4])
        let removedFirst = try queue.write { db in try Book.order(Column("id").desc).limit(1).deleteAll(db) }
        #expect(removedFirst == 1)
        #expect(try queue.read { db in try Book.fetchAll(db).map(\.id) } == [2])
    }

    @Test func includingRequiredAndOptionalDecodeNestedRecordsInOneQuery() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            let before = db.preparedStatementCount
            let infos = try BookInfo.fetchAll(db, Book.including(required: Book.author).order(Column("id")))
            #expect(infos == [
                BookInfo(book: books[0], author: authors[0]), BookInfo(book: books[1], author: authors[0]),
                BookInfo(book: books[2], author: authors[1]),
            ])
            let optional = try Book.including(optional: Book.author).order(Column("id"))
                .asRequest(of: OptionalBookInfo.self).fetchAll(db)
            #expect(optional.map(\.author?.name) == ["Ursula", "Ursula", "borges", nil])
            #expect(optional.map(\.book) == books)
            // Filtering through the association: the association's columns are its table's.
            let ursulas = try Book.joining(required: Book.author.filter(Column("name") == "Ursula"))
                .filter(Column("pages") > 200).fetchAll(db)
            #expect(ursulas.map(\.id) == [1])
            #expect(try Book.joining(required: Book.author).fetchCount(db) == 3)
            // A non-optional property for an optional association says what to do.
            let error = expectError(DatabaseError.Code.typeMismatch) {
                try BookInfo.fetchAll(db, Book.including(optional: Book.author))
            }
            #expect(error?.message.contains("declare the property as Author?") == true)
            _ = before
        }
    }

    @Test func includingAllPrefetchesWithOneQueryPerAssociationWhateverTheRowCount() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.write { (db: Database) throws in
            for id in 4...60 { try Author(id: Int64(id), name: "author \(id)").insert(db) }
        }
        try queue.read { (db: Database) throws in
            let request = Author.including(all: Author.books.order(Column("title"))).including(optional: Author.profile)
                .order(Column("id"))
            _ = try AuthorInfo.fetchAll(db, request)  // prepares the statements once
            let before = db.preparedStatementCount
            let infos = try AuthorInfo.fetchAll(db, request)
            // Cached statements: the second fetch prepares nothing, whatever the 60 authors.
            #expect(db.preparedStatementCount == before)
            #expect(infos.count == 60)
            #expect(infos[0] == AuthorInfo(author: authors[0], books: [books[0], books[1]], profile: nil))  // binary order: "T" < "a"
            #expect(infos[1].books == [books[2]] && infos[1].profile?.bio == "Buenos Aires")
            #expect(infos[2].books.isEmpty && infos[59].books.isEmpty)
            let limited = try AuthorInfo.fetchAll(
                db, Author.including(all: Author.books).including(optional: Author.profile)
                    .filter(Column("name").like("%o%")).order(Column("id").desc).limit(2))
            #expect(limited.map(\.author.id) == [60, 59])
            let firstAuthor = try AuthorInfo.fetchOne(
                db, Author.including(all: Author.books).including(optional: Author.profile).filter(id: 1))
            #expect(firstAuthor?.books.count == 2)
        }
    }

    @Test func foreignKeysAreOnSoABookOfNoAuthorIsRefusedAndNothingChanges() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        _ = try queue.read { db in try Book.fetchCount(db) }  // sets this connection's read mark in the -shm
        let files = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.constraint) {
            try queue.write { db in try Book(id: 9, authorId: 42, title: "Orphan", pages: 1, readPages: 0).insert(db) }
        }
        #expect(error?.message.contains("FOREIGN KEY constraint failed") == true)
        expectError(DatabaseError.Code.constraint) { try queue.write { db in try Author.deleteOne(db, id: 1) } }
        #expect(try snapshot(directory.path) == files)
    }

    /// `including(all:)` groups the children by their parent's key whatever its type: integers (grouped as
    /// integers), text and blobs (UUIDs); a child whose key is NULL belongs to no parent, and a parent without
    /// children gets an empty array.
    @Test func includingAllGroupsChildrenByKeysOfEveryType() throws {
        struct Shelf: Codable, Equatable, FetchableRecord, PersistableRecord {
            static let items = hasMany(Item.self)
            var code: String
            var label: String
        }
        struct Item: Codable, Equatable, FetchableRecord, PersistableRecord {
            var id: UUID
            var shelfCode: String?
            var name: String
        }
        struct Folder: Codable, Equatable, FetchableRecord, PersistableRecord {
            static let notes = hasMany(Note.self)
            var id: UUID
            var name: String
        }
        struct Note: Codable, Equatable, FetchableRecord, PersistableRecord {
            var id: Int64
            var folderId: UUID
            var text: String
        }
        struct ShelfInfo: Decodable, FetchableRecord, Equatable {
            var shelf: Shelf
            var items: [Item]
        }
        struct FolderInfo: Decodable, FetchableRecord, Equatable {
            var folder: Folder
            var notes: [Note]
        }
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("keys.db"), key: try testKey())
        let (a, b, c) = (Item(id: UUID(), shelfCode: "12", name: "a"), Item(id: UUID(), shelfCode: "A-1", name: "b"),
                         Item(id: UUID(), shelfCode: "12", name: "c"))
        let loose = Item(id: UUID(), shelfCode: nil, name: "loose")
        let (work, home) = (Folder(id: UUID(), name: "work"), Folder(id: UUID(), name: "home"))
        let notes = [Note(id: 1, folderId: work.id, text: "one"), Note(id: 2, folderId: work.id, text: "two")]
        try queue.write { (db: Database) throws in
            try db.execute("CREATE TABLE shelf (code TEXT PRIMARY KEY NOT NULL, label TEXT NOT NULL)")
            try db.execute("CREATE TABLE item (id BLOB PRIMARY KEY NOT NULL, shelfCode TEXT REFERENCES shelf(code), name TEXT NOT NULL)")
            try db.execute("CREATE TABLE folder (id BLOB PRIMARY KEY NOT NULL, name TEXT NOT NULL)")
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, folderId BLOB NOT NULL REFERENCES folder(id), text TEXT NOT NULL)")
            for shelf in [Shelf(code: "12", label: "twelve"), Shelf(code: "A-1", label: "first"), Shelf(code: "Z", label: "empty")] {
                try shelf.insert(db)
            }
            for item in [a, b, c, loose] { try item.insert(db) }
            try work.insert(db)
            try home.insert(db)
            for note in notes { try note.insert(db) }
        }
        let (shelves, folders) = try queue.read { (db: Database) throws in
            (try ShelfInfo.fetchAll(db, Shelf.including(all: Shelf.items.order(Column("name"))).order(Column("code"))),
             try FolderInfo.fetchAll(db, Folder.including(all: Folder.notes.order(Column("id"))).order(Column("name"))))
        }
        #expect(shelves.map(\.shelf.code) == ["12", "A-1", "Z"])
        #expect(shelves.map { $0.items.map(\.name) } == [["a", "c"], ["b"], []])
        #expect(folders == [FolderInfo(folder: home, notes: []), FolderInfo(folder: work, notes: notes)])
    }

    @Test func aTableAssociatedWithItselfKeepsItsTwoSidesApart() throws {
        struct Employee: Codable, Equatable, FetchableRecord, PersistableRecord {
            static let manager = belongsTo(Employee.self, key: "manager")
            static let reports = hasMany(Employee.self, key: "reports")
            var id: Int64
            var managerId: Int64?
            var name: String
        }
        struct Card: Decodable, FetchableRecord, Equatable {
            var employee: Employee
            var manager: Employee?
            var reports: [Employee]
        }
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("staff.db"), key: try testKey())
        try queue.write { (db: Database) throws in
            try db.execute(
                "CREATE TABLE employee (id INTEGER PRIMARY KEY, managerId INTEGER REFERENCES employee(id), name TEXT)")
            try Employee(id: 1, managerId: nil, name: "Ada").insert(db)
            try Employee(id: 2, managerId: 1, name: "Bob").insert(db)
            try Employee(id: 3, managerId: 1, name: "Cy").insert(db)
        }
        let cards = try queue.read { (db: Database) throws in
            try Card.fetchAll(
                db, Employee.including(optional: Employee.manager).including(all: Employee.reports.order(Column("name")))
                    .filter(Column("name") != "Cy").order(Column("id")))
        }
        #expect(cards.map(\.employee.name) == ["Ada", "Bob"])
        #expect(cards.map(\.manager?.name) == [nil, "Ada"])
        #expect(cards.map { $0.reports.map(\.name) } == [["Bob", "Cy"], []])
        // Every employee: the reports come from one scan of the table; Ada, who has no manager, is nobody's report.
        let everyone = try queue.read { (db: Database) throws in
            try Card.fetchAll(
                db, Employee.including(optional: Employee.manager).including(all: Employee.reports.order(Column("name")))
                    .order(Column("id")))
        }
        #expect(everyone.map { $0.reports.map(\.name) } == [["Bob", "Cy"], [], []])
        let filtered = try queue.read { (db: Database) throws in
            try Card.fetchAll(
                db, Employee.including(optional: Employee.manager)
                    .including(all: Employee.reports.filter(Column("name") != "Bob")).order(Column("id")))
        }
        #expect(filtered.map { $0.reports.map(\.name) } == [["Cy"], [], []])
    }

    @Test func anAssociationWithoutAForeignKeySaysHowToDeclareOne() throws {
        struct Note: Codable, FetchableRecord, TableRecord {
            static let author = belongsTo(Author.self)
            var id: Int64
            var authorId: Int64
        }
        struct NoteInfo: Decodable, FetchableRecord {
            var note: Note
            var author: Author
        }
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.write { (db: Database) throws in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, authorId INTEGER)")
            try db.execute("INSERT INTO note VALUES (1, 2)")
        }
        try queue.read { (db: Database) throws in
            let error = expectError(DatabaseError.Code.misuse) { try NoteInfo.fetchAll(db, Note.including(required: Note.author)) }
            #expect(error?.message.contains("using: ForeignKey([\"column\"])") == true)
            let explicit = Note.belongsTo(Author.self, using: ForeignKey(["authorId"]))
            let infos = try NoteInfo.fetchAll(db, Note.including(required: explicit))
            #expect(infos.map(\.author.name) == ["borges"])
        }
    }
}

// MARK: - A misspelled column is an error (issue 34)

// SQLite before 3.29 reads an unknown "name" as a string literal, so the library qualifies every column it writes
// ("book"."titel" is never a literal) and checks DDL columns against the table. Correct columns still work.

/// A type whose property is misspelled: its rows are written to table `book`, which has no column `titel`.
private struct MisspelledBook: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "book"
    var id: Int64
    var titel: String
}

private struct BookHeader: Decodable, Equatable {
    var id: Int64
    var title: String
}

private struct BooksByAuthor: Decodable, Equatable {
    var authorId: Int64?
    var count: Int
}

/// Every row of `book` and the schema, to compare before and after a statement that failed.
private func snapshot(_ queue: DatabaseQueue) throws -> [String] {
    try queue.read { db in
        try Book.order(Column("id")).fetchAll(db).map { "\($0)" }
            + db.fetch("SELECT type || ' ' || name FROM sqlite_master ORDER BY name") { try $0.string(at: 0) }
    }
}

/// Expects `body` to throw an error of the database whose message names `column`, and nothing to change.
private func expectNoSuchColumn<R>(
    _ column: String, in queue: DatabaseQueue, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (Database) throws -> R
) throws {
    let before = try snapshot(queue)
    do {
        let result = try queue.write { db in try body(db) }
        Issue.record("'\(column)': nothing was thrown; the statement gave \(result)", sourceLocation: sourceLocation)
    } catch let error as DatabaseError {
        #expect(error.code == .sqlite, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains("no such column") || error.message.contains("has no column named"),
                "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(column), "\(error)", sourceLocation: sourceLocation)
    }
    #expect(try snapshot(queue) == before, "'\(column)': the data changed", sourceLocation: sourceLocation)
}

@Suite struct MisspelledColumnTests {
    @Test func aMisspelledColumnThrowsNamingItInFilterOrderSelectGroupAndHaving() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try expectNoSuchColumn("titel", in: queue) { db in try Book.filter(Column("titel") == "x").fetchCount(db) }
        try expectNoSuchColumn("titel", in: queue) { db in try Book.filter(Column("titel") != "x").fetchAll(db) }
        try expectNoSuchColumn("titel", in: queue) { db in try Book.filter(Column("titel") != "x").isEmpty(db) }
        try expectNoSuchColumn("titel", in: queue) { db in try Book.fetchOne(db, key: ["titel": "x"]) }
        try expectNoSuchColumn("paegs", in: queue) { db in try Book.order(Column("paegs").desc).fetchAll(db) }
        try expectNoSuchColumn("paegs", in: queue) { db in
            try Book.order(Column("paegs")).limit(2).fetchCount(db)
        }
        try expectNoSuchColumn("titl", in: queue) { db in
            try Book.select(Column("id"), Column("titl").forKey("title"), as: BookHeader.self).fetchAll(db)
        }
        try expectNoSuchColumn("titl", in: queue) { db in
            try Book.select(Column("titl").lowercased, as: String.self).distinct().fetchAll(db)
        }
        try expectNoSuchColumn("autorId", in: queue) { db in
            try Book.select(count(Column("id")), as: Int.self).group(Column("autorId")).fetchAll(db)
        }
        try expectNoSuchColumn("paegs", in: queue) { db in
            try Book.select(Column("authorId"), as: Int64?.self).group(Column("authorId"))
                .having(max(Column("paegs")) > 0).fetchAll(db)
        }
    }

    @Test func aMisspelledColumnThrowsInRequestsWithAssociations() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try expectNoSuchColumn("titel", in: queue) { db in
            try Book.joining(required: Book.author).filter(Column("titel") == "Ficciones").fetchAll(db)
        }
        try expectNoSuchColumn("nam", in: queue) { db in
            try BookInfo.fetchAll(db, Book.including(required: Book.author.filter(Column("nam") == "Ursula")))
        }
        try expectNoSuchColumn("paegs", in: queue) { db in
            try AuthorInfo.fetchAll(db, Author.including(all: Author.books.order(Column("paegs"))))
        }
    }

    @Test func aMisspelledColumnInUpdateDeleteOrUpsertThrowsAndChangesNoRow() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        // The target of SET, a column read in the value, and a filter: each one would have written every row.
        try expectNoSuchColumn("titel", in: queue) { db in try Book.updateAll(db, Column("titel").set(to: "y")) }
        try expectNoSuchColumn("titel", in: queue) { db in
            try Book.updateAll(db, Column("title").set(to: Column("titel")))
        }
        try expectNoSuchColumn("titel", in: queue) { db in
            try Book.filter(Column("titel") != "x").updateAll(db, Column("title").set(to: "y"))
        }
        try expectNoSuchColumn("paegs", in: queue) { db in
            try Book.order(Column("paegs")).limit(1).updateAll(db, Column("title").set(to: "y"))
        }
        try expectNoSuchColumn("titel", in: queue) { db in try Book.filter(Column("titel") != "x").deleteAll(db) }
        try expectNoSuchColumn("titel", in: queue) { db in try MisspelledBook(id: 1, titel: "y").update(db) }
        try expectNoSuchColumn("titel", in: queue) { db in try MisspelledBook(id: 1, titel: "y").upsert(db) }
        try expectNoSuchColumn("titel", in: queue) { db in
            try MisspelledBook(id: 1, titel: "y").upsert(db, emulated: true)
        }
        try expectNoSuchColumn("titel", in: queue) { db in try MisspelledBook(id: 9, titel: "y").insert(db) }
    }

    @Test func aMisspelledColumnInTheSchemaBuilderThrowsNamingTheColumnAndTable() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        // SQLite 3.15.2 makes this index on the constant 'titel', without an error.
        try expectNoSuchColumn("titel", in: queue) { db in
            try db.create(index: "book_on_titel", on: "book", columns: ["pages", "titel"])
        }
        let error = expectError(DatabaseError.Code.sqlite) {
            try queue.write { db in try db.create(index: "book_on_titel", on: "book", columns: ["titel"]) }
        }
        #expect(error?.message.contains("'book'") == true, "\(String(describing: error))")
        try expectNoSuchColumn("titel", in: queue) { db in
            try db.create(table: "tag") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("title", .text)
                t.uniqueKey(["titel"])
            }
        }
        try expectNoSuchColumn("labl", in: queue) { db in
            try db.create(table: "tag") { t in
                t.column("label", .text)
                t.column("bookId", .integer)
                t.primaryKey(["labl", "bookId"])
            }
        }
        try expectNoSuchColumn("titel", in: queue) { db in
            try db.create(table: "tag") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("bookTitle", .text)
                t.foreignKey(["bookTitle"], references: "book", columns: ["titel"])
            }
        }
        try expectNoSuchColumn("titel", in: queue) { db in
            try db.alter(table: "book") { t in t.rename(column: "titel", to: "heading") }
        }
        try expectNoSuchColumn("titel", in: queue) { db in
            try db.alter(table: "book") { t in t.drop(column: "titel") }
        }
    }
}

@Suite struct CorrectColumnTests {
    @Test func filterOrderSelectGroupAndHavingStillWorkWithAliases() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            #expect(try Book.filter(Column("title") == "Ficciones").fetchCount(db) == 1)
            #expect(try Book.filter(Column("title") != "Ficciones").fetchCount(db) == 3)
            #expect(try Book.fetchOne(db, key: ["title": "Beowulf"])?.id == 4)
            #expect(try Book.filter(Column("pages") > 100).isEmpty(db) == false)
            #expect(try Book.order(Column("readPages").desc, Column("id")).fetchAll(db).map(\.id) == [1, 3, 2, 4])
            #expect(
                try Book.select(Column("id"), Column("title").forKey("title"), as: BookHeader.self)
                    .order(Column("id")).fetchAll(db).map(\.title)
                    == ["The Dispossessed", "a Wizard of Earthsea", "Ficciones", "Beowulf"])
            // An alias in ORDER BY, GROUP BY and HAVING names the result column, as in SQL.
            #expect(
                try Book.select(Column("authorId"), count(Column("id")).forKey("count"), as: BooksByAuthor.self)
                    .filter(Column("authorId") != nil).group(Column("authorId")).having(Column("count") > 0)
                    .order(Column("count").desc).fetchAll(db)
                    == [BooksByAuthor(authorId: 1, count: 2), BooksByAuthor(authorId: 2, count: 1)])
            #expect(
                try Book.select(Column("authorId"), count(Column("id")).forKey("count"), as: BooksByAuthor.self)
                    .group(Column("authorId")).having(max(Column("pages")) > 300).fetchAll(db)
                    == [BooksByAuthor(authorId: 1, count: 2)])
            // An alias with the name of a column orders by the alias (the selected expression).
            #expect(
                try Book.select((-Column("pages")).forKey("pages"), as: Int.self).order(Column("pages")).fetchAll(db)
                    == [-387, -183, -174, -120])
            #expect(
                try Book.select(Column("authorId"), as: Int64?.self).distinct().order(Column("authorId"))
                    .fetchCount(db) == 3)
        }
    }

    @Test func requestsWithAssociationsStillWork() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.read { (db: Database) throws in
            let ursulas = try Book.joining(required: Book.author.filter(Column("name") == "Ursula"))
                .order(Column("pages")).fetchAll(db)
            #expect(ursulas.map(\.id) == [2, 1])
            let withAuthors = try BookInfo.fetchAll(
                db, Book.including(required: Book.author.order(Column("name"))).order(Column("title")))
            #expect(withAuthors.map(\.book.id) == [3, 1, 2])
            let authors = try AuthorInfo.fetchAll(
                db, Author.including(all: Author.books.order(Column("pages").desc)).order(Column("id")))
            #expect(authors.map { $0.books.map(\.id) } == [[1, 2], [3], []])
            #expect(try Book.joining(optional: Book.author).filter(Column("title") != "Beowulf").fetchCount(db) == 3)
        }
    }

    @Test func updateAllDeleteUpsertAndTheSchemaBuilderStillWork() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeLibrary(directory)
        try queue.write { (db: Database) throws in
            #expect(
                try Book.filter(Column("authorId") == 1)
                    .updateAll(db, Column("readPages").set(to: Column("readPages") + 1)) == 2)
            #expect(try Book.order(Column("pages").desc).limit(1).updateAll(db, Column("title").set(to: "Longest")) == 1)
            #expect(
                try Book.joining(required: Book.author.filter(Column("name") == "borges"))
                    .updateAll(db, Column("readPages").set(to: 0), Column("authorId").set(to: nil)) == 1)
            #expect(try Book.updateAll(db, [Column("title").set(to: Column("title").uppercased)]) == 4)
            #expect(try Book.order(Column("id")).fetchAll(db) == [
                Book(id: 1, authorId: 1, title: "LONGEST", pages: 387, readPages: 388),
                Book(id: 2, authorId: 1, title: "A WIZARD OF EARTHSEA", pages: 183, readPages: 21),
                Book(id: 3, authorId: nil, title: "FICCIONES", pages: 174, readPages: 0),
                Book(id: 4, authorId: nil, title: "BEOWULF", pages: 120, readPages: 0),
            ])
            try Book(id: 2, authorId: 2, title: "Earthsea", pages: 183, readPages: 183).update(db)
            try Book(id: 5, authorId: 3, title: "new", pages: 500, readPages: 0).upsert(db)
            try Book(id: 5, authorId: 3, title: "newer", pages: 500, readPages: 1).upsert(db, emulated: true)
            #expect(try Book.fetchOne(db, id: 2)?.title == "Earthsea")
            #expect(try Book.fetchOne(db, id: 5)?.title == "newer")
            #expect(try Book.filter(Column("pages") > 300).deleteAll(db) == 2)
            try db.create(index: "book_on_author_title", on: "book", columns: ["authorId", "Title"])
            try db.alter(table: "book") { t in t.rename(column: "pages", to: "pageCount") }
            try db.create(table: "tag") { t in
                t.column("label", .text).notNull()
                t.belongsTo("book")
                t.column("parentLabel", .text)
                t.primaryKey(["label", "bookId"])
                t.uniqueKey(["label"])
                t.foreignKey(["parentLabel"], references: "tag", columns: ["label"])
            }
            #expect(try Book.select(Column("pageCount"), as: Int.self).order(Column("id")).fetchAll(db) == [183, 174, 120])
        }
    }
}
