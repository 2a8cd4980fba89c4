// Joining by approval, in the shape Syncthing pairs devices (Docs/sync.md, "Joining by approval"): a new device
// writes a request holding an X25519 public key and shows its fingerprint; a device of the group that is told that
// fingerprint seals the group key to that public key and signs the grant; the new device, told the approving
// device's fingerprint, believes the grant only when that device signed it and the group's own files agree.
internal import CLibCrypto
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
public import SecureStore
internal import SecureStoreCore

/// A join request: what `sync request` wrote and the fingerprint to read out to a device of the group.
public struct SyncJoinRequest: Sendable, Equatable {
    /// The request's fingerprint (6 groups of 4 Crockford base32
    /// characters), what `sync approve` takes.
    public let fingerprint: String
    /// The request file, relative to the remote's root: `requests/<fingerprint without dashes>`.
    public let path: String
}

/// What ``SyncEngine/approve(_:)`` did.
public struct SyncApproval: Sendable, Equatable {
    /// The fingerprint of the request approved.
    public let requester: String
    /// This device's fingerprint (of its Ed25519 signing key), what the new device's `sync join --approved-by` takes.
    public let approver: String
    /// The key generation whose key the grant holds.
    public let generation: Int
    /// The grant file, relative to the remote's root: `grants/<this device's id>/<requester's fingerprint>`.
    public let grant: String
}

/// An X25519 key pair (libcrypto's `EVP_PKEY_X25519`); the private key in a zeroing buffer. Every call into libcrypto
/// for X25519 goes through this type.
struct SyncJoinKey: Sendable {
    static let size = 32
    let privateKey: SecureBytes
    let publicKey: [UInt8]

    init?(privateKey: SecureBytes) {
        guard privateKey.withUnsafeBytes({ $0.count }) == Self.size, let pkey = Self.key(privateKey) else { return nil }
        defer { EVP_PKEY_free(pkey) }
        var publicKey = [UInt8](repeating: 0, count: Self.size)
        var length = Self.size
        guard EVP_PKEY_get_raw_public_key(pkey, &publicKey, &length) == 1, length == Self.size else { return nil }
        self.privateKey = privateKey
        self.publicKey = publicKey
    }

    static func random() -> SyncJoinKey? {
        var random = KeyFile.randomBytes(size)
        defer { random.withUnsafeMutableBytes { secureZero($0) } }
        return SyncJoinKey(privateKey: SecureBytes(random))
    }

    private static func key(_ bytes: SecureBytes) -> OpaquePointer? {
        bytes.withUnsafeBytes { raw in
            EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count)
        }
    }

    /// The X25519 shared secret with `peer`'s public key, or nil when libcrypto refuses it (or it is all zeros: a
    /// low-order point). The corresponding C function is `EVP_PKEY_derive`.
    func sharedSecret(with peer: [UInt8]) -> SecureBytes? {
        guard peer.count == Self.size, let pkey = Self.key(privateKey) else { return nil }
        defer { EVP_PKEY_free(pkey) }
        guard let peerKey = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, peer, peer.count) else { return nil }
        defer { EVP_PKEY_free(peerKey) }
        guard let context = EVP_PKEY_CTX_new(pkey, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peerKey) == 1 else { return nil }
        var ok = false
        let secret = SecureBytes(count: Self.size) { out in
            var length = Self.size
            ok = EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) == 1 && length == Self.size
                && out.contains { $0 != 0 }
        }
        return ok ? secret : nil
    }
}

/// The files of joining by approval and their cryptography.
enum SyncGrantFiles {
    static let requests = "requests"
    static let grants = "grants"
    static let requestMagic = Array("SSYNCQ\u{0}\u{1}".utf8)
    static let grantMagic = Array("SSYNCG\u{0}\u{1}".utf8)
    static let domain = "securestore sync grant 1"
    /// Bytes of a fingerprint: 120 bits, 24 Crockford base32 characters.
    static let fingerprintSize = 15
    /// `magic ‖ generation (4, big-endian) ‖ approver's Ed25519 key ‖ requester's X25519 key ‖ ephemeral X25519 key`.
    static let headerSize = 8 + 4 + 32 * 3
    static let nonceSize = 12
    static let tagSize = 16

    /// The fingerprint of a request's X25519 public key.
    static func requestFingerprint(_ publicKey: [UInt8]) -> [UInt8] {
        Array(SealedBundle.sha256(Array("securestore sync join request 1".utf8) + [0] + publicKey).prefix(fingerprintSize))
    }

