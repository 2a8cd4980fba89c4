// The keychain of a stress process: as the tool's, it may run the provider's prompts when
// SECURESTORE_PROMPT=always (the KeePassXC test run, where a stand-in user approves each new process).
import Foundation
import Keychain

func stressKeychain() -> Keychain {
    Keychain(configuration: Keychain.Configuration(allowsPrompts: ProcessInfo.processInfo.environment["SECURESTORE_PROMPT"] == "always"))
}
