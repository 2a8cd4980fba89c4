// Helpers shared by the EncryptedDatabase tests: keys, files, child processes (temporary directories: TestSupport).
import EncryptedDatabase
import Foundation
import TestSupport
import Testing

/// A test key whose 32 bytes are all `byte`.
func testKey(_ byte: UInt8 = 0x42) throws -> DatabaseKey {
    try DatabaseKey(bytes: [UInt8](repeating: byte, count: 32))
}

/// The 64 hex digits of a test key made by `testKey(byte)`.
func testKeyHex(_ byte: UInt8 = 0x42) -> String {
    String(repeating: String(format: "%02x", byte), count: 32)
}

func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

func fileMode(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? Int) ?? -1
}

func fileExists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

/// The repository's Keys/fixtures directory.
func fixturesDirectory() -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Keys/fixtures")
}

extension ProcessResult {
    /// Standard output, as the interoperability tests name it.
    var output: String { stdout }
    /// Standard error.
    var error: String { stderr }
}

/// Runs a program (looked up on PATH when not absolute) with `input` on its standard input, through the tests'
/// one process runner (TestSupport).
func run(_ program: String, _ arguments: [String], input: String = "") throws -> ProcessResult {
    try TestSupport.run([program] + arguments, input: Data(input.utf8))
}

/// Whether `needle` occurs anywhere in `haystack`.
func containsBytes(_ haystack: Data, _ needle: String) -> Bool {
    haystack.range(of: Data(needle.utf8)) != nil
}

/// Opens a queue on a fresh file with a small table `item(id INTEGER PRIMARY KEY, title TEXT)`.
func makeItemDatabase(_ path: String, key: DatabaseKey, titles: [String]) throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: path, key: key)
    try queue.write { db in
        try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT NOT NULL)")
        for title in titles { try db.execute("INSERT INTO item (title) VALUES (?)", [title]) }
    }
    return queue
}

func titles(_ queue: DatabaseQueue) throws -> [String] {
    try queue.read { db in try db.fetch("SELECT title FROM item ORDER BY id") { try $0.string(at: 0) } }
}

