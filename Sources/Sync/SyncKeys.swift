// The sync key: how it is stored, its pairing code, and finding it again after a restore.
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStore
internal import SecureStoreCore

extension SyncEngine {
    /// The sync key of a database restored from a backup: a restore gives the database a new id
    /// (Docs/key-lifecycle.md) while its sync key stays stored under the id it had. The key among this
    /// application's sync keys that opens the remote's key check of its generation is the group's: it is stored
    /// under the new id too (the old item stays: it is the key of the database the restore set aside) and returned.
    /// Nil when sync is not set up, or no stored key fits.
    static func keyOfRestoredDatabase(_ database: KeyedDatabase) throws -> Secret? {
        let remote = try database.read { db -> SyncRemote? in
            guard try db.tableExists("sync_state") else { return nil }
            return try db.fetchOne("SELECT remote_kind, remote_location FROM sync_state") { row in
                try SyncRemote(storedKind: try row.string(at: 0), location: try row.string(at: 1))
            }
        }
        guard let remote else { return nil }
        let root = transport(remote, clone: clonePath(database)).root
        let service = keyService(database.paths)
        for account in try database.keychain.accounts(service: service) where account != database.databaseID {
            guard let secret = try database.keychain.secret(service: service, account: account),
                let (generation, key) = try? storedKey(secret),
                let check = try? SyncLayout.read(layoutRoot(root, generation: generation) + "/" + SyncLayout.keyCheck),
                SealedBundle.checks(check, key: key)
            else { continue }
            try database.keychain.set(
                secret, service: service, account: database.databaseID, label: "SecureStore sync key of \(database.name)")
            return secret
        }
        return nil
    }

    /// The key item's text: 64 hexadecimal digits (generation 1), or `g<N>:` and 64 hexadecimal digits.
    static func storedKey(_ secret: Secret) throws -> (generation: Int, key: SyncKey) {
        let bytes = SecureBytes(count: SyncKey.byteCount) { _ in }
        var generation = 1
        let ok = secret.withUnsafeBytes { text -> Bool in
            var hex = text
            if let colon = text.firstIndex(of: UInt8(ascii: ":")), text.first == UInt8(ascii: "g"),
                let number = Int(String(decoding: text[1..<colon], as: UTF8.self)), number > 1
            {
                generation = number
                hex = UnsafeRawBufferPointer(rebasing: text[(colon + 1)...])
            }
            return bytes.withUnsafeBytes { out in
                hex.count == SyncKey.byteCount * 2 && readHex(hex, into: UnsafeMutableRawBufferPointer(mutating: out))
            }
        }
        guard ok else { throw SyncError(SyncError.Code.missingKey, "the stored sync key is damaged (not 64 hexadecimal digits)") }
        return (generation, SyncKey(bytes: bytes))
    }

    static func storedSecret(_ key: SyncKey, generation: Int) -> Secret {
        let prefix = generation == 1 ? [] : Array("g\(generation):".utf8)
        return key.bytes.withUnsafeBytes { bytes in
            Secret(count: prefix.count + bytes.count * 2) { out in
                for (index, byte) in prefix.enumerated() { out[index] = byte }
                _ = writeHex(bytes, into: UnsafeMutableRawBufferPointer(rebasing: out[prefix.count...]))
            }
        }
    }

    /// The pairing code of `key`: the recovery code's form (56 Crockford base32 characters with a CRC-24).
    static func pairingCode(_ key: SyncKey) throws -> Secret {
        let databaseKey = try key.bytes.withUnsafeBytes { try DatabaseKey(bytes: $0) }
        return RecoveryCode.code(for: databaseKey)
    }

    static func key(fromPairingCode code: Secret) throws -> SyncKey {
        do {
            let databaseKey = try RecoveryCode.key(from: code)
            return SyncKey(bytes: databaseKey.withUnsafeBytes { SecureBytes($0) })
        } catch {
            throw SyncError(
                SyncError.Code.invalidPairingCode,
                error.message.replacingOccurrences(of: "recovery code", with: "pairing code")
                    .replacingOccurrences(of: "the code you wrote down", with: "the code 'sync init' printed"))
        }
    }
}
