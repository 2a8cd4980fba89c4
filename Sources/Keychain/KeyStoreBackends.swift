// The key stores other than the Secret Service behind the one Keychain interface: the encrypted key file and
// systemd's credentials.
internal import Foundation
internal import SecureStoreCore
internal import Glibc

/// What a store other than the Secret Service does for a ``Keychain``; names and sizes are checked before.
protocol KeyStoreBackend: Sendable {
    func set(_ secret: Secret, service: String, account: String, label: String) throws(KeychainError)
    func secret(service: String, account: String) throws(KeychainError) -> Secret?
    func exists(service: String, account: String) throws(KeychainError) -> Bool
    func items(service: String) throws(KeychainError) -> [KeychainItem]
    func delete(service: String, account: String) throws(KeychainError) -> Bool
}

/// The ``KeyFile`` store.
struct KeyFileBackend: KeyStoreBackend {
    let file: KeyFile

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000) }

    func set(_ secret: Secret, service: String, account: String, label: String) throws(KeychainError) {
        try file.modify { (items) throws(KeychainError) in
            let now = Self.now()
            if let index = items.firstIndex(where: { $0.service == service && $0.account == account }) {
                items[index].secret = secret.storage
                items[index].label = label
                items[index].modified = now
            } else {
                items.append(
                    KeyFile.Item(service: service, account: account, label: label, secret: secret.storage, created: now, modified: now))
            }
        }
    }

    func secret(service: String, account: String) throws(KeychainError) -> Secret? {
        guard file.exists else { return nil }
        return try file.items().first { $0.service == service && $0.account == account }.map { Secret(storage: $0.secret) }
    }

    func exists(service: String, account: String) throws(KeychainError) -> Bool {
        try secret(service: service, account: account) != nil
    }

    func items(service: String) throws(KeychainError) -> [KeychainItem] {
        guard file.exists else { return [] }
        return try file.items().filter { $0.service == service }.map {
            KeychainItem(service: $0.service, account: $0.account, label: $0.label)
        }
    }

    func delete(service: String, account: String) throws(KeychainError) -> Bool {
        guard file.exists else { return false }
        return try file.modify { (items) throws(KeychainError) in
            let before = items.count
            items.removeAll { $0.service == service && $0.account == account }
            return items.count != before
        }
    }
}

/// systemd's credentials: read-only files in `$CREDENTIALS_DIRECTORY`, one per item.
struct SystemdCredentialsBackend: KeyStoreBackend {
    let directory: String

    /// The credential name of an item: `service@account`, `%` and `/` escaped.
    static func name(service: String, account: String) -> String {
        func escaped(_ text: String) -> String {
            text.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
        }
        return escaped(service) + "@" + escaped(account)
    }

    static func parse(_ name: String) -> (service: String, account: String)? {
        guard let at = name.firstIndex(of: "@") else { return nil }
        func unescaped(_ text: Substring) -> String {
            String(text).replacingOccurrences(of: "%2F", with: "/").replacingOccurrences(of: "%25", with: "%")
        }
        return (unescaped(name[..<at]), unescaped(name[name.index(after: at)...]))
    }

    private func readOnly(_ what: String) -> KeychainError {
        KeychainError(
            KeychainError.Code.readOnlyStore,
            "systemd credentials are read-only: cannot \(what); add it to the unit's LoadCredentialEncrypted= instead "
                + "(Docs/keystores.md)")
    }

    func set(_ secret: Secret, service: String, account: String, label: String) throws(KeychainError) {
        throw readOnly("store service '\(service)' account '\(account)'")
    }

    func secret(service: String, account: String) throws(KeychainError) -> Secret? {
        let path = directory + "/" + Self.name(service: service, account: account)
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, [.readOnly, .noFollow])
        } catch {
            if error == .noSuchFileOrDirectory { return nil }
            if error == .tooManySymbolicLinkLevels {
                throw KeychainError(
                    KeychainError.Code.damagedStore,
                    "the credential '\(path)' is a symbolic link, not a file systemd put there; point the unit's "
                        + "LoadCredential= at the file itself")
            }
            throw KeychainError(KeychainError.Code.serviceUnavailable, "cannot read the credential '\(path)': \(error)")
        }
        return try descriptor.closeAfter { () throws(KeychainError) -> Secret in
            do {
                var bytes = try descriptor.read(upTo: Keychain.maximumSecretSize + 2)
                defer { bytes.withUnsafeMutableBytes { secureZero($0) } }
                // One trailing newline is not part of the value (`echo tok > file`), as `token set` drops one.
                var count = bytes.count
                if count > 0 && bytes[count - 1] == UInt8(ascii: "\n") { count -= 1 }
                guard count <= Keychain.maximumSecretSize else {
                    throw KeychainError(KeychainError.Code.secretTooLarge, "the credential '\(path)' is too large")
                }
                return bytes.withUnsafeBytes { Secret(bytes: $0.prefix(count)) }
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainError(KeychainError.Code.serviceUnavailable, "cannot read the credential '\(path)': \(error)")
            }
        }
    }

    func exists(service: String, account: String) throws(KeychainError) -> Bool {
        fileExists(directory + "/" + Self.name(service: service, account: account))
    }

    func items(service: String) throws(KeychainError) -> [KeychainItem] {
        let names = (try? listDirectory(directory)) ?? []
        return names.compactMap(Self.parse).filter { $0.service == service }.map {
            KeychainItem(service: $0.service, account: $0.account, label: "\($0.service) (\($0.account))")
        }
    }

    func delete(service: String, account: String) throws(KeychainError) -> Bool {
        throw readOnly("delete service '\(service)' account '\(account)'")
    }
}
