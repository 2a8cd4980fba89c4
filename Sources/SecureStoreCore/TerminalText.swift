// One rule for text shown on a terminal: nothing in a name, key, label or title may act on the terminal, break a
// one-line message or reorder what is shown. The same rule refuses such text where a person types a name or a
// title (``TextProblem``), and escapes it where text from elsewhere is shown (``escapedForTerminal(_:limit:)``).

/// Whether `scalar` must not reach a terminal as it is: a control (C0, DEL, C1), a line or paragraph separator, or
/// a format character (bidi overrides, embeddings, isolates and marks, zero-width spaces, the byte order mark,
/// invisible tag characters) — all but the zero-width joiner and non-joiner (U+200D, U+200C), which emoji
/// sequences and several scripts need and which move or hide nothing.
package func isTerminalControl(_ scalar: Unicode.Scalar) -> Bool {
    if scalar.value == 0x200C || scalar.value == 0x200D { return false }
    switch scalar.properties.generalCategory {
    case .control, .format, .lineSeparator, .paragraphSeparator: return true
    default: return false
    }
}

/// What makes a text unfit for a one-line name or title (``isTerminalControl(_:)``), found by ``textProblem(_:allowingTab:)``.
package enum TextProblem: Equatable, Sendable {
    /// U+0000.
    case nul
    /// A line break: LF, VT, FF, CR, NEL, U+2028, U+2029.
    case lineBreak
    /// Another control character (C0, DEL, C1).
    case control(Unicode.Scalar)
    /// A format character: a bidi override, isolate or mark, a zero-width space, a tag character….
    case format(Unicode.Scalar)

    /// `U+202E`: the code point of the scalar at fault, for messages (nil for NUL and line breaks).
    package var codePoint: String? {
        switch self {
        case .control(let scalar), .format(let scalar):
            let hex = String(scalar.value, radix: 16, uppercase: true)
            return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        case .nul, .lineBreak: return nil
        }
    }
}

/// The first reason `text` cannot be a one-line name or title, or nil: the one rule for text a person gives the
/// product to show later (task titles, attachment names). A tab is allowed where `allowingTab`.
package func textProblem(_ text: String, allowingTab: Bool) -> TextProblem? {
    for scalar in text.unicodeScalars {
        switch scalar.value {
        case 0x20...0x7E: continue
        case 0x09 where allowingTab: continue
        case 0x00: return .nul
        case 0x0A...0x0D, 0x85, 0x2028, 0x2029: return .lineBreak
        default:
            guard isTerminalControl(scalar) else { continue }
            return scalar.properties.generalCategory == .format ? .format(scalar) : .control(scalar)
        }
    }
    return nil
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