    /// The fingerprint of a device's Ed25519 signing key.
    static func deviceFingerprint(_ publicKey: [UInt8]) -> [UInt8] {
        Array(SealedBundle.sha256(Array("securestore sync device 1".utf8) + [0] + publicKey).prefix(fingerprintSize))
    }

    /// `fingerprint` as 24 Crockford base32 characters, most significant bit first, without dashes.
    static func compact(_ fingerprint: [UInt8]) -> String {
        let alphabet = Array(RecoveryCode.alphabet.utf8)
        var out: [UInt8] = []
        var buffer = 0, bits = 0
        for byte in fingerprint {
            buffer = (buffer << 8) | Int(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[(buffer >> bits) & 31])
            }
            buffer &= (1 << bits) - 1
        }
        if bits > 0 { out.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// `fingerprint` as people read it: 6 groups of 4 characters separated by dashes.
    static func text(_ fingerprint: [UInt8]) -> String {
        let letters = Array(compact(fingerprint))
        return stride(from: 0, to: letters.count, by: 4).map { String(letters[$0..<min($0 + 4, letters.count)]) }.joined(separator: "-")
    }

    /// The fingerprint `text` stands for: 24 characters of Crockford's base32 in any case, dashes and spaces ignored,
    /// `I` and `L` read as 1 and `O` as 0; nil for anything else.
    static func parse(_ text: String) -> [UInt8]? {
        let alphabet = Array(RecoveryCode.alphabet.utf8)
        var values: [Int] = []
        for byte in text.utf8 where byte != UInt8(ascii: "-") && byte != UInt8(ascii: " ") {
            var upper = byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte
            if upper == UInt8(ascii: "I") || upper == UInt8(ascii: "L") { upper = UInt8(ascii: "1") }
            if upper == UInt8(ascii: "O") { upper = UInt8(ascii: "0") }
            guard let index = alphabet.firstIndex(of: upper) else { return nil }
            values.append(index)
        }
        guard values.count == 24 else { return nil }
        var out: [UInt8] = []
        var buffer = 0, bits = 0
        for value in values {
            buffer = (buffer << 5) | value
            bits += 5
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((buffer >> bits) & 0xFF))
                buffer &= (1 << bits) - 1
            }
        }
        return out.count == fingerprintSize ? out : nil
    }

    static func requestPath(_ fingerprint: [UInt8]) -> String { requests + "/" + compact(fingerprint) }
    static func grantPath(approver device: String, _ fingerprint: [UInt8]) -> String { grants + "/" + device + "/" + compact(fingerprint) }

    /// The X25519 public key of a request file, or nil when it is not one.
    static func requestKey(_ file: [UInt8]) -> [UInt8]? {
        guard file.count == requestMagic.count + SyncJoinKey.size, file.starts(with: requestMagic) else { return nil }
        return Array(file[requestMagic.count...])
    }

    static func header(generation: Int, approver: [UInt8], requester: [UInt8], ephemeral: [UInt8]) -> [UInt8] {
        let number = UInt32(clamping: generation)
        return grantMagic + [UInt8(number >> 24), UInt8((number >> 16) & 0xFF), UInt8((number >> 8) & 0xFF), UInt8(number & 0xFF)]
            + approver + requester + ephemeral
    }

    private static func hmac(_ key: UnsafeRawBufferPointer, _ input: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        var length: UInt32 = 32
        return HMAC(
            EVP_sha256(), key.baseAddress, Int32(key.count), input.baseAddress?.assumingMemoryBound(to: UInt8.self),
            input.count, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) != nil && length == 32
    }

    /// The AES-256-GCM key of a grant: HKDF-SHA256 (RFC 5869, one block) of the X25519 shared secret, salted with the
    /// domain string, its info the domain, the approving device's id and the header (the generation and the three
    /// public keys), so that a grant opens only for the request, the generation and the approver it was made for.
    static func sealingKey(shared: SecureBytes, approverDevice: String, header: [UInt8]) -> SyncKey? {
        let salt = Array(domain.utf8)
        var ok = true
        let prk = SecureBytes(count: 32) { out in
            ok = shared.withUnsafeBytes { ikm in salt.withUnsafeBytes { hmac($0, ikm, into: out) } }
        }
        let info = Array(domain.utf8) + [0] + Array(approverDevice.utf8) + [0] + header + [1]
        let okm = SecureBytes(count: 32) { out in
            ok = ok && prk.withUnsafeBytes { key in info.withUnsafeBytes { hmac(key, $0, into: out) } }
        }
        return ok ? SyncKey(bytes: okm) : nil
    }

    static func aad(approverDevice: String, header: [UInt8]) -> [UInt8] {
        Array(domain.utf8) + [0] + Array(approverDevice.utf8) + [0] + header
    }
}

