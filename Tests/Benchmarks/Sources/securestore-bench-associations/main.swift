// including(all:) against the two queries an app writes without associations: records, then grouped in Swift,
// and the same by column index (issue 25). `setup DB`, then `including|records|hand DB`: prints the median of 5
// timed passes (ms) after a warm-up, in a fresh process per call; Docs/records.md has the interleaved command.
import EncryptedDatabase
import Foundation

struct Author: Codable, FetchableRecord, PersistableRecord {
    static let books = hasMany(Book.self)
    var id: Int64
    var name: String
}
struct Book: Codable, FetchableRecord, PersistableRecord {
    var id: Int64
    var authorId: Int64
    var title: String
    var pages: Int
}
struct AuthorInfo: Decodable, FetchableRecord {
    var author: Author
    var books: [Book]
}

let args = CommandLine.arguments
let path = args[2]
let key = try DatabaseKey(bytes: [UInt8](repeating: 7, count: 32))
func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }
switch args[1] {
case "setup":
    try? FileManager.default.removeItem(atPath: path)
    let queue = try DatabaseQueue(path: path, key: key)
    try queue.write { db in
        try db.execute("CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        try db.execute("CREATE TABLE book (id INTEGER PRIMARY KEY, authorId INTEGER NOT NULL REFERENCES author(id), title TEXT NOT NULL, pages INTEGER NOT NULL)")
        try db.execute("CREATE INDEX book_on_authorId ON book(authorId)")
        var id: Int64 = 0
        for a in 1...2000 {
            try Author(id: Int64(a), name: "author \(a)").insert(db)
            for b in 0..<10 { id += 1; try Book(id: id, authorId: Int64(a), title: "book \(b) of \(a)", pages: b * 10).insert(db) }
        }
    }
    try queue.checkpoint()
default:
    let mode = args[1]
    let queue = try DatabaseQueue(path: path, key: key)
    func run() throws -> Int {
        try queue.read { db in
            switch mode {
            case "including":
                return try AuthorInfo.fetchAll(db, Author.including(all: Author.books)).reduce(0) { $0 + $1.books.count }
            case "records":
                let authors = try Author.fetchAll(db)
                var books: [Int64: [Book]] = [:]
                for book in try Book.fetchAll(db) { books[book.authorId, default: []].append(book) }
                return authors.reduce(0) { $0 + (books[$1.id]?.count ?? 0) }
            default:  // hand-written by column index
                let authors = try db.fetch("SELECT id, name FROM author") { row in Author(id: try row.int64(at: 0), name: try row.string(at: 1)) }
                var books: [Int64: [Book]] = [:]
                try db.forEachRow("SELECT id, authorId, title, pages FROM book") { row in
                    let book = Book(id: try row.int64(at: 0), authorId: try row.int64(at: 1), title: try row.string(at: 2), pages: try row.int(at: 3))
                    books[book.authorId, default: []].append(book)
                }
                return authors.reduce(0) { $0 + (books[$1.id]?.count ?? 0) }
            }
        }
    }
    _ = try run()
    var samples: [Double] = []
    for _ in 0..<5 { let t = now(); let n = try run(); precondition(n == 20000); samples.append(now() - t) }
    print(samples.sorted()[2])
}
