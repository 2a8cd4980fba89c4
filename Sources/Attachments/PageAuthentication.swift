// Which page of a SQLCipher file fails its authentication. SQLCipher says only that a page failed (and, in 3.4.1,
// not even that: the pager's bare SQLITE_ERROR), never which; this recomputes each page's HMAC the way SQLCipher 3's
// algorithms do (SecureStore's formats: AES-256-CBC, HMAC-SHA1, a raw 256-bit key) so an error can name the page.
internal import CLibCrypto
internal import EncryptedDatabase
internal import Foundation
internal import SecureStoreCore
internal import Glibc

enum PageAuthentication {
    /// The 1-based numbers of the pages of the file at `path` whose HMAC does not match (at most `limit`), for a file
    /// in SQLCipher 3's algorithms keyed with the raw `key` and `pageSize`-byte pages. Nil when the file cannot be
    /// read. A page that is all zeros counts as failing: SQLCipher 3.4.1 passes such a page as "never written"
    /// without checking it.
    ///
    /// The page format (SQLCipher 3.x, `sqlcipher_page_cipher`): the file's first 16 bytes are the salt; each page
    /// ends with a reserve of 48 bytes (a 16-byte IV, a 20-byte HMAC-SHA1, padding to the AES block); the HMAC covers
    /// the page's ciphertext (page 1 without the salt) and the IV, then the page number as 4 little-endian bytes;
    /// its key is PBKDF2-HMAC-SHA1(key, salt XOR 0x3a, 2 iterations).
    static func failingPages(path: String, key: DatabaseKey, pageSize: Int, limit: Int = 8) -> [Int]? {
        guard let file = try? FileDescriptor.open(path, .readOnly) else { return nil }
        defer { file.close() }
        guard let first = try? file.read(upTo: pageSize), first.count >= 16 else { return nil }
        let salt = Array(first.prefix(16)).map { $0 ^ 0x3a }
        var hmacKey = [UInt8](repeating: 0, count: 32)
        defer { hmacKey.withUnsafeMutableBytes { secureZero($0) } }
        let derived = key.withUnsafeBytes { raw in
            PKCS5_PBKDF2_HMAC_SHA1(
                raw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(raw.count), salt, Int32(salt.count), 2, 32,
                &hmacKey)
        }
        guard derived == 1 else { return nil }
        let reserve = 48
        var failing: [Int] = []
        var number = 1
        var page = first
        while page.count == pageSize, failing.count < limit {
            let offset = number == 1 ? 16 : 0
            let covered = pageSize - reserve + 16 - offset
            var input = [UInt8](page[offset..<(offset + covered)])
            input += withUnsafeBytes(of: UInt32(number).littleEndian) { Array($0) }
            var mac = [UInt8](repeating: 0, count: 20)
            var length: UInt32 = 0
            _ = HMAC(EVP_sha1(), hmacKey, Int32(hmacKey.count), input, input.count, &mac, &length)
            let stored = page[(pageSize - reserve + 16)..<(pageSize - reserve + 36)]
            if !zip(mac, stored).allSatisfy({ $0 == $1 }) || page.allSatisfy({ $0 == 0 }) { failing.append(number) }
            number += 1
            guard let next = try? file.read(upTo: pageSize) else { break }
            page = next
        }
        return failing
    }
}
