// One rule for text shown on a terminal: nothing in a name, key, label or title may act on the terminal or
// break a one-line message.

/// Whether `scalar` must not reach a terminal as it is: a control (C0, DEL, C1), a format character (bidi
/// overrides and isolates, zero-width characters) or a line or paragraph separator.
package func isTerminalControl(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.properties.generalCategory {
    case .control, .format, .lineSeparator, .paragraphSeparator: true
    default: false
    }
}

/// `text` with every scalar that ``isTerminalControl(_:)`` names written as `\u{…}` (upper-case hex), and, with
/// `limit`, cut after that many scalars with `...` added. Everything else is unchanged.
package func escapedForTerminal(_ text: String, limit: Int? = nil) -> String {
    var result = ""
    for (count, scalar) in text.unicodeScalars.enumerated() {
        if let limit, count == limit {
            result += "..."
            break
        }
        if isTerminalControl(scalar) {
            result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}
