// Sealed bundles: the only files a device writes to the remote, AES-256-GCM under the sync key.
internal import Foundation
internal import Keychain
internal import SecureStore
internal import SecureStoreCore

/// The sync key: 32 random bytes in a zeroing buffer.
struct SyncKey: Sendable {
    static let byteCount = 32
    let bytes: SecureBytes

    static func random() -> SyncKey {
        var random = KeyFile.randomBytes(byteCount)
        defer { random.withUnsafeMutableBytes { secureZero($0) } }
        return SyncKey(bytes: SecureBytes(random))
    }
}

/// One sealed file: `magic | format (2) | sequence (8) | previous hash (32) | nonce (12) | ciphertext | tag (16)`,
/// integers big-endian. The AAD is a domain string, the writing device's id and the header (format, sequence,
/// previous hash): a bundle moved to another device's folder, renamed to another sequence, or chained after
/// another bundle fails authentication.
enum SealedBundle {
    static let magic = Array("SSYNCB\u{0}\u{1}".utf8)
    /// The format of the sealed files whose plaintext is not padded (seen vectors, roster statements, snapshots, the
    /// key check): what this version writes for them; bundles of it are read too.
    static let format: UInt16 = 1
    /// The format of the bundles this version writes: the plaintext padded to a size bucket (``SyncPadding``), so
    /// that a file's size does not tell a title's length or which operation it carries.
    static let paddedFormat: UInt16 = 2
    /// The newest bundle format this version reads; a higher one is kept pending (written by a newer version).
    static let newestFormat: UInt16 = paddedFormat
    static let headerSize = 8 + 2 + 8 + 32
    static let nonceSize = 12
    static let tagSize = 16

    struct Header: Equatable {
        var format: UInt16
        var sequence: UInt64
        var previousHash: [UInt8]
    }

