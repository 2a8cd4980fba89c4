// Associations through others (many-to-many without a view), aggregates over associations, LEFT JOIN counts and
// table aliases, on a notes app's real encrypted file: authors, notes, tags and the pivot table between them.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

private struct Author: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let profile = hasOne(Profile.self)
    var id: Int64
    var name: String
}

private struct Profile: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64
    var authorId: Int64
    var bio: String
}

private struct Note: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let author = belongsTo(Author.self)
    static let noteTags = hasMany(NoteTag.self)
    static let tags = hasMany(Tag.self, through: noteTags, using: NoteTag.tag)
    static let authorProfile = hasOne(Profile.self, through: author, using: Author.profile, key: "authorProfile")
    var id: Int64
    var authorId: Int64
    var title: String
    var words: Int
}

private struct NoteTag: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let tag = belongsTo(Tag.self)
    static let note = belongsTo(Note.self)
    var noteId: Int64
    var tagId: Int64
}

private struct Tag: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let noteTags = hasMany(NoteTag.self)
    static let notes = hasMany(Note.self, through: noteTags, using: NoteTag.note)
    var id: Int64
    var label: String
}

private struct NoteWithTags: Decodable, FetchableRecord, Equatable {
    var note: Note
    var tags: [Tag]
}

private struct TagWithNotes: Decodable, FetchableRecord, Equatable {
    var tag: Tag
    var notes: [Note]
}

private struct NoteWithProfile: Decodable, FetchableRecord, Equatable {
    var note: Note
    var authorProfile: Profile?
}

private let notesSchema = """
    CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
    CREATE TABLE profile (id INTEGER PRIMARY KEY, authorId INTEGER NOT NULL REFERENCES author(id), bio TEXT NOT NULL);
    CREATE TABLE note (
        id INTEGER PRIMARY KEY, authorId INTEGER NOT NULL REFERENCES author(id), title TEXT NOT NULL,
        words INTEGER NOT NULL);
    CREATE TABLE tag (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE);
    CREATE TABLE noteTag (
        noteId INTEGER NOT NULL REFERENCES note(id) ON DELETE CASCADE,
        tagId INTEGER NOT NULL REFERENCES tag(id) ON DELETE CASCADE,
        PRIMARY KEY (noteId, tagId));
    CREATE INDEX noteTag_on_tagId ON noteTag(tagId);
    """

private let noteRows = [
    Note(id: 1, authorId: 1, title: "Groceries", words: 10),
    Note(id: 2, authorId: 1, title: "Swift tips", words: 300),
    Note(id: 3, authorId: 2, title: "Poem", words: 40),
    Note(id: 4, authorId: 2, title: "Untagged", words: 5),
]
private let tagRows = [
    Tag(id: 1, label: "home"), Tag(id: 2, label: "swift"), Tag(id: 3, label: "writing"), Tag(id: 4, label: "unused"),
]
/// Note 1: home; note 2: swift, writing; note 3: writing; note 4: none. Tag 4 has no note.
private let pivotRows = [(1, 1), (2, 2), (2, 3), (3, 3)]

private func makeNotes(_ directory: TemporaryDirectory) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.file("notes.db"), key: try testKey())
    try queue.write { (db: Database) throws in
        try db.executeScript(notesSchema)
        try Author(id: 1, name: "Ada").insert(db)
        try Author(id: 2, name: "Basho").insert(db)
        try Profile(id: 1, authorId: 2, bio: "Haiku").insert(db)
        for note in noteRows { try note.insert(db) }
        for tag in tagRows { try tag.insert(db) }
        for (note, tag) in pivotRows { try NoteTag(noteId: Int64(note), tagId: Int64(tag)).insert(db) }
    }
    return queue
}

