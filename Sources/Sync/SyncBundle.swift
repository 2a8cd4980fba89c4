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
    /// The bundle format this version writes and reads; a higher one is kept pending.
    static let format: UInt16 = 1
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

    static func parseHeader(_ bytes: [UInt8]) -> Header? {
        guard bytes.count >= headerSize + nonceSize + tagSize, Array(bytes[0..<8]) == magic else { return nil }
        let format = UInt16(bytes[8]) << 8 | UInt16(bytes[9])
        var sequence: UInt64 = 0
        for index in 10..<18 { sequence = sequence << 8 | UInt64(bytes[index]) }
        return Header(format: format, sequence: sequence, previousHash: Array(bytes[18..<50]))
    }

    static func aad(device: String, header: [UInt8], domain: String = "securestore sync bundle") -> [UInt8] {
        Array(domain.utf8) + [0] + Array(device.utf8) + [0] + header
    }

    static func seal(_ plaintext: [UInt8], header: Header, device: String, key: SyncKey) -> [UInt8]? {
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
    static func open(_ file: [UInt8], device: String, key: SyncKey) -> [UInt8]? {
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
        _ = header
        return ok ? plaintext : nil
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

/// The plaintext of a bundle.
struct SyncPayload: Sendable {
    /// The writing device's host name, for `sync devices`.
    var deviceName: String
    /// The tables and their synced columns, as the writer had them.
    var tables: [String: [String]]
    var rows: [SyncRowChange]

    /// The JSON form: device ids, tables and columns written once and referred to by index (a version is
    /// `[clock, device index]`), so that a row change costs about its values plus a hundred bytes.
    private struct Wire: Codable {
        struct Row: Codable {
            var t: Int
            var k: SyncValue
            var d: [Int64]?
            var c: [Cell]
        }
        struct Cell: Codable {
            var c: Int
            var v: SyncValue
            var w: [Int64]
            var b: [Int64]
        }
        var deviceName: String
        var devices: [String]
        var tables: [String]
        var columns: [[String]]
        var rows: [Row]
    }

    func encoded() throws -> [UInt8] {
        var devices: [String] = [""]
        var deviceIndex: [String: Int64] = ["": 0]
        func version(_ version: SyncVersion) -> [Int64] {
            if let index = deviceIndex[version.device] { return [version.hlc, index] }
            deviceIndex[version.device] = Int64(devices.count)
            devices.append(version.device)
            return [version.hlc, Int64(devices.count - 1)]
        }
        let tableNames = tables.keys.sorted()
        let tableIndex = Dictionary(uniqueKeysWithValues: tableNames.enumerated().map { ($1, $0) })
        let rows = rows.map { row in
            let columns = tables[row.table] ?? []
            return Wire.Row(
                t: tableIndex[row.table] ?? -1, k: row.key, d: row.tombstone.map(version),
                c: row.cells.map { cell in
                    Wire.Cell(c: columns.firstIndex(of: cell.column) ?? -1, v: cell.value, w: version(cell.version), b: version(cell.base))
                })
        }
        let wire = Wire(deviceName: deviceName, devices: devices, tables: tableNames, columns: tableNames.map { tables[$0] ?? [] }, rows: rows)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return [UInt8](try encoder.encode(wire))
    }

    /// The payload of `bytes`, or nil when it is not one this version understands.
    static func decode(_ bytes: [UInt8]) -> SyncPayload? {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(bytes)), wire.tables.count == wire.columns.count else { return nil }
        func version(_ pair: [Int64]) -> SyncVersion? {
            guard pair.count == 2, pair[1] >= 0, pair[1] < wire.devices.count else { return nil }
            return SyncVersion(hlc: pair[0], device: wire.devices[Int(pair[1])])
        }
        var rows: [SyncRowChange] = []
        rows.reserveCapacity(wire.rows.count)
        for row in wire.rows {
            guard row.t >= 0, row.t < wire.tables.count else { return nil }
            let columns = wire.columns[row.t]
            var cells: [SyncCell] = []
            for cell in row.c {
                guard cell.c >= 0, cell.c < columns.count, let written = version(cell.w), let base = version(cell.b) else { return nil }
                cells.append(SyncCell(column: columns[cell.c], value: cell.v, version: written, base: base))
            }
            var tombstone: SyncVersion?
            if let pair = row.d {
                guard let parsed = version(pair) else { return nil }
                tombstone = parsed
            }
            rows.append(SyncRowChange(table: wire.tables[row.t], key: row.k, tombstone: tombstone, cells: cells))
        }
        return SyncPayload(
            deviceName: wire.deviceName, tables: Dictionary(uniqueKeysWithValues: zip(wire.tables, wire.columns)), rows: rows)
    }
}