    static func headerBytes(_ header: Header) -> [UInt8] {
        var out = magic
        out.append(UInt8(header.format >> 8))
        out.append(UInt8(header.format & 0xFF))
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: header.sequence >> UInt64(shift))) }
        out += header.previousHash
        return out
    }

    static func parseHeader(_ file: [UInt8]) -> Header? {
        let bytes = file.starts(with: SyncSignedFile.magic) ? Array(SyncSignedFile.inner(file)) : file
        guard bytes.count >= headerSize + nonceSize + tagSize, Array(bytes[0..<8]) == magic else { return nil }
        let format = UInt16(bytes[8]) << 8 | UInt16(bytes[9])
        var sequence: UInt64 = 0
        for index in 10..<18 { sequence = sequence << 8 | UInt64(bytes[index]) }
        return Header(format: format, sequence: sequence, previousHash: Array(bytes[18..<50]))
    }

    static func aad(device: String, header: [UInt8], domain: String = "securestore sync bundle") -> [UInt8] {
        Array(domain.utf8) + [0] + Array(device.utf8) + [0] + header
    }

    static func seal(_ unpadded: [UInt8], header: Header, device: String, key: SyncKey) -> [UInt8]? {
        let plaintext = header.format == paddedFormat ? SyncPadding.pad(unpadded) : unpadded
        let head = headerBytes(header)
        let nonce = KeyFile.randomBytes(nonceSize)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        let tag = key.bytes.withUnsafeBytes { keyBytes in
            ciphertext.withUnsafeMutableBytes { out in
                Sealed.gcm(
                    encrypt: true, key: keyBytes, nonce: nonce, aad: aad(device: device, header: head), input: plaintext,
                    output: out, tag: nil)
            }
        }
        guard let tag else { return nil }
        return head + nonce + ciphertext + tag
    }

    /// The plaintext of `file`, authenticated against `device` and its own header; nil when it does not
    /// authenticate (forged, tampered, truncated, moved).
    static func open(_ signed: [UInt8], device: String, key: SyncKey) -> [UInt8]? {
        // A signed file (SyncSigning.swift) is opened through its envelope; its signature is checked by the caller.
        let file = signed.starts(with: SyncSignedFile.magic) ? Array(SyncSignedFile.inner(signed)) : signed
        guard let header = parseHeader(file) else { return nil }
        let head = Array(file[0..<headerSize])
        let nonce = Array(file[headerSize..<(headerSize + nonceSize)])
        let body = Array(file[(headerSize + nonceSize)..<(file.count - tagSize)])
        let tag = Array(file[(file.count - tagSize)...])
        var plaintext = [UInt8](repeating: 0, count: body.count)
        let ok = key.bytes.withUnsafeBytes { keyBytes in
            plaintext.withUnsafeMutableBytes { out in
                Sealed.gcm(
                    encrypt: false, key: keyBytes, nonce: nonce, aad: aad(device: device, header: head), input: body,
                    output: out, tag: tag) != nil
            }
        }
        guard ok else { return nil }
        return header.format == paddedFormat ? SyncPadding.unpad(plaintext) : plaintext
    }

    /// The key-check file: proves that a pairing code is the group's key without holding any data.
    static func keyCheck(key: SyncKey) -> [UInt8]? {
        let header = Header(format: format, sequence: 0, previousHash: [UInt8](repeating: 0, count: 32))
        return seal(Array("securestore sync key check".utf8), header: header, device: "key-check", key: key)
    }

    static func checks(_ file: [UInt8], key: SyncKey) -> Bool {
        open(file, device: "key-check", key: key) == Array("securestore sync key check".utf8)
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        guard let digest = SHA256Digest() else { return [] }
        bytes.withUnsafeBytes { digest.update($0) }
        return digest.finish()
    }

    /// The file name of a bundle: `<sequence, 10 digits>-<SHA-256 of the file, 64 hex digits>`.
    static func name(sequence: UInt64, file: [UInt8]) -> String {
        paddedSequence(sequence) + "-" + hexString(sha256(file))
    }

    /// A sequence number as bundle names write it: ten digits.
    static func paddedSequence(_ sequence: UInt64) -> String {
        let number = String(sequence)
        return String(repeating: "0", count: max(0, 10 - number.count)) + number
    }

    /// The sequence and hash of a bundle's file name, or nil for anything else (a replication engine's
    /// temporary or conflict file, a partial download, a stray file): those are ignored.
    static func parseName(_ name: String) -> (sequence: UInt64, hash: String)? {
        let utf8 = Array(name.utf8)
        guard utf8.count == 10 + 1 + 64, utf8[10] == UInt8(ascii: "-"),
            utf8[0..<10].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            utf8[11...].allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
            let sequence = UInt64(String(decoding: utf8[0..<10], as: UTF8.self))
        else { return nil }
        return (sequence, String(decoding: utf8[11...], as: UTF8.self))
    }
}

// MARK: The plaintext of a bundle

/// A column value as it travels: SQLite's five storage classes.
enum SyncValue: Codable, Equatable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    private enum Keys: String, CodingKey { case n, i, r, s, b }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        if let value = try container.decodeIfPresent(Int64.self, forKey: .i) { self = .integer(value) }
        else if let value = try container.decodeIfPresent(Double.self, forKey: .r) { self = .real(value) }
        else if let value = try container.decodeIfPresent(String.self, forKey: .s) { self = .text(value) }
        else if let value = try container.decodeIfPresent(Data.self, forKey: .b) { self = .blob(value) }
        else { self = .null }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        switch self {
        case .null: try container.encode(true, forKey: .n)
        case .integer(let value): try container.encode(value, forKey: .i)
        case .real(let value): try container.encode(value, forKey: .r)
        case .text(let value): try container.encode(value, forKey: .s)
        case .blob(let value): try container.encode(value, forKey: .b)
        }
    }
}

/// A version: the hybrid logical clock of a change and the device that made it, ordered by clock then device.
struct SyncVersion: Codable, Equatable, Comparable, Sendable {
    var hlc: Int64
    var device: String

    static let zero = SyncVersion(hlc: 0, device: "")

    static func < (lhs: SyncVersion, rhs: SyncVersion) -> Bool {
        lhs.hlc != rhs.hlc ? lhs.hlc < rhs.hlc : lhs.device < rhs.device
    }
}

