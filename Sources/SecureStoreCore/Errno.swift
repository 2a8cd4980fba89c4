// An error number from a system call, in swift-system's `Errno` shape.
internal import Glibc

/// A POSIX error number, as a system call left it in `errno`. Each module turns it into its own error with
/// the file and the action in the message; this type only names the number.
package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    /// The raw error number.
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// The error number the last failed call of this thread left.
    package static var current: Errno { Errno(rawValue: errno) }

    /// The C library's sentence for the number (`strerror`), e.g. "No such file or directory".
    package var description: String { String(cString: strerror(rawValue)) }

    // The names swift-system gives them (System/Errno.swift), so that code moves between the two unchanged.
    package static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    package static let fileExists = Errno(rawValue: EEXIST)
    package static let interrupted = Errno(rawValue: EINTR)
    package static let permissionDenied = Errno(rawValue: EACCES)
    package static let notPermitted = Errno(rawValue: EPERM)
    package static let readOnlyFileSystem = Errno(rawValue: EROFS)
    package static let noSpace = Errno(rawValue: ENOSPC)
    package static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
    package static let tooManySymbolicLinkLevels = Errno(rawValue: ELOOP)
    package static let notDirectory = Errno(rawValue: ENOTDIR)
    package static let isDirectory = Errno(rawValue: EISDIR)
    package static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    package static let noSuchProcess = Errno(rawValue: ESRCH)
    package static let brokenPipe = Errno(rawValue: EPIPE)
    package static let invalidArgument = Errno(rawValue: EINVAL)
    package static let badFileDescriptor = Errno(rawValue: EBADF)
    package static let directoryNotEmpty = Errno(rawValue: ENOTEMPTY)
    package static let fileTooLarge = Errno(rawValue: EFBIG)

    /// Whether the error means that the disk or the quota is full.
    package var isDiskFull: Bool { self == .noSpace || self == .diskQuotaExceeded }
    /// Whether the error means that this user may not do it.
    package var isPermission: Bool { self == .permissionDenied || self == .notPermitted }

    /// Matches an error against an error number, so that `catch Errno.noSuchFileOrDirectory { … }` works.
    package static func ~= (pattern: Errno, value: any Error) -> Bool {
        (value as? Errno) == pattern
    }
}

/// Calls `body` again while it fails with `EINTR`: the one place interrupted system calls are retried.
/// Returns the result, or throws the call's `Errno` when it returns -1.
@discardableResult
package func retryingInterrupts<T: FixedWidthInteger>(_ body: () -> T) throws(Errno) -> T {
    while true {
        let result = body()
        if result == -1 {
            let error = Errno.current
            if error == .interrupted { continue }
            throw error
        }
        return result
    }
}
