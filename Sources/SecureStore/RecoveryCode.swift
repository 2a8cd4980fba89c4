// The recovery code: a database key a person can write down and type back in.
public import Attachments
public import EncryptedDatabase
public import Keychain
internal import SecureStoreCore

/// A human-typeable form of a database key, for getting a database back after the keyring is lost.
///
/// A code is 56 characters in 14 groups of 4, such as `7XQ4-M2KD-…-R9TB`: the 32 key bytes followed by
/// a 3-byte CRC-24 checksum (the OpenPGP CRC-24: polynomial `0x864CFB`, initial value `0xB704CE`) of
/// those bytes, 280 bits in all, written most significant bit first in Crockford's base32
/// (`0123456789ABCDEFGHJKMNPQRSTVWXYZ`: no `I`, `L`, `O` or `U`).
///
/// Reading is forgiving where it is safe: letters of either case, `-`, spaces and line breaks anywhere,
/// `O` read as `0` and `I`/`L` as `1`. The checksum catches every single mistyped character and every
/// swap of two neighbouring characters; when one group alone explains the mismatch, the error names it.
///
/// A code *is* the key: it is returned as a ``Secret``, and no error message or description ever
/// contains it or any of its characters.
public enum RecoveryCode {
    /// The number of characters, without separators: 56.
    public static let characterCount = 56
    /// The number of characters per group: 4.
    public static let groupLength = 4
    /// The alphabet, Crockford's base32.
    public static let alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

    private static let payloadCount = DatabaseKey.byteCount + 3

    /// The recovery code of `key`, as `XXXX-XXXX-…` (69 ASCII bytes).
    public static func code(for key: DatabaseKey) -> Secret {
        withZeroedBuffer(count: payloadCount) { payload in
            key.withUnsafeBytes { bytes in
                for index in 0..<bytes.count { payload[index] = bytes[index] }
            }
            let checksum = crc24(UnsafeRawBufferPointer(rebasing: payload[0..<DatabaseKey.byteCount]))
            payload[DatabaseKey.byteCount] = UInt8(truncatingIfNeeded: checksum >> 16)
            payload[DatabaseKey.byteCount + 1] = UInt8(truncatingIfNeeded: checksum >> 8)
            payload[DatabaseKey.byteCount + 2] = UInt8(truncatingIfNeeded: checksum)
            let groups = characterCount / groupLength
            return Secret(count: characterCount + groups - 1) { output in
                let letters = Array(alphabet.utf8)
                var out = 0
                for symbol in 0..<characterCount {
                    if symbol > 0, symbol % groupLength == 0 {
                        output[out] = UInt8(ascii: "-")
                        out += 1
                    }
                    output[out] = letters[Int(Self.symbol(at: symbol, in: UnsafeRawBufferPointer(payload)))]
                    out += 1
                }
            }
        }
    }

