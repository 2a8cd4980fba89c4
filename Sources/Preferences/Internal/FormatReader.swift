// A strict, hand-written JSON reader for the file format that reports line and column.
internal import Foundation
internal import SecureStoreCore

/// Why a document could not be read: a description and, for syntax errors, a 1-based line and column.
struct FormatProblem: Error {
    var reason: String
    var line: Int?
    var column: Int?
    /// True when the document is well formed but of a newer format version.
    var newerVersion = false

    var text: String {
        if let line, let column { return "line \(line), column \(column): \(reason)" }
        return reason
    }
}

/// `text` (a key or tag from the file) in double quotes for a message: at most 64 characters, with every
/// scalar that would break the one-line message or that a terminal would act on written as `\u{…}`
/// (controls such as newline and ESC, format characters such as bidi overrides, line separators).
func quoted(_ text: String) -> String {
    "\"" + escapedForTerminal(text, limit: 64) + "\""
}

/// Reads a whole preferences document.
struct FormatReader {
    /// Parses one JSON document (any value: object, array, string, number…) as the file's values are parsed:
    /// integers stay integers, `{"$data": …}` and `{"$date": …}` are the tagged types.
    static func value(_ bytes: [UInt8]) throws(FormatProblem) -> PreferenceValue {
        try bytes.withUnsafeBufferPointer { buffer throws(FormatProblem) in
            var reader = Parser(buffer)
            return try reader.parseDocument()
        }
    }

    /// Parses a whole file into its values, checking the envelope (format name and version).
    static func document(_ bytes: [UInt8]) throws(FormatProblem) -> [String: PreferenceValue] {
        if bytes.isEmpty { throw FormatProblem(reason: "the file is empty (0 bytes)") }
        let root: PreferenceValue
        do {
            root = try bytes.withUnsafeBufferPointer { buffer throws(FormatProblem) in
                var reader = Parser(buffer)
                return try reader.parseDocument()
            }
        }
        guard case .dictionary(let fields) = root else {
            throw FormatProblem(reason: "the document is a JSON \(root.typeName.lowercased()), not an object with \"format\", \"version\" and \"values\"")
        }
        guard case .string(let name)? = fields["format"], name == FileFormat.name else {
            throw FormatProblem(reason: "the document has no \"format\": \"\(FileFormat.name)\" field; it is not a SecureStore preferences file")
        }
        guard case .int(let version)? = fields["version"] else {
            throw FormatProblem(reason: "the document has no integer \"version\" field")
        }
        if version > FileFormat.version {
            var problem = FormatProblem(reason: "the file has format version \(version); this build reads version \(FileFormat.version) and older")
            problem.newerVersion = true
            throw problem
        }
        guard version >= 1 else { throw FormatProblem(reason: "the format version \(version) is not valid") }
        guard case .dictionary(let values)? = fields["values"] else {
            throw FormatProblem(reason: "the document has no \"values\" object")
        }
        // min(), not first: a dictionary's order differs from one run to the next, the message must not.
        if let extra = fields.keys.filter({ !["format", "version", "values"].contains($0) }).min() {
            throw FormatProblem(reason: "the document has an unknown top-level field \(quoted(extra))")
        }
        return values
    }
}

