// RFC 3339 dates in UTC: the one formatter and parser of the product (no ISO8601DateFormatter), and the one
// proleptic Gregorian calendar (Howard Hinnant's days-from-civil and civil-from-days) that Preferences' exact
// dates use too.
package import Foundation

/// The year, month and day of the day `days` after 1970-01-01 (proleptic Gregorian; any `Int64`-sized count).
package func civilDate(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
}

/// The days from 1970-01-01 to `year`-`month`-`day` (proleptic Gregorian; the inverse of ``civilDate(fromDays:)``).
package func days(fromYear year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

/// The number of days of `month` (1–12) in `year`.
package func daysIn(month: Int64, year: Int64) -> Int64 {
    switch month {
    case 2: (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
    case 4, 6, 9, 11: 30
    default: 31
    }
}

/// `date` as every timestamp of the tool's `--json` output is written (``appendTimestamp(_:to:fraction:)``:
/// RFC 3339, UTC, six fractional digits), rounded to the microsecond: a task's `createdAt`, an attachment's, a
/// key's `retiredAt`.
package func timestampText(_ date: Date) -> String {
    var bytes: [UInt8] = []
    appendTimestamp(microsecondsSince1970(date), to: &bytes)
    return String(decoding: bytes, as: UTF8.self)
}

/// `date` in RFC 3339, UTC, to the whole second (rounded down): `2026-11-23T16:15:02Z`, as key names and
/// listings carry dates.
package func timestampTextInSeconds(_ date: Date) -> String {
    var bytes: [UInt8] = []
    appendTimestamp(microsecondsSince1970(date), to: &bytes, fraction: false)
    return String(decoding: bytes, as: UTF8.self)
}

/// RFC 3339 in UTC with six fractional digits (the stored precision, so an export imports back equal):
/// `2026-11-23T17:19:34.123456Z`; without `fraction`, to the second (rounded down). Every 64-bit count of
/// microseconds has a form: a year outside 0000–9999 (beyond RFC 3339, which has four digits) is written as
/// ISO 8601's expanded year, a sign and six digits (`+294247-01-10T04:00:54.775807Z`,
/// `-290308-12-21T19:59:05.224192Z`), which ``parseRFC3339(_:)-(String)`` reads.
package func appendTimestamp(_ microseconds: Int64, to out: inout [UInt8], fraction: Bool = true) {
    // Floor division (no overflow at Int64.min: the quotient is far from the limits).
    var seconds = microseconds / 1_000_000
    var micro = microseconds % 1_000_000
    if micro < 0 {
        micro += 1_000_000
        seconds -= 1
    }
    var days = seconds / 86_400
    var secondOfDay = seconds % 86_400
    if secondOfDay < 0 {
        secondOfDay += 86_400
        days -= 1
    }
    let (year, month, day) = civilDate(fromDays: days)
    func digits(_ value: Int64, _ width: Int) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var value = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            value %= divisor
            divisor /= 10
        }
    }
    if (0...9_999).contains(year) {
        digits(year, 4)
    } else {
        out.append(year < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
        digits(year.magnitude > 999_999 ? 999_999 : Int64(year.magnitude), 6)
    }
    out.append(UInt8(ascii: "-"))
    digits(month, 2)
    out.append(UInt8(ascii: "-"))
    digits(day, 2)
    out.append(UInt8(ascii: "T"))
    digits(secondOfDay / 3_600, 2)
    out.append(UInt8(ascii: ":"))
    digits(secondOfDay / 60 % 60, 2)
    out.append(UInt8(ascii: ":"))
    digits(secondOfDay % 60, 2)
    if fraction {
        out.append(UInt8(ascii: "."))
        digits(micro, 6)
    }
    out.append(UInt8(ascii: "Z"))
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` to microseconds since 1970 (fractions beyond six digits are
/// cut), or nil. The year may also be ISO 8601's expanded form, a sign and six digits (`+294247`, `-000001`),
/// which ``appendTimestamp(_:to:fraction:)`` writes for years outside 0000–9999; a date beyond the 64-bit range
/// of microseconds, or a day its month does not have, is nil.
package func parseRFC3339(_ text: String) -> Int64? {
    var text = text
    return text.withUTF8 { parseRFC3339($0) }
}

/// ``parseRFC3339(_:)-(String)`` on the bytes of the text.
package func parseRFC3339(_ b: UnsafeBufferPointer<UInt8>) -> Int64? {
    func number(_ range: Range<Int>) -> Int64? {
        guard range.upperBound <= b.count else { return nil }
        var value: Int64 = 0
        for i in range {
            guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
            value = value * 10 + Int64(b[i] - 0x30)
        }
        return value
    }
    guard !b.isEmpty else { return nil }
    let expanded = b[0] == UInt8(ascii: "+") || b[0] == UInt8(ascii: "-")
    // p: the index of the '-' after the year.
    let p = expanded ? 7 : 4
    guard b.count >= p + 16, let digits = number((expanded ? 1 : 0)..<p), b[p] == UInt8(ascii: "-"),
        b[p + 3] == UInt8(ascii: "-"),
        b[p + 6] == UInt8(ascii: "T") || b[p + 6] == UInt8(ascii: "t") || b[p + 6] == UInt8(ascii: " "),
        b[p + 9] == UInt8(ascii: ":"), b[p + 12] == UInt8(ascii: ":"),
        let month = number((p + 1)..<(p + 3)), let day = number((p + 4)..<(p + 6)), let hour = number((p + 7)..<(p + 9)),
        let minute = number((p + 10)..<(p + 12)), let second = number((p + 13)..<(p + 15)),
        (1...12).contains(month), hour < 24, minute < 60, second < 61
    else { return nil }
    let year = b[0] == UInt8(ascii: "-") ? -digits : digits
    guard day >= 1, day <= daysIn(month: month, year: year) else { return nil }
    var index = p + 15
    var micro: Int64 = 0
    if index < b.count, b[index] == UInt8(ascii: ".") {
        index += 1
        var count = 0
        while index < b.count, b[index] >= 0x30 && b[index] <= 0x39 {
            if count < 6 { micro = micro * 10 + Int64(b[index] - 0x30) }
            count += 1
            index += 1
        }
        guard count > 0 else { return nil }
        for _ in count..<max(count, 6) { micro *= 10 }
    }
    guard index < b.count else { return nil }
    var offset: Int64 = 0
    switch b[index] {
    case UInt8(ascii: "Z"), UInt8(ascii: "z"):
        index += 1
    case UInt8(ascii: "+"), UInt8(ascii: "-"):
        guard index + 6 == b.count, b[index + 3] == UInt8(ascii: ":"), let h = number(index + 1..<index + 3),
            let m = number(index + 4..<index + 6)
        else { return nil }
        offset = (h * 3_600 + m * 60) * (b[index] == UInt8(ascii: "+") ? 1 : -1)
        index += 6
    default: return nil
    }
    guard index == b.count else { return nil }
    // With at most six digits of year nothing here comes near Int64's limits.
    let seconds = days(fromYear: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second - offset
    // seconds × 10⁶ + micro, where it fits: for a negative second with a fraction, (seconds + 1) × 10⁶ minus the
    // rest, so that the earliest microsecond (Int64.min) is reached without passing beyond it.
    let whole = micro > 0 && seconds < 0 ? seconds + 1 : seconds
    let (scaled, overflow) = whole.multipliedReportingOverflow(by: 1_000_000)
    guard !overflow else { return nil }
    let (result, overflowAdding) = scaled.addingReportingOverflow(micro > 0 && seconds < 0 ? micro - 1_000_000 : micro)
    return overflowAdding ? nil : result
}

/// The date of an RFC 3339 text (``parseRFC3339(_:)-(String)``), to the microsecond; nil for anything else.
package func dateFromRFC3339(_ text: String) -> Date? {
    parseRFC3339(text).map(dateFromMicroseconds)
}
