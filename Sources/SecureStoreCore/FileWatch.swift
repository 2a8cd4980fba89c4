// Waiting for something to happen without spending anything meanwhile: inotify(7) for files and folders, a
// self-pipe for signals, poll(2) over both (`securestore sync watch`, Sources/Sync/SyncWatcher.swift).
internal import Glibc

/// An inotify instance: watches on files and folders, and the events the kernel queued for them. The descriptor
/// is closed once, when the value ends.
package struct FileWatch: ~Copyable {
    /// The inotify descriptor (non-blocking, close-on-exec): readable when events are queued.
    package let descriptor: Int32

    /// What a watch reports.
    package struct Events: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        /// A file was written to (`IN_MODIFY`).
        package static let modified = Events(rawValue: UInt32(IN_MODIFY))
        /// A file opened for writing was closed (`IN_CLOSE_WRITE`).
        package static let closedAfterWriting = Events(rawValue: UInt32(IN_CLOSE_WRITE))
        /// A name was created in a watched folder (`IN_CREATE`).
        package static let created = Events(rawValue: UInt32(IN_CREATE))
        /// A name was moved into a watched folder (`IN_MOVED_TO`): how Syncthing and our own writers publish a file.
        package static let movedIn = Events(rawValue: UInt32(IN_MOVED_TO))
        /// The watched file or folder itself was deleted or moved away (`IN_DELETE_SELF`, `IN_MOVE_SELF`).
        package static let gone = Events(rawValue: UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF))
        /// The kernel dropped events (`IN_Q_OVERFLOW`): whoever watches must look again at everything.
        package static let overflow = Events(rawValue: UInt32(IN_Q_OVERFLOW))
        /// The event's name is a folder (`IN_ISDIR`).
        package static let isDirectory = Events(rawValue: UInt32(IN_ISDIR))
        /// The watch was removed (`IN_IGNORED`): its file or folder went away.
        package static let removed = Events(rawValue: UInt32(IN_IGNORED))
    }

    /// One event: the watch it came from, what happened, and the name in a watched folder ("" for the watched
    /// thing itself).
    package struct Event: Sendable {
        package let watch: Int32
        package let events: Events
        package let name: String
    }

    /// A new inotify instance. The corresponding C function is `inotify_init1`.
    package init() throws(Errno) {
        descriptor = try retryingInterrupts { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    deinit { _ = Glibc.close(descriptor) }

    /// Watches `path` (a symbolic link in its place is not followed) for `events`; returns the watch's number.
    /// The corresponding C function is `inotify_add_watch`.
    package func add(_ path: String, _ events: Events) throws(Errno) -> Int32 {
        try retryingInterrupts { inotify_add_watch(descriptor, path, events.rawValue | UInt32(IN_DONT_FOLLOW)) }
    }

    /// Stops watch `watch`. The corresponding C function is `inotify_rm_watch`.
    package func remove(_ watch: Int32) {
        _ = inotify_rm_watch(descriptor, watch)
    }

    /// The events queued now (none when nothing is: the read does not block).
    package func read() -> [Event] {
        var events: [Event] = []
        let size = 64 * 1024
        var buffer = [UInt8](repeating: 0, count: size)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in Glibc.read(descriptor, bytes.baseAddress!, size) }
            if count < 0 && Errno.current == .interrupted { continue }
            guard count > 0 else { return events }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let (watch, mask, length) = buffer.withUnsafeBytes { bytes in
                    (
                        bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self),
                        bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                        Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    )
                }
                let nameBytes = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                events.append(Event(watch: watch, events: Events(rawValue: mask), name: String(decoding: nameBytes, as: UTF8.self)))
                offset += header + length
            }
        }
    }
}

/// The signals a long-running command ends on (SIGINT, SIGTERM, SIGHUP), turned into bytes on a pipe that
/// `waitForInput(_:timeout:)` waits on with everything else: the command ends at a point of its choosing (between
/// two syncs), never in the middle of writing a file. One per process.
package enum SignalPipe {
    /// The pipe's write end, for the handler (-1 until ``install()``).
    nonisolated(unsafe) private static var writeEnd: Int32 = -1
    /// Signals received so far (only the handler writes it).
    nonisolated(unsafe) private static var received = 0

    /// From now on SIGINT, SIGTERM and SIGHUP write their number to a pipe instead of ending the process (this
    /// replaces `ScratchFiles.removeOnSignals()`'s handlers); returns the pipe's read end, readable once a signal
    /// came. A second signal ends the process at once, by that signal, as a crash would (for a step that does not
    /// end: a keyring call or a remote that hangs); every step the caller takes must be crash-safe. The
    /// corresponding C functions are `pipe` and `sigaction`.
    package static func install() throws(Errno) -> FileDescriptor {
        let (readEnd, write) = try FileDescriptor.pipe()
        _ = fcntl(write.rawValue, F_SETFL, O_NONBLOCK)
        writeEnd = write.rawValue
        let handler: @convention(c) (Int32) -> Void = { signal in
            SignalPipe.received += 1
            if SignalPipe.received > 1 {
                Glibc.signal(signal, SIG_DFL)
                var unblock = sigset_t()
                sigemptyset(&unblock)
                sigaddset(&unblock, signal)
                sigprocmask(SIG_UNBLOCK, &unblock, nil)
                raise(signal)
                _exit(128 + signal)
            }
            var byte = UInt8(truncatingIfNeeded: signal)
            let saved = errno
            _ = Glibc.write(SignalPipe.writeEnd, &byte, 1)
            errno = saved
        }
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = handler
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signal, &action, nil)
        }
        return readEnd
    }

    /// The first signal number queued on `readEnd` by the handler, or nil when none is.
    package static func received(_ readEnd: FileDescriptor) -> Int32? {
        var byte: UInt8 = 0
        _ = fcntl(readEnd.rawValue, F_SETFL, O_NONBLOCK)
        let count = Glibc.read(readEnd.rawValue, &byte, 1)
        return count == 1 ? Int32(byte) : nil
    }
}

/// Waits until one of `descriptors` is readable or `timeout` passed (nil: no limit); returns which are readable
/// (all false after the timeout). An interrupted wait is resumed with what is left of the time. The corresponding C
/// function is `poll`.
package func waitForInput(_ descriptors: [Int32], timeout: Duration?) -> [Bool] {
    var polls = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let clock = ContinuousClock()
    let deadline = timeout.map { clock.now + $0 }
    while true {
        var milliseconds: Int32 = -1
        if let deadline {
            let left = clock.now.duration(to: deadline)
            let (seconds, attoseconds) = left.components
            milliseconds = left <= .zero ? 0 : Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        }
        let result = poll(&polls, nfds_t(polls.count), milliseconds)
        if result < 0 && Errno.current == .interrupted { continue }
        return polls.map { $0.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 }
    }
}