extension SyncEngine {
    /// The keychain service of a pending join request's X25519 private key: `<app>.sync-join-key` (the account is the
    /// database id). Deleted once the device has joined, or with the database's keys.
    public static func joinKeyService(_ paths: AppPaths) -> String { "\(paths.app).sync-join-key" }

    private static func storedJoinKey(_ database: KeyedDatabase) throws -> SyncJoinKey? {
        guard let secret = try database.keychain.secret(service: joinKeyService(database.paths), account: database.databaseID) else {
            return nil
        }
        let bytes = SecureBytes(count: SyncJoinKey.size) { _ in }
        let ok = secret.withUnsafeBytes { text in
            bytes.withUnsafeBytes { out in
                text.count == SyncJoinKey.size * 2 && readHex(text, into: UnsafeMutableRawBufferPointer(mutating: out))
            }
        }
        guard ok, let key = SyncJoinKey(privateKey: bytes) else {
            throw SyncError(
                SyncError.Code.missingKey, "this database's stored join request key is damaged (not 64 hexadecimal digits); nothing was changed")
        }
        return key
    }

    /// This device's fingerprint as `sync join --approved-by` takes it: of its Ed25519 signing key.
    public var fingerprint: String { SyncGrantFiles.text(SyncGrantFiles.deviceFingerprint(signingKey.publicKey)) }

    /// Asks to join the sync group at `remote` without its pairing code: makes an X25519 key pair (the private key
    /// kept in the database's key store), writes its public key to `requests/<fingerprint>` of the remote, and
    /// returns the fingerprint to read out to a device of the group (``approve(_:)``). Sync is not set up: once
    /// approved, ``join(database:remote:tables:approvedBy:)`` finishes. Run again, it writes the same request.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/alreadyEnabled`` when the database syncs already,
    ///   ``SyncError/Code-swift.struct/remote`` when the remote holds no sync group. Nothing is changed then.
    public static func requestToJoin(database: KeyedDatabase, remote: SyncRemote) throws -> SyncJoinRequest {
        try refuseIfEnabled(database)
        let transport = Self.transport(remote, clone: clonePath(database))
        try transport.pull()
        guard FileManager.default.fileExists(atPath: transport.root + "/" + SyncLayout.keyCheck) || newestGeneration(transport.root) > 1 else {
            throw SyncError(
                SyncError.Code.remote,
                "the remote \(remote) holds no sync group (no key-check file); run 'sync init' on the first device; nothing was changed")
        }
        let joinKey: SyncJoinKey
        if let stored = try storedJoinKey(database) {
            joinKey = stored
        } else {
            guard let made = SyncJoinKey.random() else {
                throw SyncError(SyncError.Code.remote, "libcrypto could not make an X25519 key; nothing was changed")
            }
            let secret = made.privateKey.withUnsafeBytes { bytes in
                Secret(count: bytes.count * 2) { out in _ = writeHex(bytes, into: out) }
            }
            try database.keychain.set(
                secret, service: joinKeyService(database.paths), account: database.databaseID,
                label: "SecureStore sync join request of \(database.name)")
            joinKey = made
        }
        let fingerprint = SyncGrantFiles.requestFingerprint(joinKey.publicKey)
        let relative = SyncGrantFiles.requestPath(fingerprint)
        let file = SyncGrantFiles.requestMagic + joinKey.publicKey
        if (try? SyncLayout.read(transport.root + "/" + relative)) != file {
            try SyncLayout.writeAtomically(file, root: transport.root, relative: relative)
        }
        try transport.publish([relative])
        return SyncJoinRequest(fingerprint: SyncGrantFiles.text(fingerprint), path: relative)
    }

