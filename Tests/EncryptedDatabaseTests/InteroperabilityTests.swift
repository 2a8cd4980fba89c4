// On-disk compatibility with the reference tools.
import EncryptedDatabase
import Foundation
import Testing

/// The SQL a person types into the `sqlcipher` tool to open a SecureStore database with a raw key.
func sqlcipherPrelude(keyHex: String) -> String {
    "PRAGMA key = \"x'\(keyHex)'\";\nPRAGMA cipher_page_size = 4096;\n"
}

@Suite struct InteroperabilityTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func theReferenceToolReadsOurDatabaseAndPlainSQLiteCannot() throws {
        let path = directory.file("interop.db")
        let secretTitles = ["zebra-crossing-4711", "quokka-sunrise-0815"]
        let queue = try makeItemDatabase(path, key: try testKey(), titles: secretTitles)
        // While open, the rows are in the main file or its write-ahead log: neither may hold the text.
        for file in [path, path + "-wal"] {
            let bytes = try #require(contents(file))
            #expect(!bytes.isEmpty)
            for title in secretTitles { #expect(!containsBytes(bytes, title), "\(file) holds plaintext") }
        }
        try queue.checkpoint()
        try queue.close()
        #expect(!containsBytes(try #require(contents(path)), secretTitles[0]))

        let query = sqlcipherPrelude(keyHex: testKeyHex()) + "SELECT title FROM item ORDER BY id;\n"
        let reference = try run("sqlcipher", [path], input: query)
        #expect(reference.output.split(separator: "\n").map(String.init).suffix(2) == secretTitles)

        // Without our page size the reference tool cannot read it: the setting is part of the format.
        let wrongSettings = try run(
            "sqlcipher", [path], input: "PRAGMA key = \"x'\(testKeyHex())'\";\nSELECT title FROM item;\n")
        #expect(!wrongSettings.output.contains(secretTitles[0]))

        let plain = try run("sqlite3", [path, "SELECT title FROM item;"])
        #expect(plain.status != 0)
        #expect(plain.error.contains("not a database"))
    }

    @Test func aDatabaseWrittenByTheReferenceToolOpens() throws {
        let fixtures = fixturesDirectory()
        // Copy first: opening switches a database to WAL mode, and the fixture must stay as committed.
        for name in ["reference-rawkey.db", "reference-passphrase.db"] {
            try FileManager.default.copyItem(
                atPath: fixtures.appendingPathComponent(name).path, toPath: directory.file(name))
        }
        let rawKey = try DatabaseKey(bytes: (0..<32).map { UInt8($0) })
        let raw = try DatabaseQueue(path: directory.file("reference-rawkey.db"), key: rawKey)
        let rows = try raw.read { db in
            try db.fetch("SELECT id, title, done, due FROM task ORDER BY id") { row in
                "\(try row.int(at: 0)) \(try row.string(at: 1)) \(try row.bool(at: 2)) \(try row[3] as Date?)"
            }
        }
        #expect(rows == [
            "1 Buy milk false Optional(2024-01-02 03:04:05 +0000)",
            "2 Écrire le rapport ✍️ true nil",
        ])
        #expect(try raw.read { db in try db.userVersion() } == 3)
        try raw.integrityCheck()

        let passphrase = try DatabaseQueue(
            path: directory.file("reference-passphrase.db"), passphrase: "SecureStore public test passphrase")
        #expect(try passphrase.read { db in try db.scalar("SELECT count(*) FROM task", as: Int.self) } == 2)
    }
}
