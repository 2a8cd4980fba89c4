public import Foundation
internal import SecureStoreCore

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
    let storage: SecureBytes

    init(storage: SecureBytes) { self.storage = storage }

    /// A secret holding a copy of `bytes`.
    public init(bytes: some Collection<UInt8>) {
        storage = SecureBytes(bytes)
    }

    /// A secret holding the UTF-8 bytes of `string`.
    public init(string: String) {
        var copy = string
        storage = copy.withUTF8 { utf8 in
            SecureBytes(count: utf8.count) { $0.copyMemory(from: UnsafeRawBufferPointer(utf8)) }
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
        storage = try SecureBytes(count: count, build: initializer)
    }

    /// The number of bytes.
    public var count: Int { storage.count }

    /// Whether the secret has no bytes.
    public var isEmpty: Bool { count == 0 }

    /// Calls `body` with the secret's bytes. Do not let the pointer escape `body`.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try storage.withUnsafeBytes { bytes in try body(bytes) }
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
        lhs.storage.constantTimeEquals(rhs.storage)
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
