// Temporary files the product makes beside real ones (a backup being written, an export, a copy being checked):
// one naming rule, `.<name>.tmp-<pid>-<random>`, so that what a killed process left can be told from what a live
// one is writing; removal on SIGINT, SIGTERM and SIGHUP; and the sweep of a dead process's leftovers.
internal import Glibc
internal import Synchronization

/// Temporary files of this process: named by one rule, removed when a signal ends it, swept when left by a
/// process that died.
package enum ScratchFiles {
    /// `.<name of path>.tmp-<pid>-<random hex>` beside `path`: the name every temporary file of the product
    /// has, so that ``sweep(_:name:)`` can tell a dead process's leftovers from a live one's work.
    package static func path(near path: String) -> String {
        let directory = directoryPart(path)
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return (directory.isEmpty ? "" : directory + "/") + ".\(namePart(path)).tmp-\(getpid())-\(suffix)"
    }

    // The registered paths, as C strings in fixed slots, so that the signal handler can read them without
    // allocating or locking (only async-signal-safe calls are made there: unlink, rmdir, signal, raise, _exit). A slot
    // holds a pointer or nil; a string is never freed once it was in a slot (a handler may be reading it), which
    // costs a few bytes per temporary file of a process that lives for one command.
    private static let capacity = 64
    nonisolated(unsafe) private static let slots: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = {
        let slots = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
        return slots
    }()
    /// Check folders (``makeDirectory(near:)``) to remove, after the files, when a signal ends the process.
    private static let directoryCapacity = 16
    nonisolated(unsafe) private static let directorySlots: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = {
        let slots = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: directoryCapacity)
        slots.initialize(repeating: nil, count: directoryCapacity)
        return slots
    }()
    private static let lock = Mutex(())

    /// Registers the check folder `path` for removal (rmdir, after the registered files, so register what is put
    /// in it) if a signal ends the process before ``unregisterDirectory(_:)``; at most 16 at once.
    package static func registerDirectory(_ path: String) {
        lock.withLock { _ in
            guard let free = (0..<directoryCapacity).first(where: { directorySlots[$0] == nil }) else { return }
            directorySlots[free] = strdup(path)
        }
    }

    /// Forgets the check folder `path` and every file registered in it: they were removed.
    package static func unregisterDirectory(_ path: String) {
        lock.withLock { _ in
            for index in 0..<directoryCapacity {
                if let name = directorySlots[index], String(cString: name) == path { directorySlots[index] = nil }
            }
            let inside = path + "/"
            for index in 0..<capacity {
                if let name = slots[index], String(cString: name).hasPrefix(inside) { slots[index] = nil }
            }
        }
    }

    /// Registers `path` (and its SQLite side files `-journal`, `-wal`, `-shm`) for removal if a signal ends the
    /// process before ``unregister(_:)``. At most 64 at once; more are not registered (the sweep still removes
    /// them later).
    package static func register(_ path: String) {
        lock.withLock { _ in
            for suffix in ["", "-journal", "-wal", "-shm"] {
                guard let free = (0..<capacity).first(where: { slots[$0] == nil }) else { return }
                slots[free] = strdup(path + suffix)
            }
        }
    }

    /// Forgets `path`: it was renamed into place or removed.
    package static func unregister(_ path: String) {
        lock.withLock { _ in
            let names = Set(["", "-journal", "-wal", "-shm"].map { path + $0 })
            for index in 0..<capacity {
                if let name = slots[index], names.contains(String(cString: name)) { slots[index] = nil }
            }
        }
    }

    /// A new private directory (mode 0700) beside `path`, `.<name of path>.check-<pid>-<random>`: for copies
    /// being checked or restored, removed with ``removeDirectoryAndFiles(_:)`` when done, and by ``sweep(_:name:)``
    /// when its process died. The corresponding C function is `mkdtemp`.
    package static func makeDirectory(near path: String) throws(Errno) -> String {
        let directory = directoryPart(path)
        var template = Array(
            ((directory.isEmpty ? "" : directory + "/") + ".\(namePart(path)).check-\(getpid())-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ $0.baseAddress.flatMap { mkdtemp($0) } }) else {
            throw Errno.current
        }
        return String(cString: made)
    }

    /// Removes the registered files, then the registered check folders, now (best effort: a folder that still
    /// holds an unregistered file stays, for the sweep).
    package static func removeRegistered() {
        for index in 0..<capacity {
            if let name = slots[index] { unlink(name) }
        }
        for index in 0..<directoryCapacity {
            if let name = directorySlots[index] { rmdir(name) }
        }
    }

    /// From now on SIGINT, SIGTERM and SIGHUP remove the registered files, then end the process by the same
    /// signal (the shell sees 130, 143, 129). For a command-line tool; a library leaves signals to its program.
    package static func removeOnSignals() {
        _ = slots  // made before a handler may need it
        _ = directorySlots
        let handler: @convention(c) (Int32) -> Void = { signal in
            ScratchFiles.removeRegistered()
            // Die by the signal itself (a parent sees WIFSIGNALED): default action, unblocked (a handler runs with
            // its own signal blocked), raised again.
            Glibc.signal(signal, SIG_DFL)
            var unblock = sigset_t()
            sigemptyset(&unblock)
            sigaddset(&unblock, signal)
            sigprocmask(SIG_UNBLOCK, &unblock, nil)
            raise(signal)
            _exit(128 + signal)
        }
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = handler
            sigemptyset(&action.sa_mask)
            for other in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&action.sa_mask, other) }
            action.sa_flags = 0
            sigaction(signal, &action, nil)
        }
    }

    /// Removes from `directory` the temporary files (`.<name>.tmp-<pid>-…`, with their side files) and check
    /// folders (`.<name>.check-<pid>-…`) of processes that no longer run, and returns the paths it could not
    /// remove. Those of live processes are left alone.
    /// With `name`, only those made near `<directory>/<name>` (`.<name>.tmp-…`, `.<name>.check-…`): for a shared
    /// folder such as the temporary directory.
    @discardableResult
    package static func sweep(_ directory: String, name: String? = nil) -> [String] {
        guard let entries = try? listDirectory(directory.isEmpty ? "." : directory) else { return [] }
        var kept: [String] = []
        for entry in entries where name.map({ entry.hasPrefix(".\($0).") }) ?? true {
            guard let pid = ownerPID(entry), pid != getpid(), !isRunning(pid) else { continue }
            let path = (directory.isEmpty ? "." : directory) + "/" + entry
            // Only this user's (root sweeping /tmp must not take another user's file of the same shape).
            guard let status = try? fileStatus(path, followingLinks: false), status.owner == geteuid() else { continue }
            do throws(Errno) {
                if isCheckFolder(entry) {
                    for inner in (try? listDirectory(path)) ?? [] { try? removeFile(path + "/" + inner) }
                    try removeDirectory(path)
                } else {
                    try removeFile(path)
                }
            } catch where error != .noSuchFileOrDirectory {
                kept.append(path)
            } catch {}
        }
        return kept
    }

    /// The temporary files and check folders of dead processes in `directory` (what ``sweep(_:name:)`` would remove).
    package static func leftovers(in directory: String) -> [String] {
        guard let entries = try? listDirectory(directory.isEmpty ? "." : directory) else { return [] }
        return entries.filter { entry in
            guard let pid = ownerPID(entry), pid != getpid() else { return false }
            return !isRunning(pid)
        }.map { (directory.isEmpty ? "." : directory) + "/" + $0 }
    }

    /// Whether process `pid` exists and is not a zombie (a killed process whose parent has not reaped it yet no
    /// longer writes anything).
    package static func isRunning(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 || Errno.current == .notPermitted else { return false }
        guard let stat = try? FileDescriptor.open("/proc/\(pid)/stat", [.readOnly]) else { return true }
        let bytes = (try? stat.closeAfter { () throws(Errno) in try stat.read(upTo: 512) }) ?? []
        // "pid (comm) S ...": the state follows the last ')'.
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < bytes.count else { return true }
        return bytes[close + 2] != UInt8(ascii: "Z")
    }

    /// The process that made `entry`, when it is named `.<name>.tmp-<pid>-<hex>…` or `.<name>.check-<pid>-…`.
    static func ownerPID(_ entry: String) -> pid_t? {
        guard entry.first == "." else { return nil }
        let characters = Array(entry)
        for marker in [Array(".tmp-"), Array(".check-")] where characters.count > marker.count {
            // The last occurrence of the marker followed by digits and a dash.
            var start = characters.count - marker.count
            while start > 0 {
                if Array(characters[start..<(start + marker.count)]) == marker {
                    let digits = characters[(start + marker.count)...].prefix { $0.isASCII && $0.isNumber }
                    let after = start + marker.count + digits.count
                    if !digits.isEmpty, after < characters.count, characters[after] == "-",
                        let pid = pid_t(String(digits)), pid > 0
                    {
                        return pid
                    }
                }
                start -= 1
            }
        }
        return nil
    }

    /// Whether `entry` is a check folder (`.<name>.check-<pid>-…`) rather than a temporary file.
    static func isCheckFolder(_ entry: String) -> Bool {
        entry.split(separator: ".").contains { $0.hasPrefix("check-") }
    }
}

