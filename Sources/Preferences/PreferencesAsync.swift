// The async forms of the blocking calls: run on the handle's own serial dispatch queue, never on a thread of
// Swift concurrency's cooperative pool (a change waits for another process's file lock and fsyncs; a read may
// read the file again when another process changed it).
public import Foundation
internal import SecureStoreCore

extension Preferences {
    // MARK: Reading

    /// The `async` form of ``get(_:default:)``: runs on this handle's own dispatch queue (the file is read
    /// again when another process changed it).
    public func get<T: PreferenceRepresentable>(_ key: String, default defaultValue: T) async -> T {
        // runBlocking rethrows only what its body throws; this body throws nothing.
        (try? await runBlocking(on: asyncQueue) { self.get(key, default: defaultValue) }) ?? defaultValue
    }

    /// The `async` form of ``value(forKey:as:)``, on this handle's own dispatch queue.
    public func value<T: PreferenceRepresentable>(forKey key: String, as type: T.Type = T.self) async throws -> T? {
        try await runBlocking(on: asyncQueue) { try self.value(forKey: key, as: type) }
    }

    /// The `async` form of ``value(forKey:)``, on this handle's own dispatch queue.
    public func value(forKey key: String) async -> PreferenceValue? {
        try? await runBlocking(on: asyncQueue) { self.value(forKey: key) }
    }

    /// The `async` form of ``value(decoding:forKey:)``, on this handle's own dispatch queue.
    public func value<T: Decodable & Sendable>(decoding type: T.Type, forKey key: String) async throws -> T? {
        try await runBlocking(on: asyncQueue) { try self.value(decoding: type, forKey: key) }
    }

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
    ///     print(await preferences.get("theme", default: "light"))
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
