// The lock file of a keyed database (`.<name>.db.lock`), held through one open descriptor that closes exactly once.
internal import SecureStoreCore

/// The advisory lock file of one keyed database, held through an open descriptor: every open handle holds it
/// shared; creation, recovery, import, restore, deletion and rotation take it exclusively.
///
/// Non-copyable: the descriptor is closed (and the lock released) exactly once, when the value is dropped — at the
/// end of its scope, when a handle sets its lock to nil, or when an open that took it throws.
struct KeyedDatabaseLock: ~Copyable, Sendable {
    /// What the lock holds.
    enum Holding: Sendable {
        /// The lock file, open (and `flock`ed) through this descriptor.
        case file(FileLock)
        /// No lock file: on a read-only file system where none exists (no process can write there, so there is
        /// nothing to lock against), or, for ``KeyedDatabaseFiles/lockIfPresent()``, another database that has none.
        case noLockFile
    }

    let holding: Holding
    /// The database file the lock guards, named in errors.
    let databasePath: String

    init(_ holding: Holding, databasePath: String) {
        self.holding = holding
        self.databasePath = databasePath
    }

    deinit {
        if case .file(let lock) = holding { lock.close() }
    }

    /// Runs `body` while the lock is held: a lock taken for the span of one call, released when the value is dropped
    /// after it returns.
    func whileHeld<R>(_ body: () throws -> R) rethrows -> R { try body() }

    /// Whether there is no lock file (see ``Holding/noLockFile``).
    var isNoLockFile: Bool {
        if case .noLockFile = holding { true } else { false }
    }

    /// Changes the lock to shared or exclusive, waiting up to `timeoutMilliseconds`.
    ///
    /// - Throws: ``SecureStoreError/Code/inUse`` when it is still held by another handle or process at the deadline.
    func relock(exclusive: Bool, timeoutMilliseconds: Int) throws {
        // No lock file on a read-only file system: the writes that an exclusive lock would guard fail there on their
        // own, with the read-only error.
        guard case .file(let lock) = holding else { return }
        let deadline = ContinuousClock.now + .milliseconds(max(timeoutMilliseconds, 0))
        let locked: Bool
        do {
            locked = try lock.lock(exclusive ? .exclusive : .shared, until: deadline)
        } catch {
            throw SecureStoreError(error, "cannot lock '\(databasePath)'")
        }
        if !locked {
            throw SecureStoreError(
                SecureStoreError.Code.inUse,
                exclusive
                    ? "the database '\(databasePath)' is open in another process (or another handle); close it there and try again"
                    : "the database '\(databasePath)' is busy with a key rotation, recovery or creation in another process; try again")
        }
    }

    /// The last step of every open that took the lock exclusively (a creation, a recovery, an import, an interrupted
    /// rotation settled): records the database id `id` for the next open's fast path (``idHint``), and turns the lock
    /// back to shared, as every open handle holds it.
    func share(recording id: String, timeoutMilliseconds: Int) throws {
        recordIDHint(id)
        try relock(exclusive: false, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Marks a key rotation of the database in the lock file (an open-file-description lock on one byte far past its
    /// contents), without waiting: false when another handle or process holds the mark. `flock` converts a shared
    /// lock to exclusive and back by dropping it first, so a second rotation could slip into that gap; the mark is
    /// held across both conversions and tells it that a SecureStore process is rotating. Released by
    /// ``endRotation()`` or when the descriptor closes. Without a lock file there is nothing to mark (true).
    func beginRotation() throws -> Bool {
        guard case .file(let lock) = holding else { return true }
        do {
            return try lock.descriptor.tryLockRange(offset: 1 << 30, length: 1, exclusive: true)
        } catch {
            throw SecureStoreError(error, "cannot lock '\(databasePath)'")
        }
    }

    /// Releases the mark of ``beginRotation()``.
    func endRotation() {
        guard case .file(let lock) = holding else { return }
        _ = try? lock.descriptor.tryLockRange(offset: 1 << 30, length: 1, exclusive: false)
    }

    /// The database id the lock file remembers (written by ``recordIDHint(_:)``), or nil. A hint only: the lock file
    /// is not encrypted and anyone may write it; the id inside the database decides.
    var idHint: String? {
        guard case .file(let lock) = holding, let buffer = try? lock.descriptor.read(upTo: 64, at: 0),
            buffer.count >= KeyedDatabaseKeyItem.idLength
        else { return nil }
        let text = String(decoding: buffer.prefix(KeyedDatabaseKeyItem.idLength), as: UTF8.self)
        return KeyedDatabaseKeyItem.isID(Substring(text)) ? text : nil
    }

    /// Records `id` in the lock file (held exclusively by the caller), so that the next open finds the key item
    /// without listing every key. Failures are ignored: it is only a hint.
    func recordIDHint(_ id: String) {
        guard case .file(let lock) = holding, idHint != id else { return }
        guard (try? lock.descriptor.resize(to: 0)) != nil else { return }
        try? lock.descriptor.writeAll(Array((id + "\n").utf8), at: 0)
    }

    /// Empties the lock file (held exclusively by the caller) of its database id hint, once the database is deleted.
    func clearIDHint() {
        guard case .file(let lock) = holding else { return }
        try? lock.descriptor.resize(to: 0)
    }
}

extension KeyedDatabaseFiles {
    /// Opens (creating, 0600) the lock file and takes a `flock` lock on it, waiting up to `timeoutMilliseconds`. The
    /// lock is held until the returned value is dropped.
    ///
    /// On a read-only file system the lock file is still taken (shared) when it is there; without one, the lock is
    /// ``KeyedDatabaseLock/Holding/noLockFile``.
    func lock(exclusive: Bool, timeoutMilliseconds: Int) throws -> KeyedDatabaseLock {
        let lock: KeyedDatabaseLock
        do {
            lock = KeyedDatabaseLock(.file(try FileLock.open(lockPath)), databasePath: path)
        } catch where error == .readOnlyFileSystem {
            // A read-only file system: nothing can write the database, so readers need no lock from writers.
            guard let readOnly = try? FileLock.open(lockPath, create: false, readOnly: true) else {
                return KeyedDatabaseLock(.noLockFile, databasePath: path)
            }
            _ = try? readOnly.tryLock(.shared)
            return KeyedDatabaseLock(.file(readOnly), databasePath: path)
        } catch {
            if error == .tooManySymbolicLinkLevels {
                throw SecureStoreError(
                    SecureStoreError.Code.fileSystem,
                    "the lock file '\(lockPath)' is a symbolic link; SecureStore never follows links for its lock "
                        + "files (one planted there could create or change another file): remove it and try again")
            }
            throw Self.errnoError(error, "cannot open the lock file '\(lockPath)'")
        }
        // A failure here drops `lock`, which closes its descriptor.
        try lock.relock(exclusive: exclusive, timeoutMilliseconds: timeoutMilliseconds)
        return lock
    }

    /// Takes this database's lock file shared if it exists (it is never created here), waiting up to a second; a lock
    /// without a file (``KeyedDatabaseLock/Holding/noLockFile``) when there is none.
    ///
    /// - Throws: ``SecureStoreError/Code/inUse`` when the lock is held exclusively (a rotation, recovery or restore of
    ///   that database is under way).
    func lockIfPresent() throws -> KeyedDatabaseLock {
        guard let file = try? FileLock.open(lockPath, create: false) else {
            return KeyedDatabaseLock(.noLockFile, databasePath: path)
        }
        let lock = KeyedDatabaseLock(.file(file), databasePath: path)
        try lock.relock(exclusive: false, timeoutMilliseconds: 1_000)
        return lock
    }
}