/// Where ``replaceFile(_:with:)`` failed, with the path of that step and the `Errno`.
package struct ReplaceFileError: Error, Sendable {
    /// The steps of a replacement, in order.
    package enum Step: Sendable {
        /// Creating the new file (``path`` is the new file's).
        case create
        /// Writing and flushing it (``path`` is the new file's).
        case write
        /// Renaming it over the old one (``path`` is the destination).
        case rename
        /// Reading its status after the rename (``path`` is the destination).
        case status
        /// Flushing the directory (``path`` is the directory).
        case syncDirectory
    }

    /// The step that failed.
    package let step: Step
    /// The file or directory of that step.
    package let path: String
    /// Why.
    package let errno: Errno
}

/// Replaces the file at `path` with `bytes`, atomically: a new file beside it, named by ``ScratchFiles`` and
/// registered for removal on a signal, mode 0600 whatever the umask, written and flushed, renamed over `path`,
/// then the directory flushed. A failure before the rename leaves `path` as it was and removes the new file.
/// Returns the status of the new file, read after the rename (which changes its ctime).
@discardableResult
package func replaceFile(_ path: String, with bytes: [UInt8]) throws(ReplaceFileError) -> FileStatus {
    let temporary = ScratchFiles.path(near: path)
    ScratchFiles.register(temporary)
    defer { ScratchFiles.unregister(temporary) }
    let descriptor: FileDescriptor
    do {
        descriptor = try FileDescriptor.open(temporary, [.writeOnly, .create, .exclusive, .noFollow])
    } catch {
        throw ReplaceFileError(step: .create, path: temporary, errno: error)
    }
    defer { descriptor.close() }
    var renamed = false
    defer { if !renamed { try? removeFile(temporary) } }
    do {
        try descriptor.setMode(0o600)
        try descriptor.writeAll(bytes)
        try descriptor.sync()
    } catch {
        throw ReplaceFileError(step: .write, path: temporary, errno: error)
    }
    do {
        try renameFile(temporary, to: path)
    } catch {
        throw ReplaceFileError(step: .rename, path: path, errno: error)
    }
    renamed = true
    let status: FileStatus
    do {
        status = try descriptor.fileStatus()
    } catch {
        throw ReplaceFileError(step: .status, path: path, errno: error)
    }
    let directory = directoryPart(path).isEmpty ? "." : directoryPart(path)
    do {
        try syncDirectory(directory)
    } catch {
        throw ReplaceFileError(step: .syncDirectory, path: directory, errno: error)
    }
    return status
}