@Suite struct AssociationThroughTests {
    @Test func hasManyThroughGivesEachNoteItsTagsWithoutAViewOrAHandGivenKey() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            // Every note (one scan of the pivot table), and a filtered, limited request (the notes named).
            let all = try NoteWithTags.fetchAll(
                db, Note.including(all: Note.tags.order(Column("label").desc)).order(Column("id")))
            #expect(all.map(\.note) == noteRows)
            #expect(all.map { $0.tags.map(\.label) } == [["home"], ["writing", "swift"], ["writing"], []])
            let some = try NoteWithTags.fetchAll(
                db, Note.including(all: Note.tags.order(Column("label"))).filter(Column("words") > 20)
                    .order(Column("title")).limit(2))
            #expect(some.map(\.note.title) == ["Poem", "Swift tips"])
            #expect(some.map { $0.tags.map(\.label) } == [["writing"], ["swift", "writing"]])
            // The other way, with the association's own filter.
            let tags = try TagWithNotes.fetchAll(
                db, Tag.including(all: Tag.notes.filter(Column("words") >= 40).order(Column("id"))).order(Column("id")))
            #expect(tags.map { $0.notes.map(\.id) } == [[], [2], [2, 3], []])
        }
    }

    @Test func joiningThroughFiltersAndCountsByTheAssociatedTable() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            let swift = try Note.joining(required: Note.tags.filter(Column("label") == "swift")).fetchAll(db)
            #expect(swift.map(\.id) == [2])
            // The request's own columns stay the note's: `title` is not looked up in tag.
            let writing = try Note.joining(required: Note.tags.filter(Column("label") == "writing"))
                .filter(Column("title") != "Poem").order(Column("id")).fetchAll(db)
            #expect(writing.map(\.id) == [2])
            #expect(try Note.joining(required: Note.tags).fetchCount(db) == 4)   // a row per note and tag
            #expect(try Note.joining(required: Note.tags).distinct().fetchCount(db) == 3)
            #expect(try Tag.joining(required: Tag.notes.filter(Column("authorId") == 2)).fetchAll(db).map(\.label)
                        == ["writing"])
            // A misspelled column through the association is an error naming it, on every engine.
            let error = expectError(DatabaseError.Code.sqlite) {
                try Note.joining(required: Note.tags.filter(Column("lable") == "swift")).fetchAll(db)
            }
            #expect(error?.message.contains("tag.lable") == true)
        }
    }

    @Test func hasOneThroughIncludesTheRecordOrNil() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            let rows = try NoteWithProfile.fetchAll(db, Note.including(optional: Note.authorProfile).order(Column("id")))
            #expect(rows.map(\.note) == noteRows)
            #expect(rows.map(\.authorProfile?.bio) == [nil, nil, "Haiku", "Haiku"])
            let required = try NoteWithProfile.fetchAll(
                db, Note.including(required: Note.authorProfile).order(Column("id")))
            #expect(required.map(\.note.id) == [3, 4])
        }
    }
}

private struct LabelCount: Decodable, Equatable {
    var label: String
    var noteCount: Int
}

private struct TagInfo: Decodable, FetchableRecord, Equatable {
    var tag: Tag
    var noteCount: Int
}

private struct TagStats: Decodable, FetchableRecord, Equatable {
    var tag: Tag
    var noteCount: Int
    var hasNoNote: Bool
    var noteWordsSum: Int?
    var totalWords: Double
    var minimumNoteWords: Int?
    var maximumNoteWords: Int?
    var averageNoteWords: Double?
}

