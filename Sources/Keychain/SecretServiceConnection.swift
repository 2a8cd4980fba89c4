// The one place where the Keychain calls libsecret. Every call is bounded by a deadline and every
// GError becomes a KeychainError here.
internal import CLibSecret
internal import Dispatch
internal import Foundation
internal import SecureStoreCore
internal import Synchronization

/// A GCancellable that cancels itself when the deadline passes, so that no libsecret call can block
/// for longer than the configured timeout (libsecret's sync calls have no timeout of their own).
final class Deadline: @unchecked Sendable {
    // g_cancellable_cancel is thread-safe; the pointer is owned by this object.
    let cancellable: UnsafeMutablePointer<GCancellable>
    private let fired = Atomic<Bool>(false)
    /// Bumped by every arm and by the end of the call; a timer fires only if none came after it.
    private let generation = Atomic<Int>(0)
    private static let timerQueue = DispatchQueue(label: "securestore.keychain.deadline")

    private init() {
        cancellable = g_cancellable_new()
    }

    /// Runs `body` with a cancellable that is cancelled after `timeout`.
    static func run<Result, Failure: Error>(
        timeout: Duration, _ body: (Deadline) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let deadline = Deadline()
        deadline.arm(timeout)
        defer { deadline.disarm() }
        return try body(deadline)
    }

    /// Restarts the clock: the deadline now passes `timeout` from now (unless it already passed).
    /// A prompt waits for a person with the prompt timeout, then the call goes on with its own.
    func arm(_ timeout: Duration) {
        let armed = generation.add(1, ordering: .sequentiallyConsistent).newValue
        Self.timerQueue.asyncAfter(deadline: .now() + .nanoseconds(max(Self.nanoseconds(timeout), 1))) { [self] in
            if generation.load(ordering: .sequentiallyConsistent) == armed { fire() }
        }
    }

    private func disarm() {
        generation.add(1, ordering: .sequentiallyConsistent)
    }