    /// Approves the join request whose public key has `fingerprint` (what `sync request` printed on the new device):
    /// seals this generation's sync key to that key (ephemeral X25519, HKDF-SHA256, AES-256-GCM), signs the grant with
    /// this device's signing key, and publishes it as `grants/<this device>/<fingerprint>`. A request file is found by
    /// the hash of its content, never by its name: a planted file is never approved unless its fingerprint was typed.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/invalidArgument`` for a malformed fingerprint,
    ///   ``SyncError/Code-swift.struct/notFound`` when no request on the remote has it,
    ///   ``SyncError/Code-swift.struct/keyRotated`` when the group moved to a newer key. Nothing is changed then.
    public func approve(_ fingerprint: String) throws -> SyncApproval {
        guard let wanted = SyncGrantFiles.parse(fingerprint) else {
            throw SyncError(
                SyncError.Code.invalidArgument,
                // What was typed is not repeated: it may be a pairing code typed in the wrong place, and stderr ends up in logs.
                "the text given is not a request's fingerprint: 24 letters and digits (Crockford's base32, dashes optional), "
                    + "as 'sync request' printed them on the new device; nothing was changed")
        }
        return try withSyncLock {
            try transport.pull()
            let folder = transport.root + "/" + SyncGrantFiles.requests
            var requester: [UInt8]?
            for name in ((try? listDirectory(folder)) ?? []).sorted() {
                // Only a regular file of a request's size is read (a planted link, FIFO or huge file is not).
                guard let status = try? fileStatus(folder + "/" + name, followingLinks: false), status.isRegularFile,
                    status.size == SyncGrantFiles.requestMagic.count + SyncJoinKey.size,
                    let file = try? SyncLayout.read(folder + "/" + name), let publicKey = SyncGrantFiles.requestKey(file),
                    SyncGrantFiles.requestFingerprint(publicKey) == wanted
                else { continue }
                requester = publicKey
                break
            }
            guard let requester else {
                throw SyncError(
                    SyncError.Code.notFound,
                    "no join request on the remote has the fingerprint \(SyncGrantFiles.text(wanted)): check it against what 'sync request' "
                        + "printed on the new device (or wait until its request has reached this device); nothing was changed")
            }
            // The group as it is now: a device that has not taken a newer key stops here (77), and this device's own
            // statement is on this generation's roster, which the new device checks the grant's signer against.
            try database.write { db in try db.executeScript(Self.rosterSQL) }
            try publishRosterEntry()
            try adoptGeneration(try readRoster())
            guard let ephemeral = SyncJoinKey.random(), let shared = ephemeral.sharedSecret(with: requester) else {
                throw SyncError(SyncError.Code.invalidArgument, "the request's public key is not one X25519 accepts; nothing was changed")
            }
            let header = SyncGrantFiles.header(
                generation: generation, approver: signingKey.publicKey, requester: requester, ephemeral: ephemeral.publicKey)
            guard let sealing = SyncGrantFiles.sealingKey(shared: shared, approverDevice: device, header: header) else {
                throw SyncError(SyncError.Code.remote, "libcrypto could not derive the grant's key; nothing was changed")
            }
            let nonce = KeyFile.randomBytes(SyncGrantFiles.nonceSize)
            var ciphertext = [UInt8](repeating: 0, count: SyncKey.byteCount)
            var plaintext = key.bytes.withUnsafeBytes { Array($0) }
            defer { plaintext.withUnsafeMutableBytes { secureZero($0) } }
            let tag = sealing.bytes.withUnsafeBytes { sealingBytes in
                ciphertext.withUnsafeMutableBytes { out in
                    Sealed.gcm(
                        encrypt: true, key: sealingBytes, nonce: nonce,
                        aad: SyncGrantFiles.aad(approverDevice: device, header: header), input: plaintext, output: out, tag: nil)
                }
            }
            guard let tag, let signed = SyncSignedFile.wrap(header + nonce + ciphertext + tag, device: device, key: signingKey, generation: generation)
            else { throw SyncError(SyncError.Code.remote, "libcrypto could not seal and sign the grant; nothing was changed") }
            let relative = SyncGrantFiles.grantPath(approver: device, wanted)
            try SyncLayout.writeAtomically(signed, root: transport.root, relative: relative)
            try transport.publish([relative])
            return SyncApproval(
                requester: SyncGrantFiles.text(wanted), approver: self.fingerprint, generation: generation, grant: relative)
        }
    }

