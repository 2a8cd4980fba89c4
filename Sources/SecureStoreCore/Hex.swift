// Hexadecimal text: the one encoder and decoder of the product (bytes, secrets in place, UUIDs, ID prefixes).
package import Foundation

/// Lower-case hexadecimal digits of `bytes` written into `output` (two per byte), without an intermediate
/// `String`: for secrets, the caller owns and wipes `output`. Encodes as many whole bytes as `output` holds
/// (every caller sizes it at twice the input) and returns how many; it never writes past `output` and never
/// traps.
@discardableResult
package func writeHex(_ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int {
    let count = min(bytes.count, output.count / 2)
    let digits: StaticString = "0123456789abcdef"
    digits.withUTF8Buffer { table in
        for index in 0..<count {
            let byte = bytes[index]
            output[2 * index] = table[Int(byte >> 4)]
            output[2 * index + 1] = table[Int(byte & 0x0f)]
        }
    }
    return count
}

/// Lower-case hexadecimal text of `bytes` (not for secrets: the `String` cannot be wiped).
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let array = Array(bytes)
    var output = [UInt8](repeating: 0, count: array.count * 2)
    _ = array.withUnsafeBytes { input in output.withUnsafeMutableBytes { writeHex(input, into: $0) } }
    return String(decoding: output, as: UTF8.self)
}

/// The value of one hexadecimal digit (either case), or nil.
package func hexValue(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// Decodes hexadecimal text (either case, even length) into `output`; false on any other character or length.
package func readHex(_ text: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
    guard text.count == output.count * 2 else { return false }
    for index in 0..<output.count {
        guard let high = hexValue(text[2 * index]), let low = hexValue(text[2 * index + 1]) else { return false }
        output[index] = high << 4 | low
    }
    return true
}

/// Whether `bytes` are valid UTF-8, checked in place without making a `String` (for secrets, which must not
/// be copied into memory that is never wiped).
package func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var iterator = bytes.makeIterator()
    var decoder = UTF8()
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return true
        case .error: return false
        }
    }
}

/// Appends the two lower-case hexadecimal digits of `byte` to `output`: for writers that build their output byte
/// by byte (JSON `\u00XX` escapes, IDs in a streamed export).
@inlinable
package func appendHex(_ byte: UInt8, to output: inout [UInt8]) {
    output.append(hexDigit(byte >> 4))
    output.append(hexDigit(byte & 0x0f))
}

/// The lower-case hexadecimal digit of `value` (0...15).
@inlinable
package func hexDigit(_ value: UInt8) -> UInt8 {
    value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
}

/// The bytes that the hexadecimal text `text` (either case, even length) stands for, or nil when it holds any
/// other character or an odd number of digits: nothing is skipped.
package func bytes(fromHex text: some StringProtocol) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var output = [UInt8](repeating: 0, count: digits.count / 2)
    let ok = digits.withUnsafeBytes { input in output.withUnsafeMutableBytes { readHex(input, into: $0) } }
    return ok ? output : nil
}

/// The 16 bytes of a UUID as 32 lower-case hexadecimal digits, without dashes (the IDs the tool shows).
package func hexString(uuid: UUID) -> String {
    withUnsafeBytes(of: uuid.uuid) { hexString($0) }
}

/// The UUID written as 32 hexadecimal digits without dashes (either case), or nil.
package func hexUUID(_ text: some StringProtocol) -> UUID? {
    guard text.utf8.count == 32, let bytes = bytes(fromHex: text) else { return nil }
    var value = UUID().uuid
    withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
    return UUID(uuid: value)
}

/// The range of 16-byte IDs that start with a prefix of hexadecimal digits: every ID `id` with
/// `lower <= id < upper` (no upper bound when the prefix is all `f`), for a `WHERE id >= ? AND id < ?` that uses
/// the index.
package struct HexPrefixRange: Equatable, Sendable {
    /// The prefix's bytes, an odd last digit padded with 0.
    package let lower: [UInt8]
    /// The smallest byte string above every ID with the prefix; nil when the prefix is all `f`.
    package let upper: [UInt8]?
    /// The prefix's digits, lower case, without dashes.
    package let digits: String

    /// Why a text is not an ID prefix.
    package enum Problem: Error, Sendable {
        /// A character that is neither a hexadecimal digit (ASCII, either case) nor a dash.
        case notHex
        /// No digit at all.
        case empty
        /// More digits than an ID has.
        case tooLong
    }

    /// The range of `text`'s digits (dashes ignored, either case), at most `maximumDigits` of them.
    package init(_ text: some StringProtocol, maximumDigits: Int = 32) throws(Problem) {
        var nibbles: [UInt8] = []
        for unit in text.utf8 where unit != UInt8(ascii: "-") {
            guard let value = hexValue(unit) else { throw .notHex }
            nibbles.append(value)
        }
        guard !nibbles.isEmpty else { throw .empty }
        guard nibbles.count <= maximumDigits else { throw .tooLong }
        func bytes(_ nibbles: [UInt8]) -> [UInt8] {
            var padded = nibbles
            if padded.count % 2 == 1 { padded.append(0) }
            return stride(from: 0, to: padded.count, by: 2).map { padded[$0] << 4 | padded[$0 + 1] }
        }
        digits = String(decoding: nibbles.map(hexDigit), as: UTF8.self)
        lower = bytes(nibbles)
        // The prefix plus one in its last digit, carrying; all f has no upper bound.
        var next = nibbles
        var index = next.count - 1
        while index >= 0, next[index] == 0xF {
            next[index] = 0
            index -= 1
        }
        if index < 0 {
            upper = nil
        } else {
            next[index] += 1
            upper = bytes(Array(next[...index]))
        }
    }
}