@Suite struct AssociationAggregateTests {
    @Test func aLeftJoinCountsTagsWithoutNotesAndAJoinedColumnIsTheJoinedTables() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            // `noteId` is a column of noteTag only: it is qualified with noteTag, not with tag (the old
            // `no such column: tag.noteId`); `label` and `id` stay the tag's.
            let counts = try Tag.joining(optional: Tag.noteTags)
                .select(Column("label"), count(Column("noteId")).forKey("noteCount"), as: LabelCount.self)
                .group(Column("id")).order(Column("label")).fetchAll(db)
            #expect(counts == [
                LabelCount(label: "home", noteCount: 1), LabelCount(label: "swift", noteCount: 1),
                LabelCount(label: "unused", noteCount: 0), LabelCount(label: "writing", noteCount: 2),
            ])
            let joined = try Tag.joining(required: Tag.noteTags)
                .select(Column("label"), count(Column("noteId")).forKey("noteCount"), as: LabelCount.self)
                .group(Column("id")).order(Column("noteCount").desc, Column("label")).fetchAll(db)
            #expect(joined.map(\.label) == ["writing", "home", "swift"])
            // Still an error naming the column when no table has it.
            let error = expectError(DatabaseError.Code.sqlite) {
                try Tag.joining(optional: Tag.noteTags).select(count(Column("noteIdd")), as: Int.self).fetchAll(db)
            }
            #expect(error?.message.contains("tag.noteIdd") == true)
        }
    }

    @Test func annotatedWithAggregatesGivesEveryTagItsCountsAndSumsUnmultiplied() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            let infos = try TagInfo.fetchAll(db, Tag.annotated(with: Tag.notes.count).order(Column("id")))
            #expect(infos == zip(tagRows, [1, 1, 2, 0]).map { TagInfo(tag: $0, noteCount: $1) })
            let stats = try TagStats.fetchAll(
                db,
                Tag.annotated(
                    with: Tag.notes.count, Tag.notes.isEmpty, Tag.notes.sum(Column("words")),
                    Tag.notes.total(Column("words")).forKey("totalWords"), Tag.notes.min(Column("words")),
                    Tag.notes.max(Column("words")), Tag.notes.average(Column("words"))
                ).order(Column("id")))
            #expect(stats[2] == TagStats(
                tag: tagRows[2], noteCount: 2, hasNoNote: false, noteWordsSum: 340, totalWords: 340,
                minimumNoteWords: 40, maximumNoteWords: 300, averageNoteWords: 170))
            #expect(stats[3] == TagStats(
                tag: tagRows[3], noteCount: 0, hasNoNote: true, noteWordsSum: nil, totalWords: 0,
                minimumNoteWords: nil, maximumNoteWords: nil, averageNoteWords: nil))
            // A direct association's aggregate, filtered, and ordering by an aggregate.
            let busiest = try Tag.annotated(with: Tag.noteTags.count).order(Tag.noteTags.count.desc, Column("label"))
                .limit(1).fetchOne(db)
            #expect(busiest?.label == "writing")
            let longNotes = try Tag.annotated(with: Tag.notes.filter(Column("words") >= 100).count.forKey("noteCount"))
                .asRequest(of: TagInfo.self).order(Column("id")).fetchAll(db)
            #expect(longNotes.map(\.noteCount) == [0, 1, 1, 0])
            // Through two aggregates of different associations in one request, nothing is counted twice.
            let notes = try Note.annotated(with: Note.tags.count, Note.noteTags.count).order(Column("id"))
                .asRequest(of: NoteCounts.self).fetchAll(db)
            #expect(notes.map(\.tagCount) == [1, 2, 1, 0] && notes.map(\.noteTagCount) == [1, 2, 1, 0])
        }
    }

    @Test func havingAndFilterWithAggregatesKeepTheTagsAUserAskedFor() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            let used = try Tag.having(Tag.notes.isEmpty == false).order(Column("label")).fetchAll(db)
            #expect(used.map(\.label) == ["home", "swift", "writing"])
            #expect(try Tag.having(Tag.notes.isEmpty == false).fetchCount(db) == 3)
            #expect(try Tag.having(Tag.notes.count >= 2).fetchAll(db).map(\.label) == ["writing"])
            #expect(try Tag.all().having(Tag.notes.sum(Column("words")) > 20).order(Column("id")).fetchAll(db)
                        .map(\.label) == ["swift", "writing"])
            #expect(try Tag.filter(Tag.notes.isEmpty).fetchAll(db).map(\.label) == ["unused"])
        }
        let removed = try queue.write { db in try Tag.filter(Tag.notes.isEmpty).deleteAll(db) }
        #expect(removed == 1)
        #expect(try queue.read { db in try Tag.order(Column("id")).fetchAll(db).map(\.id) } == [1, 2, 3])
    }

    @Test func aTableAliasReachesAnAssociatedTablesColumn() throws {
        let directory = try TemporaryDirectory()
        let queue = try makeNotes(directory)
        try queue.read { (db: Database) throws in
            let tag = TableAlias()
            let writing = try Note.joining(required: Note.tags.aliased(tag)).filter(tag[Column("label")] == "writing")
                .order(Column("id")).fetchAll(db)
            #expect(writing.map(\.id) == [2, 3])
            let author = TableAlias(name: "writer")
            let byAuthor = try Note.joining(required: Note.author.aliased(author))
                .select(author["name"].forKey("name"), Column("title"), as: AuthorTitle.self)
                .order(author[Column("name")].desc, Column("title")).fetchAll(db)
            #expect(byAuthor.map(\.name) == ["Basho", "Basho", "Ada", "Ada"])
            #expect(byAuthor.map(\.title) == ["Poem", "Untagged", "Groceries", "Swift tips"])
            let error = expectError(DatabaseError.Code.misuse) {
                try Note.joining(required: Note.author.aliased(author)).joining(optional: Note.tags.aliased(author))
                    .fetchAll(db)
            }
            #expect(error?.message.contains("'writer' names two tables") == true)
        }
    }
}

