// A damaged file is an error naming the path and what is wrong, and the file is never changed by us
// until an explicit reset moves it aside.
import Foundation
import TestSupport
import Testing
@testable import Preferences

private let validDocument = """
    {
      "format": "securestore-preferences",
      "version": 1,
      "values": {
        "theme": "dark",
        "fontSize": 13
      }
    }

    """

/// A damaged file and the reason its error must give.
struct Damage: Sendable, CustomStringConvertible {
    var name: String
    var bytes: [UInt8]
    var expected: String
    var code: PreferencesError.Code = .damagedFile
    var description: String { name }
}

private let damages: [Damage] = [
    Damage(name: "empty", bytes: [], expected: "the file is empty (0 bytes)"),
    Damage(
        name: "truncated", bytes: Array(validDocument.utf8.prefix(80)),
        expected: "line 5, column 5: the document ends inside a string"),
    Damage(
        name: "garbage", bytes: [0x00, 0xFF, 0x13, 0x37, 0x42],
        expected: "line 1, column 1: unexpected byte 0x00 where a value was expected"),
    Damage(
        name: "wrong shape", bytes: Array("[1, 2, 3]\n".utf8),
        expected: "the document is a JSON array, not an object with \"format\", \"version\" and \"values\""),
    Damage(
        name: "another JSON file", bytes: Array(#"{"theme": "dark"}"#.utf8),
        expected: "the document has no \"format\": \"securestore-preferences\" field; it is not a SecureStore preferences file"),
    Damage(
        name: "bad literal",
        bytes: Array(validDocument.replacingOccurrences(of: "\"dark\"", with: "tru").utf8),
        expected: "line 5, column 14: unexpected text where a value was expected"),
    Damage(
        name: "trailing comma",
        bytes: Array(validDocument.replacingOccurrences(of: "13", with: "13,").utf8),
        expected: "line 7, column 3: expected a key in double quotes, found '}'"),
    Damage(
        name: "duplicate key",
        bytes: Array(validDocument.replacingOccurrences(of: "\"fontSize\"", with: "\"theme\"").utf8),
        expected: "line 6, column 14: the key \"theme\" appears twice in one object"),
    Damage(
        name: "null", bytes: Array(validDocument.replacingOccurrences(of: "13", with: "null").utf8),
        expected: "line 6, column 17: null is not a supported value; remove the key instead"),
    Damage(
        name: "invalid UTF-8",
        bytes: Array(validDocument.utf8).map { $0 == UInt8(ascii: "k") ? 0xC3 : $0 },
        expected: "line 5, column 14: the string is not valid UTF-8"),
    Damage(
        name: "bad base64",
        bytes: Array(validDocument.replacingOccurrences(of: "\"dark\"", with: #"{"$data": "@@@"}"#).utf8),
        expected: "line 5, column 24: the \"$data\" value is not valid base64"),
    Damage(
        name: "integer overflow",
        bytes: Array(validDocument.replacingOccurrences(of: "13", with: "9223372036854775808").utf8),
        expected: "line 6, column 17: the integer is out of the range of Int (write it with a '.0' to store a Double)"),
    Damage(
        name: "newer version", bytes: Array(validDocument.replacingOccurrences(of: "\"version\": 1", with: "\"version\": 2").utf8),
        expected: "the file has format version 2; this build reads version 1 and older", code: .unsupportedFormat),
]

@Suite("Damaged files")
struct DamagedFileTests {
    @Test(arguments: damages)
    func openingADamagedFileIsAClearErrorAndLeavesItAlone(_ damage: Damage) throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            try Data(damage.bytes).write(to: location.fileURL)
            let error = expectError(damage.code) { _ = try Preferences(location: location) }
            let message = error?.message ?? ""
            #expect(message.hasPrefix(location.fileURL.path + " "), "message: \(message)")
            #expect(message.contains(damage.expected), "message: \(message)")
            #expect(try fileBytes(location.fileURL) == Data(damage.bytes))
        }
    }

    @Test(arguments: damages)
    func aSetOnADamagedFileThrowsAndLeavesItAlone(_ damage: Damage) throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let prefs = try Preferences(location: location)
            try prefs.set("dark", forKey: "theme")
            // Another program damages the file after this handle read it.
            try Data(damage.bytes).write(to: location.fileURL)
            let error = expectError(damage.code) { try prefs.set("light", forKey: "theme") }
            #expect(error?.message.contains(location.fileURL.path) == true)
            #expect(try fileBytes(location.fileURL) == Data(damage.bytes))
            // Reads keep the last good values (never silently empty) and say why the file was not used.
            #expect(prefs.get("theme", default: "none") == "dark")
            #expect(prefs.fileProblem?.code == damage.code)
            expectError(damage.code) { try prefs.remove("theme") }
            #expect(try fileBytes(location.fileURL) == Data(damage.bytes))
        }
    }

    @Test func resetMovesTheDamagedFileAsideWithATimestamp() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let damaged = Data("{ not json".utf8)
            try damaged.write(to: location.fileURL)
            expectError(PreferencesError.Code.damagedFile) { _ = try Preferences(location: location) }
            let moved = try #require(try Preferences.reset(location))
            #expect(moved.deletingLastPathComponent().standardizedFileURL == location.directory)
            let name = moved.lastPathComponent
            #expect(name.hasPrefix("test.json.reset-"))
            #expect(name.range(of: #"^test\.json\.reset-\d{8}T\d{6}Z$"#, options: .regularExpression) != nil, "\(name)")
            #expect(try fileBytes(moved) == damaged)
            #expect(!FileManager.default.fileExists(atPath: location.fileURL.path))
            let prefs = try Preferences(location: location)
            #expect(prefs.keys.isEmpty)
            try prefs.set("fresh", forKey: "theme")
            #expect(try Preferences(location: location).get("theme", default: "") == "fresh")
            // A second reset in the same second does not overwrite the first moved-aside file.
            let again = try #require(try prefs.reset())
            #expect(again != moved)
            #expect(try fileBytes(moved) == damaged)
            #expect(prefs.keys.isEmpty)
            #expect(try Preferences.reset(location) == nil)
        }
    }

    @Test func aFileChangedByAnotherWriterIsSeenWithoutReopening() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let first = try Preferences(location: location)
            let second = try Preferences(location: location)
            try first.set("dark", forKey: "theme")
            #expect(second.get("theme", default: "none") == "dark")
            try second.set(14, forKey: "fontSize")
            #expect(first.keys == ["fontSize", "theme"])
            // A hand edit with the same size is seen too (new inode and modification time).
            try Data(validDocument.utf8).write(to: location.fileURL)
            #expect(first.get("fontSize", default: 0) == 13)
            try FileManager.default.removeItem(at: location.fileURL)
            #expect(first.keys.isEmpty)
        }
    }

    @Test func aHandEditedFileWithExtraWhitespaceAndEscapesIsRead() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let text = "\u{FEFF}{\"values\":{\"a\":\"\\u00e9\\ud83d\\ude00\\/\",\"b\":-0.5e3,\"c\":{\"$$x\":[]}},"
                + "\"version\":1,\"format\":\"securestore-preferences\"}"
            try Data(text.utf8).write(to: location.fileURL)
            let prefs = try Preferences(location: location)
            #expect(prefs.get("a", default: "") == "é😀/")
            #expect(prefs.value(forKey: "b") == .double(-500))
            #expect(prefs.value(forKey: "c") == ["$x": []])
        }
    }
}

