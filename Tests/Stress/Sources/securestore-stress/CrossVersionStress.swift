// securestore-stress cross write|read DIR
//
// Files written by this build's SQLCipher, read by another's: `make test-debian13` runs `write` on Debian 12
// (SQLCipher 3.4) and `read` on Debian 13 (SQLCipher 4.6), and the other way round. THE KEYS ARE PUBLIC
// TEST KEYS (the fixtures' key, Keys/fixtures/README.md): these files protect nothing.
//
//   write DIR   makes DIR/cross-*.db: a raw-key database, an export of it under another key, a passphrase
//               database, and a crash image (a main file plus a -wal holding committed transactions, copied
//               while the writer was open); DIR/cross-written-by names the SQLCipher that wrote them.
//   read DIR    opens each with this build, checks every row, the integrity and the format, and prints
//               "cross read ok: written by SQLCipher A, read by SQLCipher B"; exit 1 with the reason otherwise.
import EncryptedDatabase
import Foundation

private let titles = ["written before", "Écrire le rapport ✍️", "crash-image row"]

private func fixtureKey(_ first: UInt8) throws -> DatabaseKey {
    try DatabaseKey(bytes: (0..<32).map { first &+ UInt8($0) })
}

private let passphrase = "SecureStore public test passphrase"

func runCrossVersionStress(_ arguments: [String]) -> Int32 {
    guard arguments.count == 2, ["write", "read"].contains(arguments[0]) else {
        FileHandle.standardError.write(Data("usage: securestore-stress cross write|read DIR\n".utf8))
        return 64
    }
    let directory = arguments[1]
    do {
        if arguments[0] == "write" { try crossWrite(directory) } else { try crossRead(directory) }
        return 0
    } catch {
        FileHandle.standardError.write(Data("cross \(arguments[0]): \(error)\n".utf8))
        return 1
    }
}

private func crossWrite(_ directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = directory + "/cross-rawkey.db"
    let queue = try DatabaseQueue(path: path, key: try fixtureKey(0))
    try queue.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        for title in titles.prefix(2) { try db.execute("INSERT INTO item (title) VALUES (?)", [title]) }
        try db.execute("PRAGMA user_version = 5")
    }
    try queue.export(to: directory + "/cross-export.db", key: try fixtureKey(0x40))
    let version = try queue.cipherInfo().sqlcipherVersion

    let words = try DatabaseQueue(path: directory + "/cross-passphrase.db", passphrase: passphrase)
    try words.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        for title in titles.prefix(2) { try db.execute("INSERT INTO item (title) VALUES (?)", [title]) }
    }
    try words.close()

    // The crash image: checkpointed rows in the main file, one more committed row only in the -wal.
    try queue.checkpoint()
    try queue.write { db in try db.execute("INSERT INTO item (title) VALUES (?)", [titles[2]]) }
    for suffix in ["", "-wal"] {
        try FileManager.default.copyItem(atPath: path + suffix, toPath: directory + "/cross-crash.db" + suffix)
    }
    try queue.close()
    try Data(version.utf8).write(to: URL(fileURLWithPath: directory + "/cross-written-by"))
    print("cross write ok: SQLCipher \(version)")
}

private struct CrossFailure: Error, CustomStringConvertible {
    let description: String
}

private func crossRead(_ directory: String) throws {
    let writer = String(decoding: FileManager.default.contents(atPath: directory + "/cross-written-by") ?? Data(),
                        as: UTF8.self)
    func check(_ queue: DatabaseQueue, _ name: String, expected: [String]) throws -> String {
        let found = try queue.read { db in
            try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) }
        }
        guard found == expected else {
            throw CrossFailure(description: "\(name): rows \(found), expected \(expected)")
        }
        try queue.integrityCheck()
        let info = try queue.cipherInfo()
        guard info.format == .secureStore, info.pageSize == 4096, info.hmacAlgorithm == "HMAC_SHA1" else {
            throw CrossFailure(description: "\(name): format \(info)")
        }
        return info.sqlcipherVersion
    }
    // Read-only first: the files are checked as they arrived, before any open may switch or checkpoint them.
    var readOnly = DatabaseConfiguration()
    readOnly.readOnly = true
    let raw = try DatabaseQueue(path: directory + "/cross-rawkey.db", key: try fixtureKey(0), configuration: readOnly)
    let reader = try check(raw, "cross-rawkey.db", expected: titles)
    guard try raw.read({ db in try db.userVersion() }) == 5 else {
        throw CrossFailure(description: "cross-rawkey.db: user_version lost")
    }
    _ = try check(
        DatabaseQueue(path: directory + "/cross-export.db", key: try fixtureKey(0x40)), "cross-export.db",
        expected: Array(titles.prefix(2)))
    _ = try check(
        DatabaseQueue(path: directory + "/cross-passphrase.db", passphrase: passphrase), "cross-passphrase.db",
        expected: Array(titles.prefix(2)))
    _ = try check(
        DatabaseQueue(path: directory + "/cross-crash.db", key: try fixtureKey(0)), "cross-crash.db",
        expected: titles)
    print("cross read ok: written by SQLCipher \(writer), read by SQLCipher \(reader)")
}
