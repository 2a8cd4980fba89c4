// Base64 (RFC 4648, with padding) over raw buffers, so that secrets are encoded and decoded straight
// between wiped buffers without passing through `Data` or `String`.

private let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

private let decodeTable: [UInt8] = {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
    return table
}()

enum Base64 {
    /// The length of the encoding of `count` bytes.
    static func encodedCount(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Encodes `input` into `output`, which must hold exactly `encodedCount(input.count)` bytes.
    static func encode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        var out = 0
        var index = 0
        while index + 3 <= input.count {
            let value = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output[out] = alphabet[Int(value >> 18 & 63)]
            output[out + 1] = alphabet[Int(value >> 12 & 63)]
            output[out + 2] = alphabet[Int(value >> 6 & 63)]
            output[out + 3] = alphabet[Int(value & 63)]
            index += 3
            out += 4
        }
        let remaining = input.count - index
        if remaining > 0 {
            var value = UInt32(input[index]) << 16
            if remaining == 2 { value |= UInt32(input[index + 1]) << 8 }
            output[out] = alphabet[Int(value >> 18 & 63)]
            output[out + 1] = alphabet[Int(value >> 12 & 63)]
            output[out + 2] = remaining == 2 ? alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "=")
            output[out + 3] = UInt8(ascii: "=")
        }
    }

    /// The number of bytes `input` decodes to, or nil when it is not canonical padded base64.
    static func decodedCount(_ input: UnsafeRawBufferPointer) -> Int? {
        guard input.count % 4 == 0 else { return nil }
        guard input.count > 0 else { return 0 }
        var padding = 0
        if input[input.count - 1] == UInt8(ascii: "=") { padding += 1 }
        if input[input.count - 2] == UInt8(ascii: "=") { padding += 1 }
        for index in 0..<(input.count - padding) where decodeTable[Int(input[index])] == 0xFF {
            return nil
        }
        return input.count / 4 * 3 - padding
    }

    /// Decodes `input` into `output`, which must hold exactly `decodedCount(input)` bytes.
    static func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        var out = 0
        var index = 0
        while index < input.count {
            var value: UInt32 = 0
            var valid = 0
            for offset in 0..<4 {
                let character = input[index + offset]
                value <<= 6
                if character != UInt8(ascii: "=") {
                    value |= UInt32(decodeTable[Int(character)])
                    valid += 1
                }
            }
            let bytes = valid - 1
            if bytes >= 1 { output[out] = UInt8(value >> 16 & 0xFF) }
            if bytes >= 2 { output[out + 1] = UInt8(value >> 8 & 0xFF) }
            if bytes >= 3 { output[out + 2] = UInt8(value & 0xFF) }
            out += bytes
            index += 4
        }
    }
}