    /// Joins the sync group at `remote` through a grant a device of the group wrote for this database's request
    /// (``requestToJoin(database:remote:)``, ``approve(_:)``). The grant is believed only when it is signed by the
    /// device whose fingerprint is `approvedBy` (what `sync approve` printed there), that device is on the roster of
    /// the grant's generation and was not removed, the key it holds opens that generation's key check, and no newer
    /// generation proven by a device of the group exists. Then sync is set up as a pairing-code join sets it up, the
    /// request's key is deleted from the key store and the request and grant files from the remote. Call ``sync()``
    /// next.
    ///
    /// - Throws: ``SyncError/Code-swift.struct/notFound`` when this database made no request or no grant for it is
    ///   on the remote yet; ``SyncError/Code-swift.struct/refusedGrant`` when every grant for it is refused (the
    ///   error names each and why); ``SyncError/Code-swift.struct/invalidArgument`` for a malformed fingerprint.
    ///   Nothing is changed then.
    public static func join(database: KeyedDatabase, remote: SyncRemote, tables: [String], approvedBy: String) throws -> SyncEngine {
        guard let approver = SyncGrantFiles.parse(approvedBy) else {
            throw SyncError(
                SyncError.Code.invalidArgument,
                "the text given to --approved-by is not a device's fingerprint: 24 letters and digits (Crockford's base32, dashes "
                    + "optional), as 'sync approve' printed them; nothing was changed")
        }
        try refuseIfEnabled(database)
        guard let joinKey = try storedJoinKey(database) else {
            throw SyncError(
                SyncError.Code.notFound,
                "this database made no join request: run 'securestore sync request' first; nothing was changed")
        }
        let transport = Self.transport(remote, clone: clonePath(database))
        try transport.pull()
        let mine = SyncGrantFiles.requestFingerprint(joinKey.publicKey)
        let name = SyncGrantFiles.compact(mine)
        var refusals: [String] = []
        var accepted: (generation: Int, key: SyncKey, path: String)?
        for approverDevice in ((try? listDirectory(transport.root + "/" + SyncGrantFiles.grants)) ?? []).sorted() {
            let relative = SyncGrantFiles.grants + "/" + approverDevice + "/" + name
            guard fileExists(transport.root + "/" + relative) else { continue }
            switch openGrant(root: transport.root, relative: relative, approverDevice: approverDevice, approver: approver, joinKey: joinKey) {
            case .opened(let generation, let key):
                accepted = (generation, key, relative)
            case .refused(let reason):
                refusals.append("'\(escapedForTerminal(relative))' \(reason)")
            }
            if accepted != nil { break }
        }
        guard let accepted else {
            if refusals.isEmpty {
                throw SyncError(
                    SyncError.Code.notFound,
                    "no grant for this device's request (\(SyncGrantFiles.text(mine))) is on the remote yet: run 'securestore sync approve "
                        + "\(SyncGrantFiles.text(mine))' on a device of the group; nothing was changed")
            }
            throw SyncError(
                SyncError.Code.refusedGrant,
                "refused every grant for this device's request: " + refusals.joined(separator: "; ")
                    + "; no key was stored and nothing was changed")
        }
        try enable(database, remote: remote, tables: tables, key: accepted.key, generation: accepted.generation)
        let engine = try SyncEngine(database: database)  // makes and stores this device's signing key
        _ = try? database.keychain.delete(service: joinKeyService(database.paths), account: database.databaseID)
        let request = SyncGrantFiles.requestPath(mine)
        try? removeFileIfPresent(transport.root + "/" + request)
        try? removeFileIfPresent(transport.root + "/" + accepted.path)
        try? engine.transport.publish([request, accepted.path])
        return engine
    }

    private enum GrantCheck {
        case opened(generation: Int, key: SyncKey)
        case refused(String)
    }