/// One cell of a row change: the column's value, its version, and the version it replaced on the device that
/// wrote it (what that device had seen): two edits from the same base are concurrent, a conflict.
struct SyncCell: Equatable, Sendable {
    var column: String
    var value: SyncValue
    var version: SyncVersion
    var base: SyncVersion
}

/// Everything a device knows of one row: every column with its version, and the row's tombstone (the
/// latest delete), if any.
struct SyncRowChange: Equatable, Sendable {
    var table: String
    var key: SyncValue
    var tombstone: SyncVersion?
    var cells: [SyncCell]
}

/// A value of the writing device that lost to a concurrent edit before it was ever sent (its unsent edit beaten by
/// another device's later one that arrived first): a bundle carries rows as they are now, so without this the value
/// would be in its writer's conflict log only. Every device that applies the bundle logs it (issue 32, part 3).
struct SyncLostEdit: Equatable, Sendable {
    var table: String
    var key: SyncValue
    var column: String
    var value: SyncValue
    /// The lost value's version (always the bundle's writer's).
    var version: SyncVersion
    /// The version it lost to.
    var won: SyncVersion
}

/// The plaintext of a bundle.
struct SyncPayload: Sendable {
    /// The writing device's host name, for `sync devices`.
    var deviceName: String
    /// The tables and their synced columns, as the writer had them.
    var tables: [String: [String]]
    var rows: [SyncRowChange]
    /// The writer's values that lost before they were sent (``SyncLostEdit``); a payload with none is written in the
    /// first format, so that a device of an earlier version reads it.
    var lost: [SyncLostEdit] = []

    /// The binary form (all integers LEB128 varints, signed ones zigzag): `SSP1`, the device name, the device ids,
    /// the tables with their columns, then the rows. A version is `clock, device index`; a value is a tag (0 null,
    /// 1 integer, 2 real as 8 bytes big-endian, 3 text, 4 blob; text and blob length-prefixed). Device ids, tables
    /// and columns are written once and referred to by index.
    static let magic = Array("SSP1".utf8)
    /// `SSP2`: the same, then the lost edits (a count, then each: table index, key, column index, value, version, the
    /// version it lost to). Written only when there are some.
    static let lostMagic = Array("SSP2".utf8)

