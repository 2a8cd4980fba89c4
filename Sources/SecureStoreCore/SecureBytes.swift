// One byte buffer that wipes itself, in swift-crypto's `SecureBytes` shape: the storage of every secret type.
internal import Glibc

/// Overwrites `count` bytes at `pointer` with zeros in a way the optimizer may not remove (`explicit_bzero`).
package func secureZero(_ pointer: UnsafeMutableRawPointer?, _ count: Int) {
    guard let pointer, count > 0 else { return }
    explicit_bzero(pointer, count)
}

/// Overwrites the whole of `buffer` with zeros (`explicit_bzero`).
package func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    secureZero(buffer.baseAddress, buffer.count)
}

/// Calls `body` with a zero-filled heap buffer of `count` bytes that is wiped (``secureZero(_:)``) and freed when
/// `body` returns or throws: for a secret's temporary form (decoded hex, a recovery code's payload).
package func withZeroedBuffer<R, E: Error>(
    count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
) throws(E) -> R {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
    buffer.initializeMemory(as: UInt8.self, repeating: 0)
    defer {
        secureZero(buffer)
        buffer.deallocate()
    }
    return try body(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
}

/// A heap buffer of bytes that is wiped with `explicit_bzero` — its whole capacity — when the last reference
/// goes away. The bytes are written only while it is built (``init(count:build:)``), then reached only through
/// ``withUnsafeBytes(_:)``: there is no mutable access afterwards, because copies of a wrapping value share the
/// buffer. ``constantTimeEquals(_:)`` compares in time that depends only on the length (there is no `==`, so that
/// a comparison that leaks timing cannot be written by accident). Shared by reference: a type that wraps it is a
/// value whose copies share one buffer, as `Secret` and `DatabaseKey` do.
package final class SecureBytes: @unchecked Sendable {
    // @unchecked: the buffer is written only while the instance is being built (the initializers and the
    // `build` closure), then only read; it is freed once, in deinit.
    private let pointer: UnsafeMutableRawPointer
    /// The number of bytes held.
    package let count: Int
    private let capacity: Int

    /// A buffer of `count` zero bytes, filled by `build` before anyone else sees it.
    package init(count: Int, build: (UnsafeMutableRawBufferPointer) throws -> Void = { _ in }) rethrows {
        self.count = count
        capacity = max(count, 1)
        pointer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        pointer.initializeMemory(as: UInt8.self, repeating: 0, count: capacity)
        do {
            try build(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            secureZero(pointer, capacity)
            pointer.deallocate()
            throw error
        }
    }

    /// A copy of `bytes`. The caller wipes its own copy if it has one.
    package convenience init(_ bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { buffer in
            for (index, byte) in bytes.enumerated() { buffer[index] = byte }
        }
    }

    deinit {
        secureZero(pointer, capacity)
        pointer.deallocate()
    }

    /// Calls `body` with the bytes. Do not let the pointer, or a copy of the bytes, escape.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Whether both hold the same bytes, in time that depends only on the length.
    package func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<count {
            difference |= pointer.load(fromByteOffset: index, as: UInt8.self)
                ^ other.pointer.load(fromByteOffset: index, as: UInt8.self)
        }
        return difference == 0
    }
}
