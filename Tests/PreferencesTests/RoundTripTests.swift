// Values go to the file and come back exactly, with their types, in a new handle that reads the file.
import Foundation
import TestSupport
import Testing
@testable import Preferences

@Suite("Type round trips")
struct RoundTripTests {
    /// Writes with one handle and reads with a fresh one, so every value crosses the file.
    private func roundTrip(_ values: [String: PreferenceValue]) throws -> [String: PreferenceValue] {
        try withTemporaryDirectory { dir in
            let writer = try Preferences(location: testLocation(dir))
            try writer.update { $0.merge(values) { _, new in new } }
            let reader = try Preferences(location: testLocation(dir))
            return reader.storedValues
        }
    }

    @Test func integersKeepTheirTypeAndFullRange() throws {
        let back = try roundTrip(["min": .int(.min), "max": .int(.max), "zero": 0, "minusOne": -1])
        #expect(back["min"] == .int(Int.min))
        #expect(back["max"] == .int(Int.max))
        #expect(back["zero"] == .int(0))
        #expect(back["minusOne"] == .int(-1))
    }

    @Test func doublesKeepEveryBitAndStayDoubles() throws {
        let doubles: [Double] = [
            0.1, 1.0, -0.0, .pi, 1e16, 1e-300, 123456789.123456789, .greatestFiniteMagnitude,
            .leastNonzeroMagnitude, .leastNormalMagnitude, -2.5e-5, .infinity, -.infinity,
        ]
        var values: [String: PreferenceValue] = [:]
        for (index, number) in doubles.enumerated() { values["d\(index)"] = .double(number) }
        values["nan"] = .double(.nan)
        let back = try roundTrip(values)
        for (index, number) in doubles.enumerated() {
            guard case .double(let read)? = back["d\(index)"] else {
                Issue.record("d\(index) did not come back as a Double: \(String(describing: back["d\(index)"]))")
                continue
            }
            #expect(read.bitPattern == number.bitPattern, "\(number) came back as \(read)")
        }
        guard case .double(let nan)? = back["nan"] else {
            Issue.record("NaN did not come back as a Double")
            return
        }
        #expect(nan.isNaN)
    }

