// Hexadecimal text: the one encoder and decoder of the product.

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