    private static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000).overflow
            ? Int.max : Int(clamping: seconds) &* 1_000_000_000 &+ Int(attoseconds / 1_000_000_000)
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
    /// The item's `Locked` property, nil when the service did not give it. KeePassXC answers per client: an
    /// item this client is not approved for reads as locked.
    let locked: Bool?
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
                KeychainError.Code.invalidSecret,
                "the stored secret is marked as base64 but is not valid base64; store it again")
        }
        return Secret(count: count) { Base64.decode(encoded, into: $0) }
    }

    /// The paths of the items of the collection at `collectionPath` whose attributes include `attributes`
    /// (the collection's own `SearchItems`), locked or not: no split, and never a prompt. A locked collection
    /// answers at once: gnome-keyring with its items (they read as locked), KeePassXC with nothing (it cannot
    /// search a locked database, and unlike the service's `SearchItems` never opens its unlock dialog here).
    func search(in collectionPath: String, _ attributes: [(String, String)], deadline: Deadline) throws(KeychainError)
        -> [String]
    {
        let reply = try call(
            collectionPath, "org.freedesktop.Secret.Collection", "SearchItems", tuple([Self.attributeVariant(attributes)]),
            reply: "(ao)", deadline: deadline)
        defer { g_variant_unref(reply) }
        return Self.objectPaths(child: 0, of: reply)
    }

    /// The label, attributes and lock state of the item at `path`: one `GetAll` of its properties.
    func properties(at path: String, deadline: Deadline) throws(KeychainError) -> ItemProperties {
        let reply = try call(
            path, "org.freedesktop.DBus.Properties", "GetAll", tuple([g_variant_new_string("org.freedesktop.Secret.Item")]),
            reply: "(a{sv})", deadline: deadline)
        defer { g_variant_unref(reply) }
        let dictionary = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(dictionary) }
        var label = ""
        var attributes: [String: String] = [:]
        var locked: Bool?
        for index in 0..<g_variant_n_children(dictionary) {
            guard let entry = g_variant_get_child_value(dictionary, index) else { continue }
            defer { g_variant_unref(entry) }
            let name = Self.string(child: 0, of: entry)
            guard let boxed = g_variant_get_child_value(entry, 1) else { continue }
            defer { g_variant_unref(boxed) }
            guard let value = g_variant_get_variant(boxed) else { continue }
            defer { g_variant_unref(value) }
            switch (name, typeString(value)) {
            case ("Label", "s"):
                label = g_variant_get_string(value, nil).map { String(cString: $0) } ?? ""
            case ("Locked", "b"):
                locked = g_variant_get_boolean(value) != 0
            case ("Attributes", "a{ss}"):
                for pair in 0..<g_variant_n_children(value) {
                    guard let attribute = g_variant_get_child_value(value, pair) else { continue }
                    attributes[Self.string(child: 0, of: attribute)] = Self.string(child: 1, of: attribute)
                    g_variant_unref(attribute)
                }
            default:
                continue
            }
        }
        return ItemProperties(label: label, attributes: attributes, locked: locked)
    }

    // MARK: - Locks and prompts
    //
    // These calls go to D-Bus directly rather than through libsecret's wrappers, because libsecret runs
    // every prompt it is handed (so a call waits on a dialog nobody may see) and cannot tell a dismissed
    // prompt from a completed one. Here the Keychain decides whether to run a prompt, and for how long.

    /// Whether the collection at `path` is locked (its `Locked` property).
    func isCollectionLocked(_ path: String, deadline: Deadline) throws(KeychainError) -> Bool {
        let reply = try call(
            path, "org.freedesktop.DBus.Properties", "Get",
            tuple([g_variant_new_string("org.freedesktop.Secret.Collection"), g_variant_new_string("Locked")]),
            reply: "(v)", deadline: deadline)
        defer { g_variant_unref(reply) }
        let boxed = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(boxed) }
        let value = g_variant_get_variant(boxed)!
        defer { g_variant_unref(value) }
        return typeString(value) == "b" && g_variant_get_boolean(value) != 0
    }

    /// Asks the service to unlock `paths` (collections or items): the paths it unlocked at once, and
    /// the path of the prompt that would unlock the rest ("/" when there is none).
    func unlock(_ paths: [String], deadline: Deadline) throws(KeychainError) -> (unlocked: [String], prompt: String) {
        let reply = try call(
            "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Unlock",
            tuple([Self.objectPathArray(paths)]), reply: "(aoo)", deadline: deadline)
        defer { g_variant_unref(reply) }
        return (Self.objectPaths(child: 0, of: reply), Self.string(child: 1, of: reply))
    }

    /// Creates an item in the collection at `collectionPath`, replacing one with the same attributes:
    /// the new item's path ("/" when the service asks for a prompt first) and the prompt's path.
    func createItem(
        collectionPath: String, label: String, attributes: [(String, String)], secret: Secret,
        deadline: Deadline
    ) throws(KeychainError) -> (item: String, prompt: String) {
        let type = g_variant_type_new("a{sv}")
        let builder = g_variant_builder_new(type)
        g_variant_type_free(type)
        defer { g_variant_builder_unref(builder) }
        g_variant_builder_add_value(
            builder,
            g_variant_new_dict_entry(
                g_variant_new_string("org.freedesktop.Secret.Item.Label"), g_variant_new_variant(g_variant_new_string(label))))
        g_variant_builder_add_value(
            builder,
            g_variant_new_dict_entry(
                g_variant_new_string("org.freedesktop.Secret.Item.Attributes"),
                g_variant_new_variant(Self.attributeVariant(attributes))))
        let properties = g_variant_builder_end(builder)

        let value = StoredEncoding.value(for: secret)
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        // The session-encrypted (oayays) form; libsecret keeps the plaintext in memory it wipes.
        guard let encoded = secret_service_encode_dbus_secret(service, value) else {
            throw KeychainError(KeychainError.Code.providerError, "the Secret Service session could not encode the secret")
        }
        let reply = try call(
            collectionPath, "org.freedesktop.Secret.Collection", "CreateItem",
            tuple([properties!, encoded, g_variant_new_boolean(1)]), reply: "(oo)", deadline: deadline)
        defer { g_variant_unref(reply) }
        return (Self.string(child: 0, of: reply), Self.string(child: 1, of: reply))
    }

    /// Replaces the secret of the existing item at `path` (`Item.SetSecret`). Unlike a `CreateItem` that
    /// replaces the item, it needs no prompt: KeePassXC answers such a `CreateItem` with an approval dialog
    /// for an entry this client did not make, even with its access confirmation off.
    func setSecret(at path: String, _ secret: Secret, deadline: Deadline) throws(KeychainError) {
        let value = StoredEncoding.value(for: secret)
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        guard let encoded = secret_service_encode_dbus_secret(service, value) else {
            throw KeychainError(KeychainError.Code.providerError, "the Secret Service session could not encode the secret")
        }
        let reply = try call(path, "org.freedesktop.Secret.Item", "SetSecret", tuple([encoded]), reply: "()", deadline: deadline)
        g_variant_unref(reply)
    }

    /// Sets the attributes of the item at `path` (its `Attributes` property). gnome-keyring replaces them
    /// all; KeePassXC sets these and keeps the others.
    func setAttributes(at path: String, _ attributes: [(String, String)], deadline: Deadline) throws(KeychainError) {
        try setItemProperty(at: path, "Attributes", Self.attributeVariant(attributes), deadline: deadline)
    }

    /// Sets the label of the item at `path` (its `Label` property).
    func setLabel(at path: String, _ label: String, deadline: Deadline) throws(KeychainError) {
        try setItemProperty(at: path, "Label", g_variant_new_string(label), deadline: deadline)
    }

    private func setItemProperty(at path: String, _ name: String, _ value: OpaquePointer, deadline: Deadline)
        throws(KeychainError)
    {
        let reply = try call(
            path, "org.freedesktop.DBus.Properties", "Set",
            tuple([
                g_variant_new_string("org.freedesktop.Secret.Item"), g_variant_new_string(name), g_variant_new_variant(value),
            ]),
            reply: "()", deadline: deadline)
        g_variant_unref(reply)
    }

    /// Deletes the item at `path`: the path of the prompt the service asks for first, or "/".
    func deleteItem(at path: String, deadline: Deadline) throws(KeychainError) -> String {
        let reply = try call(path, "org.freedesktop.Secret.Item", "Delete", tuple([]), reply: "(o)", deadline: deadline)
        defer { g_variant_unref(reply) }
        return Self.string(child: 0, of: reply)
    }

    /// How a prompt ended.
    enum PromptOutcome {
        /// The prompt completed; the object paths in its result (unlocked objects, a created item).
        case completed([String])
        /// The user (or the service) dismissed it.
        case dismissed
        /// Nobody answered within the time given; the prompt was dismissed.
        case timedOut
        /// The provider left the bus (stopped or crashed) before the prompt completed: no `Completed`
        /// signal will come, so the wait ends at once rather than at the prompt's timeout.
        case providerStopped
    }

    /// Runs the prompt at `path` (the service shows its dialog, if it has one) and waits for its
    /// `Completed` signal for at most `timeout`; the call's own deadline is restarted afterwards.
    func runPrompt(_ path: String, timeout: Duration, callTimeout: Duration, deadline: Deadline)
        throws(KeychainError) -> PromptOutcome
    {
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            while g_main_context_iteration(context, 0) != 0 {}
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let waiter = PromptWaiter()
        let box = Unmanaged.passRetained(waiter).toOpaque()
        let subscription = g_dbus_connection_signal_subscribe(
            busConnection, nil, "org.freedesktop.Secret.Prompt", "Completed", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, box in
                guard let box, let parameters else { return }
                Unmanaged<PromptWaiter>.fromOpaque(box).takeUnretainedValue().complete(parameters)
            },
            box, { box in box.map { Unmanaged<PromptWaiter>.fromOpaque($0).release() } })
        defer { g_dbus_connection_signal_unsubscribe(busConnection, subscription) }
        // A provider that leaves the bus never completes its prompt (KeePassXC 2.7 can crash mid-save):
        // the bus's NameOwnerChanged for the service's name ends the wait.
        let ownerWatch = g_dbus_connection_signal_subscribe(
            busConnection, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
            busName, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, _, box in
                guard let box else { return }
                Unmanaged<PromptWaiter>.fromOpaque(box).takeUnretainedValue().providerLeft()
            },
            Unmanaged.passRetained(waiter).toOpaque(), { box in box.map { Unmanaged<PromptWaiter>.fromOpaque($0).release() } })
        defer { g_dbus_connection_signal_unsubscribe(busConnection, ownerWatch) }
        // Wake the loop now and then to see whether the deadline passed.
        let tick = g_timeout_source_new(50)!
        g_source_set_callback(tick, { _ in 1 }, nil, nil)
        g_source_attach(tick, context)
        defer {
            g_source_destroy(tick)
            g_source_unref(tick)
        }

        deadline.arm(timeout)
        let started = try call(path, "org.freedesktop.Secret.Prompt", "Prompt", tuple([g_variant_new_string("")]),
            reply: "()", deadline: deadline, personWaiting: true)
        g_variant_unref(started)
        while !waiter.done && !waiter.providerGone && !deadline.didFire {
            g_main_context_iteration(context, 1)
        }
        if !waiter.done && waiter.providerGone { return .providerStopped }
        if !waiter.done {
            // Take the dialog down: nobody answered it.
            dismissPrompt(path)
            return .timedOut
        }
        deadline.arm(callTimeout)
        return waiter.dismissed ? .dismissed : .completed(waiter.paths)
    }

    /// Dismisses a prompt this client will not run, so the service can forget it. Best effort.
    func dismissPrompt(_ path: String) {
        var error: UnsafeMutablePointer<GError>?
        let reply = g_dbus_connection_call_sync(
            busConnection, busName, path, "org.freedesktop.Secret.Prompt", "Dismiss", tuple([]), nil,
            G_DBUS_CALL_FLAGS_NO_AUTO_START, 1000, nil, &error)
        if let reply { g_variant_unref(reply) }
        if let error { g_error_free(error) }
    }

    /// The low-level D-Bus call: `method` of `interface` on the object at `path` of the service.
    /// `parameters` is consumed (a floating GVariant); the reply is returned owned.
    private func call(
        _ path: String, _ interface: String, _ method: String, _ parameters: OpaquePointer, reply: String,
        deadline: Deadline, personWaiting: Bool = false
    ) throws(KeychainError) -> OpaquePointer {
        let type = g_variant_type_new(reply)
        defer { g_variant_type_free(type) }
        var error: UnsafeMutablePointer<GError>?
        let result = g_dbus_connection_call_sync(
            busConnection, busName, path, interface, method, parameters, type, G_DBUS_CALL_FLAGS_NO_AUTO_START,
            Int32.max, deadline.cancellable, &error)
        if let error { throw Self.classify(GLibError(taking: error), deadline: deadline, personWaiting: personWaiting) }
        guard let result else {
            throw KeychainError(KeychainError.Code.providerError, "the Secret Service gave no answer to \(method)")
        }
        return result
    }

    private var busConnection: OpaquePointer {
        g_dbus_proxy_get_connection(UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self))
    }

    private var busName: String {
        g_dbus_proxy_get_name(UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self))
            .map { String(cString: $0) } ?? "org.freedesktop.secrets"
    }

    private func tuple(_ children: [OpaquePointer?]) -> OpaquePointer {
        children.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
    }

    private static func objectPathArray(_ paths: [String]) -> OpaquePointer? {
        let children: [OpaquePointer?] = paths.map { g_variant_new_object_path($0) }
        let type = g_variant_type_new("o")
        defer { g_variant_type_free(type) }
        return children.withUnsafeBufferPointer { g_variant_new_array(type, $0.baseAddress, gsize($0.count)) }
    }

    private static func string(child index: Int, of tuple: OpaquePointer) -> String {
        guard let child = g_variant_get_child_value(tuple, gsize(index)) else { return "" }
        defer { g_variant_unref(child) }
        return g_variant_get_string(child, nil).map { String(cString: $0) } ?? ""
    }

    static func objectPaths(child index: Int, of tuple: OpaquePointer) -> [String] {
        guard let child = g_variant_get_child_value(tuple, gsize(index)) else { return [] }
        defer { g_variant_unref(child) }
        return objectPaths(in: child)
    }

    /// The object paths in `value`: an `o`, an `ao`, or a variant holding one.
    static func objectPaths(in value: OpaquePointer) -> [String] {
        if typeString(value) == "v", let inner = g_variant_get_variant(value) {
            defer { g_variant_unref(inner) }
            return objectPaths(in: inner)
        }
        if typeString(value) == "o" {
            return [g_variant_get_string(value, nil).map { String(cString: $0) } ?? "/"]
        }
        guard g_variant_is_container(value) != 0 else { return [] }
        var paths: [String] = []
        for index in 0..<g_variant_n_children(value) {
            guard let child = g_variant_get_child_value(value, index) else { continue }
            paths += objectPaths(in: child)
            g_variant_unref(child)
        }
        return paths
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
            KeychainError.Code.collectionNotFound,
            "the Secret Service has no '\(alias)' collection; create it in your keyring manager, or choose another collection")
    }

    static func connectError(_ error: UnsafeMutablePointer<GError>?, deadline: Deadline) -> KeychainError {
        let address = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
        if address.isEmpty && !deadline.didFire {
            let detail = error.map { GLibError(taking: $0).message } ?? "no bus address"
            return KeychainError(
                KeychainError.Code.noSessionBus,
                "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set: \(detail)); run inside a desktop session, or start one with `dbus-run-session -- COMMAND` and a Secret Service such as `gnome-keyring-daemon --unlock --components=secrets`")
        }
        return classify(error.map(GLibError.init(taking:)), deadline: deadline)
    }

    static func classify(_ error: GLibError?, deadline: Deadline, personWaiting: Bool = false) -> KeychainError {
        guard let error else {
            return KeychainError(KeychainError.Code.providerError, "the Secret Service failed without saying why")
        }
        if deadline.didFire || error.isDBus(G_DBUS_ERROR_NO_REPLY) || error.isDBus(G_DBUS_ERROR_TIMEOUT)
            || error.isDBus(G_DBUS_ERROR_TIMED_OUT)
        {
            return KeychainError(
                KeychainError.Code.timedOut,
                "the Secret Service did not answer in time; it may be waiting on an unlock prompt or be stuck (restart the keyring daemon, or raise Keychain.Configuration.timeout)")
        }
        if error.isDBus(G_DBUS_ERROR_UNKNOWN_OBJECT) || error.isDBus(G_DBUS_ERROR_UNKNOWN_METHOD)
            || error.remoteName == "org.freedesktop.Secret.Error.NoSuchObject"
        {
            return KeychainError(KeychainError.Code.providerError, "the Secret Service reported an error: \(error.message)")
        }
        if error.isLocked {
            return KeychainError(
                KeychainError.Code.locked,
                "the keyring collection is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again")
        }
        if error.isDBus(G_DBUS_ERROR_SERVICE_UNKNOWN) || error.isDBus(G_DBUS_ERROR_NAME_HAS_NO_OWNER)
            || error.isDBus(G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND) || error.isDBus(G_DBUS_ERROR_SPAWN_EXEC_FAILED)
            || error.isDBus(G_DBUS_ERROR_SPAWN_CHILD_EXITED)
        {
            return KeychainError(
                KeychainError.Code.serviceUnavailable,
                "no Secret Service provider answers on the session bus (\(error.message)); start one: `gnome-keyring-daemon --start --components=secrets`, KeePassXC with Secret Service integration, or KWallet")
        }
        return KeychainError(KeychainError.Code.providerError, "the Secret Service reported an error: \(error.message)")
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

    /// Whether `secret` is stored as it is: UTF-8 text without NUL that does not look encoded. Checked in
    /// place: no `String` copy of the secret is made (it could not be wiped).
    static func isText(_ secret: Secret) -> Bool {
        secret.withUnsafeBytes { bytes in
            !bytes.contains(0) && !bytes.starts(with: prefix) && isValidUTF8(bytes)
        }
    }

    /// A SecretValue holding the stored form of `secret`. libsecret copies it into memory it wipes.
    static func value(for secret: Secret) -> OpaquePointer {
        if isText(secret) {
            return secret.withUnsafeBytes { bytes in
                secret_value_new(cString(bytes), gssize(bytes.count), "text/plain")
            }
        }
        let encoded = Secret(count: prefix.count + Base64.encodedCount(secret.count)) { output in
            output.copyBytes(from: prefix)
            secret.withUnsafeBytes { Base64.encode($0, into: UnsafeMutableRawBufferPointer(rebasing: output[prefix.count...])) }
        }
        return encoded.withUnsafeBytes { bytes in
            secret_value_new(cString(bytes), gssize(bytes.count), "text/plain")
        }
    }
}

