// The one place where the Keychain calls libsecret. Every call is bounded by a deadline and every
// GError becomes a KeychainError here.
internal import CLibSecret
import Dispatch
import Foundation
import Synchronization

/// A GCancellable that cancels itself when the deadline passes, so that no libsecret call can block
/// for longer than the configured timeout (libsecret's sync calls have no timeout of their own).
final class Deadline: @unchecked Sendable {
    // g_cancellable_cancel is thread-safe; the pointer is owned by this object.
    let cancellable: UnsafeMutablePointer<GCancellable>
    private let fired = Atomic<Bool>(false)
    private static let timerQueue = DispatchQueue(label: "securestore.keychain.deadline")

    private init() {
        cancellable = g_cancellable_new()
    }

    /// Runs `body` with a cancellable that is cancelled after `timeout`.
    static func run<Result, Failure: Error>(
        timeout: Duration, _ body: (Deadline) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let deadline = Deadline()
        let work = DispatchWorkItem { [deadline] in deadline.fire() }
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = Int(clamping: seconds) &* 1_000_000_000 &+ Int(attoseconds / 1_000_000_000)
        timerQueue.asyncAfter(deadline: .now() + .nanoseconds(max(nanoseconds, 1)), execute: work)
        defer { work.cancel() }
        return try body(deadline)
    }

    private func fire() {
        fired.store(true, ordering: .sequentiallyConsistent)
        g_cancellable_cancel(cancellable)
    }

    /// Whether the deadline passed and the call was cancelled because of it.
    var didFire: Bool { fired.load(ordering: .sequentiallyConsistent) }

    deinit { g_object_unref(cancellable) }
}

/// A GError taken apart into Swift values (and freed).
struct GLibError {
    let domain: GQuark
    let code: Int32
    let message: String
    /// The D-Bus error name for errors a remote service returned, e.g. `org.freedesktop.Secret.Error.IsLocked`.
    let remoteName: String?

    init(taking error: UnsafeMutablePointer<GError>) {
        domain = error.pointee.domain
        code = error.pointee.code
        if let remote = g_dbus_error_get_remote_error(error) {
            remoteName = String(cString: remote)
            g_free(remote)
            g_dbus_error_strip_remote_error(error)
        } else {
            remoteName = nil
        }
        message = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        g_error_free(error)
    }

    func isDBus(_ code: GDBusError) -> Bool {
        domain == g_dbus_error_quark() && self.code == Int32(code.rawValue)
    }

    var isCancelled: Bool {
        domain == g_io_error_quark() && code == Int32(G_IO_ERROR_CANCELLED.rawValue)
    }

    var isLocked: Bool {
        (domain == secret_error_get_quark() && code == Int32(SECRET_ERROR_IS_LOCKED.rawValue))
            || remoteName == "org.freedesktop.Secret.Error.IsLocked"
            || message.localizedCaseInsensitiveContains("locked collection")
    }
}

/// A string-to-string GHashTable, as libsecret takes attributes.
final class AttributeTable {
    let table: OpaquePointer

    init(_ attributes: [(String, String)]) {
        table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)
        for (key, value) in attributes {
            g_hash_table_insert(table, g_strdup(key), g_strdup(value))
        }
    }

    deinit { g_hash_table_unref(table) }
}

/// The facts about one item that a listing shows.
struct ItemProperties {
    let label: String
    let attributes: [String: String]
}

/// One open connection (a Secret Service session) of one Keychain.
///
/// Unchecked Sendable: it is only ever used while the owning Keychain's mutex is held.
final class SecretServiceConnection: @unchecked Sendable {
    private let service: UnsafeMutablePointer<SecretService>
    private var collectionPaths: [String: String] = [:]

    /// Opens a session with the Secret Service on the session bus.
    init(deadline: Deadline) throws(KeychainError) {
        var error: UnsafeMutablePointer<GError>?
        let service = secret_service_open_sync(
            secret_service_get_type(), nil, SECRET_SERVICE_OPEN_SESSION, deadline.cancellable, &error)
        guard let service else {
            throw Self.connectError(error, deadline: deadline)
        }
        self.service = service
    }

    deinit { g_object_unref(service) }

    /// The D-Bus object path of the collection that `alias` names (`default`, `session`…).
    func collectionPath(alias: String, deadline: Deadline) throws(KeychainError) -> String {
        if let path = collectionPaths[alias] { return path }
        var error: UnsafeMutablePointer<GError>?
        let result = secret_service_read_alias_dbus_path_sync(service, alias, deadline.cancellable, &error)
        if let error { throw Self.classify(GLibError(taking: error), deadline: deadline) }
        guard let result else { throw Self.noCollection(alias) }
        let path = String(cString: result)
        g_free(result)
        guard path != "/" && !path.isEmpty else { throw Self.noCollection(alias) }
        collectionPaths[alias] = path
        return path
    }

