// Directories the product makes and the renames it makes durable.
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// Creates `path` and its missing parents, each with mode 0700 whatever the umask, and checks that what is
/// there afterwards is a directory. Existing directories are left as they are.
///
/// Throws `ENOTDIR` when `path` (or a parent) exists and is not a directory, or the `Errno` of `mkdir`/`chmod`.
package func makeDirectories(_ path: String) throws(Errno) {
    var status = stat()
    if stat(path, &status) == 0 {
        guard (status.st_mode & S_IFMT) == S_IFDIR else { throw Errno(rawValue: ENOTDIR) }
        return
    }
    let error = Errno.current
    guard error == .noSuchFile else { throw error }
    if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
        try makeDirectories(String(path[..<slash]))
    }
    if mkdir(path, 0o700) != 0 {
        let error = Errno.current
        guard error == .exists else { throw error }
        return try makeDirectories(path)  // another process made it first: check what it is
    }
    // mkdir applied the umask, which can only remove bits; set exactly 0700.
    try retryingInterrupts { chmod(path, 0o700) }
    guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else { throw Errno(rawValue: ENOTDIR) }
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