    /// The grant at `relative`, opened and checked (``join(database:remote:tables:approvedBy:)``), or why it is refused.
    private static func openGrant(
        root: String, relative: String, approverDevice: String, approver: [UInt8], joinKey: SyncJoinKey
    ) -> GrantCheck {
        let size = SyncSignedFile.prefixSize + SyncGrantFiles.headerSize + SyncGrantFiles.nonceSize + SyncKey.byteCount + SyncGrantFiles.tagSize
        guard let status = try? fileStatus(root + "/" + relative, followingLinks: false), status.isRegularFile else {
            return .refused("is not a regular file")
        }
        guard status.size == size, let file = try? SyncLayout.read(root + "/" + relative) else { return .refused("is not a grant") }
        guard isDeviceID(approverDevice), SyncSignedFile.signer(file) == approverDevice else {
            return .refused("is not signed by the device whose folder it is in")
        }
        let inner = Array(SyncSignedFile.inner(file))
        let headerSize = SyncGrantFiles.headerSize
        guard inner.count == headerSize + SyncGrantFiles.nonceSize + SyncKey.byteCount + SyncGrantFiles.tagSize,
            inner.starts(with: SyncGrantFiles.grantMagic)
        else { return .refused("is not a grant") }
        let generation = Int(inner[8]) << 24 | Int(inner[9]) << 16 | Int(inner[10]) << 8 | Int(inner[11])
        let approverKey = Array(inner[12..<44]), requesterKey = Array(inner[44..<76]), ephemeral = Array(inner[76..<108])
        guard generation >= 1 else { return .refused("is not a grant") }
        guard requesterKey == joinKey.publicKey else { return .refused("is sealed to another request's key") }
        guard SyncGrantFiles.deviceFingerprint(approverKey) == approver else {
            return .refused(
                "is signed by the device with the fingerprint \(SyncGrantFiles.text(SyncGrantFiles.deviceFingerprint(approverKey))), "
                    + "not by the one named (\(SyncGrantFiles.text(approver)))")
        }
        guard SyncSignedFile.verify(file, publicKey: approverKey, generation: generation) else {
            return .refused("does not carry a valid signature of the device named")
        }
        guard let shared = joinKey.sharedSecret(with: ephemeral),
            let sealing = SyncGrantFiles.sealingKey(shared: shared, approverDevice: approverDevice, header: Array(inner[0..<headerSize]))
        else { return .refused("holds an ephemeral key X25519 refuses") }
        let nonce = Array(inner[headerSize..<(headerSize + SyncGrantFiles.nonceSize)])
        let body = Array(inner[(headerSize + SyncGrantFiles.nonceSize)..<(inner.count - SyncGrantFiles.tagSize)])
        let tag = Array(inner[(inner.count - SyncGrantFiles.tagSize)...])
        var opened = false
        let groupKey = SecureBytes(count: SyncKey.byteCount) { out in
            opened = sealing.bytes.withUnsafeBytes { sealingBytes in
                Sealed.gcm(
                    encrypt: false, key: sealingBytes, nonce: nonce,
                    aad: SyncGrantFiles.aad(approverDevice: approverDevice, header: Array(inner[0..<headerSize])), input: body,
                    output: out, tag: tag) != nil
            }
        }
        guard opened else { return .refused("does not open with this device's request key") }
        let key = SyncKey(bytes: groupKey)
        let generationRoot = layoutRoot(root, generation: generation)
        guard let check = try? SyncLayout.read(generationRoot + "/" + SyncLayout.keyCheck), SealedBundle.checks(check, key: key) else {
            return .refused("holds a key that does not open the key check of generation \(generation)")
        }
        // The roster of the grant's generation, read with the key the grant holds: every statement that verifies under
        // its writer's own key.
        var statements: [String: SyncRosterEntry] = [:]
        for writer in ((try? listDirectory(generationRoot + "/" + SyncRosterFiles.folder)) ?? []).filter(isDeviceID) {
            for number in SyncRosterFiles.numbers(root: generationRoot, device: writer) {
                guard let bytes = try? SyncLayout.read(generationRoot + "/" + SyncRosterFiles.relative(device: writer, number: number)),
                    SyncSignedFile.signer(bytes) == writer, SealedBundle.parseHeader(bytes)?.sequence == number,
                    let plaintext = SealedBundle.open(bytes, device: SyncRosterFiles.aadDevice(writer), key: key),
                    let entry = SyncRosterEntry.decode(plaintext, generation: generation),
                    SyncSignedFile.verify(bytes, publicKey: entry.publicKey, generation: generation)
                else { continue }
                statements[writer] = entry
                break
            }
        }
        guard statements[approverDevice]?.publicKey == approverKey else {
            return .refused("is signed by a device that is not on the group's roster of generation \(generation)")
        }
        if let removal = statements.values.flatMap(\.removals).first(where: { $0.generation == generation }) {
            return .refused(
                "is of generation \(generation), in which device \(removal.device.prefix(8)) was removed from the group (it still holds "
                    + "that key): ask for a new approval")
        }
        for (name, number) in generationFolders(root) where number > generation {
            guard let newer = try? SyncLayout.read(root + "/" + name + "/" + SyncLayout.keyCheck), let signer = SyncSignedFile.signer(newer),
                let member = statements[signer], SyncSignedFile.verify(newer, publicKey: member.publicKey, generation: number)
            else { continue }
            return .refused(
                "is of generation \(generation), but the group has moved to generation \(number) since (a device was removed): ask for a "
                    + "new approval")
        }
        return .opened(generation: generation, key: key)
    }

    private static func generationFolders(_ root: String) -> [(String, Int)] {
        ((try? listDirectory(root)) ?? []).compactMap { name in
            guard name.hasPrefix("generation-"), let number = Int(name.dropFirst("generation-".count)) else { return nil }
            return (name, number)
        }
    }
}
