// Inputs the preferences-reader fuzz target (Tests/Fuzz/PreferencesReader) found or generated, kept as
// tests of what a user sees: the values, or a damaged-file error with the path, line and column.
import Foundation
import TestSupport
import Testing
@testable import Preferences

private let envelope = #"{"format":"securestore-preferences","version":1,"values":"#

/// A one-line document with `values` (JSON text) as its values object.
private func document(_ values: String) -> [UInt8] { Array((envelope + values + "}").utf8) }

@Suite("Fuzz regressions: the preferences file")
struct FuzzRegressionTests {
    /// Writes `bytes` as the domain file of a fresh directory and opens it.
    private func open<T>(_ bytes: [UInt8], _ body: (PreferencesLocation, Result<Preferences, PreferencesError>) throws -> T) throws -> T {
        try withTemporaryDirectory { dir in
            let location = try testLocation(dir)
            try Data(bytes).write(to: location.fileURL)
            do {
                return try body(location, .success(try Preferences(location: location)))
            } catch let error as PreferencesError {
                return try body(location, .failure(error))
            }
        }
    }

    /// Found by the round-trip property: the reader took this date as 10000-01-01T00:00:00Z, which the
    /// writer refuses, so the file loaded but every later set failed on a key it did not touch.
    @Test func aDateThatRoundsPastTheYear9999IsRefusedWhenRead() throws {
        let bytes = document(#"{"d":{"$date":"9999-12-31T23:59:59.99999999Z"}}"#)
        try open(bytes) { location, result in
            guard case .failure(let error) = result else {
                Issue.record("the file loaded")
                return
            }
            #expect(error.code == .damagedFile)
            #expect(error.message.hasPrefix(location.fileURL.path + " is damaged: line 1, column 72: "))
            #expect(error.message.contains(#"the "$date" value is not a UTC date like 2026-01-31T12:00:00Z"#))
        }
    }

    @Test func theLastRepresentableDateStillLoadsAndWritesBack() throws {
        try open(document(#"{"d":{"$date":"9999-12-31T23:59:59.5Z"}}"#)) { location, result in
            let prefs = try result.get()
            #expect(try prefs.set("x", forKey: "other") == nil)
            let again = try Preferences(location: location)
            let date = try #require(try again.value(forKey: "d", as: Date.self))
            #expect(date.timeIntervalSince1970 == 253_402_300_799.5)
        }
    }

    /// Found by the date-writer property: in the half second before 2001-01-01 the fraction was not exact;
    /// the fuzzer's input (the bytes A4 × 8, an interval of -3.6e-132) was written as ":59.0", a second early.
    @Test(arguments: [
        Double(bitPattern: 0xA4A4_A4A4_A4A4_A4A4), -0.1, -0.25, -0.5, -1e-9, -Double.leastNonzeroMagnitude,
        (-1.0).nextUp, -0.0, -1.5, 0.1,
    ])
    func datesJustBefore2001RoundTripExactly(interval: Double) throws {
        try withTemporaryDirectory { dir in
            let date = Date(timeIntervalSinceReferenceDate: interval)
            _ = try Preferences(location: testLocation(dir)).set(date, forKey: "when")
            let back = try #require(try Preferences(location: testLocation(dir)).value(forKey: "when", as: Date.self))
            #expect(back.timeIntervalSinceReferenceDate == interval)
            if interval < 0 && interval > -1 {
                let text = try ISODate.format(date)
                #expect(text.hasPrefix("2000-12-31T23:59:59."))
                #expect(!text.hasSuffix(":59.0Z"))
            }
        }
    }

    /// Seen while fixing the above: adding the reference offset overflowed, a trap instead of an error.
    @Test func aDateNearIntMaxIsRefusedWithAnError() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            for interval in [9_223_372_036_854_774_784.0, -9_223_372_036_854_775_808.0, .greatestFiniteMagnitude] {
                let error = expectError(PreferencesError.Code.unsupportedValue) { _ = try prefs.set(Date(timeIntervalSinceReferenceDate: interval), forKey: "far") }
                #expect(error?.message == "a date outside the years 0000–9999 cannot be stored in preferences")
            }
            #expect(prefs.keys.isEmpty)
        }
    }

    /// Found by the one-line-message property: a key with an escaped newline and ESC was repeated raw.
    @Test func aKeyInAMessageHasItsControlCharactersEscaped() throws {
        let bytes = document(#"{"\u001b[31m\n":1,"\u001b[31m\n":2}"#)
        try open(bytes) { location, result in
            guard case .failure(let error) = result else {
                Issue.record("the file loaded")
                return
            }
            #expect(error.code == .damagedFile)
            #expect(error.message.contains(#"line 1, column 91: the key "\u{1B}[31m\u{A}" appears twice in one object"#))
            #expect(!error.message.unicodeScalars.contains { $0.properties.generalCategory == .control })
        }
        #expect(quoted(String(repeating: "k", count: 100)) == "\"" + String(repeating: "k", count: 64) + "...\"")
        #expect(quoted("\u{202E}$data") == #""\u{202E}$data""#)
    }

    /// Found by the fuzz target comparing two reads of one file: with two unknown top-level fields the
    /// message named either, by the dictionary's order, which changes from run to run.
    @Test func twoUnknownTopLevelFieldsGiveOneStableMessage() throws {
        let bytes = Array(#"{"format":"securestore-preferences","version":1,"neme":1,"values":{},"alpha":2}"#.utf8)
        for _ in 0..<20 {
            do {
                _ = try FormatReader.document(bytes)
                Issue.record("the document was read")
            } catch {
                #expect(error.text == #"the document has an unknown top-level field "alpha""#)
            }
        }
    }

    /// A few inputs the fuzzer generated, with the clear error each gives (Tests/Fuzz/corpus keeps more).
    @Test(arguments: [
        (#"{"a":"\ud83d"}"#, #"line 1, column 64: a \u escape holds an unpaired surrogate"#),
        (#"{"a":{"$date":"2024-02-30T00:00:00Z"}}"#, #"line 1, column 72: the "$date" value is not a UTC date"#),
        (#"{"a":{"$double":"NaN"}}"#, #"line 1, column 74: the "$double" value must be "nan", "inf" or "-inf""#),
        (#"{"a":{"$+ata":"x"}}"#, #"line 1, column 64: unknown tag "$+ata"; a key that begins with '$' is written as "$$+ata""#),
        (#"{"a":-}"#, "line 1, column 63: a '-' must be followed by digits"),
        (#"{"a":1e999}"#, "line 1, column 63: the number is out of the range of a Double"),
        (#"{"a":"\x"}"#, #"line 1, column 64: unknown escape: '\' followed by 'x'"#),
        (#"{"a":"# + String(repeating: "[", count: 120) + String(repeating: "]", count: 120) + "}",
         "values are nested more than 100 levels deep"),
    ])
    func generatedInputsGiveAClearError(values: String, expected: String) throws {
        try open(document(values)) { location, result in
            guard case .failure(let error) = result else {
                Issue.record("the file loaded")
                return
            }
            #expect(error.code == .damagedFile)
            #expect(error.message.hasPrefix(location.fileURL.path + " is damaged: "))
            #expect(error.message.contains(expected), "message: \(error.message)")
        }
    }
}
