// Dates as whole microseconds since 1970: how the product stores every date, in one place.
package import Foundation

/// Whole microseconds since 1970-01-01 00:00:00 UTC for `date`: rounded to the nearest, clamped to the range of
/// `Int64` (dates beyond about ±292 000 years), and 0 for a date that is not a number (NaN) instead of a trap.
package func microsecondsSince1970(_ date: Date) -> Int64 {
    let value = (date.timeIntervalSince1970 * 1_000_000).rounded()
    if value.isNaN { return 0 }
    if value >= 9.2e18 { return .max }
    if value <= -9.2e18 { return .min }
    return Int64(value)
}

/// The date `micros` microseconds after 1970-01-01 00:00:00 UTC, split so that whole seconds keep their
/// precision.
package func dateFromMicroseconds(_ micros: Int64) -> Date {
    let parts = micros.quotientAndRemainder(dividingBy: 1_000_000)
    return Date(timeIntervalSince1970: Double(parts.quotient) + Double(parts.remainder) / 1_000_000)
}
