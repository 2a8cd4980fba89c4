public import Keychain
public import Preferences
internal import SecureStore

/// Moves a secret that was stored in preferences into the keychain, in an order that cannot lose it:
/// the keychain write is read back and compared first, and only then is the preference removed. A
/// crash or an error at any point leaves the value in preferences, in the keychain, or in both.
public struct PreferenceSecretMover: Sendable {
    /// The preferences the value is moved out of.
    public let preferences: Preferences
    /// The keychain it is moved into.
    public let keychain: Keychain
    /// The keychain service of the new item (for the command-line tool, the application's token service).
    public let service: String

    /// A mover from `preferences` to `service` in `keychain`.
    public init(preferences: Preferences, keychain: Keychain, service: String) {
        self.preferences = preferences
        self.keychain = keychain
        self.service = service
    }

    /// Moves the string (or data) preference `key` to the keychain item (`service`, `account`).
    ///
    /// - Throws: ``SecureStoreError/Code/notFound`` when there is no such preference,
    ///   ``SecureStoreError/Code/invalidArgument`` when it is not a string or data, or when another secret
    ///   is already stored under `account`; ``SecureStoreError/Code/verificationFailed`` when the keychain
    ///   did not give back what was written (the preference is kept); keychain and preferences errors.
    public func move(key: String, toAccount account: String) throws {
        let secret: Secret
        // The stored value only: a registered default is not in the file and not the user's secret.
        let original = preferences.storedValues[key]
        switch original {
        case .string(let string)?: secret = Secret(string: string)
        case .data(let data)?: secret = Secret(data: data)
        case nil:
            throw SecureStoreError(SecureStoreError.Code.notFound, "no preference '\(key)'")
        case let other?:
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "preference '\(key)' is a \(other.typeName); only strings and data can be moved to the keyring")
        }
        if let existing = try keychain.secret(service: service, account: account), existing != secret {
            throw SecureStoreError(
                SecureStoreError.Code.invalidArgument,
                "the keyring already holds a different secret named '\(account)'; choose another name")
        }
        try keychain.set(secret, service: service, account: account, label: "\(service) token \(account) (moved from preferences)")
        guard try keychain.secret(service: service, account: account) == secret else {
            throw SecureStoreError(
                SecureStoreError.Code.verificationFailed,
                "the keyring did not return what was stored for '\(account)'; preference '\(key)' was kept")
        }
        // Remove it only if it is still the value that was stored in the keychain: another process may
        // have set a new one meanwhile, and that one must not be lost.
        _ = try preferences.update { values in
            guard values[key] == original else {
                throw SecureStoreError(
                    SecureStoreError.Code.inUse,
                    "preference '\(key)' changed while it was being moved; the keyring holds the earlier value and "
                        + "the preference keeps the new one; run the move again")
            }
            values[key] = nil
        }
    }
}
