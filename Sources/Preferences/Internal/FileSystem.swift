// Every file operation of the module goes through here, on the core's system-call layer: one place that turns
// an Errno into a PreferencesError.
internal import Foundation
internal import SecureStoreCore

/// What identifies one version of the domain file: a save renames a new inode over the old one, so any
/// change by any process changes at least the inode, and the size or modification time as a rule.
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: timespec
    var changed: timespec

    init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = status.st_mtim
        changed = status.st_ctim
    }

    static func == (a: Self, b: Self) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size
            && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
            && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }
}

enum FileSystem {
    /// The identity of the file at `path`, `nil` if there is none.
    static func identity(of path: String) throws(PreferencesError) -> FileIdentity? {
        do {
            return FileIdentity(try fileStatus(path, followingLinks: false).raw)
        } catch where error == .noSuchFileOrDirectory {
            return nil
        } catch {
            throw .system("read the status of", path: path, error: error)
        }
    }

    /// The whole contents of the file at `path` and the identity of exactly that version, or `nil` if
    /// there is no file. Refuses files larger than `maxSize`.
    static func read(_ path: String, maxSize: Int) throws(PreferencesError) -> (bytes: [UInt8], identity: FileIdentity)? {
        // Never follows a symbolic link (see ``symbolicLink(_:)``) and never blocks: a FIFO in place of the file
        // would otherwise hang every program that opens the domain.
        let found: SecureStoreCore.FileDescriptor.RegularFile
        do {
            found = try SecureStoreCore.FileDescriptor.openRegularFile(path)
        } catch {
            if error == .tooManySymbolicLinkLevels { throw symbolicLink(path) }
            throw .system("open", path: path, error: error)
        }
        let descriptor: SecureStoreCore.FileDescriptor
        let status: stat
        switch found {
        case .missing: return nil
        case .notRegular:
            throw PreferencesError(.damagedFile, "\(path) is not a regular file")
        case .opened(let opened, let openedStatus):
            descriptor = opened
            status = openedStatus
        }
        defer { descriptor.close() }
        let size = Int(status.st_size)
        guard size <= maxSize else {
            throw PreferencesError(
                .limitExceeded,
                "\(path) is \(size) bytes, more than the \(maxSize) bytes a preferences file may have; "
                    + "it was left untouched (reset() moves it aside)"
            )
        }
        do {
            // Fewer bytes only if it shrank while reading, which rename-only writers never do.
            return (try descriptor.read(upTo: size), FileIdentity(status))
        } catch {
            throw .system("read", path: path, error: error)
        }
    }

    /// Creates `path` and any missing parents with mode 0700 (whatever the umask), and checks the result
    /// is a directory owned by this user.
    static func makeDirectory(_ path: String) throws(PreferencesError) {
        do {
            try makeDirectories(path)
        } catch {
            if error.errno == .notDirectory {
                throw PreferencesError(.invalidLocation, "\(error.path) exists and is not a directory")
            }
            throw .system("create the directory", path: error.path, error: error.errno)
        }
    }

    /// The error for a symbolic link where the preferences file or its lock file should be. Links are not
    /// followed: one planted by someone else could redirect reads, the lock file's creation and its chmod.
    /// (A save renames a new file over the link, so writes never went through it; reads would have.)
    /// Symbolic links to the *directory* are followed: only its owner can make one inside their config home.
    static func symbolicLink(_ path: String) -> PreferencesError {
        PreferencesError(
            .invalidLocation,
            "\(path) is a symbolic link; preferences files are never read or written through one. "
                + "It was left untouched; replace it with the file it points to")
    }

    /// Opens (creating with mode 0600) the lock file and takes an exclusive `flock` on it.
    /// Returns the descriptor; closing it releases the lock.
    static func lock(_ path: String) throws(PreferencesError) -> FileLock {
        // O_NOFOLLOW: through a planted symbolic link, O_CREAT would create a file wherever it points and
        // the fchmod below would change the mode of whatever file it names.
        let lock: FileLock
        do {
            lock = try FileLock.open(path)
        } catch {
            if error == .tooManySymbolicLinkLevels { throw symbolicLink(path) }
            throw .system("open the lock file", path: path, error: error)
        }
        // O_CREAT applied the umask; make the mode exactly 0600 (harmless if someone else owns it).
        if let status = try? lock.descriptor.fileStatus(), status.permissions & 0o777 != 0o600, status.owner == getuid() {
            try? lock.descriptor.setMode(0o600)
        }
        do {
            try lock.lock(.exclusive)
        } catch {
            lock.close()
            throw .system("lock", path: path, error: error)
        }
        return lock
    }

    /// Writes `bytes` to a new file beside `path`, fsyncs it, renames it over `path`, fsyncs the directory.
    /// The new file has mode 0600 whatever the umask. Returns the identity of the new file.
    static func replace(_ path: String, with bytes: [UInt8]) throws(PreferencesError) -> FileIdentity {
        // Core's one atomic replacement: `.<domain>.json.tmp-<pid>-<random>`, fsync, rename, directory fsync.
        do {
            return FileIdentity(try replaceFile(path, with: bytes).raw)
        } catch {
            let operation =
                switch error.step {
                case .create: "create"
                case .write: "write"
                case .rename: "rename a new version over"
                case .status: "read the status of"
                case .syncDirectory: "flush the directory"
                }
            throw .system(operation, path: error.path, error: error.errno)
        }
    }

    /// fsyncs a directory, making a rename in it durable.
    static func syncDirectory(_ directory: String) throws(PreferencesError) {
        do {
            try SecureStoreCore.syncDirectory(directory)
        } catch {
            throw .system("flush the directory", path: directory, error: error)
        }
    }

    /// Renames `path` to `newPath`; `false` if `path` does not exist.
    static func move(_ path: String, to newPath: String) throws(PreferencesError) -> Bool {
        do {
            try renameFile(path, to: newPath)
            return true
        } catch where error == .noSuchFileOrDirectory {
            return false
        } catch {
            throw .system("move aside", path: path, error: error)
        }
    }

    /// Whether anything exists at `path`.
    static func exists(_ path: String) -> Bool { fileExists(path) }

    /// Removes files in `directory` whose names begin with `prefix` (left by a writer killed mid-save).
    /// Call only while holding the domain's lock: then no live writer owns such a file.
    static func removeStale(in directory: String, prefix: String) {
        for name in (try? listDirectory(directory)) ?? [] where name.hasPrefix(prefix) {
            try? removeFile(directory + "/" + name)
        }
    }
}
