// The preferences handle: typed reads, limit-checked durable writes shared between processes.
public import Foundation
internal import Glibc
internal import SecureStoreCore
internal import Synchronization

/// A preferences domain: small typed settings in a human-readable file with enforced size limits.
///
/// Each change is a read-modify-write under an advisory lock on `<domain>.json.lock`, written to a
/// temporary file, fsynced and renamed over the domain file, so that a crash leaves the old or the new
/// version and processes sharing a domain never lose each other's keys. Reads see other processes'
/// changes: the file is read again whenever its inode, size or modification time changes.
///
/// ```swift
/// let prefs = try Preferences(app: "com.example.tasks")
/// prefs.register(defaults: ["theme": "system", "fontSize": 13])
/// let size = prefs.get("fontSize", default: 13)
/// try prefs.set("dark", forKey: "theme")
/// ```
///
/// The handle is `Sendable`; share one per domain within a process, or open several: they coordinate
/// through the file lock exactly as separate processes do.
public final class Preferences: Sendable {
    /// Where the domain lives.
    public let location: PreferencesLocation
    /// The limits this handle enforces at set time.
    public let limits: PreferencesLimits

    private struct Snapshot: Sendable {
        var values: [String: PreferenceValue] = [:]
        /// The identity of the file these values were read from or written to; nil when there was no file.
        var identity: FileIdentity?
        /// Entry sizes (key bytes + compact value bytes), computed at the first write or usage query.
        var sizes: [String: Int]?
    }

    private struct State: Sendable {
        var snapshot: Snapshot
        var registered: [String: PreferenceValue] = [:]
        var fileProblem: PreferencesError?
        var removedStaleTemporaries = false
    }

    private let state: Mutex<State>
    /// Where the `async` forms run (PreferencesAsync.swift): this handle's own serial dispatch queue, never
    /// Swift concurrency's cooperative pool (a change waits for the file lock and fsyncs).
    let asyncQueue = DispatchQueue(label: "securestore.preferences")

    /// Opens the domain `domain` of the app `app` under `$XDG_CONFIG_HOME/<app>/` (or `~/.config/<app>/`),
    /// creating the directory with mode 0700 if needed. Reads the file if there is one.
    /// - Throws: ``PreferencesError`` — ``PreferencesError/Code/damagedFile`` (with the path, line and column)
    ///   when the file cannot be read; the file is left as it is. Call ``reset(_:)`` to move it aside.
    public convenience init(app: String, domain: String = "preferences", limits: PreferencesLimits = .default) throws {
        try self.init(location: .app(app, domain: domain), limits: limits)
    }

    /// Opens a domain at an explicit location, creating the directory with mode 0700 if needed.
    /// - Throws: ``PreferencesError`` as ``init(app:domain:limits:)``.
    public init(location: PreferencesLocation, limits: PreferencesLimits = .default) throws {
        self.location = location
        self.limits = limits
        try FileSystem.makeDirectory(location.directoryPath)
        let snapshot = try Self.load(location, limits: limits)
        state = Mutex(State(snapshot: snapshot))
    }

    // MARK: Reading

    /// The value stored for `key` (or registered as its default) if it has type `T`; otherwise `defaultValue`.
    ///
    /// Never throws: if another process has damaged the file since it was last read, the last values read
    /// are used and ``fileProblem`` says why (the next set throws).
    public func get<T: PreferenceRepresentable>(_ key: String, default defaultValue: T) -> T {
        value(forKey: key).flatMap(T.init(preferenceValue:)) ?? defaultValue
    }

    /// The value of a typed key: stored, else registered, else the key's default.
    public subscript<T>(key: PreferenceKey<T>) -> T {
        self.get(key.name, default: key.defaultValue)
    }

    /// The value stored for `key` as `T`, `nil` when there is none (registered defaults included).
    /// - Throws: ``PreferencesError/Code/typeMismatch`` when the stored value has another type.
    public func value<T: PreferenceRepresentable>(forKey key: String, as type: T.Type = T.self) throws -> T? {
        guard let stored = value(forKey: key) else { return nil }
        guard let typed = T(preferenceValue: stored) else {
            throw PreferencesError(
                .typeMismatch,
                "the value for \"\(Self.shortened(key))\" is \(Self.article(stored.typeName)), not \(T.self)"
            )
        }
        return typed
    }

    /// The stored value for `key`, else its registered default, else `nil`.
    public func value(forKey key: String) -> PreferenceValue? {
        let snapshot = current()
        if let stored = snapshot.values[key] { return stored }
        return state.withLock { $0.registered[key] }
    }

