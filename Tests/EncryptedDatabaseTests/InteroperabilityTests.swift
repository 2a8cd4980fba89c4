// On-disk compatibility with the reference tools.
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// The SQLCipher this process uses, as the library reports it.
func sqlcipherMajor() throws -> Int {
    let directory = try TemporaryDirectory()
    let queue = try DatabaseQueue(path: directory.file("probe.db"), key: try testKey())
    return Int(try queue.cipherInfo().sqlcipherVersion.prefix { $0.isNumber }) ?? 0
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

        let reference = try sqlcipher(path, key: .raw(hex: testKeyHex()), pageSize: 4096, "SELECT title FROM item ORDER BY id;\n")
        #expect(reference.output.split(separator: "\n").map(String.init).suffix(2) == secretTitles)

        // Without our page size the reference tool cannot read it: the setting is part of the format.
        let wrongSettings = try sqlcipher(path, key: .raw(hex: testKeyHex()), compatibility: nil, "SELECT title FROM item;\n")
        #expect(!wrongSettings.output.contains(secretTitles[0]))

        let plain = try run("sqlite3", [path, "SELECT title FROM item;"])
        #expect(plain.status != 0)
        #expect(plain.error.contains("not a database"))
    }

    @Test(arguments: [("reference-rawkey.db", "reference-passphrase.db"),
                      ("sqlcipher4-rawkey.db", "sqlcipher4-passphrase.db")])
    func aDatabaseWrittenByTheReferenceToolOpens(rawName: String, passphraseName: String) throws {
        // Fixtures written by SQLCipher 3.4.1 (Debian 12) and by SQLCipher 4.6.1 (Debian 13) in SecureStore's
        // format: each opens under either library.
        let fixtures = fixturesDirectory()
        // Copy first: opening switches a database to WAL mode, and the fixture must stay as committed.
        for name in [rawName, passphraseName] {
            try FileManager.default.copyItem(
                atPath: fixtures.appendingPathComponent(name).path, toPath: directory.file(name))
        }
        let rawKey = try DatabaseKey(bytes: (0..<32).map { UInt8($0) })
        let raw = try DatabaseQueue(path: directory.file(rawName), key: rawKey)
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
            path: directory.file(passphraseName), passphrase: "SecureStore public test passphrase")
        #expect(try passphrase.read { db in try db.scalar("SELECT count(*) FROM task", as: Int.self) } == 2)
    }

    @Test func theFormatIsReportedInFull() throws {
        let queue = try makeItemDatabase(directory.file("info.db"), key: try testKey(), titles: ["x"])
        let info = try queue.cipherInfo()
        #expect(info.format == .secureStore)
        #expect(info.format.name == "securestore-1")
        #expect(info.cipher.uppercased() == "AES-256-CBC")
        #expect(info.pageSize == 4096)
        #expect(info.hmacAlgorithm == "HMAC_SHA1")
        #expect(info.kdfAlgorithm == "PBKDF2_HMAC_SHA1")
        #expect(info.sqlcipherVersion.first == "3" || info.sqlcipherVersion.first == "4")
        #expect(!info.sqliteVersion.isEmpty)
    }

    @Test func aFileInSQLCipher4sDefaultFormatIsNamedNotCalledAWrongKey() throws {
        let path = directory.file("other.db")
        try FileManager.default.copyItem(
            atPath: fixturesDirectory().appendingPathComponent("sqlcipher4-default-rawkey.db").path, toPath: path)
        let before = try snapshot(directory.path)
        let rawKey = try DatabaseKey(bytes: (0..<32).map { UInt8($0) })
        if try sqlcipherMajor() >= 4 {
            let error = expectError(DatabaseError.Code.otherFormat) { try DatabaseQueue(path: path, key: rawKey) }
            #expect(error?.message.contains("sqlcipher4-default") == true)
            #expect(error?.message.contains("the key is right") == true)
        } else {
            // SQLCipher 3 cannot read HMAC-SHA512 pages at all, so it cannot tell this from a wrong key: the
            // message says both.
            let error = expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabaseQueue(path: path, key: rawKey) }
            #expect(error?.message.contains("SQLCipher 4's default format") == true)
        }
        #expect(try snapshot(directory.path) == before, "nothing was written while finding out")
    }

    @Test func aFileInSQLCipher3sDefaultFormatIsNamed() throws {
        // Written now by this system's reference tool in SQLCipher 3's defaults (1024-byte pages): SQLCipher 4
        // after the compatibility pragma, SQLCipher 3 as it is.
        let path = directory.file("v3.db")
        let made = try sqlcipher(path, key: .raw(hex: testKeyHex()), """
            CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT);
            INSERT INTO item (title) VALUES ('kept');
            """)
        #expect(made.status == 0, "\(made.error)")
        let before = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.otherFormat) { try DatabaseQueue(path: path, key: try testKey()) }
        #expect(error?.message.contains("sqlcipher3-default") == true)
        #expect(try snapshot(directory.path) == before)
    }

    @Test func aWrongKeyIsStillCalledAWrongKey() throws {
        let path = directory.file("a.db")
        try makeItemDatabase(path, key: try testKey(), titles: ["x"]).close()
        let before = try snapshot(directory.path)
        let error = expectError(DatabaseError.Code.wrongKeyOrNotADatabase) { try DatabaseQueue(path: path, key: try testKey(7)) }
        #expect(error?.message.contains("does not open") == true)
        #expect(try snapshot(directory.path) == before)
    }

    @Test func exportsAndImportsAreInTheSameFormatTheReferenceToolReads() throws {
        let source = try makeItemDatabase(directory.file("a.db"), key: try testKey(), titles: ["copied"])
        try source.export(to: directory.file("b.db"), key: try testKey(0x43))
        let reference = try sqlcipher(directory.file("b.db"), key: .raw(hex: testKeyHex(0x43)), pageSize: 4096, "SELECT title FROM item;\n")
        #expect(reference.output.split(separator: "\n").last == "copied")
        let copy = try DatabaseQueue(path: directory.file("b.db"), key: try testKey(0x43))
        #expect(try copy.cipherInfo().hmacAlgorithm == "HMAC_SHA1")
        #expect(try titles(copy) == ["copied"])
    }
}
