// Whether a Secret Service can answer at all, asked of the session bus itself (not of a provider): the choice of
// store on a machine with a bus but no keyring (a container or CI job under dbus-run-session, a minimal desktop).
internal import CLibSecret

extension Keychain.Store {
    /// Whether a Secret Service provider can answer on the session bus: the name `org.freedesktop.secrets` has an
    /// owner, or the bus can start one (it is activatable: gnome-keyring's and KeePassXC's D-Bus service files).
    /// False when no session bus can be reached. Asks the bus daemon only — no provider is started, nothing is
    /// unlocked, no prompt is shown — within `timeout`.
    public static func secretServiceIsReachable(timeout: Duration = .seconds(2)) -> Bool {
        var error: UnsafeMutablePointer<GError>?
        guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            if let error { g_error_free(error) }
            return false
        }
        defer { g_object_unref(UnsafeMutableRawPointer(bus)) }
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        /// One call to the bus daemon; its reply owned, or nil.
        func ask(_ method: String, _ parameters: OpaquePointer?) -> OpaquePointer? {
            var failure: UnsafeMutablePointer<GError>?
            let reply = g_dbus_connection_call_sync(
                bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", method, parameters, nil,
                G_DBUS_CALL_FLAGS_NO_AUTO_START, milliseconds, nil, &failure)
            if let failure { g_error_free(failure) }
            return reply
        }
        let name = "org.freedesktop.secrets"
        let nameArgument: [OpaquePointer?] = [g_variant_new_string(name)]
        let owned = nameArgument.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        if let reply = ask("NameHasOwner", owned) {
            defer { g_variant_unref(reply) }
            if let value = g_variant_get_child_value(reply, 0) {
                defer { g_variant_unref(value) }
                if g_variant_get_boolean(value) != 0 { return true }
            }
        }
        let none: [OpaquePointer?] = []
        let empty = none.withUnsafeBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        guard let reply = ask("ListActivatableNames", empty) else { return false }
        defer { g_variant_unref(reply) }
        guard let names = g_variant_get_child_value(reply, 0) else { return false }
        defer { g_variant_unref(names) }
        for index in 0..<g_variant_n_children(names) {
            guard let child = g_variant_get_child_value(names, index) else { continue }
            defer { g_variant_unref(child) }
            if let text = g_variant_get_string(child, nil), String(cString: text) == name { return true }
        }
        return false
    }
}