    /// The key written in `code`.
    ///
    /// - Throws: ``SecureStoreError/Code/invalidRecoveryCode`` when a character is not in the alphabet, the
    ///   number of characters is not 56, or the checksum does not match. The message names the group
    ///   and position of a bad character, never the character.
    public static func key(from code: Secret) throws(SecureStoreError) -> DatabaseKey {
        try withZeroedBuffer(count: characterCount) { symbols throws(SecureStoreError) -> DatabaseKey in
            var count = 0
            var invalidAt: Int?
            code.withUnsafeBytes { text in
                for byte in text {
                    if byte == UInt8(ascii: "-") || byte == 0x20 || byte == 0x0a || byte == 0x0d || byte == 0x09 {
                        continue
                    }
                    if let value = value(of: byte) {
                        if count < characterCount { symbols[count] = value }
                    } else if invalidAt == nil {
                        invalidAt = count
                    }
                    count += 1
                }
            }
            if let invalidAt {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidRecoveryCode,
                    "character \(invalidAt % groupLength + 1) of group \(invalidAt / groupLength + 1) of the recovery "
                        + "code is not one of its letters and digits (\(alphabet)); check what you typed")
            }
            guard count == characterCount else {
                throw SecureStoreError(
                    SecureStoreError.Code.invalidRecoveryCode,
                    "the recovery code has \(count) letters and digits; a recovery code has \(characterCount) "
                        + "(\(characterCount / groupLength) groups of \(groupLength)); check for a missing or extra group")
            }
            return try withZeroedBuffer(count: payloadCount) { payload throws(SecureStoreError) -> DatabaseKey in
                let symbolValues = UnsafeRawBufferPointer(symbols)
                if let key = decode(symbolValues, into: payload) { return key }
                // Name the group when changing one character of one group alone makes the checksum match.
                var suspects = Set<Int>()
                withZeroedBuffer(count: characterCount) { trial in
                    trial.copyMemory(from: symbolValues)
                    for position in 0..<characterCount {
                        let original = trial[position]
                        for candidate in 0..<UInt8(32) where candidate != original {
                            trial[position] = candidate
                            if checksumMatches(UnsafeRawBufferPointer(trial), payload: payload) {
                                suspects.insert(position / groupLength)
                            }
                        }
                        trial[position] = original
                    }
                }
                let hint =
                    if suspects.count == 1, let group = suspects.first {
                        "group \(group + 1) looks mistyped"
                    } else {
                        "a character is mistyped, or two are swapped"
                    }
                throw SecureStoreError(
                    SecureStoreError.Code.invalidRecoveryCode,
                    "the recovery code's checksum does not match: \(hint); compare each group with the code you wrote down")
            }
        }
    }

    // MARK: Internals

    /// The 5-bit symbol `index` of the 35-byte payload, most significant bit first.
    private static func symbol(at index: Int, in payload: UnsafeRawBufferPointer) -> UInt8 {
        var value: UInt8 = 0
        for bit in (index * 5)..<(index * 5 + 5) {
            value = value << 1 | (payload[bit / 8] >> (7 - UInt8(bit % 8))) & 1
        }
        return value
    }

    /// Packs 56 symbols into the payload; returns the key when the checksum matches.
    private static func decode(_ symbols: UnsafeRawBufferPointer, into payload: UnsafeMutableRawBufferPointer)
        -> DatabaseKey?
    {
        guard checksumMatches(symbols, payload: payload) else { return nil }
        return try? DatabaseKey(bytes: UnsafeRawBufferPointer(rebasing: payload[0..<DatabaseKey.byteCount]))
    }

    private static func checksumMatches(_ symbols: UnsafeRawBufferPointer, payload: UnsafeMutableRawBufferPointer)
        -> Bool
    {
        for index in 0..<payload.count { payload[index] = 0 }
        for index in 0..<characterCount {
            let value = symbols[index]
            for bit in 0..<5 where (value >> (4 - UInt8(bit))) & 1 == 1 {
                let position = index * 5 + bit
                payload[position / 8] |= 1 << (7 - UInt8(position % 8))
            }
        }
        let expected = crc24(UnsafeRawBufferPointer(rebasing: payload[0..<DatabaseKey.byteCount]))
        let stored =
            UInt32(payload[DatabaseKey.byteCount]) << 16 | UInt32(payload[DatabaseKey.byteCount + 1]) << 8
            | UInt32(payload[DatabaseKey.byteCount + 2])
        return expected == stored
    }

    /// The value of one typed character, or nil when it is not in the alphabet.
    private static func value(of byte: UInt8) -> UInt8? {
        var upper = byte
        if upper >= UInt8(ascii: "a") && upper <= UInt8(ascii: "z") { upper -= 0x20 }
        switch upper {
        case UInt8(ascii: "O"): return 0
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        default: break
        }
        for (index, letter) in alphabet.utf8.enumerated() where letter == upper { return UInt8(index) }
        return nil
    }

    /// CRC-24 as in OpenPGP (RFC 4880, section 6.1).
    static func crc24(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xB7_04CE
        for byte in bytes {
            crc ^= UInt32(byte) << 16
            for _ in 0..<8 {
                crc <<= 1
                if crc & 0x100_0000 != 0 { crc ^= 0x186_4CFB }
            }
        }
        return crc & 0xFF_FFFF
    }
}
