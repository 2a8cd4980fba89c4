// The keychain of a stress process: as the tool's, it may run the provider's prompts when
// SECURESTORE_PROMPT=always (the KeePassXC test run, where a stand-in user approves each new process).
import Foundation
import Keychain

func stressKeychain() -> Keychain {
    let environment = ProcessInfo.processInfo.environment
    // With no D-Bus (Tests/Harness/with-keyfile): the key file, its key from the session keyring the harness filled.
    if environment["SECURESTORE_PROVIDER"] == "keyfile" {
        return Keychain(configuration: .init(store: .keyFile(KeyFile(passphrase: .none, sessionCacheTimeout: .seconds(14400)))))
    }
    return Keychain(configuration: Keychain.Configuration(allowsPrompts: environment["SECURESTORE_PROMPT"] == "always"))
}