    func encoded() throws -> [UInt8] {
        var out = lost.isEmpty ? Self.magic : Self.lostMagic
        out.reserveCapacity(64 + rows.count * 96)
        func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                out.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            out.append(UInt8(value))
        }
        func bytes(_ data: some Collection<UInt8>) {
            varint(UInt64(data.count))
            out.append(contentsOf: data)
        }
        func string(_ text: String) { bytes(Array(text.utf8)) }
        var devices: [String] = [""]
        var deviceIndex: [String: UInt64] = ["": 0]
        for row in rows {
            for device in row.cells.flatMap({ [$0.version.device, $0.base.device] }) + [row.tombstone?.device ?? ""]
            where deviceIndex[device] == nil {
                deviceIndex[device] = UInt64(devices.count)
                devices.append(device)
            }
        }
        for device in lost.flatMap({ [$0.version.device, $0.won.device] }) where deviceIndex[device] == nil {
            deviceIndex[device] = UInt64(devices.count)
            devices.append(device)
        }
        func version(_ version: SyncVersion) {
            varint(UInt64(bitPattern: version.hlc))
            varint(deviceIndex[version.device] ?? 0)
        }
        func value(_ value: SyncValue) {
            switch value {
            case .null: out.append(0)
            case .integer(let number):
                out.append(1)
                varint(UInt64(bitPattern: (number << 1) ^ (number >> 63)))
            case .real(let number):
                out.append(2)
                let bits = number.bitPattern
                for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
            case .text(let text):
                out.append(3)
                string(text)
            case .blob(let data):
                out.append(4)
                bytes(data)
            }
        }
        string(deviceName)
        varint(UInt64(devices.count))
        for device in devices { string(device) }
        let tableNames = tables.keys.sorted()
        let tableIndex = Dictionary(uniqueKeysWithValues: tableNames.enumerated().map { ($1, UInt64($0)) })
        varint(UInt64(tableNames.count))
        for name in tableNames {
            string(name)
            let columns = tables[name] ?? []
            varint(UInt64(columns.count))
            for column in columns { string(column) }
        }
        varint(UInt64(rows.count))
        for row in rows {
            guard let table = tableIndex[row.table], let columns = tables[row.table] else {
                throw SyncError(SyncError.Code.invalidArgument, "a change of table '\(row.table)' that the bundle does not list")
            }
            varint(table)
            value(row.key)
            if let tombstone = row.tombstone {
                out.append(1)
                version(tombstone)
            } else {
                out.append(0)
            }
            varint(UInt64(row.cells.count))
            for cell in row.cells {
                guard let column = columns.firstIndex(of: cell.column) else {
                    throw SyncError(SyncError.Code.invalidArgument, "a change of column '\(cell.column)' that the bundle does not list")
                }
                varint(UInt64(column))
                value(cell.value)
                version(cell.version)
                version(cell.base)
            }
        }
        if !lost.isEmpty {
            varint(UInt64(lost.count))
            for edit in lost {
                guard let table = tableIndex[edit.table], let column = tables[edit.table]?.firstIndex(of: edit.column) else {
                    throw SyncError(SyncError.Code.invalidArgument, "a lost edit of '\(edit.table)' that the bundle does not list")
                }
                varint(table)
                value(edit.key)
                varint(UInt64(column))
                value(edit.value)
                version(edit.version)
                version(edit.won)
            }
        }
        return out
    }

    /// The payload of `bytes`, or nil when it is not one this version understands (every length and index is
    /// checked; nothing is trusted because it authenticated).
    static func decode(_ bytes: [UInt8]) -> SyncPayload? {
        let withLost = bytes.starts(with: lostMagic)
        guard bytes.starts(with: magic) || withLost else { return nil }
        var reader = Reader(bytes: bytes, offset: magic.count)
        return reader.payload(withLost: withLost)
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset: Int

        mutating func byte() -> UInt8? {
            guard offset < bytes.count else { return nil }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 7) {
                guard let next = byte() else { return nil }
                value |= UInt64(next & 0x7F) << UInt64(shift)
                if next & 0x80 == 0 { return value }
            }
            return nil
        }

        /// A count or index of at most `limit` (nil for a negative limit: an empty list has no index).
        mutating func count(atMost limit: Int) -> Int? {
            guard limit >= 0, let value = varint(), value <= UInt64(limit) else { return nil }
            return Int(value)
        }

        mutating func data() -> [UInt8]? {
            // The length is compared with what is left after the length itself.
            guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
            let end = offset + Int(length)
            defer { offset = end }
            return Array(bytes[offset..<end])
        }

        mutating func string() -> String? {
            guard let data = data() else { return nil }
            let ok = data.withUnsafeBytes { isValidUTF8($0) }
            return ok ? String(decoding: data, as: UTF8.self) : nil
        }

        mutating func value() -> SyncValue? {
            switch byte() {
            case 0: return .null
            case 1:
                guard let raw = varint() else { return nil }
                return .integer(Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1))
            case 2:
                guard offset + 8 <= bytes.count else { return nil }
                var bits: UInt64 = 0
                for _ in 0..<8 {
                    bits = bits << 8 | UInt64(bytes[offset])
                    offset += 1
                }
                return .real(Double(bitPattern: bits))
            case 3: return string().map(SyncValue.text)
            case 4: return data().map { .blob(Data($0)) }
            default: return nil
            }
        }

        mutating func version(_ devices: [String]) -> SyncVersion? {
            guard let hlc = varint(), let device = count(atMost: devices.count - 1) else { return nil }
            return SyncVersion(hlc: Int64(bitPattern: hlc), device: devices[device])
        }

        mutating func strings(_ count: Int) -> [String]? {
            var list: [String] = []
            for _ in 0..<count {
                guard let text = string() else { return nil }
                list.append(text)
            }
            return list
        }

        mutating func payload(withLost: Bool) -> SyncPayload? {
            guard let deviceName = string(), let deviceCount = count(atMost: bytes.count), let devices = strings(deviceCount),
                !devices.isEmpty, let tableCount = count(atMost: bytes.count)
            else { return nil }
            var names: [String] = []
            var columns: [[String]] = []
            for _ in 0..<tableCount {
                guard let name = string(), let columnCount = count(atMost: bytes.count), let list = strings(columnCount)
                else { return nil }
                names.append(name)
                columns.append(list)
            }
            guard Set(names).count == names.count, let rowCount = count(atMost: bytes.count) else { return nil }
            var rows: [SyncRowChange] = []
            for _ in 0..<rowCount {
                guard let table = count(atMost: names.count - 1), let key = value(), let hasTombstone = byte(), hasTombstone <= 1
                else { return nil }
                var tombstone: SyncVersion?
                if hasTombstone == 1 {
                    guard let parsed = version(devices) else { return nil }
                    tombstone = parsed
                }
                guard let cellCount = count(atMost: bytes.count) else { return nil }
                var cells: [SyncCell] = []
                for _ in 0..<cellCount {
                    guard let column = count(atMost: columns[table].count - 1), let cellValue = value(),
                        let written = version(devices), let base = version(devices)
                    else { return nil }
                    cells.append(SyncCell(column: columns[table][column], value: cellValue, version: written, base: base))
                }
                rows.append(SyncRowChange(table: names[table], key: key, tombstone: tombstone, cells: cells))
            }
            var lost: [SyncLostEdit] = []
            if withLost {
                guard let lostCount = count(atMost: bytes.count), lostCount > 0 else { return nil }
                for _ in 0..<lostCount {
                    guard let table = count(atMost: names.count - 1), let key = value(), let column = count(atMost: columns[table].count - 1),
                        let lostValue = value(), let written = version(devices), let won = version(devices)
                    else { return nil }
                    lost.append(
                        SyncLostEdit(table: names[table], key: key, column: columns[table][column], value: lostValue, version: written, won: won))
                }
            }
            guard offset == bytes.count else { return nil }
            return SyncPayload(
                deviceName: deviceName, tables: Dictionary(uniqueKeysWithValues: zip(names, columns)), rows: rows, lost: lost)
        }
    }
}

