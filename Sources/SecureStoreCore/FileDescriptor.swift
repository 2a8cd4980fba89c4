// File descriptors with scoped closing, in swift-system's `FileDescriptor` shape: every file operation of the
// product goes through here, so EINTR, O_NOFOLLOW and "is it a regular file" are handled in one place.
package import Glibc

/// An open file descriptor. Not closed automatically: use ``closeAfter(_:)``.
package struct FileDescriptor: Sendable {
    /// The raw descriptor.
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// How to open a file.
    package struct Options: OptionSet, Sendable {
        package let rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }
        package static let readOnly = Options([])
        package static let writeOnly = Options(rawValue: O_WRONLY)
        package static let readWrite = Options(rawValue: O_RDWR)
        package static let create = Options(rawValue: O_CREAT)
        package static let exclusive = Options(rawValue: O_EXCL)
        package static let truncate = Options(rawValue: O_TRUNC)
        package static let append = Options(rawValue: O_APPEND)
        package static let directory = Options(rawValue: O_DIRECTORY)
        /// A symbolic link in the last component is refused with `ELOOP` instead of followed.
        package static let noFollow = Options(rawValue: O_NOFOLLOW)
        /// A terminal opened does not become the process's controlling terminal.
        package static let noControllingTerminal = Options(rawValue: O_NOCTTY)
    }

    /// Opens `path` (always close-on-exec), retrying on `EINTR`. A new file gets `mode`.
    package static func open(
        _ path: String, _ options: Options, mode: mode_t = 0o600
    ) throws(Errno) -> FileDescriptor {
        let flags = options.rawValue | O_CLOEXEC
        return FileDescriptor(rawValue: try retryingInterrupts { Glibc.open(path, flags, mode) })
    }

    /// What ``openRegularFile(_:_:followingLinks:)`` found at a path.
    package enum RegularFile {
        /// A regular file, open, with its status.
        case opened(FileDescriptor, stat)
        /// Nothing is there.
        case missing
        /// Something that is not a regular file (a FIFO, a device, a socket, a directory): not opened for use.
        case notRegular(mode_t)
    }

    /// Opens an existing **regular file** at `path` without ever blocking: a FIFO, a device or a socket in its
    /// place is reported instead of hanging the open. Unless `followingLinks`, a symbolic link in place of the
    /// file is refused (`ELOOP`).
    package static func openRegularFile(
        _ path: String, _ options: Options = .readOnly, followingLinks: Bool = false
    ) throws(Errno) -> RegularFile {
        let descriptor: FileDescriptor
        do {
            let flags = options.union(Options(rawValue: O_NONBLOCK)).union(followingLinks ? [] : .noFollow)
            descriptor = try open(path, flags)
        } catch {
            if error == .noSuchFileOrDirectory { return .missing }
            throw error
        }
        let status: stat
        do {
            status = try descriptor.status()
        } catch {
            descriptor.close()
            throw error
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            descriptor.close()
            return .notRegular(status.st_mode & S_IFMT)
        }
        // Back to blocking I/O: on a regular file it never waits on another program.
        _ = fcntl(descriptor.rawValue, F_SETFL, fcntl(descriptor.rawValue, F_GETFL) & ~O_NONBLOCK)
        return .opened(descriptor, status)
    }

    /// Runs `body` with the descriptor and closes it afterwards, also when `body` throws.
    package func closeAfter<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        defer { close() }
        return try body()
    }

    /// Closes the descriptor (`EINTR` on close is not retried: the descriptor is gone either way).
    package func close() {
        _ = Glibc.close(rawValue)
    }

    /// `fstat`.
    package func status() throws(Errno) -> stat {
        var status = stat()
        try retryingInterrupts { fstat(rawValue, &status) }
        return status
    }

    /// Reads up to `count` bytes at the current offset (fewer at the end of the file).
    package func read(upTo count: Int) throws(Errno) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = try retryingInterrupts {
                bytes.withUnsafeMutableBytes { Glibc.read(rawValue, $0.baseAddress! + filled, count - filled) }
            }
            if got == 0 { break }
            filled += got
        }
        if filled < count { bytes.removeLast(count - filled) }
        return bytes
    }

    /// Reads exactly `count` bytes at `offset`; nil when the file ends first. The corresponding C function is `pread`.
    package func read(exactly count: Int, at offset: Int) throws(Errno) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = try retryingInterrupts {
                bytes.withUnsafeMutableBytes {
                    pread(rawValue, $0.baseAddress! + filled, count - filled, off_t(offset + filled))
                }
            }
            if got == 0 { return nil }
            filled += got
        }
        return bytes
    }

    /// Writes all of `bytes` at the current offset.
    package func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var written = 0
        while written < bytes.count {
            written += try retryingInterrupts { Glibc.write(rawValue, bytes.baseAddress! + written, bytes.count - written) }
        }
    }

    /// Writes all of `bytes` at the current offset.
    package func writeAll(_ bytes: [UInt8]) throws(Errno) {
        var failure: Errno?
        bytes.withUnsafeBytes { buffer in
            do throws(Errno) { try writeAll(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Writes all of `bytes` at `offset` (the current offset is left as it is).
    /// The corresponding C function is `pwrite`.
    package func writeAll(_ bytes: [UInt8], at offset: Int) throws(Errno) {
        var written = 0
        while written < bytes.count {
            written += try retryingInterrupts {
                bytes.withUnsafeBytes { pwrite(rawValue, $0.baseAddress! + written, bytes.count - written, off_t(offset + written)) }
            }
        }
    }

    /// Fills `buffer` from `offset` as far as the file goes (the current offset is left as it is); returns how many
    /// bytes were read. For secrets: nothing is copied outside `buffer`. The corresponding C function is `pread`.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        var filled = 0
        while filled < buffer.count {
            let got = try retryingInterrupts {
                pread(rawValue, buffer.baseAddress! + filled, buffer.count - filled, off_t(offset + filled))
            }
            if got == 0 { break }
            filled += got
        }
        return filled
    }

    /// Reads up to `count` bytes at `offset` (fewer at the end of the file). The corresponding C function is `pread`.
    package func read(upTo count: Int, at offset: Int) throws(Errno) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = try retryingInterrupts {
                bytes.withUnsafeMutableBytes { pread(rawValue, $0.baseAddress! + filled, count - filled, off_t(offset + filled)) }
            }
            if got == 0 { break }
            filled += got
        }
        if filled < count { bytes.removeLast(count - filled) }
        return bytes
    }

    /// One `read` into `buffer` (retried on `EINTR`): the number of bytes read, 0 at the end of the file. For a
    /// pipe or a terminal, which hand over what they have.
    package func readSome(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        guard buffer.count > 0 else { return 0 }
        return try retryingInterrupts { Glibc.read(rawValue, buffer.baseAddress!, buffer.count) }
    }

    /// The current offset. The corresponding C function is `lseek(fd, 0, SEEK_CUR)`.
    package func currentOffset() throws(Errno) -> Int {
        Int(try retryingInterrupts { lseek(rawValue, 0, SEEK_CUR) })
    }

    /// A new pipe, both ends close-on-exec (a child gets an end only through a `dup2` of its spawn actions).
    /// The corresponding C calls are `pipe` and `fcntl(F_SETFD, FD_CLOEXEC)` (`pipe2` is not exported to Swift).
    package static func pipe() throws(Errno) -> (readEnd: FileDescriptor, writeEnd: FileDescriptor) {
        var ends: [Int32] = [-1, -1]
        try retryingInterrupts { Glibc.pipe(&ends) }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (FileDescriptor(rawValue: ends[0]), FileDescriptor(rawValue: ends[1]))
    }

    /// Reads until the end of the file (a pipe's writer closed it) or an error, keeping nothing: for draining.
    package func drain() {
        var scratch = [UInt8](repeating: 0, count: 4096)
        while (scratch.withUnsafeMutableBytes { (try? readSome(into: $0)) ?? 0 }) > 0 {}
        secureZero(&scratch, scratch.count)
    }

    /// Whether `rawValue` is an open descriptor of this process. The corresponding C call is `fcntl(F_GETFD)`.
    package static func isOpen(_ rawValue: Int32) -> Bool {
        rawValue >= 0 && fcntl(rawValue, F_GETFD) != -1
    }

    /// `fsync`.
    package func sync() throws(Errno) {
        try retryingInterrupts { fsync(rawValue) }
    }

    /// `fchmod`.
    package func setMode(_ mode: mode_t) throws(Errno) {
        try retryingInterrupts { fchmod(rawValue, mode) }
    }

    /// `ftruncate`.
    package func resize(to size: Int) throws(Errno) {
        try retryingInterrupts { ftruncate(rawValue, off_t(size)) }
    }
}

