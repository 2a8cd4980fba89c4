// Every system call of the module goes through here: one place that turns errno into a PreferencesError.
import Foundation
import Glibc

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
    /// Retries a call interrupted by a signal.
    @discardableResult
    static func retrying(_ call: () -> Int32) -> Int32 {
        while true {
            let result = call()
            if result == -1 && errno == EINTR { continue }
            return result
        }
    }

    /// The identity of the file at `path`, `nil` if there is none.
    static func identity(of path: String) throws(PreferencesError) -> FileIdentity? {
        var status = stat()
        if lstat(path, &status) != 0 {
            if errno == ENOENT { return nil }
            throw .system("read the status of", path: path, errno: errno)
        }
        return FileIdentity(status)
    }

    /// The whole contents of the file at `path` and the identity of exactly that version, or `nil` if
    /// there is no file. Refuses files larger than `maxSize`.
    static func read(_ path: String, maxSize: Int) throws(PreferencesError) -> (bytes: [UInt8], identity: FileIdentity)? {
        // O_NOFOLLOW: a symbolic link in place of the file is refused (see ``symbolicLink(_:)``).
        let fd = retrying { open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        if fd < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw symbolicLink(path) }
            throw .system("open", path: path, errno: errno)
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .system("read the status of", path: path, errno: errno) }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw PreferencesError(code: .damagedFile, message: "\(path) is not a regular file")
        }
        let size = Int(status.st_size)
        guard size <= maxSize else {
            throw PreferencesError(
                code: .limitExceeded,
                message: "\(path) is \(size) bytes, more than the \(maxSize) bytes a preferences file may have; "
                    + "it was left untouched (reset() moves it aside)"
            )
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            let count = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(fd, buffer.baseAddress! + filled, size - filled)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system("read", path: path, errno: errno)
            }
            if count == 0 { break }  // shrank while reading; cannot happen with rename-only writers
            filled += count
        }
        if filled < size { bytes.removeLast(size - filled) }
        return (bytes, FileIdentity(status))
    }

    /// Creates `path` and any missing parents with mode 0700 (whatever the umask), and checks the result
    /// is a directory owned by this user.
    static func makeDirectory(_ path: String) throws(PreferencesError) {
        var status = stat()
        if stat(path, &status) == 0 {
            guard (status.st_mode & S_IFMT) == S_IFDIR else {
                throw PreferencesError(code: .invalidLocation, message: "\(path) exists and is not a directory")
            }
            return
        }
        guard errno == ENOENT || errno == ENOTDIR else { throw .system("read the status of", path: path, errno: errno) }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty && parent != path && parent != "/" { try makeDirectory(parent) }
        if mkdir(path, 0o700) != 0 {
            if errno == EEXIST { return try makeDirectory(path) }  // another process made it first
            throw .system("create the directory", path: path, errno: errno)
        }
        // mkdir applied the umask; set the mode exactly, then check what is there.
        guard chmod(path, 0o700) == 0 else { throw .system("set the mode of", path: path, errno: errno) }
        guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR,
            status.st_uid == getuid(), (status.st_mode & 0o777) == 0o700
        else {
            throw PreferencesError(
                code: .permissionDenied,
                message: "\(path) was created but is not a directory with mode 0700 owned by this user"
            )
        }
    }

    /// The error for a symbolic link where the preferences file or its lock file should be. Links are not
    /// followed: one planted by someone else could redirect reads, the lock file's creation and its chmod.
    /// (A save renames a new file over the link, so writes never went through it; reads would have.)
    /// Symbolic links to the *directory* are followed: only its owner can make one inside their config home.
    static func symbolicLink(_ path: String) -> PreferencesError {
        PreferencesError(
            code: .invalidLocation,
            message: "\(path) is a symbolic link; preferences files are never read or written through one. "
                + "It was left untouched; replace it with the file it points to")
    }

    /// Opens (creating with mode 0600) the lock file and takes an exclusive `flock` on it.
    /// Returns the descriptor; closing it releases the lock.
    static func lock(_ path: String) throws(PreferencesError) -> Int32 {
        // O_NOFOLLOW: through a planted symbolic link, O_CREAT would create a file wherever it points and
        // the fchmod below would change the mode of whatever file it names.
        let fd = retrying { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        guard fd >= 0 else {
            if errno == ELOOP { throw symbolicLink(path) }
            throw .system("open the lock file", path: path, errno: errno)
        }
        // O_CREAT applied the umask; make the mode exactly 0600 (harmless if someone else owns it).
        var status = stat()
        if fstat(fd, &status) == 0, status.st_mode & 0o777 != 0o600, status.st_uid == getuid() { fchmod(fd, 0o600) }
        if retrying({ flock(fd, LOCK_EX) }) != 0 {
            let code = errno
            close(fd)
            throw .system("lock", path: path, errno: code)
        }
        return fd
    }

    /// Writes `bytes` to a new file in `directory`, fsyncs it, renames it over `path`, fsyncs the directory.
    /// The new file has mode 0600 whatever the umask. Returns the identity of the new file.
    static func replace(
        _ path: String, in directory: String, with bytes: [UInt8], temporaryPrefix: String
    ) throws(PreferencesError) -> FileIdentity {
        let temporary = directory + "/" + temporaryPrefix + String(getpid()) + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let fd = retrying { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw .system("create", path: temporary, errno: errno) }
        var succeeded = false
        defer {
            if !succeeded {
                close(fd)
                unlink(temporary)
            }
        }
        guard fchmod(fd, 0o600) == 0 else { throw .system("set the mode of", path: temporary, errno: errno) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                write(fd, buffer.baseAddress! + written, bytes.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system("write", path: temporary, errno: errno)
            }
            written += count
        }
        guard retrying({ fsync(fd) }) == 0 else { throw .system("flush", path: temporary, errno: errno) }
        guard rename(temporary, path) == 0 else { throw .system("rename a new version over", path: path, errno: errno) }
        succeeded = true
        defer { close(fd) }
        // After the rename: a rename changes the inode's ctime, which is part of the identity.
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .system("read the status of", path: path, errno: errno) }
        try syncDirectory(directory)
        return FileIdentity(status)
    }

    /// fsyncs a directory, making a rename in it durable.
    static func syncDirectory(_ directory: String) throws(PreferencesError) {
        let fd = retrying { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { throw .system("open the directory", path: directory, errno: errno) }
        defer { close(fd) }
        guard retrying({ fsync(fd) }) == 0 else { throw .system("flush the directory", path: directory, errno: errno) }
    }

    /// Renames `path` to `newPath`; `false` if `path` does not exist.
    static func move(_ path: String, to newPath: String) throws(PreferencesError) -> Bool {
        if rename(path, newPath) != 0 {
            if errno == ENOENT { return false }
            throw .system("move aside", path: path, errno: errno)
        }
        return true
    }

    /// Whether anything exists at `path`.
    static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// Removes files in `directory` whose names begin with `prefix` (left by a writer killed mid-save).
    /// Call only while holding the domain's lock: then no live writer owns such a file.
    static func removeStale(in directory: String, prefix: String) {
        guard let dir = opendir(directory) else { return }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name.hasPrefix(prefix) { names.append(name) }
        }
        for name in names { unlink(directory + "/" + name) }
    }
}
