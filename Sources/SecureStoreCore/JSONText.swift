// JSON strings written byte by byte: the one writer of the product (preferences files, the task list's streamed
// export, `token get --json`), for output that is built without JSONEncoder.

/// Appends `text` as a JSON string, quotes included (``appendJSONEscaped(_:to:)`` for what is between them).
package func appendJSONString(_ text: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    var text = text
    text.withUTF8 { appendJSONEscaped(UnsafeRawBufferPointer($0), to: &out) }
    out.append(UInt8(ascii: "\""))
}

/// Appends the UTF-8 `bytes` escaped for the inside of a JSON string: `"` and `\` with a backslash, tab, line
/// feed and carriage return as `\t` `\n` `\r`, every other control (U+0000–U+001F, U+007F) as `\u00XX`;
/// everything else as it is. Nothing else is allocated: a caller that reserved room in `out` (6 bytes per
/// input byte at the most) writes a secret there without a copy elsewhere.
package func appendJSONEscaped(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == 0x7F }) {
        out.append(contentsOf: bytes)
        return
    }
    for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"):
            out.append(UInt8(ascii: "\\"))
            out.append(byte)
        case 0x09:
            out.append(UInt8(ascii: "\\"))
            out.append(UInt8(ascii: "t"))
        case 0x0A:
            out.append(UInt8(ascii: "\\"))
            out.append(UInt8(ascii: "n"))
        case 0x0D:
            out.append(UInt8(ascii: "\\"))
            out.append(UInt8(ascii: "r"))
        case 0x00..<0x20, 0x7F:
            out.append(UInt8(ascii: "\\"))
            out.append(UInt8(ascii: "u"))
            out.append(UInt8(ascii: "0"))
            out.append(UInt8(ascii: "0"))
            appendHex(byte, to: &out)
        default: out.append(byte)
        }
    }
}