private struct NoteCounts: Decodable, FetchableRecord {
    var note: Note
    var tagCount: Int
    var noteTagCount: Int
}

private struct AuthorTitle: Decodable {
    var name: String
    var title: String
}

/// The pivot of a schema written with plural snake_case table names.
private struct PluralNoteTag: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "note_tags"
    var noteId: Int64
    var tagId: Int64
}

private struct PluralNote: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "notes"
    static let noteTags = hasMany(PluralNoteTag.self)
    var id: Int64
}

private struct PluralNoteInfo: Decodable, FetchableRecord, Equatable {
    var note: PluralNote
    var note_tags: [PluralNoteTag]   // the default key: the table's name, already plural
    var note_tagCount: Int           // GRDB's name of the count: the key in the singular
}

@Suite struct AssociationKeyTests {
    @Test func aTableNameAlreadyPluralIsTheKeyOfHasManyAsItIs() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.file("plural.db"), key: try testKey())
        try queue.write { (db: Database) throws in
            try db.executeScript("""
                CREATE TABLE notes (id INTEGER PRIMARY KEY);
                CREATE TABLE note_tags (noteId INTEGER NOT NULL REFERENCES notes(id), tagId INTEGER NOT NULL);
                INSERT INTO notes VALUES (1), (2);
                INSERT INTO note_tags VALUES (1, 10), (1, 11);
                """)
        }
        let infos = try queue.read { (db: Database) throws in
            try PluralNoteInfo.fetchAll(
                db, PluralNote.including(all: PluralNote.noteTags.order(Column("tagId"))).annotated(with: PluralNote.noteTags.count)
                    .order(Column("id")))
        }
        #expect(infos == [
            PluralNoteInfo(note: PluralNote(id: 1), note_tags: [PluralNoteTag(noteId: 1, tagId: 10), PluralNoteTag(noteId: 1, tagId: 11)],
                           note_tagCount: 2),
            PluralNoteInfo(note: PluralNote(id: 2), note_tags: [], note_tagCount: 0),
        ])
    }

    @Test func pluralAndSingularFollowGRDBsEnglishRulesOnTheLastWord() {
        let cases = [
            ("note_tags", "note_tags"), ("note_tag", "note_tags"), ("noteTag", "noteTags"), ("tags", "tags"),
            ("book", "books"), ("category", "categories"), ("day", "days"), ("box", "boxes"), ("church", "churches"),
            ("class", "classes"), ("status", "statuses"), ("bus", "buses"), ("wolf", "wolves"), ("wife", "wives"),
            ("analysis", "analyses"), ("person", "people"), ("child", "children"), ("sheep", "sheep"),
            ("user_person", "user_people"), ("matrix", "matrices"), ("index", "indices"), ("hero", "heroes"),
            ("quiz", "quizzes"), ("datum", "data"), ("mouse", "mice"),
        ]
        for (singular, plural) in cases {
            #expect(EncryptedDatabase.plural(singular) == plural, "plural of \(singular)")
        }
        for (singular, plural) in cases where singular != "note_tags" && singular != "tags" && singular != "datum" {
            #expect(EncryptedDatabase.singular(plural) == singular, "singular of \(plural)")
        }
        #expect(EncryptedDatabase.singular("note_tags") == "note_tag" && EncryptedDatabase.singular("authors") == "author")
        #expect(EncryptedDatabase.singular("movies") == "movie" && EncryptedDatabase.singular("news") == "news")
    }
}
