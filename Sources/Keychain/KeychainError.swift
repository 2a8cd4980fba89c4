/// An error from the ``Keychain``: a code to match on and a message a person can act on.
///
/// Match on the code with a `catch` pattern:
///
/// ```swift
/// do {
///     try keychain.set(token, service: "github.com", account: "me")
/// } catch KeychainError.Code.locked {
///     print("unlock your keyring first")
/// }
/// ```
///
/// Messages name services, accounts, sizes and the Secret Service's own words; they never contain a
/// secret.
public struct KeychainError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a value a caller can match on. New codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A stable name for the code, e.g. `locked`.
        public let name: String
        /// A code named `name`.
        public init(_ name: String) { self.name = name }
        /// The code's name.
        public var description: String { name }

        /// Matches a code against an error in a `catch` or `case` pattern: `catch KeychainError.Code.locked`.
        public static func ~= (pattern: Code, value: any Error) -> Bool {
            (value as? KeychainError)?.code == pattern
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence a person can act on. Never contains a secret.
    public let message: String

    /// Whether the call that failed must not be run again by the ``Keychain`` itself (the provider stopped mid-call:
    /// another one may answer the retry, e.g. a D-Bus-activated gnome-keyring after KeePassXC crashed).
    let isFinal: Bool

    /// An error with `code` and `message`.
    public init(_ code: Code, _ message: String) {
        self.init(code, message, isFinal: false)
    }

    init(_ code: Code, _ message: String, isFinal: Bool) {
        self.code = code
        self.message = message
        self.isFinal = isFinal
    }

    /// `code: message`.
    public var description: String { "\(code.name): \(message)" }
}

extension KeychainError.Code {
    /// There is no D-Bus session bus to reach a Secret Service on (no `DBUS_SESSION_BUS_ADDRESS`).
    public static let noSessionBus = Self("noSessionBus")
    /// The session bus has no Secret Service provider (gnome-keyring, KeePassXC, KWallet…).
    public static let serviceUnavailable = Self("serviceUnavailable")
    /// The collection is locked and was not unlocked: prompting was not allowed
    /// (``Keychain/Configuration/allowsPrompts``), or the service offers no way to unlock it.
    public static let locked = Self("locked")
    /// The item is locked although its collection is unlocked, and the service offers no prompt to
    /// unlock it.
    public static let itemLocked = Self("itemLocked")
    /// The item is locked and its attributes are hidden, so it cannot even be listed; gnome-keyring
    /// shows only hashed attributes of a keyring that has stayed locked since the daemon started.
    public static let attributesHidden = Self("attributesHidden")
    /// The provider asks the user to approve this client (KeePassXC's "Access Request" or delete
    /// confirmation), and prompting was not allowed, or nobody answered within the prompt timeout.
    public static let approvalRequired = Self("approvalRequired")
    /// The user (or the provider) dismissed the prompt: the unlock or approval was refused.
    public static let promptDismissed = Self("promptDismissed")
    /// The Secret Service did not answer within the configured timeout.
    public static let timedOut = Self("timedOut")
    /// The secret is larger than ``Keychain/maximumSecretSize``.
    public static let secretTooLarge = Self("secretTooLarge")
    /// A service, account or label is empty, too long, or contains a NUL byte.
    public static let invalidName = Self("invalidName")
    /// The collection (for example `session`) does not exist in this Secret Service.
    public static let collectionNotFound = Self("collectionNotFound")
    /// A stored value could not be decoded (for example a damaged base64 secret).
    public static let invalidSecret = Self("invalidSecret")
    /// Any other error the Secret Service reported; the message carries its words.
    public static let providerError = Self("providerError")
    /// The key file's passphrase is wrong (``KeyFile``); nothing was changed.
    public static let wrongPassphrase = Self("wrongPassphrase")
    /// The key file is damaged, truncated, not a regular file, too large or from a newer version: refused and left
    /// as it is (``KeyFile``).
    public static let damagedStore = Self("damagedStore")
    /// The disk under the key file is full; the file is unchanged (``KeyFile``).
    public static let storeFull = Self("storeFull")
    /// The store cannot be written: systemd credentials are read-only.
    public static let readOnlyStore = Self("readOnlyStore")
    /// The key file, or its folder, can be read or changed by another user (its mode, or its owner): refused, as
    /// OpenSSH refuses a private key others can read; the message says the `chmod` or `chown` that fixes it.
    public static let unsafePermissions = Self("unsafePermissions")
}
