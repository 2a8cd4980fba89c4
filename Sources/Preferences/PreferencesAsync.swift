// The async forms of the blocking calls: run on the handle's own serial dispatch queue, never on a thread of
// Swift concurrency's cooperative pool (a change waits for another process's file lock and fsyncs).
public import Foundation
internal import SecureStoreCore

extension Preferences {
    // MARK: Reading
    //
    // `get`, `value(forKey:)`, `value(forKey:as:)` and `value(decoding:forKey:)` stay synchronous only: they read
    // memory, after one `stat` of the file (and a read of at most the hard total size when another process
    // changed it), take no lock and never wait for another process. An `async` twin of the same name would make
    // every existing `prefs.get(…)` in `async` code an error ("expression is 'async' but is not marked with
    // 'await'") for no gain.

    /// The `async` form of ``reload()``, on this handle's own dispatch queue.
    public func reload() async throws {
        try await runBlocking(on: asyncQueue) { try self.reload() }
    }

    // MARK: Writing

    /// The `async` form of ``set(_:forKey:)``: the locked read-modify-write, the fsync and the rename run on
    /// this handle's own dispatch queue.
    ///
    /// ```swift
    /// import Preferences
    ///
    /// func saveTheme(_ theme: String, in preferences: Preferences) async throws {
    ///     try await preferences.set(theme, forKey: "theme")
    ///     print(preferences.get("theme", default: "light"))
    /// }
    /// ```
    @discardableResult
    public func set<T: PreferenceRepresentable>(_ value: T, forKey key: String) async throws -> PreferencesWarning? {
        try await runBlocking(on: asyncQueue) { try self.set(value, forKey: key) }
    }

    /// The `async` form of ``set(_:for:)``, on this handle's own dispatch queue.
    @discardableResult
    public func set<T>(_ value: T, for key: PreferenceKey<T>) async throws -> PreferencesWarning? {
        try await runBlocking(on: asyncQueue) { try self.set(value, for: key) }
    }

    /// The `async` form of ``set(encoding:forKey:)``, on this handle's own dispatch queue.
    @discardableResult
    public func set<T: Encodable & Sendable>(encoding value: T, forKey key: String) async throws
        -> PreferencesWarning?
    {
        try await runBlocking(on: asyncQueue) { try self.set(encoding: value, forKey: key) }
    }

    /// The `async` form of ``remove(_:)-(String)``, on this handle's own dispatch queue.
    @discardableResult
    public func remove(_ key: String) async throws -> Bool {
        try await runBlocking(on: asyncQueue) { try self.remove(key) }
    }

    /// The `async` form of ``remove(_:)-(PreferenceKey<T>)``, on this handle's own dispatch queue.
    @discardableResult
    public func remove<T>(_ key: PreferenceKey<T>) async throws -> Bool {
        try await runBlocking(on: asyncQueue) { try self.remove(key) }
    }

    /// The `async` form of ``update(_:)``: `body` runs on this handle's own dispatch queue, under the domain's
    /// file lock, and must not use the same domain.
    @discardableResult
    public func update(
        _ body: @escaping @Sendable (inout [String: PreferenceValue]) throws -> Void
    ) async throws -> PreferencesWarning? {
        try await runBlocking(on: asyncQueue) { try self.update(body) }
    }

    /// The `async` form of ``reset()``, on this handle's own dispatch queue.
    @discardableResult
    public func reset() async throws -> URL? {
        try await runBlocking(on: asyncQueue) { try self.reset() }
    }

    /// The `async` form of ``importDocument(_:replacing:)``, on this handle's own dispatch queue.
    @discardableResult
    public func importDocument(_ document: Data, replacing: Bool = false) async throws -> PreferencesWarning? {
        try await runBlocking(on: asyncQueue) { try self.importDocument(document, replacing: replacing) }
    }

    /// The `async` form of ``exportDocument()``, on this handle's own dispatch queue.
    public func exportDocument() async throws -> Data {
        try await runBlocking(on: asyncQueue) { try self.exportDocument() }
    }
}