    /// The paths of the items whose attributes include `attributes`, split into unlocked and locked.
    func search(_ attributes: [(String, String)], deadline: Deadline) throws(KeychainError)
        -> (unlocked: [String], locked: [String])
    {
        let table = AttributeTable(attributes)
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var error: UnsafeMutablePointer<GError>?
        let ok = secret_service_search_for_dbus_paths_sync(
            service, nil, table.table, deadline.cancellable, &unlocked, &locked, &error)
        defer {
            g_strfreev(unlocked)
            g_strfreev(locked)
        }
        guard ok != 0 else { throw Self.classify(error.map(GLibError.init(taking:)), deadline: deadline) }
        return (Self.strings(unlocked), Self.strings(locked))
    }

    /// Reads the secret of the item at `path` into a ``Secret``, decoding it per its content type.
    func secret(at path: String, deadline: Deadline) throws(KeychainError) -> Secret? {
        var error: UnsafeMutablePointer<GError>?
        let value = secret_service_get_secret_for_dbus_path_sync(service, path, deadline.cancellable, &error)
        if let error { throw Self.classify(GLibError(taking: error), deadline: deadline) }
        guard let value else { return nil }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length: gsize = 0
        guard let bytes = secret_value_get(value, &length) else { return Secret(bytes: []) }
        let raw = UnsafeRawBufferPointer(start: bytes, count: Int(length))
        // Binary secrets are stored as "base64:<base64>" with the attribute encoding=base64. Only an item
        // whose text starts with the prefix costs the extra round trip that reads its attributes, so that
        // another client's text that happens to start with "base64:" is returned as it is.
        guard raw.starts(with: StoredEncoding.prefix),
            try properties(at: path, deadline: deadline).attributes["encoding"] == "base64"
        else {
            return Secret(bytes: raw)
        }
        let encoded = UnsafeRawBufferPointer(rebasing: raw[StoredEncoding.prefix.count...])
        guard let count = Base64.decodedCount(encoded) else {
            throw KeychainError(
                KeychainError.invalidSecret,
                "the stored secret is marked as base64 but is not valid base64; store it again")
        }
        return Secret(count: count) { Base64.decode(encoded, into: $0) }
    }

    /// Creates an item in the collection at `collectionPath`, replacing one with the same attributes.
    func createItem(
        collectionPath: String, label: String, attributes: [(String, String)], secret: Secret,
        deadline: Deadline
    ) throws(KeychainError) -> String {
        let properties = g_hash_table_new_full(g_str_hash, g_str_equal, g_free) { g_variant_unref(OpaquePointer($0)) }
        defer { g_hash_table_unref(properties) }
        g_hash_table_insert(
            properties, g_strdup("org.freedesktop.Secret.Item.Label"),
            UnsafeMutableRawPointer(g_variant_ref_sink(g_variant_new_string(label))))
        g_hash_table_insert(
            properties, g_strdup("org.freedesktop.Secret.Item.Attributes"),
            UnsafeMutableRawPointer(g_variant_ref_sink(Self.attributeVariant(attributes))))

        let value = StoredEncoding.value(for: secret)
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var error: UnsafeMutablePointer<GError>?
        let path = secret_service_create_item_dbus_path_sync(
            service, collectionPath, properties, value, SECRET_ITEM_CREATE_REPLACE, deadline.cancellable, &error)
        if let error { throw Self.classify(GLibError(taking: error), deadline: deadline) }
        guard let path else {
            throw KeychainError(KeychainError.providerError, "the Secret Service did not create the item")
        }
        defer { g_free(path) }
        return String(cString: path)
    }

    /// Deletes the item at `path`.
    func deleteItem(at path: String, deadline: Deadline) throws(KeychainError) {
        var error: UnsafeMutablePointer<GError>?
        let ok = secret_service_delete_item_dbus_path_sync(service, path, deadline.cancellable, &error)
        guard ok != 0 else { throw Self.classify(error.map(GLibError.init(taking:)), deadline: deadline) }
    }

    /// The label and attributes of the item at `path`.
    func properties(at path: String, deadline: Deadline) throws(KeychainError) -> ItemProperties {
        var error: UnsafeMutablePointer<GError>?
        let item = secret_item_new_for_dbus_path_sync(service, path, SECRET_ITEM_NONE, deadline.cancellable, &error)
        if let error { throw Self.classify(GLibError(taking: error), deadline: deadline) }
        guard let item else {
            throw KeychainError(KeychainError.providerError, "the Secret Service returned no item at \(path)")
        }
        defer { g_object_unref(item) }
        var label = ""
        if let cLabel = secret_item_get_label(item) {
            label = String(cString: cLabel)
            g_free(cLabel)
        }
        var attributes: [String: String] = [:]
        if let table = secret_item_get_attributes(item) {
            defer { g_hash_table_unref(table) }
            var iterator = GHashTableIter()
            g_hash_table_iter_init(&iterator, table)
            var key: gpointer?
            var value: gpointer?
            while g_hash_table_iter_next(&iterator, &key, &value) != 0 {
                guard let key, let value else { continue }
                attributes[String(cString: key.assumingMemoryBound(to: CChar.self))] =
                    String(cString: value.assumingMemoryBound(to: CChar.self))
            }
        }
        return ItemProperties(label: label, attributes: attributes)
    }

