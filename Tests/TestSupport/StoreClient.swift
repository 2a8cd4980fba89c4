// Another client of the store the tools under test use: `secret-tool` on the Secret Service of the harness, or —
// with no D-Bus at all (Tests/Harness/with-keyfile) — the Keychain library on the key file, unlocked from the session
// keyring the harness left its key in. Tests read, plant and remove items through it to check what the tool stored.
import Foundation
public import Keychain

/// Reads and writes items of the run's key store from outside the tool under test (see the file's comment).
public enum StoreClient {
    /// The key file of a with-keyfile run: its key comes from the session keyring, never a prompt.
    public static var keyFileConfiguration: Keychain.Configuration {
        .init(store: .keyFile(KeyFile(passphrase: .none, sessionCacheTimeout: .seconds(14400))))
    }

    private static var keyFile: Keychain { Keychain(configuration: keyFileConfiguration) }

    /// A keychain on this run's store: the Secret Service of the harness (prompts allowed under KeePassXC, where the
    /// stand-in user approves), or the key file with no D-Bus.
    public static var keychain: Keychain {
        Harness.isKeyFile ? keyFile : Keychain(configuration: .init(allowsPrompts: Harness.isKeePassXC))
    }

    /// The secret stored for (`service`, `account`) as text, or nil when there is none (`secret-tool lookup`).
    /// `dataHome`: the XDG_DATA_HOME of the tool's run when it is not this process's (its key file, unlocked by that
    /// run into the session keyring, with no D-Bus).
    public static func lookup(service: String, account: String, dataHome: String? = nil) throws -> String? {
        if Harness.isKeyFile, let dataHome {
            let file = KeyFile(path: dataHome + "/securestore/keys.sealed", passphrase: .none, sessionCacheTimeout: .seconds(14400))
            return try Keychain(configuration: .init(store: .keyFile(file))).string(service: service, account: account)
        }
        if Harness.isKeyFile { return try keyFile.string(service: service, account: account) }
        let result = try run(["secret-tool", "lookup", "service", service, "account", account])
        return result.status == 0 ? result.stdout : nil
    }

    /// The key file of a tool's run whose XDG_DATA_HOME is `dataHome` (its key in the session keyring).
    private static func keyFile(_ dataHome: String) -> Keychain {
        let file = KeyFile(path: dataHome + "/securestore/keys.sealed", passphrase: .none, sessionCacheTimeout: .seconds(14400))
        return Keychain(configuration: .init(store: .keyFile(file)))
    }

    /// The accounts stored under `service`, sorted (`secret-tool search --all`); `dataHome` as for ``lookup``.
    public static func accounts(service: String, dataHome: String? = nil) throws -> [String] {
        if Harness.isKeyFile, let dataHome {
            let file = KeyFile(path: dataHome + "/securestore/keys.sealed", passphrase: .none, sessionCacheTimeout: .seconds(14400))
            return try Keychain(configuration: .init(store: .keyFile(file))).accounts(service: service).sorted()
        }
        if Harness.isKeyFile { return try keyFile.accounts(service: service).sorted() }
        let result = try run(["secret-tool", "search", "--all", "service", service])
        let prefix = "attribute.account = "
        return (result.stdout + "\n" + result.stderr).split(separator: "\n")
            .compactMap { $0.hasPrefix(prefix) ? String($0.dropFirst(prefix.count)) : nil }.sorted()
    }

    /// Removes the item of (`service`, `account`); whether it succeeded (`secret-tool clear`); `dataHome` as for
    /// ``lookup``.
    @discardableResult
    public static func clear(service: String, account: String, dataHome: String? = nil) throws -> Bool {
        if Harness.isKeyFile, let dataHome { return try keyFile(dataHome).delete(service: service, account: account) }
        if Harness.isKeyFile { return try keyFile.delete(service: service, account: account) }
        return try run(["secret-tool", "clear", "service", service, "account", account]).status == 0
    }

    /// Stores `secret` as text for (`service`, `account`) with `label`; whether it succeeded (`secret-tool store`).
    @discardableResult
    public static func store(
        _ secret: String, service: String, account: String, label: String, dataHome: String? = nil
    ) throws -> Bool {
        if Harness.isKeyFile, let dataHome {
            try keyFile(dataHome).set(secret, service: service, account: account, label: label)
            return true
        }
        if Harness.isKeyFile {
            try keyFile.set(secret, service: service, account: account, label: label)
            return true
        }
        return try run(
            ["secret-tool", "store", "--label", label, "service", service, "account", account],
            input: Data(secret.utf8)).status == 0
    }
}
