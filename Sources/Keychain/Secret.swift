public import Foundation
import Glibc

/// Bytes that must stay secret: a token, a password, a database key.
///
/// `Secret` keeps its bytes in memory of its own that is overwritten with zeros when the last copy of
/// the value is released. It never prints itself: `description`, `debugDescription` and reflection
/// (`dump`, string interpolation, a debugger's summary) all show `Secret(<redacted>)`. Two secrets
/// compare in constant time for a given length.
///
/// Read the bytes through ``withUnsafeBytes(_:)`` where you can. ``stringValue()`` and ``dataValue()``
/// make ordinary Swift copies that are *not* wiped when released; use them only where the consumer
/// needs a `String` or `Data` anyway.
///
/// ```swift
/// let token = Secret(string: "ghp_…")
/// try keychain.set(token, service: "github.com", account: "me")
/// ```
public struct Secret: Sendable {
    let storage: SecretStorage

    /// A secret holding a copy of `bytes`.
    public init(bytes: some Collection<UInt8>) {
        storage = SecretStorage(count: bytes.count)
        UnsafeMutableRawBufferPointer(storage.buffer).copyBytes(from: bytes)
    }

    /// A secret holding the UTF-8 bytes of `string`.
    public init(string: String) {
        var copy = string
        storage = copy.withUTF8 { utf8 in
            let storage = SecretStorage(count: utf8.count)
            UnsafeMutableRawBufferPointer(storage.buffer).copyMemory(from: UnsafeRawBufferPointer(utf8))
            return storage
        }
    }

    /// A secret holding a copy of `data`.
    public init(data: Data) {
        self.init(bytes: data)
    }

    /// A secret of `count` bytes written in place by `initializer`, with no intermediate copy.
    ///
    /// The buffer is zero-filled when `initializer` is called; it must write all the bytes it needs.
    public init(count: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        storage = SecretStorage(count: count)
        try initializer(storage.buffer)
    }

    /// The number of bytes.
    public var count: Int { storage.buffer.count }

    /// Whether the secret has no bytes.
    public var isEmpty: Bool { count == 0 }

    /// Calls `body` with the secret's bytes. Do not let the pointer escape `body`.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(storage.buffer))
    }

    /// The bytes as a `String` if they are valid UTF-8, or nil.
    ///
    /// The returned string is an ordinary Swift copy: it is not wiped when released.
    public func stringValue() -> String? {
        withUnsafeBytes { bytes in
            String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self)
        }
    }

    /// The bytes as `Data`. The returned value is an ordinary copy: it is not wiped when released.
    public func dataValue() -> Data {
        withUnsafeBytes { Data($0) }
    }
}

extension Secret: Equatable {
    /// Whether two secrets hold the same bytes, compared in constant time for a given length.
    public static func == (lhs: Secret, rhs: Secret) -> Bool {
        lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in
                guard a.count == b.count else { return false }
                var difference: UInt8 = 0
                for index in 0..<a.count {
                    difference |= a[index] ^ b[index]
                }
                return difference == 0
            }
        }
    }
}

extension Secret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `Secret(<redacted>)`: a secret never prints itself.
    public var description: String { "Secret(<redacted>)" }
    /// Always `Secret(<redacted>)`: a secret never prints itself.
    public var debugDescription: String { description }
    /// An empty mirror, so that `dump` and debuggers show no bytes.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// The memory behind a ``Secret``: allocated once, zeroed and freed when released.
final class SecretStorage: @unchecked Sendable {
    // Immutable after initialization (the initializer closure of `Secret` runs before the value is shared).
    private let base: UnsafeMutableRawPointer
    private let capacity: Int
    let count: Int

    init(count: Int) {
        self.count = count
        capacity = Swift.max(count, 1)
        base = .allocate(byteCount: capacity, alignment: 16)
        base.initializeMemory(as: UInt8.self, repeating: 0, count: capacity)
    }

    /// The first byte, as C sees it (never null, also for an empty secret).
    var pointer: UnsafePointer<CChar> { UnsafePointer(base.assumingMemoryBound(to: CChar.self)) }

    /// The secret's bytes (exactly `count` of them).
    var buffer: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base, count: count) }

    deinit {
        secureZero(UnsafeMutableRawBufferPointer(start: base, count: capacity))
        base.deallocate()
    }
}

/// Overwrites `buffer` with zeros in a way the optimizer may not remove (`explicit_bzero`).
func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    explicit_bzero(base, buffer.count)
}