    /// Every stored key, sorted (registered defaults not included).
    public var keys: [String] { current().values.keys.sorted() }

    /// Every stored key and value (registered defaults not included).
    public var storedValues: [String: PreferenceValue] { current().values }

    /// The total size of the domain against the limits.
    public var usage: PreferencesUsage {
        let snapshot = current()
        let sizes = snapshot.sizes ?? Self.sizes(of: snapshot.values)
        return PreferencesUsage(totalSize: sizes.values.reduce(0, +), keyCount: snapshot.values.count, limits: limits)
    }

    /// Why the file could not be read again after another process changed it, or `nil` when the values
    /// this handle returns are those of the file on disk.
    public var fileProblem: PreferencesError? {
        _ = current()
        return state.withLock { $0.fileProblem }
    }

    /// Reads the file again now, whether or not it changed.
    /// - Throws: ``PreferencesError/Code/damagedFile`` and the other load errors; the values in memory are
    ///   then left as they were.
    public func reload() throws {
        let fresh = try Self.load(location, limits: limits)
        state.withLock {
            $0.snapshot = fresh
            $0.fileProblem = nil
        }
    }

    // MARK: Defaults

    /// Registers values returned when a key has no stored value. Kept in memory only, never written;
    /// a later registration of the same key replaces the earlier one.
    public func register(defaults: [String: PreferenceValue]) {
        state.withLock { $0.registered.merge(defaults) { _, new in new } }
    }

    // MARK: Writing

    /// Stores `value` for `key`.
    ///
    /// - Returns: a warning when the domain is now above its soft total size, else `nil`.
    /// - Throws: ``PreferencesError/Code/limitExceeded`` naming the key, its size and the limit when the key,
    ///   the value or the new total is too large — then nothing changes in memory or on disk;
    ///   ``PreferencesError/Code/damagedFile`` when the file on disk is damaged (it is left untouched);
    ///   ``PreferencesError/Code/unsupportedValue`` for a date outside years 0000–9999; I/O errors.
    @discardableResult
    public func set<T: PreferenceRepresentable>(_ value: T, forKey key: String) throws -> PreferencesWarning? {
        let stored = value.preferenceValue
        try checkKey(key)
        _ = try checkValue(stored, key: key)
        return try modify(only: [key]) { $0[key] = stored }
    }

    /// Stores `value` for a typed key. See ``set(_:forKey:)``.
    @discardableResult
    public func set<T>(_ value: T, for key: PreferenceKey<T>) throws -> PreferencesWarning? {
        try set(value, forKey: key.name)
    }

    /// Removes the stored value for `key` (a registered default shows through again). Never refused by a limit.
    /// - Returns: whether a value was stored.
    @discardableResult
    public func remove(_ key: String) throws -> Bool {
        var existed = false
        try modify(only: [key]) { values in existed = values.removeValue(forKey: key) != nil }
        return existed
    }

    /// Removes the stored value for a typed key. See ``remove(_:)``.
    @discardableResult
    public func remove<T>(_ key: PreferenceKey<T>) throws -> Bool {
        try remove(key.name)
    }

    /// Changes several keys at once: `body` gets the current stored values (read under the domain's lock,
    /// so including every other process's changes) and edits them; the result is checked against the
    /// limits and written as one version. If `body` throws or a limit is hit, nothing is written.
    ///
    /// `body` runs while this process holds the domain's file lock: keep it short and do not use the same
    /// domain from inside it.
    @discardableResult
    public func update(_ body: (inout [String: PreferenceValue]) throws -> Void) throws -> PreferencesWarning? {
        try modify(only: nil, body)
    }

