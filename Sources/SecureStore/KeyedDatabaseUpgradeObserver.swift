// A hook for the crash tests of the 0.1 key-item upgrade: the stress helper kills itself right after a
// step, as it does after each rotation and restore step (those have public progress callbacks; the
// upgrade happens inside an open, which has none).
internal import Synchronization

extension KeyedDatabase {
    /// A step of the upgrade of a key item written by SecureStore 0.1 (or of a file without a database
    /// id), done on its first open. Docs/key-lifecycle.md, "Upgrading a 0.1 item".
    @_spi(Testing)
    public enum UpgradeStep: Int, Sendable, CaseIterable {
        /// The key is stored (read back) as `<id>@<path>`.
        case itemStored = 1
        /// The database id is written into the file.
        case idWritten
        /// Rotation leftovers and the used 0.1 pending item are removed.
        case finished
    }

    /// Calls `observer` after each upgrade step in this process (nil removes it). For crash tests only.
    @_spi(Testing)
    public static func observeUpgradeSteps(_ observer: (@Sendable (UpgradeStep) -> Void)?) {
        UpgradeObserver.current.withLock { $0 = observer }
    }
}

enum UpgradeObserver {
    static let current = Mutex<(@Sendable (KeyedDatabase.UpgradeStep) -> Void)?>(nil)

    static func report(_ step: KeyedDatabase.UpgradeStep) {
        let observer = current.withLock { $0 }
        observer?(step)
    }
}
