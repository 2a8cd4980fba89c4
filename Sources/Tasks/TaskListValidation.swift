// Checks of what a person types: task titles and ID prefixes.
internal import Foundation
internal import SecureStore
internal import SecureStoreCore

extension TaskList {
    /// The longest title, in characters (grapheme clusters), after trimming.
    public static let maximumTitleLength = 1000

    /// `title` trimmed of white space and line breaks at both ends, or an error that says what is wrong.
    ///
    /// A title is one line of text of 1 to ``maximumTitleLength`` characters: it may not be empty (or only
    /// white space), and may not contain NUL, line breaks, other control characters (a tab is allowed) or
    /// invisible format characters such as bidi overrides (the zero-width joiner of emoji sequences is allowed),
    /// so that it prints safely, and as it reads, on one line of a terminal.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidArgument``.
    public static func validatedTitle(_ title: String) throws -> String {
        if isPlainASCIITitle(title) { return title }
        let scalars = title.unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, scalars[start].properties.isWhitespace { start = scalars.index(after: start) }
        while start < end, scalars[scalars.index(before: end)].properties.isWhitespace {
            end = scalars.index(before: end)
        }
        guard start < end else {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                title.isEmpty ? "a task title cannot be empty" : "a task title cannot be only white space")
        }
        let trimmed = start == scalars.startIndex && end == scalars.endIndex ? title : String(scalars[start..<end])
        // Core's one rule for names and titles (``textProblem(_:allowingTab:)``).
        switch textProblem(trimmed, allowingTab: true) {
        case nil: break
        case .nul:
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a task title cannot contain a NUL character")
        case .lineBreak:
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a task title must be one line: it contains a line break")
        case let problem?:
            let kind = if case .format = problem {
                "invisible formatting characters such as bidirectional overrides, which reorder what a terminal shows"
            } else {
                "control characters"
            }
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "a task title cannot contain \(kind) (found \(problem.codePoint ?? ""))")
        }
        // Characters are at most as many as UTF-8 bytes: count them only when the bytes exceed the limit.
        if trimmed.utf8.count > maximumTitleLength {
            let length = trimmed.count
            if length > maximumTitleLength {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidArgument,
                    "a task title can be at most \(maximumTitleLength) characters long; this one has \(length)")
            }
        }
        return trimmed
    }

    /// Whether `title` is 1 to ``maximumTitleLength`` printable ASCII characters (U+0020–U+007E) that neither start
    /// nor end with a space: a title the full check below returns unchanged (in that range only the space is white
    /// space, and nothing is a control or format character), decided from the UTF-8 bytes without Unicode
    /// properties. Anything else takes the full check.
    private static func isPlainASCIITitle(_ title: String) -> Bool {
        let plain = title.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let first = bytes.first, let last = bytes.last, bytes.count <= maximumTitleLength,
                first != 0x20, last != 0x20
            else { return false }
            for byte in bytes where byte < 0x20 || byte > 0x7E { return false }
            return true
        }
        return plain ?? false
    }

    /// The ID range `[lower, upper)` of the IDs that start with the hex digits of `prefix` (dashes ignored,
    /// either case); `upper` is `nil` when the prefix is all `f`. Throws for anything that is not 1–32 hex
    /// digits.
    static func idRange(prefix: String) throws -> (lower: [UInt8], upper: [UInt8]?, digits: String) {
        do throws(HexPrefixRange.Problem) {
            let range = try HexPrefixRange(prefix)
            return (range.lower, range.upper, range.digits)
        } catch .notHex {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "'\(prefix.prefix(40))' is not a task ID or ID prefix: use hexadecimal digits 0-9 and a-f")
        } catch .empty {
            throw SecureStoreError(SecureStoreError.Code.invalidArgument, "a task ID prefix needs at least one hexadecimal digit")
        } catch {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument, "'\(prefix.prefix(40))…' is too long for a task ID: an ID has 32 hexadecimal digits")
        }
    }
}
