// Each device's own Ed25519 signing key (libcrypto's EVP_PKEY_ED25519), kept in the key store beside the sync key,
// and the signed envelope every file a device writes to the remote is wrapped in.
internal import CLibCrypto
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStore
internal import SecureStoreCore
internal import Synchronization

/// A device's Ed25519 private key (its 32-byte seed) in a zeroing buffer, and its public key. Every call into
/// libcrypto for Ed25519 goes through this type; the seed never leaves it but through the key store.
struct SyncSigningKey: Sendable {
    static let seedSize = 32
    static let publicKeySize = 32
    static let signatureSize = 64

    let seed: SecureBytes
    let publicKey: [UInt8]

    /// The key of `seed`, or nil when libcrypto refuses it.
    init?(seed: SecureBytes) {
        guard let pkey = Self.privateKey(seed) else { return nil }
        defer { EVP_PKEY_free(pkey) }
        var length = Self.publicKeySize
        var publicKey = [UInt8](repeating: 0, count: Self.publicKeySize)
        guard EVP_PKEY_get_raw_public_key(pkey, &publicKey, &length) == 1, length == Self.publicKeySize else { return nil }
        self.seed = seed
        self.publicKey = publicKey
    }

    /// A new random key.
    static func random() -> SyncSigningKey? {
        var random = KeyFile.randomBytes(seedSize)
        defer { random.withUnsafeMutableBytes { secureZero($0) } }
        return SyncSigningKey(seed: SecureBytes(random))
    }

    private static func privateKey(_ seed: SecureBytes) -> OpaquePointer? {
        seed.withUnsafeBytes { bytes in
            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
    }

    /// The Ed25519 signature of `message` (64 bytes), or nil when libcrypto fails. The corresponding C function is
    /// `EVP_DigestSign`.
    func sign(_ message: [UInt8]) -> [UInt8]? {
        guard let pkey = Self.privateKey(seed) else { return nil }
        defer { EVP_PKEY_free(pkey) }
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, pkey) == 1 else { return nil }
        var signature = [UInt8](repeating: 0, count: Self.signatureSize)
        var length = Self.signatureSize
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == Self.signatureSize else {
            return nil
        }
        return signature
    }

    /// Whether `signature` is `publicKey`'s Ed25519 signature of `message`. The corresponding C function is
    /// `EVP_DigestVerify`.
    static func verify(_ signature: some Collection<UInt8>, of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == signatureSize, publicKey.count == publicKeySize,
            let pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count)
        else { return false }
        defer { EVP_PKEY_free(pkey) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, pkey) == 1 else { return false }
        let bytes = Array(signature)
        return EVP_DigestVerify(context, bytes, bytes.count, message, message.count) == 1
    }
}

/// The signed envelope: `SSYNCS\0\1 ‖ signer's device id (32 ASCII hex digits) ‖ Ed25519 signature (64) ‖ sealed
/// file`. The signature covers a domain string, the key generation and the sealed file (whose authenticated data
/// already binds the writing device, the file's number and its kind), so a signed file copied into another
/// generation, another device's folder or another name does not verify.
enum SyncSignedFile {
    static let magic = Array("SSYNCS\u{0}\u{1}".utf8)
    static let signerSize = 32
    static let prefixSize = 8 + signerSize + SyncSigningKey.signatureSize

    static func message(_ inner: some Collection<UInt8>, generation: Int) -> [UInt8] {
        Array("securestore sync signature 1\u{0}generation \(generation)\u{0}".utf8) + inner
    }

    /// Set only by the sync benchmark (``SyncBenchmarkHooks``): envelopes carry a zero signature and every check
    /// passes, so that the cost of Ed25519 can be measured against the same work without it.
    static let benchmarkWithoutCrypto = Atomic<Bool>(false)
    /// Ed25519 signatures made and checked in this process (read by the sync benchmark).
    static let signatures = Atomic<Int>(0)
    static let checks = Atomic<Int>(0)

    /// `inner` signed by `device` with `key` for `generation`; nil when libcrypto fails.
    static func wrap(_ inner: [UInt8], device: String, key: SyncSigningKey, generation: Int) -> [UInt8]? {
        guard device.utf8.count == signerSize else { return nil }
        if benchmarkWithoutCrypto.load(ordering: .relaxed) {
            return magic + Array(device.utf8) + [UInt8](repeating: 0, count: SyncSigningKey.signatureSize) + inner
        }
        guard let signature = key.sign(message(inner, generation: generation)) else { return nil }
        signatures.add(1, ordering: .relaxed)
        return magic + Array(device.utf8) + signature + inner
    }

    /// The sealed file inside `file`: itself when it carries no envelope (a file of an earlier version).
    static func inner(_ file: [UInt8]) -> ArraySlice<UInt8> {
        file.count > prefixSize && file.starts(with: magic) ? file[prefixSize...] : file[...]
    }

    /// The device id that signed `file`, or nil when it is not signed.
    static func signer(_ file: [UInt8]) -> String? {
        guard file.count > prefixSize, file.starts(with: magic) else { return nil }
        let id = String(decoding: file[8..<(8 + signerSize)], as: UTF8.self)
        return SyncEngine.isDeviceID(id) ? id : nil
    }

