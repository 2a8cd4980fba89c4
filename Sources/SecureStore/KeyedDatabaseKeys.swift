// The database key in the Keychain: items, their names and the hex text form, built and parsed in
// zeroed buffers (never through String).
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// The keychain items of one keyed database: the current key (account `<name>`) and, during a
/// rotation, the pending key (account `<name>.pending`), under service `<app>.database-key`.
struct KeyedDatabaseKeyItems: Sendable {
    let keychain: Keychain
    let service: String
    let account: String
    let pendingAccount: String
    let label: String
    let pendingLabel: String
    let databaseName: String

    /// The suffix of the pending key's account.
    static let pendingSuffix = ".pending"

    init(paths: AppPaths, name: String, keychain: Keychain) {
        self.keychain = keychain
        service = paths.databaseKeyService
        account = name
        pendingAccount = name + Self.pendingSuffix
        label = "SecureStore database key: \(paths.app)/\(name)"
        pendingLabel = "SecureStore database key (rotation pending): \(paths.app)/\(name)"
        databaseName = name
    }

    /// Where the key lives, for messages: service, account and collection. Never the key.
    var location: String {
        "service '\(service)', account '\(account)', collection '\(keychain.configuration.collection.alias)'"
    }

    func current() throws -> DatabaseKey? {
        try keychain.secret(service: service, account: account).map { try decode($0, account: account) }
    }

    func pending() throws -> DatabaseKey? {
        try keychain.secret(service: service, account: pendingAccount).map { try decode($0, account: pendingAccount) }
    }

    /// Stores `key` as the current key and reads it back: a provider that does not return what it was
    /// given must be found out before any file depends on it.
    func storeCurrent(_ key: DatabaseKey) throws {
        try keychain.set(Self.hexSecret(key), service: service, account: account, label: label)
        try checkStored(key, account: account)
    }

    /// Stores `key` as the pending key and reads it back.
    func storePending(_ key: DatabaseKey) throws {
        try keychain.set(Self.hexSecret(key), service: service, account: pendingAccount, label: pendingLabel)
        try checkStored(key, account: pendingAccount)
    }

    private func checkStored(_ key: DatabaseKey, account: String) throws {
        let stored = try keychain.secret(service: service, account: account).flatMap(Self.key(fromHex:))
        guard stored == key else {
            throw SecureStoreError(
                SecureStoreError.verificationFailed,
                "the keyring did not give back the database key just stored (service '\(service)', account "
                    + "'\(account)', collection '\(keychain.configuration.collection.alias)'); no database file "
                    + "depends on it yet. Check the Secret Service provider")
        }
    }

    @discardableResult
    func deletePending() throws -> Bool {
        try keychain.delete(service: service, account: pendingAccount)
    }

    private func decode(_ secret: Secret, account: String) throws -> DatabaseKey {
        guard let key = Self.key(fromHex: secret) else {
            throw SecureStoreError(
                SecureStoreError.keyMismatch,
                "the keychain item (service '\(service)', account '\(account)') does not hold a database key "
                    + "(64 hexadecimal digits; it holds \(secret.count) bytes); it was not written by SecureStore")
        }
        return key
    }

    // MARK: Hex text

    /// The key as 64 lowercase hexadecimal digits, written straight into a `Secret`.
    static func hexSecret(_ key: DatabaseKey) -> Secret {
        Secret(count: 2 * DatabaseKey.byteCount) { output in
            key.withUnsafeBytes { bytes in
                let digits: StaticString = "0123456789abcdef"
                let hex = digits.utf8Start
                for index in 0..<bytes.count {
                    output[2 * index] = hex[Int(bytes[index] >> 4)]
                    output[2 * index + 1] = hex[Int(bytes[index] & 0x0f)]
                }
            }
        }
    }

    /// The key in a secret of 64 hexadecimal digits (either case; surrounding white space, such as a
    /// newline added by a tool, is ignored), or nil when it is not one.
    static func key(fromHex secret: Secret) -> DatabaseKey? {
        secret.withUnsafeBytes { text -> DatabaseKey? in
            var start = 0
            var end = text.count
            while start < end, isSpace(text[start]) { start += 1 }
            while end > start, isSpace(text[end - 1]) { end -= 1 }
            guard end - start == 2 * DatabaseKey.byteCount else { return nil }
            return withZeroedBuffer(count: DatabaseKey.byteCount) { bytes -> DatabaseKey? in
                for index in 0..<DatabaseKey.byteCount {
                    guard let high = nibble(text[start + 2 * index]), let low = nibble(text[start + 2 * index + 1])
                    else { return nil }
                    bytes[index] = high << 4 | low
                }
                return try? DatabaseKey(bytes: bytes)
            }
        }
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0a || byte == 0x0d || byte == 0x09
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Calls `body` with a zero-filled heap buffer of `count` bytes that is wiped (`explicit_bzero`) and
/// freed when `body` returns.
func withZeroedBuffer<R, E: Error>(
    count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
) throws(E) -> R {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
    buffer.initializeMemory(as: UInt8.self, repeating: 0)
    defer {
        explicit_bzero(buffer.baseAddress!, buffer.count)
        buffer.deallocate()
    }
    return try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
}
