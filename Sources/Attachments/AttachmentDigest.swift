// SHA-256 of attachments, computed by libcrypto (OpenSSL's EVP interface): the library SQLCipher already links
// for its own encryption. No digest is written by hand here.
internal import CLibCrypto
internal import SecureStoreCore

/// A running SHA-256 digest: feed it bytes with ``update(_:)``, read the 32-byte result with ``finish()``.
///
/// The corresponding C functions are `EVP_DigestInit_ex`, `EVP_DigestUpdate` and `EVP_DigestFinal_ex`.
package final class SHA256Digest {
    /// The byte count of a SHA-256 digest.
    package static let byteCount = 32

    private let context: OpaquePointer

    /// A new digest, or `nil` when libcrypto cannot make one (out of memory).
    package init?() {
        guard let context = EVP_MD_CTX_new() else { return nil }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            EVP_MD_CTX_free(context)
            return nil
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `bytes` to the digest.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        // EVP_DigestUpdate fails only for a context that was never initialized, which init rules out.
        _ = EVP_DigestUpdate(context, base, bytes.count)
    }

    /// The digest of everything added, as 32 bytes. The digest cannot be updated afterwards.
    package func finish() -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Self.byteCount)
        var length: UInt32 = 0
        output.withUnsafeMutableBufferPointer { buffer in
            _ = EVP_DigestFinal_ex(context, buffer.baseAddress, &length)
        }
        return output
    }

    /// The SHA-256 digest of `bytes`, as 64 lowercase hexadecimal digits.
    static func hex(of bytes: UnsafeRawBufferPointer) -> String? {
        guard let digest = SHA256Digest() else { return nil }
        digest.update(bytes)
        return hexString(digest.finish())
    }
}
