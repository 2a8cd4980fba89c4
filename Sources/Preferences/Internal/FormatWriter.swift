// Writes preference values as the strict JSON of the file format (see Docs/preferences.md).
internal import Foundation
internal import SecureStoreCore

/// The file format's constants.
enum FileFormat {
    static let name = "securestore-preferences"
    static let version = 1
    static let dataTag = "$data"
    static let dateTag = "$date"
    static let doubleTag = "$double"
    static let maxDepth = 100
}

/// Writes JSON into a byte buffer, either pretty (the file) or compact (size accounting).
struct FormatWriter {
    private(set) var bytes: [UInt8] = []
    let pretty: Bool

    init(pretty: Bool, capacity: Int = 256) {
        self.pretty = pretty
        bytes.reserveCapacity(capacity)
    }

    /// The whole file for `values`: a versioned envelope, keys sorted, two-space indentation.
    static func document(_ values: [String: PreferenceValue]) throws -> [UInt8] {
        var writer = FormatWriter(pretty: true, capacity: 4096)
        writer.bytes.append(contentsOf: "{\n  \"format\": \"\(FileFormat.name)\",\n  \"version\": \(FileFormat.version),\n  \"values\": ".utf8)
        try writer.writeDictionary(values, indent: 1)
        writer.bytes.append(contentsOf: "\n}\n".utf8)
        return writer.bytes
    }

    /// The number of bytes `value` takes in compact form: the unit of every size limit.
    /// Counted without building the text, so that a 50 MiB value is refused without being encoded.
    static func compactSize(_ value: PreferenceValue) throws -> Int {
        switch value {
        case .bool(let flag): return flag ? 4 : 5
        case .int(let number): return String(number).utf8.count
        case .double, .date:
            var writer = FormatWriter(pretty: false)
            try writer.write(value, indent: 0)
            return writer.bytes.count
        case .string(let text): return stringSize(text)
        case .data(let data): return 12 + (data.count + 2) / 3 * 4  // {"$data":"…"}
        case .array(let values):
            var total = 2 + max(0, values.count - 1)
            for element in values { total += try compactSize(element) }
            return total
        case .dictionary(let values):
            var total = 2 + max(0, values.count - 1)
            for (key, element) in values {
                total += stringSize(key) + (key.hasPrefix("$") ? 1 : 0) + 1 + (try compactSize(element))
            }
            return total
        }
    }

    /// Bytes of `text` written as a JSON string, quotes included.
    private static func stringSize(_ text: String) -> Int {
        var text = text
        return text.withUTF8 { stringSize(utf8: $0) }
    }

    private static func stringSize(utf8: UnsafeBufferPointer<UInt8>) -> Int {
        var total = 2
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09: total += 2
            case 0x00..<0x20, 0x7F: total += 6
            default: total += 1
            }
        }
        return total
    }

    /// The compact JSON text of `value` (used by the audit's JSON renderer for its own report values).
    static func compact(_ value: PreferenceValue) throws -> String {
        var writer = FormatWriter(pretty: false)
        try writer.write(value, indent: 0)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The pretty JSON text of `value`, followed by a newline (used by the audit's JSON renderer).
    static func pretty(_ value: PreferenceValue) throws -> String {
        var writer = FormatWriter(pretty: true)
        try writer.write(value, indent: 0)
        writer.bytes.append(0x0A)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    private mutating func newline(_ indent: Int) {
        guard pretty else { return }
        bytes.append(0x0A)
        for _ in 0..<indent { bytes.append(0x20); bytes.append(0x20) }
    }

    mutating func write(_ value: PreferenceValue, indent: Int) throws {
        switch value {
        case .bool(let flag):
            bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        case .int(let number):
            bytes.append(contentsOf: String(number).utf8)
        case .double(let number):
            if number.isFinite {
                var text = number.description
                // Always mark a double as a double: "1.0", never "1".
                if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) { text += ".0" }
                bytes.append(contentsOf: text.utf8)
            } else {
                let name = number.isNaN ? "nan" : (number > 0 ? "inf" : "-inf")
                writeTagged(FileFormat.doubleTag, name)
            }
        case .string(let text):
            writeString(text)
        case .data(let data):
            writeTagged(FileFormat.dataTag, data.base64EncodedString())
        case .date(let date):
            writeTagged(FileFormat.dateTag, try ISODate.format(date))
        case .array(let values):
            if values.isEmpty {
                bytes.append(contentsOf: "[]".utf8)
                return
            }
            bytes.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                try write(element, indent: indent + 1)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "]"))
        case .dictionary(let values):
            try writeDictionary(values, indent: indent)
        }
    }

    private mutating func writeDictionary(_ values: [String: PreferenceValue], indent: Int) throws {
        if values.isEmpty {
            bytes.append(contentsOf: "{}".utf8)
            return
        }
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for key in values.keys.sorted() {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            newline(indent + 1)
            // A key that begins with "$" is written with the "$" doubled, so it can never be read as a tag.
            writeString(key.hasPrefix("$") ? "$" + key : key)
            bytes.append(UInt8(ascii: ":"))
            if pretty { bytes.append(0x20) }
            try write(values[key]!, indent: indent + 1)
        }
        newline(indent)
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func writeTagged(_ tag: String, _ text: String) {
        bytes.append(UInt8(ascii: "{"))
        writeString(tag)
        bytes.append(UInt8(ascii: ":"))
        if pretty { bytes.append(0x20) }
        writeString(text)
        bytes.append(UInt8(ascii: "}"))
    }

    mutating func writeString(_ text: String) { appendJSONString(text, to: &bytes) }
}