    /// The read-modify-write behind every change. `only`, when given, holds every key `body` may change,
    /// so that a single set compares one key instead of the whole domain.
    @discardableResult
    private func modify(
        only changedKeys: Set<String>?, _ body: (inout [String: PreferenceValue]) throws -> Void
    ) throws -> PreferencesWarning? {
        try FileSystem.makeDirectory(location.directoryPath)
        let lock = try FileSystem.lock(location.lockPath)
        defer { lock.close() }

        if state.withLock({ state in
            defer { state.removedStaleTemporaries = true }
            return !state.removedStaleTemporaries
        }) {
            FileSystem.removeStale(in: location.directoryPath, prefix: location.temporaryPrefix)
        }

        // Under the lock the file cannot change: read it unless this handle already holds that version.
        let cached = state.withLock { $0.snapshot }
        let onDisk = try FileSystem.identity(of: location.filePath)
        var base = cached
        if onDisk != cached.identity {
            base = try Self.load(location, limits: limits)
        }
        let oldSizes = base.sizes ?? Self.sizes(of: base.values)

        var values = base.values
        try body(&values)

        // Check every changed key before anything is written.
        var newSizes = oldSizes
        var largestChange: (key: String, size: Int)?
        let candidates = changedKeys.map { Array($0) } ?? Array(values.keys) + base.values.keys.filter { values[$0] == nil }
        var changed = false
        for key in candidates {
            guard let value = values[key] else {
                if base.values[key] != nil {
                    newSizes[key] = nil
                    changed = true
                }
                continue
            }
            guard base.values[key] != value else { continue }
            changed = true
            try checkKey(key)
            let size = try checkValue(value, key: key)
            newSizes[key] = key.utf8.count + size
            if largestChange == nil || size > largestChange!.size { largestChange = (key, size) }
        }
        let oldTotal = oldSizes.values.reduce(0, +)
        let newTotal = newSizes.values.reduce(0, +)
        if newTotal > limits.hardTotalSize && newTotal > oldTotal, let change = largestChange {
            throw PreferencesError(
                .limitExceeded,
                "setting \"\(Self.shortened(change.key))\" (\(change.size) bytes) would make the preferences "
                    + "total \(newTotal) bytes, over the hard limit of \(limits.hardTotalSize) bytes; nothing was changed"
            )
        }
        guard changed else {
            state.withLock { $0.snapshot = Snapshot(values: base.values, identity: base.identity, sizes: oldSizes) }
            return nil
        }

        let bytes = try FormatWriter.document(values)
        let identity = try FileSystem.replace(location.filePath, with: bytes)
        state.withLock {
            $0.snapshot = Snapshot(values: values, identity: identity, sizes: newSizes)
            $0.fileProblem = nil
        }
        guard newTotal > limits.softTotalSize, let change = largestChange else { return nil }
        return PreferencesWarning(
            key: change.key, totalSize: newTotal, softLimit: limits.softTotalSize, hardLimit: limits.hardTotalSize)
    }

    // MARK: Reset

    /// Moves the domain file aside to `<domain>.json.reset-<UTC timestamp>` and starts with no stored values.
    /// This is the way out of a ``PreferencesError/Code/damagedFile`` error; the old file is kept for
    /// inspection. Registered defaults stay.
    /// - Returns: where the old file now is, or `nil` when there was no file.
    @discardableResult
    public func reset() throws -> URL? {
        let moved = try Self.reset(location)
        state.withLock {
            $0.snapshot = Snapshot(values: [:], identity: nil, sizes: [:])
            $0.fileProblem = nil
        }
        return moved
    }

    /// Moves the domain file at `location` aside without opening it (for a file too damaged to open).
    /// See ``reset()``.
    @discardableResult
    public static func reset(_ location: PreferencesLocation) throws -> URL? {
        try FileSystem.makeDirectory(location.directoryPath)
        let lock = try FileSystem.lock(location.lockPath)
        defer { lock.close() }
        guard FileSystem.exists(location.filePath) else { return nil }
        let stamp = Self.timestamp()
        var name = location.domain + ".json.reset-" + stamp
        var counter = 1
        while FileSystem.exists(location.directoryPath + "/" + name) {
            counter += 1
            name = location.domain + ".json.reset-" + stamp + "-" + String(counter)
        }
        let target = location.directoryPath + "/" + name
        guard try FileSystem.move(location.filePath, to: target) else { return nil }
        try FileSystem.syncDirectory(location.directoryPath)
        return location.directory.appending(path: name)
    }

    // MARK: Audit

    /// Audits the stored values against this handle's limits: sizes, oversize keys and values that look like
    /// secrets. See ``PreferencesAudit``.
    public func audit() -> PreferencesAuditReport {
        PreferencesAudit.run(values: current().values, limits: limits, path: location.fileURL.path)
    }

    // MARK: Internals

    /// The values to read: the in-memory snapshot, read again first if the file changed on disk.
    private func current() -> Snapshot {
        let cached = state.withLock { $0.snapshot }
        let onDisk: FileIdentity?
        do {
            onDisk = try FileSystem.identity(of: location.filePath)
        } catch {
            state.withLock { $0.fileProblem = error }
            return cached
        }
        if onDisk == cached.identity { return cached }
        do {
            let fresh = try Self.load(location, limits: limits)
            state.withLock {
                $0.snapshot = fresh
                $0.fileProblem = nil
            }
            return fresh
        } catch let error as PreferencesError {
            state.withLock { $0.fileProblem = error }
            return cached
        } catch {
            return cached
        }
    }

