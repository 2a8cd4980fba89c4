public import Dispatch
internal import Glibc
internal import SecureStoreCore
internal import Synchronization

extension Preferences {
    /// Calls `handler` with the keys whose stored values changed — through this handle, another handle or
    /// another process — until the returned observation is cancelled or released.
    ///
    /// ```swift
    /// let observation = try preferences.observe { keys in
    ///     if keys.contains("theme") { applyTheme() }
    /// }
    /// ```
    ///
    /// The domain's directory is watched with inotify: every save replaces the file by a rename, which
    /// inotify reports at once, and the handle then reads the file again (as any read would) and compares
    /// the stored values with those it saw last. Registered defaults are not stored values and never
    /// reported. A change to a file that cannot be read (damaged by someone else) is not reported;
    /// ``fileProblem`` says why. `handler` runs on `queue`, one call at a time.
    ///
    /// - Throws: ``PreferencesError/Code/io`` when the directory cannot be watched (for example when the
    ///   system's inotify limits are reached).
    public func observe(
        queue: DispatchQueue = DispatchQueue(label: "securestore.preferences.observe"),
        _ handler: @escaping @Sendable (Set<String>) -> Void
    ) throws -> PreferencesObservation {
        try PreferencesObservation(preferences: self, queue: queue, handler: handler)
    }
}

/// A running observation of a preferences domain; see ``Preferences/observe(queue:_:)``. Stops when
/// ``cancel()`` is called or the observation is released.
public final class PreferencesObservation: Sendable {
    /// A dispatch source is safe to cancel from any thread; Dispatch does not mark it Sendable.
    private struct Source: @unchecked Sendable {
        let source: any DispatchSourceRead
    }

    /// The stored values the handler was last told about.
    private final class Seen: Sendable {
        let values: Mutex<[String: PreferenceValue]>
        init(_ values: [String: PreferenceValue]) { self.values = Mutex(values) }
    }

    private let source: Source

    init(
        preferences: Preferences, queue: DispatchQueue, handler: @escaping @Sendable (Set<String>) -> Void
    ) throws {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else {
            throw PreferencesError(
                .io, "cannot watch \(preferences.location.directoryPath) for changes: errno \(errno)")
        }
        let mask = UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM)
        guard inotify_add_watch(descriptor, preferences.location.directoryPath, mask) >= 0 else {
            let code = errno
            FileDescriptor(rawValue: descriptor).close()
            throw PreferencesError(
                .io, "cannot watch \(preferences.location.directoryPath) for changes: errno \(code)")
        }
        let seen = Seen(preferences.storedValues)
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler {
            // Drain the events; which file changed does not matter: the handle knows whether the domain
            // file is a new one, and reads it only then.
            var buffer = [UInt8](repeating: 0, count: 4096)
            while buffer.withUnsafeMutableBytes({ (try? FileDescriptor(rawValue: descriptor).readSome(into: $0)) ?? 0 }) > 0 {}
            let now = preferences.storedValues
            let changed: Set<String> = seen.values.withLock { last in
                var keys = Set<String>()
                for (key, value) in now where last[key] != value { keys.insert(key) }
                for key in last.keys where now[key] == nil { keys.insert(key) }
                last = now
                return keys
            }
            if !changed.isEmpty { handler(changed) }
        }
        source.setCancelHandler { FileDescriptor(rawValue: descriptor).close() }
        source.resume()
        self.source = Source(source: source)
    }

    /// Stops the observation: `handler` is not called again once a call under way has returned.
    public func cancel() {
        source.source.cancel()
    }

    deinit {
        source.source.cancel()
    }
}
