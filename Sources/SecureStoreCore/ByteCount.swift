// Byte counts as people read them: one rule for every message and listing.
/// A byte count for a person, the one rule for every message and listing: `812 bytes`, `97.7 KiB`, `1 MiB`,
/// `293 KiB` (1024-based units; one decimal below 100, none from 100 up; a trailing `.0` left out).
package func byteCountText(_ bytes: Int64) -> String {
    if bytes < 1024 { return "\(bytes) bytes" }
    let units = ["KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes) / 1024
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    let tenths = (value * 10).rounded()
    let number =
        value >= 100 || tenths.truncatingRemainder(dividingBy: 10) == 0
        ? String(Int(value >= 100 ? value.rounded() : tenths / 10)) : String(tenths / 10)
    return number + " " + units[unit]
}