    /// The deepest nesting of arrays and dictionaries a value may have: the file's own envelope and the
    /// tagged forms of Data, Date and non-finite Doubles take the rest of the reader's FileFormat.maxDepth.
    static let maximumNesting = FileFormat.maxDepth - 4

    /// How deeply `value` nests arrays and dictionaries (a scalar is 0), counting no further than one past
    /// `limit` so that a hostile value cannot make this recurse without bound.
    static func nestingDepth(_ value: PreferenceValue, stoppingAfter limit: Int) -> Int {
        guard limit >= 0 else { return 1 }
        switch value {
        case .array(let elements):
            var deepest = 0
            for element in elements {
                deepest = max(deepest, nestingDepth(element, stoppingAfter: limit - 1))
                if deepest >= limit { break }
            }
            return deepest + 1
        case .dictionary(let entries):
            var deepest = 0
            for element in entries.values {
                deepest = max(deepest, nestingDepth(element, stoppingAfter: limit - 1))
                if deepest >= limit { break }
            }
            return deepest + 1
        default:
            return 0
        }
    }

    private static func load(_ location: PreferencesLocation, limits: PreferencesLimits) throws -> Snapshot {
        let path = location.filePath
        let (scaled, overflow) = limits.hardTotalSize.multipliedReportingOverflow(by: 4)
        let maxSize = overflow ? Int.max : max(16 * 1024 * 1024, scaled)
        guard let (bytes, identity) = try FileSystem.read(path, maxSize: maxSize) else {
            return Snapshot(values: [:], identity: nil, sizes: [:])
        }
        do {
            let values = try FormatReader.document(bytes)
            return Snapshot(values: values, identity: identity, sizes: nil)
        } catch let problem {
            if problem.newerVersion {
                throw PreferencesError(
                    .unsupportedFormat,
                    "\(path) was written by a newer SecureStore: \(problem.text). It was left untouched."
                )
            }
            throw PreferencesError(
                .damagedFile,
                "\(path) is damaged: \(problem.text). It was left untouched; fix it by hand, "
                    + "or reset the domain to move it aside and start with no values."
            )
        }
    }

    private static func sizes(of values: [String: PreferenceValue]) -> [String: Int] {
        values.reduce(into: [:]) { sizes, entry in
            sizes[entry.key] = entry.key.utf8.count + ((try? FormatWriter.compactSize(entry.value)) ?? 0)
        }
    }

    private func checkKey(_ key: String) throws {
        guard !key.isEmpty else {
            throw PreferencesError(.invalidKey, "a preferences key cannot be empty")
        }
        let length = key.utf8.count
        if length > limits.maxKeyLength {
            throw PreferencesError(
                .limitExceeded,
                "the key \"\(Self.shortened(key))\" is \(length) bytes long, over the key-length limit of "
                    + "\(limits.maxKeyLength) bytes; nothing was changed"
            )
        }
    }

    /// The compact size of `value`, checked against the per-value limit.
    private func checkValue(_ value: PreferenceValue, key: String) throws -> Int {
        // Checked first: the reader refuses files nested deeper than FileFormat.maxDepth, so a deeper value
        // would be written and then make the whole domain unreadable for every other process.
        let depth = Self.nestingDepth(value, stoppingAfter: Self.maximumNesting)
        if depth > Self.maximumNesting {
            throw PreferencesError(
                .limitExceeded,
                "the value for \"\(Self.shortened(key))\" is nested more than \(Self.maximumNesting) levels deep, "
                    + "over the nesting limit of \(Self.maximumNesting); nothing was changed"
            )
        }
        let size = try FormatWriter.compactSize(value)
        if size > limits.maxValueSize {
            throw PreferencesError(
                .limitExceeded,
                "the value for \"\(Self.shortened(key))\" is \(size) bytes, over the per-value limit of "
                    + "\(limits.maxValueSize) bytes; nothing was changed"
            )
        }
        return size
    }

    /// A key for a message: at most 64 characters.
    static func shortened(_ key: String) -> String {
        key.count <= 64 ? key : String(key.prefix(61)) + "..."
    }

    private static func article(_ typeName: String) -> String {
        ("AEIOU".contains(typeName.first ?? "x") ? "an " : "a ") + typeName
    }

    private static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        return String(
            format: "%04d%02d%02dT%02d%02d%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}

// MARK: Literals

extension PreferenceValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// `.bool(value)`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `.int(value)`.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// `.double(value)`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `.string(value)`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `.array(elements)`.
    public init(arrayLiteral elements: PreferenceValue...) { self = .array(elements) }
    /// `.dictionary` of the pairs; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, PreferenceValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
