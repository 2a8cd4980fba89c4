// Operations on paths (status, remove, rename, link, directories), in swift-system's shape: each throws an
// `Errno`, retries `EINTR` where the call can see it, and names its C function. The modules turn the `Errno`
// into their own error with the file and the action in the message.
package import Glibc

/// What `stat` or `lstat` says about a file, with the questions the product asks of it.
package struct FileStatus: Sendable {
    /// The C structure, for the fields not named here.
    package let raw: stat

    package init(_ raw: stat) { self.raw = raw }

    /// The type bits (`st_mode & S_IFMT`).
    package var type: mode_t { raw.st_mode & S_IFMT }
    /// A regular file.
    package var isRegularFile: Bool { type == S_IFREG }
    /// A directory.
    package var isDirectory: Bool { type == S_IFDIR }
    /// A symbolic link (only `lstat` sees one).
    package var isSymbolicLink: Bool { type == S_IFLNK }
    /// A socket.
    package var isSocket: Bool { type == S_IFSOCK }
    /// The permission bits (`st_mode & 0o7777`).
    package var permissions: mode_t { raw.st_mode & 0o7777 }
    /// The size in bytes.
    package var size: Int { Int(raw.st_size) }
    /// The owner's user id.
    package var owner: uid_t { raw.st_uid }
    /// The device and inode: what "the same file" means across paths and links.
    package var device: UInt64 { UInt64(raw.st_dev) }
    /// See ``device``.
    package var inode: UInt64 { UInt64(raw.st_ino) }
}

/// The status of the file at `path`; unless `followingLinks`, of a symbolic link itself.
/// The corresponding C functions are `stat` and `lstat`.
package func fileStatus(_ path: String, followingLinks: Bool = true) throws(Errno) -> FileStatus {
    var status = stat()
    if followingLinks {
        try retryingInterrupts { stat(path, &status) }
    } else {
        try retryingInterrupts { lstat(path, &status) }
    }
    return FileStatus(status)
}

/// Whether anything (a symbolic link too, even a dangling one) is at `path`; with `followingLinks`, whether a
/// symbolic link there leads to something (as FileManager's `fileExists` answers). The corresponding C functions
/// are `lstat` and `stat`.
package func fileExists(_ path: String, followingLinks: Bool = false) -> Bool {
    (try? fileStatus(path, followingLinks: followingLinks)) != nil
}

/// The whole of the regular file at `path` (a symbolic link to one is followed), at most `maximumSize` bytes:
/// ``Errno/noSuchFileOrDirectory`` when nothing is there, ``Errno/invalidArgument`` for what is not a regular file
/// (a FIFO is never waited on), ``Errno/fileTooLarge`` beyond `maximumSize`.
package func readFile(_ path: String, maximumSize: Int = 64 << 20) throws(Errno) -> [UInt8] {
    switch try FileDescriptor.openRegularFile(path, followingLinks: true) {
    case .missing: throw .noSuchFileOrDirectory
    case .notRegular: throw .invalidArgument
    case .opened(let descriptor, let status):
        return try descriptor.closeAfter { () throws(Errno) in
            guard Int(status.st_size) <= maximumSize else { throw .fileTooLarge }
            return try descriptor.read(upTo: Int(status.st_size))
        }
    }
}

/// Removes the file (or symbolic link) at `path`. The corresponding C function is `unlink`.
package func removeFile(_ path: String) throws(Errno) {
    try retryingInterrupts { unlink(path) }
}

/// Removes the file at `path` if there is one: a missing file is not an error, any other failure is.
package func removeFileIfPresent(_ path: String) throws(Errno) {
    do {
        try removeFile(path)
    } catch where error == .noSuchFileOrDirectory {}
}

/// Removes `path` and its SQLite side files (`-wal`, `-shm`, `-journal`), ignoring errors: for copies that never
/// held the only version of anything.
package func removeDatabaseFiles(_ path: String) {
    for suffix in ["", "-wal", "-shm", "-journal"] { try? removeFile(path + suffix) }
}

/// Removes the empty directory at `path`. The corresponding C function is `rmdir`.
package func removeDirectory(_ path: String) throws(Errno) {
    try retryingInterrupts { rmdir(path) }
}

/// Removes the files in `directory` (not below: it holds no folders), then `directory` itself, ignoring errors.
package func removeDirectoryAndFiles(_ directory: String) {
    for name in (try? listDirectory(directory)) ?? [] { try? removeFile(directory + "/" + name) }
    try? removeDirectory(directory)
}

/// Renames `source` to `destination`, atomically replacing what is there. The corresponding C function is `rename`.
package func renameFile(_ source: String, to destination: String) throws(Errno) {
    try retryingInterrupts { rename(source, destination) }
}

/// Makes `destination` a new hard link to `source`; fails with ``Errno/fileExists`` when `destination` exists, so
/// nothing is ever replaced. The corresponding C function is `link`.
package func linkFile(_ source: String, to destination: String) throws(Errno) {
    try retryingInterrupts { link(source, destination) }
}

/// Makes the directory `path` (one level) with `mode`, less the umask. The corresponding C function is `mkdir`.
package func makeDirectory(_ path: String, mode: mode_t = 0o700) throws(Errno) {
    try retryingInterrupts { mkdir(path, mode) }
}

/// Sets the permission bits of the file at `path` (following links). The corresponding C function is `chmod`.
package func setMode(_ path: String, _ mode: mode_t) throws(Errno) {
    try retryingInterrupts { chmod(path, mode) }
}

/// `path` made absolute with every symbolic link and `.`/`..` resolved, or nil when a component is missing.
/// The corresponding C function is `realpath`.
package func resolvedPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

/// The temporary directory: `$TMPDIR` when it holds an absolute path, else `/tmp` (without a trailing slash).
/// The one place `TMPDIR` is read; read at each call, as a process may change it.
package func temporaryDirectory() -> String {
    if let value = getenv("TMPDIR"), value.pointee == 0x2F {
        var path = String(cString: value)
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }
    return "/tmp"
}

/// The names in `directory`, without `.` and `..`, in the order the file system gives them: the one way the
/// product lists a directory. The corresponding C functions are `opendir` and `readdir`.
package func listDirectory(_ directory: String) throws(Errno) -> [String] {
    guard let stream = opendir(directory) else { throw Errno.current }
    defer { closedir(stream) }
    var names: [String] = []
    while let entry = readdir(stream) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

extension FileDescriptor {
    /// The status of the open file. The corresponding C function is `fstat`.
    package func fileStatus() throws(Errno) -> FileStatus { FileStatus(try status()) }
}
