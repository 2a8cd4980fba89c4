// Size limits are enforced at set time; a refused set changes nothing in memory or on disk.
import Foundation
import TestSupport
import Testing
@testable import Preferences

@Suite("Size limits")
struct LimitTests {
    @Test func aTooLongKeyIsRefusedAndChangesNothing() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set("before", forKey: "existing")
            let before = try fileBytes(prefs.location.fileURL)
            let key = String(repeating: "k", count: 300)
            let error = expectError(PreferencesError.Code.limitExceeded) { try prefs.set(1, forKey: key) }
            #expect(
                error?.message == "the key \"\(String(repeating: "k", count: 61))...\" is 300 bytes long, over the "
                    + "key-length limit of 256 bytes; nothing was changed")
            #expect(try fileBytes(prefs.location.fileURL) == before)
            #expect(prefs.keys == ["existing"])
        }
    }

    /// Found in review: the writer accepted values nested deeper than the reader reads, so one set made
    /// the domain unreadable for every other process.
    @Test func aTooDeeplyNestedValueIsRefusedAndTheDeepestAllowedOneReadsBack() throws {
        func nested(_ levels: Int, bottom: PreferenceValue) -> PreferenceValue {
            var value = bottom
            for level in 0..<levels { value = level % 2 == 0 ? .array([value]) : .dictionary(["k": value]) }
            return value
        }
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set("before", forKey: "existing")
            let before = try fileBytes(prefs.location.fileURL)
            let limit = Preferences.maximumNesting
            let error = expectError(PreferencesError.Code.limitExceeded) { try prefs.set(nested(limit + 1, bottom: 1), forKey: "deep") }
            #expect(error?.message == "the value for \"deep\" is nested more than \(limit) levels deep, over the nesting limit of \(limit); nothing was changed")
            #expect(try fileBytes(prefs.location.fileURL) == before)
            #expect(prefs.keys == ["existing"])
            // A value far deeper than the limit is refused the same way, without deep recursion.
            expectError(PreferencesError.Code.limitExceeded) { try prefs.set(nested(1_000, bottom: 1), forKey: "deeper") }

            // At the limit, with tagged values (Data, Date) at the bottom, a fresh handle reads it back.
            let deepest = nested(limit, bottom: .array([.data(Data([1, 2])), .date(Date(timeIntervalSince1970: 5))]))
            #expect(Preferences.nestingDepth(deepest, stoppingAfter: limit + 5) == limit + 1)
            let atLimit = nested(limit - 1, bottom: .array([.data(Data([1, 2])), .date(Date(timeIntervalSince1970: 5))]))
            try prefs.set(atLimit, forKey: "deep")
            let fresh = try Preferences(location: testLocation(dir))
            #expect(fresh.value(forKey: "deep") == atLimit)
        }
    }

    @Test func aTooLargeValueIsRefusedNamingKeySizeAndLimit() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            try prefs.set("small", forKey: "thumbnail")
            let before = try fileBytes(prefs.location.fileURL)
            let big = String(repeating: "x", count: 40_000)
            let error = expectError(PreferencesError.Code.limitExceeded) { try prefs.set(big, forKey: "thumbnail") }
            // 40 000 characters plus two quotes.
            #expect(
                error?.message == "the value for \"thumbnail\" is 40002 bytes, over the per-value limit of 32768 bytes; "
                    + "nothing was changed")
            #expect(error?.message.contains("xxxx") == false)
            #expect(try fileBytes(prefs.location.fileURL) == before)
            #expect(prefs.get("thumbnail", default: "") == "small")
            #expect(try Preferences(location: testLocation(dir)).get("thumbnail", default: "") == "small")
        }
    }

    @Test func fiftyMebibytesIsRefused() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            expectError(PreferencesError.Code.limitExceeded) { try prefs.set(Data(count: 50 * 1024 * 1024), forKey: "huge") }
            #expect(!FileManager.default.fileExists(atPath: prefs.location.fileURL.path))
            #expect(prefs.keys.isEmpty)
        }
    }

    @Test func theHardTotalIsEnforcedAndChangesNothing() throws {
        try withTemporaryDirectory { dir in
            let limits = PreferencesLimits(maxValueSize: 1000, softTotalSize: 2000, hardTotalSize: 3000)
            let prefs = try Preferences(location: testLocation(dir), limits: limits)
            for index in 0..<3 { try prefs.set(String(repeating: "a", count: 900), forKey: "k\(index)") }
            let before = try fileBytes(prefs.location.fileURL)
            let valuesBefore = prefs.storedValues
            let error = expectError(PreferencesError.Code.limitExceeded) { try prefs.set(String(repeating: "b", count: 500), forKey: "k3") }
            // Each entry is 2 key bytes + 902 value bytes; three are 2712, a fourth of 2 + 502 makes 3216.
            #expect(
                error?.message == "setting \"k3\" (502 bytes) would make the preferences total 3216 bytes, over the "
                    + "hard limit of 3000 bytes; nothing was changed")
            #expect(try fileBytes(prefs.location.fileURL) == before)
            #expect(prefs.storedValues == valuesBefore)
            // Shrinking and removing stay possible.
            try prefs.set("short", forKey: "k0")
            try prefs.set(String(repeating: "b", count: 500), forKey: "k3")
            #expect(prefs.usage.totalSize == 2 + 7 + 2 * (2 + 902) + 2 + 502)
        }
    }

    @Test func aBatchUpdateOverTheLimitWritesNothing() throws {
        try withTemporaryDirectory { dir in
            let limits = PreferencesLimits(maxValueSize: 1000, softTotalSize: 2000, hardTotalSize: 3000)
            let prefs = try Preferences(location: testLocation(dir), limits: limits)
            try prefs.set(1, forKey: "kept")
            let before = try fileBytes(prefs.location.fileURL)
            expectError(PreferencesError.Code.limitExceeded) {
                try prefs.update { values in
                    for index in 0..<5 { values["big\(index)"] = .string(String(repeating: "z", count: 990)) }
                }
            }
            #expect(try fileBytes(prefs.location.fileURL) == before)
            #expect(prefs.keys == ["kept"])
        }
    }

    @Test func theSoftLimitWarnsWithAValueTheCallerCanRead() throws {
        try withTemporaryDirectory { dir in
            let limits = PreferencesLimits(maxValueSize: 1000, softTotalSize: 1500, hardTotalSize: 3000)
            let prefs = try Preferences(location: testLocation(dir), limits: limits)
            let first = try prefs.set(String(repeating: "a", count: 900), forKey: "one")
            #expect(first == nil)
            #expect(prefs.usage.isAboveSoftLimit == false)
            let second = try prefs.set(String(repeating: "a", count: 900), forKey: "two")
            #expect(second?.key == "two")
            #expect(second?.totalSize == 2 * (3 + 902))
            #expect(second?.softLimit == 1500)
            #expect(second?.description.contains("above the soft limit of 1500 bytes") == true)
            #expect(prefs.usage.isAboveSoftLimit)
            #expect(prefs.get("two", default: "").count == 900)
        }
    }

    @Test func catchByCodeWorks() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir), limits: PreferencesLimits(maxValueSize: 10))
            var caught = "nothing"
            do {
                try prefs.set("this is longer than ten bytes", forKey: "k")
            } catch PreferencesError.Code.damagedFile {
                caught = "damaged"
            } catch PreferencesError.Code.limitExceeded {
                caught = "limit"
            } catch {
                caught = "other"
            }
            #expect(caught == "limit")
        }
    }

    @Test func anEmptyKeyIsRefused() throws {
        try withTemporaryDirectory { dir in
            let prefs = try Preferences(location: testLocation(dir))
            expectError(PreferencesError.Code.invalidKey) { try prefs.set(1, forKey: "") }
            #expect(!FileManager.default.fileExists(atPath: prefs.location.fileURL.path))
        }
    }

    @Test func defaultLimitsAreTheDocumentedOnes() {
        let limits = PreferencesLimits.default
        #expect(limits.maxKeyLength == 256)
        #expect(limits.maxValueSize == 32 * 1024)
        #expect(limits.softTotalSize == 100 * 1024)
        #expect(limits.hardTotalSize == 512 * 1024)
    }
}

@Suite("Size accounting")
struct SizeAccountingTests {
    /// The size limits count the compact encoding; check the counter against the writer for every kind.
    @Test func countedSizesMatchTheCompactText() throws {
        let values: [PreferenceValue] = [
            true, false, 0, -123, .int(.min), 1.5, .double(.nan), "", "quote\"back\\slash\nnl\u{1}ctl é 日本",
            .data(Data()), .data(Data([1])), .data(Data([1, 2])), .data(Data([1, 2, 3])), .data(Data(count: 1000)),
            .date(Date(timeIntervalSince1970: 0.5)), [], [1, "two", [3.0]], [:], ["$k": 1, "b": ["c": [true]]],
        ]
        for value in values {
            #expect(try FormatWriter.compactSize(value) == FormatWriter.compact(value).utf8.count, "\(value)")
        }
    }
}