/// Padding of a bundle's or an attachment chunk's plaintext to a size bucket, so that what a reader of the remote sees
/// — the file sizes — tells no title's length, no attachment's exact size, and not which operation a small bundle
/// carries (Docs/sync.md, "What the remote learns"). The plaintext is followed by one 0x80 byte and zeros
/// (ISO/IEC 7816-4 padding) up to the bucket: at least ``minimum`` bytes, and above that Padmé's (Nikitin et al.,
/// "Reducing Metadata Leakage from Encrypted Files and Communication with PURBs", PETS 2019): a length L is rounded
/// up so that only its top ⌊log₂ ⌊log₂ L⌋⌋ + 1 bits may be non-zero — at most about 12 % more bytes (less for large
/// files), and a file's size tells at most O(log log L) bits about its content.
enum SyncPadding {
    /// The smallest bucket: a bundle of one task (333 bytes and its title) or a done, undo or delete, and a seen
    /// vector's worth of changes all fit in it, and look the same.
    static let minimum = 1024

    /// The padded length of a plaintext of `length` bytes (the 0x80 marker included).
    static func bucket(_ length: Int) -> Int {
        let needed = length + 1
        guard needed > minimum else { return minimum }
        let exponent = Int.bitWidth - 1 - needed.leadingZeroBitCount           // ⌊log₂ L⌋
        let significant = Int.bitWidth - exponent.leadingZeroBitCount          // ⌊log₂ E⌋ + 1
        let mask = (1 << (exponent - significant)) - 1
        return (needed + mask) & ~mask
    }

    static func pad(_ plaintext: [UInt8]) -> [UInt8] {
        var out = plaintext
        let size = bucket(plaintext.count)
        out.reserveCapacity(size)
        out.append(0x80)
        out.append(contentsOf: repeatElement(0, count: size - out.count))
        return out
    }

    /// The plaintext before its padding, or nil when the padding is malformed (never from a writer of this format).
    static func unpad(_ padded: [UInt8]) -> [UInt8]? {
        guard let marker = padded.lastIndex(where: { $0 != 0 }), padded[marker] == 0x80 else { return nil }
        return Array(padded[..<marker])
    }
}
