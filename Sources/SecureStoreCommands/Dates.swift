// One date grammar for every option that takes a date (`prefs set --date`, `db keys prune --before`).
internal import Foundation
internal import SecureStoreCore

/// What a date option accepts, for help texts and usage errors.
let dateGrammar = "a date such as 2026-11-23 (midnight UTC), 2026-11-23T16:15:02Z or 2026-11-23T16:15:02.250+01:00"

/// `text` as a date, in the one grammar of the tool's date options: a calendar day `YYYY-MM-DD` (midnight UTC), or an
/// RFC 3339 date and time with `T`, seconds, optional fractional seconds and a zone (`Z` or `±HH:MM`). Nil for
/// anything else (a day alone with a zone, a time without one, a week date).
func parseDate(_ text: String) -> Date? {
    let day = #/[0-9]{4}-[0-9]{2}-[0-9]{2}/#
    let dateTime = #/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})/#
    if text.wholeMatch(of: day) != nil { return dateFromRFC3339(text + "T00:00:00Z") }
    guard text.wholeMatch(of: dateTime) != nil else { return nil }
    return dateFromRFC3339(text)
}