@Suite("Damaged files, more shapes")
struct MoreDamageTests {
    @Test func aDirectoryWhereTheFileShouldBeIsAnError() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            try FileManager.default.createDirectory(at: location.fileURL, withIntermediateDirectories: false)
            let error = expectError(PreferencesError.Code.damagedFile) { _ = try Preferences(location: location) }
            #expect(error?.message == "\(location.fileURL.path) is not a regular file")
        }
    }

    @Test func deepNestingIsAnErrorNotACrash() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            let deep = String(repeating: "[", count: 100_000)
            try Data(#"{"format":"securestore-preferences","version":1,"values":{"a":\#(deep)}}"#.utf8).write(to: location.fileURL)
            let error = expectError(PreferencesError.Code.damagedFile) { _ = try Preferences(location: location) }
            #expect(error?.message.contains("nested more than 100 levels deep") == true)
        }
    }
}

/// A FIFO where the preferences file should be (planted by mistake or on purpose) used to hang every program
/// that opened the domain: open(2) of a FIFO for reading blocks until a writer appears. It is refused at once.
@Suite struct NotARegularFileTests {
    @Test func aFIFOInPlaceOfTheFileIsRefusedAtOnceAndLeftThere() throws {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            try FileManager.default.createDirectory(at: location.directory, withIntermediateDirectories: true)
            #expect(mkfifo(location.fileURL.path, 0o600) == 0)
            let error = expectError(PreferencesError.Code.damagedFile) { _ = try Preferences(location: location) }
            #expect(error?.message == location.fileURL.path + " is not a regular file")
            var status = stat()
            #expect(lstat(location.fileURL.path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFIFO)
        }
    }
}
