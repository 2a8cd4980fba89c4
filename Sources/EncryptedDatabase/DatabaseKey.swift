// The 32-byte key of an encrypted database, and the raw-key form SQLCipher is given.
internal import SecureStoreCore

/// A 256-bit key for an encrypted database.
///
/// The bytes live in one heap buffer that is wiped with `explicit_bzero` when the last copy of the key
/// goes away; they can be read only through ``withUnsafeBytes(_:)``. The description is redacted and `==`
/// runs in constant time.
///
/// ```swift
/// let key = try DatabaseKey(bytes: bytesFromTheKeychain)
/// let queue = try DatabaseQueue(path: path, key: key)
/// ```
///
/// The database is keyed with SQLCipher's raw-key form, so no key derivation runs at open.
public struct DatabaseKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The number of bytes in a key: 32.
    public static let byteCount = 32

    let storage: SecureBytes

    /// Creates a key from exactly 32 bytes.
    ///
    /// - Throws: ``DatabaseError`` with code ``DatabaseError/Code/misuse`` when `bytes` does not hold
    ///   32 bytes. The message gives the count, never the bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw DatabaseError(
                .misuse, "a database key is \(Self.byteCount) bytes; this one has \(bytes.count)")
        }
        storage = SecureBytes(bytes)
    }

    /// Creates a new random key from the system's cryptographically secure generator
    /// (`SystemRandomNumberGenerator`, which reads `getrandom` on Linux).
    public static func random() -> DatabaseKey {
        var generator = SystemRandomNumberGenerator()
        let storage = SecureBytes(count: byteCount) { buffer in
            for word in 0..<(byteCount / 8) {
                var value = generator.next()
                Swift.withUnsafeBytes(of: &value) { bytes in
                    for index in 0..<8 { buffer[word * 8 + index] = bytes[index] }
                }
                Swift.withUnsafeMutableBytes(of: &value) { secureZero($0) }
            }
        }
        return DatabaseKey(storage: storage)
    }

    private init(storage: SecureBytes) {
        self.storage = storage
    }

    /// Calls `body` with the 32 key bytes. Do not let the pointer, or a copy of the bytes, escape.
    public func withUnsafeBytes<R, E: Error>(
        _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try storage.withUnsafeBytes(body)
    }

    /// Compares two keys in constant time.
    public static func == (lhs: DatabaseKey, rhs: DatabaseKey) -> Bool {
        lhs.storage.constantTimeEquals(rhs.storage)
    }

    /// Always `DatabaseKey(<redacted>)`: a key is never printed.
    public var description: String { "DatabaseKey(<redacted>)" }

    /// Always `DatabaseKey(<redacted>)`: a key is never printed.
    public var debugDescription: String { description }

    /// Calls `body` with SQLCipher's raw-key form of the key, the 67 bytes `x'<64 lowercase hex digits>'`,
    /// in a buffer that is wiped as soon as `body` returns.
    func withRawKeyForm<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let count = 3 + 2 * Self.byteCount
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
        defer {
            secureZero(buffer)
            buffer.deallocate()
        }
        buffer[0] = UInt8(ascii: "x")
        buffer[1] = UInt8(ascii: "'")
        _ = storage.withUnsafeBytes { key in
            writeHex(key, into: UnsafeMutableRawBufferPointer(rebasing: buffer[2..<(count - 1)]))
        }
        buffer[count - 1] = UInt8(ascii: "'")
        return try body(UnsafeRawBufferPointer(buffer))
    }
}