private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        // Tolerate a UTF-8 byte-order mark left by an editor.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
    }

    func problem(_ reason: String, at offset: Int? = nil) -> FormatProblem {
        let end = min(offset ?? index, bytes.count)
        var line = 1
        var column = 1
        var position = 0
        while position < end {
            let byte = bytes[position]
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {  // count characters, not UTF-8 continuation bytes
                column += 1
            }
            position += 1
        }
        return FormatProblem(reason: reason, line: line, column: column)
    }

    mutating func parseDocument() throws(FormatProblem) -> PreferenceValue {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if index < bytes.count { throw problem("unexpected \(describe(bytes[index])) after the end of the document") }
        return value
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return String(format: "byte 0x%02X", byte)
    }

    mutating func parseValue(depth: Int) throws(FormatProblem) -> PreferenceValue {
        guard index < bytes.count else { throw problem("the document ends where a value was expected") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["):
            return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectWord("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectWord("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            throw problem("null is not a supported value; remove the key instead")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        case let byte:
            throw problem("unexpected \(describe(byte)) where a value was expected")
        }
    }

    mutating func expectWord(_ word: StaticString) throws(FormatProblem) {
        let start = index
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
            memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0
        else { throw problem("unexpected text where a value was expected", at: start) }
        index += count
    }

    mutating func parseArray(depth: Int) throws(FormatProblem) -> PreferenceValue {
        if depth > FileFormat.maxDepth { throw problem("values are nested more than \(FileFormat.maxDepth) levels deep") }
        index += 1  // [
        var values: [PreferenceValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(values)
        }
        while true {
            skipWhitespace()
            values.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw problem("the document ends inside an array") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(values)
            case let byte: throw problem("expected ',' or ']' in an array, found \(describe(byte))")
            }
        }
    }

    mutating func parseObject(depth: Int) throws(FormatProblem) -> PreferenceValue {
        if depth > FileFormat.maxDepth { throw problem("values are nested more than \(FileFormat.maxDepth) levels deep") }
        index += 1  // {
        var values: [String: PreferenceValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .dictionary(values)
        }
        var first = true
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw problem("the document ends inside an object") }
            guard bytes[index] == UInt8(ascii: "\"") else {
                throw problem("expected a key in double quotes, found \(describe(bytes[index]))")
            }
            let keyStart = index
            var key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw problem("expected ':' after a key")
            }
            index += 1
            skipWhitespace()
            if key.hasPrefix("$$") {
                key.removeFirst()
            } else if key.hasPrefix("$") {
                guard first else {
                    throw problem("a tagged value (\(quoted(key))) must be the only field of its object", at: keyStart)
                }
                return try parseTagged(key, keyStart: keyStart)
            }
            first = false
            let valueStart = index
            let value = try parseValue(depth: depth)
            if values.updateValue(value, forKey: key) != nil {
                throw problem("the key \(quoted(key)) appears twice in one object", at: valueStart)
            }
            skipWhitespace()
            guard index < bytes.count else { throw problem("the document ends inside an object") }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .dictionary(values)
            case let byte: throw problem("expected ',' or '}' in an object, found \(describe(byte))")
            }
        }
    }

    /// `{"$data": "…"}`, `{"$date": "…"}`, `{"$double": "nan"}`; the key and ':' are already read.
    mutating func parseTagged(_ tag: String, keyStart: Int) throws(FormatProblem) -> PreferenceValue {
        let valueStart = index
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
            throw problem("the value of \(quoted(tag)) must be a string")
        }
        let text = try parseString()
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
            throw problem("a tagged value (\(quoted(tag))) must be the only field of its object")
        }
        index += 1
        switch tag {
        case FileFormat.dataTag:
            guard let data = Data(base64Encoded: text) else {
                throw problem("the \"$data\" value is not valid base64", at: valueStart)
            }
            return .data(data)
        case FileFormat.dateTag:
            guard let date = ISODate.parse(text) else {
                throw problem("the \"$date\" value is not a UTC date like 2026-01-31T12:00:00Z", at: valueStart)
            }
            return .date(date)
        case FileFormat.doubleTag:
            switch text {
            case "nan": return .double(.nan)
            case "inf": return .double(.infinity)
            case "-inf": return .double(-.infinity)
            default: throw problem("the \"$double\" value must be \"nan\", \"inf\" or \"-inf\"", at: valueStart)
            }
        default:
            throw problem("unknown tag \(quoted(tag)); a key that begins with '$' is written as \(quoted("$" + tag))", at: keyStart)
        }
    }

    mutating func parseNumber() throws(FormatProblem) -> PreferenceValue {
        let start = index
        var isDouble = false
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func isDigit(_ i: Int) -> Bool { i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }
        guard isDigit(index) else { throw problem("a '-' must be followed by digits", at: start) }
        if bytes[index] == 0x30 {
            index += 1
            if isDigit(index) { throw problem("numbers must not have leading zeros", at: start) }
        } else {
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isDouble = true
            index += 1
            guard isDigit(index) else { throw problem("a '.' in a number must be followed by digits", at: start) }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isDouble = true
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { throw problem("an exponent must have digits", at: start) }
            while isDigit(index) { index += 1 }
        }
        let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
        if isDouble {
            guard let value = Double(String(decoding: slice, as: UTF8.self)), value.isFinite else {
                throw problem("the number is out of the range of a Double", at: start)
            }
            return .double(value)
        }
        var value = 0
        let negative = slice[0] == UInt8(ascii: "-")
        for byte in slice.dropFirst(negative ? 1 : 0) {
            let digit = Int(byte &- 0x30)
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) =
                negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !overflow1, !overflow2 else {
                throw problem("the integer is out of the range of Int (write it with a '.0' to store a Double)", at: start)
            }
            value = next
        }
        return .int(value)
    }

    mutating func parseString() throws(FormatProblem) -> String {
        let start = index
        index += 1  // opening quote
        let contentStart = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[contentStart..<index])
                index += 1
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw problem("the string is not valid UTF-8", at: start)
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw problem("a control character must be escaped inside a string") }
            index += 1
        }
        guard index < bytes.count else { throw problem("the document ends inside a string", at: start) }
        // Slow path: build the bytes with escapes decoded.
        var out = Array(UnsafeBufferPointer(rebasing: bytes[contentStart..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw problem("the string is not valid UTF-8", at: start)
                }
                return text
            }
            if byte < 0x20 { throw problem("a control character must be escaped inside a string") }
            if byte != UInt8(ascii: "\\") {
                out.append(byte)
                index += 1
                continue
            }
            let escapeStart = index
            index += 1
            guard index < bytes.count else { break }
            let escaped = bytes[index]
            index += 1
            switch escaped {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4(at: escapeStart)
                if (0xD800..<0xDC00).contains(scalar) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                    else { throw problem("a \\u escape holds an unpaired surrogate", at: escapeStart) }
                    index += 2
                    let low = try hex4(at: escapeStart)
                    guard (0xDC00..<0xE000).contains(low) else {
                        throw problem("a \\u escape holds an unpaired surrogate", at: escapeStart)
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw problem("a \\u escape holds an unpaired surrogate", at: escapeStart)
                }
                out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default:
                throw problem("unknown escape: '\\' followed by \(describe(escaped))", at: escapeStart)
            }
        }
        throw problem("the document ends inside a string", at: start)
    }

    mutating func hex4(at escapeStart: Int) throws(FormatProblem) -> UInt32 {
        guard index + 4 <= bytes.count else { throw problem("a \\u escape needs four hex digits", at: escapeStart) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw problem("a \\u escape needs four hex digits", at: escapeStart)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }
}