    /// Small files verified before in this process (roster statements, seen vectors, key checks are read at every
    /// sync and rarely change), by SHA-256 of the public key, the generation and the file: only successes are kept, and
    /// the same bytes under the same key verify the same way. At most `verifiedLimit`; emptied when full.
    private static let verified = Mutex<Set<[UInt8]>>([])
    private static let verifiedLimit = 1_024
    private static let cachedSize = 16 * 1024

    /// Whether `file` is signed by the holder of `publicKey` for `generation`.
    static func verify(_ file: [UInt8], publicKey: [UInt8], generation: Int) -> Bool {
        guard signer(file) != nil else { return false }
        if benchmarkWithoutCrypto.load(ordering: .relaxed) { return true }
        let cacheKey = file.count <= cachedSize ? SealedBundle.sha256(publicKey + message(file, generation: generation)) : nil
        if let cacheKey, verified.withLock({ $0.contains(cacheKey) }) { return true }
        let signature = file[(8 + signerSize)..<prefixSize]
        checks.add(1, ordering: .relaxed)
        guard SyncSigningKey.verify(signature, of: message(file[prefixSize...], generation: generation), publicKey: publicKey) else {
            return false
        }
        if let cacheKey {
            verified.withLock { set in
                if set.count >= verifiedLimit { set.removeAll(keepingCapacity: true) }
                set.insert(cacheKey)
            }
        }
        return true
    }
}

extension SyncEngine {
    /// The keychain service of devices' signing keys: `<app>.sync-signing-key`; the account is the device id (a
    /// database restored from a backup keeps its device id, hence its key).
    static func signingKeyService(_ paths: AppPaths) -> String { "\(paths.app).sync-signing-key" }

    /// This device's signing key from the key store, made and stored when there is none (at `sync init`/`join`, or
    /// the first sync of a device set up by an earlier version, or a copy that became a new device). The stored
    /// item is the seed as 64 hexadecimal digits; the temporary copies are zeroed.
    static func signingKey(database: KeyedDatabase, device: String) throws -> SyncSigningKey {
        let service = signingKeyService(database.paths)
        if let secret = try database.keychain.secret(service: service, account: device) {
            let seed = SecureBytes(count: SyncSigningKey.seedSize) { _ in }
            let ok = secret.withUnsafeBytes { text in
                seed.withUnsafeBytes { out in
                    text.count == SyncSigningKey.seedSize * 2 && readHex(text, into: UnsafeMutableRawBufferPointer(mutating: out))
                }
            }
            guard ok, let key = SyncSigningKey(seed: seed) else {
                throw SyncError(SyncError.Code.missingKey, "this device's stored signing key is damaged (not 64 hexadecimal digits); nothing was synced")
            }
            return key
        }
        guard let key = SyncSigningKey.random() else {
            throw SyncError(SyncError.Code.remote, "libcrypto could not make an Ed25519 signing key; nothing was changed")
        }
        let secret = key.seed.withUnsafeBytes { bytes in
            Secret(count: bytes.count * 2) { out in _ = writeHex(bytes, into: out) }
        }
        try database.keychain.set(secret, service: service, account: device, label: "SecureStore sync signing key of \(database.name)")
        return key
    }
}

/// Hooks for the sync benchmark only (`make bench-sync`, Docs/performance.md), not an option of the library or the
/// tool: a client must import them with `@_spi(Benchmarks) import Sync`.
@_spi(Benchmarks) public enum SyncBenchmarkHooks {
    /// Turns Ed25519 signing and checking off (`false`) or on again (`true`, the default) for the whole process:
    /// off, every file gets a zero signature and every signature check passes (nothing else changes), so that the
    /// benchmark can measure what signing and checking cost. Never turn it off outside a benchmark: a device without
    /// it believes anyone who holds the sync key.
    public static func setSigningAndChecking(_ on: Bool) {
        SyncSignedFile.benchmarkWithoutCrypto.store(!on, ordering: .relaxed)
    }

    /// The Ed25519 signatures made and checked in this process so far (checks answered from the cache of small files
    /// verified before are not counted).
    public static var counts: (signatures: Int, checks: Int) {
        (SyncSignedFile.signatures.load(ordering: .relaxed), SyncSignedFile.checks.load(ordering: .relaxed))
    }

    /// The median time, in microseconds, of one Ed25519 signature and one check of a `bytes`-byte file, each done
    /// `iterations` times with a fresh key (what the sync does per file, key set-up included).
    public static func signAndCheckMicroseconds(bytes: Int, iterations: Int) -> (sign: Double, check: Double) {
        guard let key = SyncSigningKey.random() else { return (0, 0) }
        let file = [UInt8](repeating: 0x5a, count: bytes)
        let clock = ContinuousClock()
        func micro(_ duration: Duration) -> Double {
            Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
        }
        var signing: [Double] = [], checking: [Double] = []
        var signature: [UInt8] = []
        for _ in 0..<max(1, iterations) {
            signing.append(micro(clock.measure { signature = key.sign(file) ?? [] }))
            checking.append(micro(clock.measure { _ = SyncSigningKey.verify(signature, of: file, publicKey: key.publicKey) }))
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return (median(signing), median(checking))
    }
}
