// The sync module's error: a code to match on and a message a person can act on.

/// An error of the sync engine: a code a caller can match on and a message that states what happened and
/// what was (not) changed. Messages never contain a key, a pairing code or a row's values.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value a caller can match on. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable name for the code.
        public let name: String
        /// A code named `name`.
        public init(_ name: String) { self.name = name }
        /// The code's name.
        public var description: String { name }

        /// Matches a code against an error in a `catch` pattern: `catch SyncError.Code.refusedBundle`.
        public static func ~= (pattern: Code, value: any Error) -> Bool {
            (value as? SyncError)?.code == pattern
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence that states what happened and what was (not) changed.
    public let message: String
    /// The remote file the error is about (a refused bundle), when there is one.
    public let path: String?
    /// What the sync round did before it reported this error (a round applies and sends all it can first), when
    /// the error comes from ``SyncEngine/sync()``; nil otherwise.
    public internal(set) var report: SyncReport?

    /// An error with `code`, `message` and, where known, the file it is about.
    public init(_ code: Code, _ message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.report = nil
    }

    /// `code: message`.
    public var description: String { "\(code.name): \(message)" }
}

extension SyncError.Code {
    /// A table, option or remote given by the caller is not acceptable (a rowid table, a bad URL).
    public static let invalidArgument = Self("invalidArgument")
    /// Sync is not set up on this database.
    public static let notEnabled = Self("notEnabled")
    /// Sync is already set up on this database (or the remote already holds a sync group).
    public static let alreadyEnabled = Self("alreadyEnabled")
    /// The sync key is not in the key store.
    public static let missingKey = Self("missingKey")
    /// A pairing code is malformed, or does not open the remote's sync group.
    public static let invalidPairingCode = Self("invalidPairingCode")
    /// A bundle on the remote was refused (forged, tampered, truncated, reordered, replayed); nothing of it
    /// was applied. ``SyncError/path`` names it.
    public static let refusedBundle = Self("refusedBundle")
    /// Another device replaced the sync key (it removed a device from the group): this device needs the new
    /// pairing code (``SyncEngine/rekey(database:pairingCode:)``).
    public static let keyRotated = Self("keyRotated")
    /// The remote is not a sync remote, or cannot be read or written (git failed, folder missing).
    public static let remote = Self("remote")
    /// A conflict asked for does not exist.
    public static let notFound = Self("notFound")
    /// The database's own sync settings cannot be used as they are (a remote of an unknown kind): damaged, or
    /// written by a later version. Nothing was synced.
    public static let damagedState = Self("damagedState")
}

extension SyncError.Code {
    /// A bundle this device needs is not on the remote — removed after a snapshot held it (``SyncEngine/clean(attachmentGrace:)``),
    /// or not delivered yet — and no snapshot on the remote holds it: that device's later bundles wait.
    /// ``SyncError/path`` names the oldest bundle of that chain that is there. Another device that is up to date
    /// runs ``SyncEngine/writeSnapshot()``; the next sync starts from it.
    public static let missingBundle = Self("missingBundle")

    /// The remote shows less of a device's chain of bundles than this device has verified — bundles it applied, or
    /// that a verified seen vector counts, are gone (deleted, or the remote restored from an older copy) — or a
    /// bundle is missing between two that are there. Nothing of that chain is applied while it is short; the device
    /// that wrote the bundles sends them again from the copies it keeps. Also thrown, after the sync, by the device
    /// that sent its own lost bundles again. ``SyncError/path`` names the chain's folder.
    public static let rolledBack = Self("rolledBack")

    /// Every grant on the remote for this device's join request was refused (``SyncEngine/join(database:remote:tables:approvedBy:)``):
    /// not signed by the device named, not on the group's roster, of an older or closed key generation, sealed to another
    /// request, or tampered with. The message names each file and why; no key was stored.
    public static let refusedGrant = Self("refusedGrant")
}
