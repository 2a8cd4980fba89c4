// Advisory locks between processes: `flock` on a whole lock file, and the byte-range locks the product needs
// (an open-file-description mark, and the question "does another process hold SQLite's lock bytes").
internal import Glibc

/// A `flock` lock held through an open descriptor: shared or exclusive, waited for or tried once. The lock goes
/// with the descriptor: ``close()`` (or the process's end) releases it.
package struct FileLock: Sendable {
    /// Shared (several holders) or exclusive (one).
    package enum Kind: Sendable {
        case shared, exclusive

        var operation: Int32 { self == .shared ? LOCK_SH : LOCK_EX }
    }

    /// The descriptor the lock is held through.
    package let descriptor: FileDescriptor

    /// A lock on the file open as `descriptor` (not taken yet).
    package init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// Opens the lock file at `path` (created with mode 0600 unless `create` is false; a symbolic link in its
    /// place is refused with ``Errno/tooManySymbolicLinkLevels``), without locking it.
    package static func open(_ path: String, create: Bool = true, readOnly: Bool = false) throws(Errno) -> FileLock {
        var options: FileDescriptor.Options = readOnly ? .readOnly : .readWrite
        if create { options.insert(.create) }
        options.insert(.noFollow)
        return FileLock(try FileDescriptor.open(path, options))
    }

    /// Takes the lock, waiting for it as long as it takes (a held lock changes kind, which `flock` does by
    /// dropping it first). The corresponding C function is `flock`.
    package func lock(_ kind: Kind) throws(Errno) {
        try retryingInterrupts { flock(descriptor.rawValue, kind.operation) }
    }

    /// Takes the lock if nobody holds a conflicting one: false when someone does. The corresponding C call is
    /// `flock(LOCK_NB)`.
    package func tryLock(_ kind: Kind) throws(Errno) -> Bool {
        do {
            try retryingInterrupts { flock(descriptor.rawValue, kind.operation | LOCK_NB) }
            return true
        } catch where error == .wouldBlock {
            return false
        }
    }

    /// Takes the lock, trying again every 5 ms until `deadline`: false when it was still held by then.
    package func lock(_ kind: Kind, until deadline: ContinuousClock.Instant) throws(Errno) -> Bool {
        while true {
            if try tryLock(kind) { return true }
            if ContinuousClock.now >= deadline { return false }
            usleep(5_000)
        }
    }

    /// Releases the lock, keeping the descriptor open. The corresponding C call is `flock(LOCK_UN)`.
    package func unlock() {
        _ = try? retryingInterrupts { flock(descriptor.rawValue, LOCK_UN) }
    }

    /// Closes the descriptor, which releases the lock.
    package func close() { descriptor.close() }
}

extension FileDescriptor {
    /// Takes (`exclusive`) or releases an open-file-description write lock on `length` bytes at `offset`,
    /// without waiting: false when another description (another handle or process) holds a conflicting one.
    /// Unlike `flock`, it is kept while a `flock` lock on the same file changes kind. The corresponding C call
    /// is `fcntl(F_OFD_SETLK)` (Linux 3.15).
    package func tryLockRange(offset: Int, length: Int, exclusive: Bool) throws(Errno) -> Bool {
        var range = flock()
        range.l_type = Int16(exclusive ? F_WRLCK : F_UNLCK)
        range.l_whence = Int16(SEEK_SET)
        range.l_start = off_t(offset)
        range.l_len = off_t(length)
        let setOpenFileDescriptionLock: Int32 = 37  // F_OFD_SETLK, not exported to Swift by Glibc
        do {
            try retryingInterrupts { fcntl(rawValue, setOpenFileDescriptionLock, &range) }
            return true
        } catch where error == .wouldBlock || error == .permissionDenied {
            return false
        }
    }

    /// Whether another process holds a POSIX lock that would conflict with a write lock on `length` bytes at
    /// `offset` (false when it cannot be asked). The corresponding C call is `fcntl(F_GETLK)`.
    package func isRangeLockedByOthers(offset: Int, length: Int) -> Bool {
        var range = flock()
        range.l_type = Int16(F_WRLCK)
        range.l_whence = Int16(SEEK_SET)
        range.l_start = off_t(offset)
        range.l_len = off_t(length)
        guard (try? retryingInterrupts { fcntl(rawValue, F_GETLK, &range) }) != nil else { return false }
        return range.l_type != Int16(F_UNLCK)
    }
}
