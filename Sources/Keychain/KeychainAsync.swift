// The async forms of the Keychain's calls: the same calls, on the keychain's own dispatch queue.
internal import Foundation
internal import SecureStoreCore

extension Keychain {
    /// The `async` form of `set(_:service:account:label:)` for a ``Secret``.
    public func set(_ secret: Secret, service: String, account: String, label: String? = nil) async throws {
        try await perform { try self.set(secret, service: service, account: account, label: label) }
    }

    /// The `async` form of `set(_:service:account:label:)` for a `String`.
    public func set(_ string: String, service: String, account: String, label: String? = nil) async throws {
        try await perform { try self.set(string, service: service, account: account, label: label) }
    }

    /// The `async` form of ``secret(service:account:)``.
    public func secret(service: String, account: String) async throws -> Secret? {
        try await perform { try self.secret(service: service, account: account) }
    }

    /// The `async` form of ``string(service:account:)``.
    public func string(service: String, account: String) async throws -> String? {
        try await perform { try self.string(service: service, account: account) }
    }

    /// The `async` form of ``items(service:)``.
    public func items(service: String) async throws -> [KeychainItem] {
        try await perform { try self.items(service: service) }
    }

    /// The `async` form of ``delete(service:account:)``.
    @discardableResult
    public func delete(service: String, account: String) async throws -> Bool {
        try await perform { try self.delete(service: service, account: account) }
    }

    private func perform<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await runBlocking(on: asyncQueue, body)
    }
}
