// Directories the product makes and the renames it makes durable.
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

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
        guard (status.st_mode & S_IFMT) == S_IFDIR else { throw PathError(path: path, errno: .notADirectory) }
        return
    }
    let error = Errno.current
    // ENOTDIR: a parent is not a directory; the parent's own check names it.
    guard error == .noSuchFile || error == .notADirectory else { throw PathError(path: path, errno: error) }
    if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
        try makeDirectories(String(path[..<slash]))
    }
    if mkdir(path, 0o700) != 0 {
        let error = Errno.current
        guard error == .exists else { throw PathError(path: path, errno: error) }
        return try makeDirectories(path)  // another process made it first: check what it is
    }
    // mkdir applied the umask, which can only remove bits; set exactly 0700.
    do {
        try retryingInterrupts { chmod(path, 0o700) }
    } catch {
        throw PathError(path: path, errno: error)
    }
    guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else {
        throw PathError(path: path, errno: .notADirectory)
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
