// Directories the product makes and the renames it makes durable.
internal import Glibc

/// A system call's error together with the path it failed on.
package struct PathError: Error, Sendable {
    /// The file or directory the call failed on (for ``makeDirectories(_:)``, the component at fault).
    package let path: String
    /// Why.
    package let errno: Errno
}

/// Creates `path` and its missing parents, each with mode 0700 whatever the umask, and checks that what is
/// there afterwards is a directory. Existing directories (and symbolic links to directories) are left as they
/// are.
///
/// Throws the component at fault: with `ENOTDIR` when it exists and is not a directory, else with the `Errno`
/// of `stat`, `mkdir` or `chmod`.
package func makeDirectories(_ path: String) throws(PathError) {
    var status = stat()
    if stat(path, &status) == 0 {
        guard (status.st_mode & S_IFMT) == S_IFDIR else { throw PathError(path: path, errno: .notDirectory) }
        return
    }
    let error = Errno.current
    // ENOTDIR: a parent is not a directory; the parent's own check names it.
    guard error == .noSuchFileOrDirectory || error == .notDirectory else { throw PathError(path: path, errno: error) }
    if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
        try makeDirectories(String(path[..<slash]))
    }
    if mkdir(path, 0o700) != 0 {
        let error = Errno.current
        guard error == .fileExists else { throw PathError(path: path, errno: error) }
        return try makeDirectories(path)  // another process made it first: check what it is
    }
    // mkdir applied the umask, which can only remove bits; set exactly 0700.
    do {
        try retryingInterrupts { chmod(path, 0o700) }
    } catch {
        throw PathError(path: path, errno: error)
    }
    guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else {
        throw PathError(path: path, errno: .notDirectory)
    }
}

/// fsyncs the directory `directory`, making a rename or a link in it durable.
package func syncDirectory(_ directory: String) throws(Errno) {
    let descriptor = try FileDescriptor.open(directory.isEmpty ? "." : directory, [.readOnly, .directory])
    try descriptor.closeAfter { () throws(Errno) in try descriptor.sync() }
}

/// The directory part of `path` ("" for a bare name), without a trailing slash.
package func directoryPart(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "" }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

/// The last component of `path`.
package func namePart(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return path }
    return String(path[path.index(after: slash)...])
}

/// Copies the regular file `source` (a symbolic link to one is followed) into the new file `destination`,
/// created exclusively with mode 0600 whatever the umask, in 1 MiB chunks (never whole in memory). With
/// `prefix`, only that many bytes are copied and the copy is extended (sparsely) to the original's size. With
/// `sync`, the copy is flushed to the disk. A failed copy removes what it wrote. Throws the path at fault.
package func copyFile(_ source: String, to destination: String, prefix: Int? = nil, sync: Bool = false) throws(PathError) {
    let input: FileDescriptor
    let status: stat
    do throws(Errno) {
        switch try FileDescriptor.openRegularFile(source, followingLinks: true) {
        case .opened(let descriptor, let found):
            input = descriptor
            status = found
        case .missing: throw Errno.noSuchFileOrDirectory
        case .notRegular: throw Errno(rawValue: EINVAL)
        }
    } catch {
        throw PathError(path: source, errno: error)
    }
    defer { input.close() }
    let output: FileDescriptor
    do {
        output = try FileDescriptor.open(destination, [.writeOnly, .create, .exclusive, .noFollow])
    } catch {
        throw PathError(path: destination, errno: error)
    }
    var complete = false
    defer {
        output.close()
        if !complete { unlink(destination) }
    }
    let size = Int(status.st_size)
    var remaining = min(prefix ?? size, size)
    func writing(_ body: () throws(Errno) -> Void) throws(PathError) {
        do { try body() } catch { throw PathError(path: destination, errno: error) }
    }
    try writing { () throws(Errno) in try output.setMode(0o600) }
    while remaining > 0 {
        let chunk: [UInt8]
        do {
            chunk = try input.read(upTo: min(remaining, 1 << 20))
        } catch {
            throw PathError(path: source, errno: error)
        }
        if chunk.isEmpty { break }
        try writing { () throws(Errno) in try output.writeAll(chunk) }
        remaining -= chunk.count
    }
    if prefix != nil { try writing { () throws(Errno) in try output.resize(to: size) } }
    if sync { try writing { () throws(Errno) in try output.sync() } }
    complete = true
}

/// The bytes an unprivileged writer may still use on the file system holding `path`, or nil when it cannot
/// be asked. The corresponding C function is `statvfs`.
package func availableBytes(onFileSystemOf path: String) -> Int64? {
    var status = statvfs()
    guard statvfs(path.isEmpty ? "." : path, &status) == 0 else { return nil }
    return Int64(status.f_bavail) * Int64(status.f_frsize)
}

/// Whether the file system holding `path` is mounted read-only (`statvfs`'s `ST_RDONLY`): nothing can write
/// there, not this process nor any other.
package func isOnReadOnlyFileSystem(_ path: String) -> Bool {
    var info = statvfs()
    guard statvfs(path, &info) == 0 else { return false }
    return info.f_flag & UInt(ST_RDONLY) != 0
}
