// ISO-8601 UTC dates that round-trip a `Date` exactly: "2026-11-21T05:35:49.25Z". The calendar is Core's
// (Timestamps.swift); the shortest exact fraction is this file's own, as preferences keep a `Date` bit for bit.
internal import Foundation
internal import SecureStoreCore

enum ISODate {
    /// Seconds from 1970-01-01 to 2001-01-01, Foundation's reference date.
    private static let referenceOffset = 978_307_200
    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z in Unix seconds (Foundation's distantPast is 0000-12-30).
    private static let minUnix = -62_167_219_200
    private static let maxUnix = 253_402_300_799

    /// Formats `date` in UTC with the shortest fraction that reads back as the same `Date`.
    static func format(_ date: Date) throws -> String {
        let interval = date.timeIntervalSinceReferenceDate
        guard let unix = unixSeconds(interval) else {
            throw PreferencesError(
                .unsupportedValue,
                "a date outside the years 0000–9999 cannot be stored in preferences"
            )
        }
        let fraction: String?
        if interval < 0 && interval > -1 {
            // 1 + interval (the fraction of the second 2000-12-31T23:59:59) is not exact here: a tiny
            // negative interval would round to 1.0 and be written as ":59.0", a second off. Write the
            // decimal complement of |interval|'s shortest digits instead; `parse` undoes it exactly.
            fraction = complement(fractionDigits(-interval))
        } else {
            // Exact (Sterbenz): interval and its floor are within a factor of two of each other.
            let part = interval - interval.rounded(.down)
            fraction = part > 0 ? fractionDigits(part) : nil
        }
        let days = floorDiv(unix, 86_400)
        let secondsOfDay = unix - days * 86_400
        let (year, month, day) = civilDate(fromDays: Int64(days))
        var text = pad(Int(year), 4) + "-" + pad(Int(month), 2) + "-" + pad(Int(day), 2) + "T"
        text += pad(secondsOfDay / 3600, 2) + ":" + pad(secondsOfDay / 60 % 60, 2) + ":" + pad(secondsOfDay % 60, 2)
        if let fraction { text += "." + fraction }
        return text + "Z"
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SS[.fraction]Z`; `nil` for anything else.
    static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), b.last == UInt8(ascii: "Z"),
            let year = number(b, 0, 4), let month = number(b, 5, 2), let day = number(b, 8, 2),
            let hour = number(b, 11, 2), let minute = number(b, 14, 2), let second = number(b, 17, 2),
            year >= 0, (1...12).contains(month), day >= 1, day <= daysIn(month: Int64(month), year: Int64(year)),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var digits = ""
        var fraction = 0.0
        if b.count > 20 {
            guard b[19] == UInt8(ascii: "."), b.count > 21 else { return nil }
            let bytes = b[20..<(b.count - 1)]
            guard bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            digits = String(decoding: bytes, as: UTF8.self)
            guard let value = Double("0." + digits) else { return nil }
            fraction = value
        } else if b.count != 20 {
            return nil
        }
        let unix = Int(days(fromYear: Int64(year), month: Int64(month), day: Int64(day))) * 86_400 + hour * 3600 + minute * 60 + second
        let whole = unix - referenceOffset
        let interval: Double
        if whole == -1 && fraction > 0 {
            // The second before the reference date: -(1 - 0.digits), computed in decimal, is exact
            // where -1 + fraction would not be (see `format`).
            guard let magnitude = Double("0." + complement(digits)) else { return nil }
            interval = -magnitude
        } else {
            // whole + fraction is exact for any value `format` wrote (it is the original interval).
            interval = Double(whole) + fraction
        }
        // A hand-written fraction can round up to the next second: 9999-12-31T23:59:59.99999999Z is
        // 10000-01-01T00:00:00Z as a Date. Refuse what `format` would refuse, or a file that reads could
        // never be written again (every set would fail on this value).
        guard unixSeconds(interval) != nil else { return nil }
        return Date(timeIntervalSinceReferenceDate: interval)
    }

    /// The whole Unix seconds of `interval` (rounded down) when it lies in the years 0000 through 9999,
    /// the range both `format` and `parse` accept; nil otherwise.
    private static func unixSeconds(_ interval: TimeInterval) -> Int? {
        // Near Int.max the sum would overflow (and trap): Date(timeIntervalSinceReferenceDate: 9.2e18).
        guard interval.isFinite, let whole = Int(exactly: interval.rounded(.down)) else { return nil }
        let (unix, overflow) = whole.addingReportingOverflow(referenceOffset)
        return !overflow && unix >= minUnix && unix <= maxUnix ? unix : nil
    }

    private static func number(_ b: [UInt8], _ start: Int, _ count: Int) -> Int? {
        var value = 0
        for index in start..<(start + count) {
            let digit = Int(b[index]) - 0x30
            guard digit >= 0, digit <= 9 else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    private static func floorDiv(_ a: Int, _ b: Int) -> Int {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }

    /// The digits after "0." of 1 − 0.`digits`, computed in decimal, without trailing zeros: "25" → "75",
    /// "001" → "999". Its own inverse for digits that end in a non-zero digit; `digits` must not be all zeros.
    private static func complement(_ digits: String) -> String {
        var values = digits.utf8.map { Int($0) - 0x30 }
        while values.last == 0 { values.removeLast() }
        // 10^n − D: subtract the last digit from 10 and every other one from 9 (D's last digit is not 0).
        for index in values.indices { values[index] = (index == values.count - 1 ? 10 : 9) - values[index] }
        while values.last == 0 { values.removeLast() }
        return String(decoding: values.map { UInt8($0 + 0x30) }, as: UTF8.self)
    }

    /// The digits after "0." of the shortest decimal that reads back as `fraction` (0 < fraction < 1).
    private static func fractionDigits(_ fraction: Double) -> String {
        // `description` is the shortest round-trip form, e.g. "0.25" or "1.1920928955078125e-07".
        let text = fraction.description
        let parts = text.split(separator: "e", maxSplits: 1)
        let mantissa = parts[0]
        let exponent = parts.count > 1 ? Int(parts[1])! : 0
        let pieces = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        let integerPart = String(pieces[0])
        let fractionPart = pieces.count > 1 ? String(pieces[1]) : ""
        // value = integerPart.fractionPart × 10^exponent, with 0 < value < 1.
        var digits = integerPart + fractionPart
        var pointPosition = integerPart.count + exponent  // digits before the decimal point
        while pointPosition < 0 {
            digits = "0" + digits
            pointPosition += 1
        }
        var after = String(digits.dropFirst(pointPosition))
        while after.hasSuffix("0") { after.removeLast() }
        return after.isEmpty ? "0" : after
    }
}
