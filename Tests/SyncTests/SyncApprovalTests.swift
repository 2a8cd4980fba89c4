import EncryptedDatabase
import Foundation
import Keychain
import SecureStore
import SecureStoreCore
import Testing
import TestSupport
@testable import Sync
import Tasks

/// Joining by approval (issue 32, part 2; Docs/sync.md "Joining by approval"): the X25519 exchange, the fingerprints,
/// and the join key's life in the key store.
@Suite(.serialized) struct SyncApprovalTests {
    private func hex(_ text: String) -> [UInt8] { bytes(fromHex: text) ?? [] }

    /// RFC 7748, section 6.1: libcrypto's X25519 as this code calls it gives the published public keys and shared
    /// secret, from either side.
    @Test func x25519MatchesRFC7748() throws {
        let alice = try #require(SyncJoinKey(privateKey: SecureBytes(hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))))
        let bob = try #require(SyncJoinKey(privateKey: SecureBytes(hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))))
        #expect(alice.publicKey == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        #expect(bob.publicKey == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(try #require(alice.sharedSecret(with: bob.publicKey)).withUnsafeBytes { hexString($0) } == shared)
        #expect(try #require(bob.sharedSecret(with: alice.publicKey)).withUnsafeBytes { hexString($0) } == shared)
        // A low-order point (all zeros) gives an all-zero secret: refused.
        #expect(alice.sharedSecret(with: [UInt8](repeating: 0, count: 32)) == nil)
        #expect(alice.sharedSecret(with: [1, 2, 3]) == nil)
    }

    /// A fingerprint reads back as itself however it is typed (case, dashes, spaces, I/L for 1, O for 0); anything but
    /// 24 characters of the alphabet is not one.
    @Test func fingerprintsReadBackHoweverTheyAreTyped() throws {
        for _ in 0..<200 {
            let key = try #require(SyncJoinKey.random())
            let fingerprint = SyncGrantFiles.requestFingerprint(key.publicKey)
            let text = SyncGrantFiles.text(fingerprint)
            #expect(text.range(of: "^[0-9A-Z]{4}(-[0-9A-Z]{4}){5}$", options: .regularExpression) != nil, "\(text)")
            #expect(SyncGrantFiles.parse(text) == fingerprint)
            #expect(SyncGrantFiles.parse(text.lowercased().replacingOccurrences(of: "-", with: " ")) == fingerprint)
            #expect(SyncGrantFiles.parse(text.replacingOccurrences(of: "1", with: "l").replacingOccurrences(of: "0", with: "O")) == fingerprint)
        }
        #expect(SyncGrantFiles.parse("0123-4567-89AB-CDEF-GHJK-MNP") == nil)  // 23
        #expect(SyncGrantFiles.parse("0123-4567-89AB-CDEF-GHJK-MNPQR") == nil)  // 25
        #expect(SyncGrantFiles.parse("0123-4567-89AB-CDEF-GHJK-MNPU") == nil)  // U is not in the alphabet
        #expect(SyncGrantFiles.parse("") == nil)
    }

    /// The join key lives in the key store from `requestToJoin` until the join, then is deleted; the key the grant
    /// brings is the group's; the database never holds the join key. A grant whose generation bytes are changed does
    /// not verify and stores nothing.
    @Test func theJoinKeyIsInTheKeyStoreUntilTheJoin() throws {
        let folder = try TemporaryDirectory()
        let remote = SyncRemote.folder(folder.path + "/remote")
        let a = try SyncDevice_(), c = try SyncDevice_()
        _ = try a.initialize(remote)
        let request = try SyncEngine.requestToJoin(database: c.database, remote: remote)
        let service = "\(c.app).sync-join-key"
        let stored = try #require(try c.keychain.secret(service: service, account: c.database.databaseID))
        #expect(stored.withUnsafeBytes { $0.count } == 64)
        #expect(try SyncEngine.requestToJoin(database: c.database, remote: remote) == request)
        let approval = try a.engine.approve(request.fingerprint)
        #expect(approval.approver == a.engine.fingerprint)

        // The generation changed from 1 to 2 in the grant (a tamperer wanting it read as another generation's).
        let grant = folder.path + "/remote/" + approval.grant
        let genuine = try SyncLayout.read(grant)
        var tampered = genuine
        tampered[SyncSignedFile.prefixSize + 11] = 2
        try Data(tampered).write(to: URL(fileURLWithPath: grant))
        #expect(throws: SyncError.self) {
            try SyncEngine.join(database: c.database, remote: remote, tables: ["tasks"], approvedBy: approval.approver)
        }
        #expect(try c.database.read { try $0.tableExists("sync_state") } == false)
        #expect(try c.keychain.secret(service: "\(c.app).sync-key", account: c.database.databaseID) == nil)

        try Data(genuine).write(to: URL(fileURLWithPath: grant))
        c.engine = try SyncEngine.join(database: c.database, remote: remote, tables: ["tasks"], approvedBy: approval.approver)
        #expect(c.engine.key.bytes.constantTimeEquals(a.engine.key.bytes))
        #expect(try c.keychain.secret(service: service, account: c.database.databaseID) == nil)
        let seedHex = stored.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        try c.database.writeWithoutTransaction { db in try db.checkpoint() }
        #expect(try Data(contentsOf: c.database.url).range(of: Data(seedHex.utf8)) == nil)
        _ = try c.tasks.create(title: "from C")
        try c.sync()
        try a.sync()
        #expect(try a.rows() == c.rows())
    }
}