    // MARK: - Helpers

    private static func attributeVariant(_ attributes: [(String, String)]) -> OpaquePointer {
        let type = g_variant_type_new("a{ss}")
        defer { g_variant_type_free(type) }
        let builder = g_variant_builder_new(type)
        defer { g_variant_builder_unref(builder) }
        for (key, value) in attributes {
            g_variant_builder_add_value(
                builder, g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_string(value)))
        }
        return g_variant_builder_end(builder)
    }

    private static func strings(_ array: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard let array else { return [] }
        var result: [String] = []
        var index = 0
        while let element = array[index] {
            result.append(String(cString: element))
            index += 1
        }
        return result
    }

    private static func noCollection(_ alias: String) -> KeychainError {
        KeychainError(
            KeychainError.collectionNotFound,
            "the Secret Service has no '\(alias)' collection; create it in your keyring manager, or choose another collection")
    }

    static func connectError(_ error: UnsafeMutablePointer<GError>?, deadline: Deadline) -> KeychainError {
        let address = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        if address.isEmpty && !deadline.didFire {
            let detail = error.map { GLibError(taking: $0).message } ?? "no bus address"
            return KeychainError(
                KeychainError.noSessionBus,
                "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set: \(detail)); run inside a desktop session, or start one with `dbus-run-session -- COMMAND` and a Secret Service such as `gnome-keyring-daemon --unlock --components=secrets`")
        }
        return classify(error.map(GLibError.init(taking:)), deadline: deadline)
    }

    static func classify(_ error: GLibError?, deadline: Deadline) -> KeychainError {
        guard let error else {
            return KeychainError(KeychainError.providerError, "the Secret Service failed without saying why")
        }
        if deadline.didFire || error.isDBus(G_DBUS_ERROR_NO_REPLY) || error.isDBus(G_DBUS_ERROR_TIMEOUT)
            || error.isDBus(G_DBUS_ERROR_TIMED_OUT)
        {
            return KeychainError(
                KeychainError.timedOut,
                "the Secret Service did not answer in time; it may be waiting on an unlock prompt or be stuck (restart the keyring daemon, or raise the Keychain timeout)")
        }
        if error.isLocked {
            return KeychainError(
                KeychainError.locked,
                "the keyring collection is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again")
        }
        if error.isDBus(G_DBUS_ERROR_SERVICE_UNKNOWN) || error.isDBus(G_DBUS_ERROR_NAME_HAS_NO_OWNER)
            || error.isDBus(G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND) || error.isDBus(G_DBUS_ERROR_SPAWN_EXEC_FAILED)
            || error.isDBus(G_DBUS_ERROR_SPAWN_CHILD_EXITED)
        {
            return KeychainError(
                KeychainError.serviceUnavailable,
                "no Secret Service provider answers on the session bus (\(error.message)); start one: `gnome-keyring-daemon --start --components=secrets`, KeePassXC with Secret Service integration, or KWallet")
        }
        return KeychainError(KeychainError.providerError, "the Secret Service reported an error: \(error.message)")
    }
}

/// How secrets are stored as text, so that every provider keeps them intact.
///
/// UTF-8 text without NUL bytes is stored as it is, so that `secret-tool` and desktop keyring managers
/// show it. Anything else — binary data, or text that itself starts with `base64:` — is stored as
/// `base64:` followed by its base64 encoding, with the attribute `encoding=base64`, because KDE's and
/// KeePassXC's bridges mangle raw bytes. (The content type cannot carry this: gnome-keyring returns
/// `text/plain` whatever was stored.)
enum StoredEncoding {
    static let prefix: [UInt8] = Array("base64:".utf8)

    static func isText(_ secret: Secret) -> Bool {
        secret.withUnsafeBytes { bytes in
            !bytes.contains(0) && !bytes.starts(with: prefix)
                && String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self) != nil
        }
    }

    /// A SecretValue holding the stored form of `secret`. libsecret copies it into memory it wipes.
    static func value(for secret: Secret) -> OpaquePointer {
        if isText(secret) {
            return secret_value_new(secret.storage.pointer, gssize(secret.count), "text/plain")
        }
        let encoded = Secret(count: prefix.count + Base64.encodedCount(secret.count)) { output in
            output.copyBytes(from: prefix)
            secret.withUnsafeBytes { Base64.encode($0, into: UnsafeMutableRawBufferPointer(rebasing: output[prefix.count...])) }
        }
        return secret_value_new(encoded.storage.pointer, gssize(encoded.count), "text/plain")
    }
}
