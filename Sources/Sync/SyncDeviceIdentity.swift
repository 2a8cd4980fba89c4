// A device is a database on one machine: a copy of the database on another machine becomes a new device before it
// writes anything, so two machines never extend one device's chain of bundles.
internal import EncryptedDatabase
internal import Foundation
internal import Keychain
internal import SecureStoreCore

extension SyncEngine {
    /// This machine's identity for sync: a SHA-256 of `/etc/machine-id` (systemd's machine id, which a copied
    /// disk image or home folder does not carry to another machine) and a constant of ours, so the stored value
    /// tells nothing about the machine id itself. Nil when the machine has none (a container without one): no
    /// copy is detected there.
    static func machineFingerprint(_ path: String = "/etc/machine-id") -> String? {
        guard let bytes = try? SyncLayout.read(path) else { return nil }
        let id = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard id.utf8.count == 32, id.utf8.allSatisfy({ isHexDigit($0) }) else { return nil }
        return hexString(SealedBundle.sha256(Array(("securestore sync machine " + id).utf8)))
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
    }

    /// Records the machine this database syncs on, or, when the database was copied to another machine (its
    /// recorded machine is not this one), makes it a new device: a new device id, its own chain from bundle 1,
    /// its unsent edits relabelled as the new device's, and the device it was copied from known as another device
    /// at the position the copy had (so that device's later bundles apply here). Returns the id of the device it
    /// was copied from, or nil. One write transaction: two processes that start at once switch once.
    static func adoptMachine(_ database: any DatabaseWriter) throws -> String? {
        guard let here = machineFingerprint() else { return nil }
        // Read first: the usual case (this machine, recorded) takes no write lock (`sync status` stays a read).
        let recordedHere = try database.read { db in
            try db.tableExists("sync_machine") && db.scalar("SELECT machine FROM sync_machine", as: String.self) == here
        }
        if recordedHere { return nil }
        return try database.write { db -> String? in
            guard try db.tableExists("sync_state") else { return nil }
            try db.execute(
                "CREATE TABLE IF NOT EXISTS sync_machine (singleton INTEGER PRIMARY KEY CHECK (singleton = 0), machine TEXT NOT NULL)")
            guard let recorded = try db.scalar("SELECT machine FROM sync_machine", as: String.self) else {
                try db.execute("INSERT INTO sync_machine (singleton, machine) VALUES (0, ?)", [here])
                return nil
            }
            guard recorded != here else { return nil }
            let (old, sequence, lastHash) = try db.fetchOne("SELECT device, sequence, last_hash FROM sync_state") { row in
                (try row.string(at: 0), try row.int64(at: 1), try row.data(at: 2))
            }!
            let new = hexString(KeyFile.randomBytes(16))
            if sequence > 0 {
                try db.execute(
                    "INSERT OR REPLACE INTO sync_devices (device, name, sequence, last_hash, applied_at) VALUES (?, '', ?, ?, ?)",
                    [old, sequence, lastHash, microsecondsSince1970(Date())])
            }
            try SyncClock.relabelUnsent(db, from: old, to: new)
            try db.execute(
                "UPDATE sync_state SET device = ?, sequence = 0, last_hash = ? WHERE singleton = 0", [new, Data(count: 32)])
            try db.execute("UPDATE sync_machine SET machine = ? WHERE singleton = 0", [here])
            return old
        }
    }
}