/// The first byte of `bytes` as C sees it: never null, also for no bytes (libsecret reads `count` bytes). A
/// ``Secret``'s buffer always has an address; the empty literal is only a fallback.
private func cString(_ bytes: UnsafeRawBufferPointer) -> UnsafePointer<CChar> {
    let base = bytes.baseAddress ?? UnsafeRawPointer(("" as StaticString).utf8Start)
    return base.assumingMemoryBound(to: CChar.self)
}

/// The GVariant type string of `value`, e.g. `b` or `(aoo)`.
func typeString(_ value: OpaquePointer) -> String {
    String(cString: g_variant_get_type_string(value))
}

/// Collects the `Completed` signal of one prompt. Touched only on the thread that runs the prompt
/// (the signal is delivered through that thread's main context).
final class PromptWaiter: @unchecked Sendable {
    private(set) var done = false
    private(set) var dismissed = false
    private(set) var paths: [String] = []
    /// Whether the service's name changed owner (its provider stopped) while the prompt was waited for.
    private(set) var providerGone = false

    func providerLeft() { providerGone = true }

    func complete(_ parameters: OpaquePointer) {
        guard !done, typeString(parameters).hasPrefix("("), g_variant_n_children(parameters) == 2
        else { return }
        let flag = g_variant_get_child_value(parameters, 0)!
        dismissed = g_variant_get_boolean(flag) != 0
        g_variant_unref(flag)
        let result = g_variant_get_child_value(parameters, 1)!
        paths = SecretServiceConnection.objectPaths(in: result)
        g_variant_unref(result)
        done = true
    }
}