    @Test func oneAndOnePointZeroStayApart() throws {
        let back = try roundTrip(["int": .int(1), "double": .double(1)])
        #expect(back["int"] == .int(1))
        #expect(back["double"] == .double(1.0))
        // A hand-written 1 reads as a Double where a Double is asked for, but a 1.0 never reads as an Int.
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set(1, forKey: "int")
            try prefs.set(1.0, forKey: "double")
            #expect(prefs.get("int", default: 0.5) == 1.0)
            #expect(prefs.get("double", default: 7) == 7)
        }
    }

    @Test func stringsKeepEveryCharacter() throws {
        let strings = [
            "", "plain", "héllo wörld", "日本語テキスト", "👨‍👩‍👧‍👦 family", "e\u{301} combining",
            "quote \" backslash \\ slash /", "line\nbreak\ttab\r", "nul \u{0} bell \u{7} del \u{7F}",
            "{\"$data\":\"AAAA\"}", "$data", "\u{FFFF}\u{10FFFF}",
        ]
        var values: [String: PreferenceValue] = [:]
        for (index, text) in strings.enumerated() { values["s\(index)"] = .string(text) }
        let back = try roundTrip(values)
        for (index, text) in strings.enumerated() {
            guard case .string(let read)? = back["s\(index)"] else {
                Issue.record("s\(index) did not come back as a String")
                continue
            }
            #expect(Array(read.unicodeScalars) == Array(text.unicodeScalars))
        }
    }

    @Test func dataKeepsAll256ByteValues() throws {
        let all = Data((0...255).map { UInt8($0) })
        let back = try roundTrip(["all": .data(all), "empty": .data(Data()), "one": .data(Data([0xFF]))])
        #expect(back["all"] == .data(all))
        #expect(back["empty"] == .data(Data()))
        #expect(back["one"] == .data(Data([0xFF])))
    }

    @Test func datesComeBackEqualToTheNanosecond() throws {
        let dates = [
            Date(), Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSinceReferenceDate: -0.25),
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_700_000_000.123456789),
            Date(timeIntervalSinceReferenceDate: 1e-7), Date(timeIntervalSince1970: 951_782_400),  // 2000-02-29
            .distantPast, .distantFuture,
        ]
        var values: [String: PreferenceValue] = [:]
        for (index, date) in dates.enumerated() { values["t\(index)"] = .date(date) }
        let back = try roundTrip(values)
        for (index, date) in dates.enumerated() {
            guard case .date(let read)? = back["t\(index)"] else {
                Issue.record("t\(index) did not come back as a Date")
                continue
            }
            #expect(
                read.timeIntervalSinceReferenceDate.bitPattern == date.timeIntervalSinceReferenceDate.bitPattern,
                "\(date.timeIntervalSinceReferenceDate) came back as \(read.timeIntervalSinceReferenceDate)")
        }
    }

    @Test func datesAreWrittenAsReadableUTC() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set(Date(timeIntervalSince1970: 951_825_600.5), forKey: "leapDay")
            let text = String(decoding: try fileBytes(prefs.location.fileURL), as: UTF8.self)
            #expect(text.contains(#""leapDay": {"$date": "2000-02-29T12:00:00.5Z"}"#))
        }
    }

    @Test func nestedArraysAndDictionariesRoundTrip() throws {
        let nested: PreferenceValue = [
            "window": ["x": 10, "y": -20, "size": [800, 600.5]],
            "recent": ["a", "b", ["deeper": [[[true]]]]],
            "empty": [:], "emptyList": [],
            "$dollar": "a key that starts with $", "$$double": .data(Data([1, 2, 3])),
            "$data": "not a tag", "mixed": [1, 1.5, "two", false, .date(Date(timeIntervalSince1970: 0))],
        ]
        let back = try roundTrip(["tree": nested, "$top": "dollar key at the top"])
        #expect(back["tree"] == nested)
        #expect(back["$top"] == "dollar key at the top")
    }

    @Test func typedAPIReadsWhatWasSet() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set(["a", "b"], forKey: "list")
            try prefs.set(["w": 1, "h": 2], forKey: "size")
            try prefs.set(true, forKey: "flag")
            try prefs.set(Data([9]), forKey: "blob")
            let reader = try Preferences(location: testLocation(dir))
            #expect(reader.get("list", default: [String]()) == ["a", "b"])
            #expect(reader.get("size", default: [String: Int]()) == ["w": 1, "h": 2])
            #expect(reader.get("flag", default: false) == true)
            #expect(reader.get("blob", default: Data()) == Data([9]))
            #expect(reader.keys == ["blob", "flag", "list", "size"])
            // Asking for another type gives the default, or a typeMismatch error when asked strictly.
            #expect(reader.get("flag", default: "no") == "no")
            let error = expectError(PreferencesError.Code.typeMismatch) { _ = try reader.value(forKey: "flag", as: String.self) }
            #expect(error?.message == "the value for \"flag\" is a Bool, not String")
            #expect(try reader.value(forKey: "missing", as: Int.self) == nil)
        }
    }

    @Test func typedKeysCarryTheirDefault() throws {
        let fontSize = PreferenceKey("fontSize", default: 13)
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            #expect(prefs[fontSize] == 13)
            try prefs.set(15, for: fontSize)
            #expect(try Preferences(location: testLocation(dir))[fontSize] == 15)
            #expect(try prefs.remove(fontSize) == true)
            #expect(prefs[fontSize] == 13)
            #expect(try prefs.remove(fontSize) == false)
        }
    }

    @Test func registeredDefaultsAreReadButNeverWritten() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            prefs.register(defaults: ["theme": "system", "fontSize": 13])
            #expect(prefs.get("theme", default: "none") == "system")
            try prefs.set("dark", forKey: "theme")
            #expect(prefs.get("theme", default: "none") == "dark")
            try prefs.remove("theme")
            #expect(prefs.get("theme", default: "none") == "system")
            try prefs.set(1, forKey: "other")
            let text = String(decoding: try fileBytes(prefs.location.fileURL), as: UTF8.self)
            #expect(!text.contains("fontSize"))
            #expect(!text.contains("theme"))
            let fresh = try Preferences(location: testLocation(dir))
            #expect(fresh.get("fontSize", default: 0) == 0)
            #expect(prefs.keys == ["other"])
        }
    }

    @Test func otherTypesAreAThrownErrorNamingTheType() throws {
        let error = expectError(PreferencesError.Code.unsupportedType) { _ = try PreferenceValue(converting: URL(filePath: "/tmp")) }
        #expect(error?.message.contains("URL") == true)
        expectError(PreferencesError.Code.unsupportedType) { _ = try PreferenceValue(converting: ["ok": 1, "bad": [NSObject()]] as [String: Any]) }
        #expect(try PreferenceValue(converting: ["a": [1, 2], "b": "x"] as [String: Any]) == ["a": [1, 2], "b": "x"])
    }

    @Test func aDateOutsideTheFormatIsRefusedAndChangesNothing() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set("kept", forKey: "a")
            let before = try fileBytes(prefs.location.fileURL)
            expectError(PreferencesError.Code.unsupportedValue) {
                try prefs.set(Date(timeIntervalSince1970: -70_000_000_000), forKey: "ancient")
            }
            #expect(try fileBytes(prefs.location.fileURL) == before)
            #expect(prefs.keys == ["a"])
        }
    }

    @Test func theFileIsTheDocumentedReadableFormat() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.update {
                $0["theme"] = "dark"
                $0["fontSize"] = 13
                $0["zoom"] = 1.25
                $0["window"] = ["width": 800, "height": 600]
                $0["recent"] = ["notes", "todo"]
                $0["avatar"] = .data(Data([0x89, 0x50, 0x4E, 0x47]))
                $0["lastOpened"] = .date(Date(timeIntervalSince1970: 1_763_703_349.25))
            }
            let text = String(decoding: try fileBytes(prefs.location.fileURL), as: UTF8.self)
            #expect(
                text == """
                    {
                      "format": "securestore-preferences",
                      "version": 1,
                      "values": {
                        "avatar": {"$data": "iVBORw=="},
                        "fontSize": 13,
                        "lastOpened": {"$date": "2025-11-21T05:35:49.25Z"},
                        "recent": [
                          "notes",
                          "todo"
                        ],
                        "theme": "dark",
                        "window": {
                          "height": 600,
                          "width": 800
                        },
                        "zoom": 1.25
                      }
                    }

                    """)
        }
    }
}
