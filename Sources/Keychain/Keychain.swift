public import Foundation
internal import Synchronization

/// Generic secrets in the freedesktop Secret Service (gnome-keyring, KeePassXC, KWallet), named by a
/// service and an account, as Apple's Keychain Services names generic passwords.
///
/// ```swift
/// let keychain = Keychain()
/// try keychain.set("s3cr3t", service: "github.com", account: "octocat", label: "GitHub token")
/// let token = try keychain.string(service: "github.com", account: "octocat")   // "s3cr3t"
/// try keychain.delete(service: "github.com", account: "octocat")
/// ```
///
/// Items carry the attributes `service` and `account`, so `secret-tool lookup service S account A`
/// finds what this type stores, and this type finds what another client stored with those attributes.
/// See Keys/README.md for the full catalogue.
///
/// A `Keychain` keeps one connection (one Secret Service session) and reuses it for every call; it
/// reconnects once when the service was restarted under it. Calls from many tasks or threads are
/// safe: they are serialized. Every call is bounded by ``Configuration/timeout``: libsecret's own
/// calls can block forever on a prompt or a stuck daemon.
///
/// Locks and approvals: a locked collection, a locked item, an item whose attributes are hidden, and a
/// provider that asks the user to approve this client (KeePassXC) are each their own error —
/// ``KeychainError/Code/locked``, ``KeychainError/Code/itemLocked``, ``KeychainError/Code/attributesHidden``,
/// ``KeychainError/Code/approvalRequired`` — never a silent "not found". When
/// ``Configuration/allowsPrompts`` is on (off by default), the Keychain instead runs the service's
/// prompt (its unlock or approval dialog) and waits up to ``Configuration/promptTimeout`` for the
/// person to answer; a dismissed prompt is ``KeychainError/Code/promptDismissed``.
public final class Keychain: Sendable {
    /// A Secret Service collection, named by its alias.
    public struct Collection: Hashable, Sendable, CustomStringConvertible {
        /// The alias, such as `default` or `session`.
        public let alias: String

        /// A collection by alias.
        public init(alias: String) { self.alias = alias }

        /// The user's default collection, kept on disk (gnome-keyring's "login" keyring).
        public static let `default` = Collection(alias: "default")
        /// The in-memory session collection: its items are gone when the keyring daemon stops (at
        /// logout). For secrets that must not outlive the login session.
        public static let session = Collection(alias: "session")

        /// The alias.
        public var description: String { alias }
    }

    /// Where items go, how long a call may take, and whether a person may be asked.
    public struct Configuration: Sendable {
        /// The collection that items are stored in and read from.
        public var collection: Collection
        /// How long one call to the Secret Service may take before it fails with
        /// ``KeychainError/Code/timedOut``. Five seconds by default. Time spent waiting on a prompt that
        /// a person answers is not counted: it is bounded by ``promptTimeout``.
        public var timeout: Duration
        /// Whether the Keychain may run the Secret Service's prompts: the dialog that unlocks a
        /// collection or items, and KeePassXC's approval of this client. Turn it on only when a person
        /// is there to answer (a program on their desktop or terminal); off by default, so that a
        /// service or script fails at once with ``KeychainError/Code/locked`` or
        /// ``KeychainError/Code/approvalRequired`` instead of waiting on a dialog nobody sees.
        public var allowsPrompts: Bool
        /// How long to wait for a person to answer a prompt: two minutes by default.
        public var promptTimeout: Duration
        /// Where the items live: the Secret Service (the default), an encrypted ``KeyFile``, or systemd's
        /// credentials (read-only). The collection, timeout and prompt settings apply to the Secret Service.
        public var store: Store

        /// A configuration; by default the default collection, a five-second timeout, and no prompts.
        public init(
            collection: Collection = .default, timeout: Duration = .seconds(5), allowsPrompts: Bool = false,
            promptTimeout: Duration = .seconds(120), store: Store = .secretService
        ) {
            self.collection = collection
            self.timeout = timeout
            self.allowsPrompts = allowsPrompts
            self.promptTimeout = promptTimeout
            self.store = store
        }
    }

    /// Where a keychain keeps its items: one interface, three stores.
    public struct Store: Sendable, CustomStringConvertible {
        enum Kind: Sendable {
            case secretService
            case keyFile(KeyFile)
            case systemdCredentials(directory: String)
        }
        let kind: Kind

        /// The name of the systemd credential that holds item (`service`, `account`) for
        /// ``systemdCredentials(directory:)``: `service@account`, `%` and `/` written `%25` and `%2F`.
        public static func systemdCredentialName(service: String, account: String) -> String {
            SystemdCredentialsBackend.name(service: service, account: account)
        }

        /// Whether the store can only be read (systemd credentials): nothing can be stored or deleted there.
        public var isReadOnly: Bool {
            if case .systemdCredentials = kind { return true }
            return false
        }

        /// The key file, when this store is one.
        public var keyFile: KeyFile? {
            if case .keyFile(let file) = kind { return file }
            return nil
        }

        /// The freedesktop Secret Service on the session bus (gnome-keyring, KeePassXC, KWallet).
        public static let secretService = Store(kind: .secretService)
        /// An encrypted key file, for machines without a Secret Service.
        public static func keyFile(_ file: KeyFile) -> Store { Store(kind: .keyFile(file)) }
        /// systemd's credentials of a service (`LoadCredential=`, `LoadCredentialEncrypted=`): the files in
        /// `directory` (by default `$CREDENTIALS_DIRECTORY`), read-only. An item (service, account) is the file
        /// named `service@account`, with `%` and `/` written `%25` and `%2F`.
        public static func systemdCredentials(directory: String) -> Store {
            Store(kind: .systemdCredentials(directory: directory))
        }

        /// `secret-service`, `file` or `systemd`: the names `--keystore` takes.
        public var name: String {
            switch kind {
            case .secretService: "secret-service"
            case .keyFile: "file"
            case .systemdCredentials: "systemd"
            }
        }

        /// The name and, for the file and systemd stores, where they are.
        public var description: String {
            switch kind {
            case .secretService: "the Secret Service"
            case .keyFile(let file): "the key file '\(file.path)'"
            case .systemdCredentials(let directory): "the systemd credentials in '\(directory)'"
            }
        }

        /// The backend for stores other than the Secret Service.
        var backend: (any KeyStoreBackend)? {
            switch kind {
            case .secretService: nil
            case .keyFile(let file): KeyFileBackend(file: file)
            case .systemdCredentials(let directory): SystemdCredentialsBackend(directory: directory)
            }
        }
    }

    /// The largest secret accepted, in bytes: 64 KiB. Tokens, passwords and keys are far smaller;
    /// some providers store items in memory and on every unlock re-read them all.
    public static let maximumSecretSize = 64 * 1024
    /// The longest service, account or label accepted, in UTF-8 bytes.
    public static let maximumNameLength = 1024
    /// The `xdg:schema` attribute of the items this type creates.
    public static let schemaName = "org.securestore.Secret"

    /// The collection and timeout in use.
    public let configuration: Configuration

    private let connection = Mutex<SecretServiceConnection?>(nil)
    /// Where the `async` forms run: a dispatch queue of this keychain, never Swift concurrency's cooperative
    /// pool (a Secret Service call can wait up to its timeout, or for a person's prompt).
    let asyncQueue = DispatchQueue(label: "securestore.keychain")

    /// A keychain on the session bus's Secret Service. Connecting happens at the first call.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    // MARK: - Storing

    /// Stores `secret` for (`service`, `account`), replacing any secret stored for them in the
    /// configured collection: this type's item, or a plain one (only `service` and `account`, as
    /// `secret-tool store` makes). An item of another application — one with attributes of its own, such
    /// as a `domain` — is never replaced or removed; reads prefer this type's item to it.
    ///
    /// - Parameter label: what desktop keyring managers show; by default "`service` (`account`)".
    /// - Throws: ``KeychainError`` — ``KeychainError/Code/secretTooLarge``, ``KeychainError/Code/invalidName``,
    ///   ``KeychainError/Code/locked``, ``KeychainError/Code/timedOut``… On any error the stored item is unchanged.
    public func set(_ secret: Secret, service: String, account: String, label: String? = nil) throws(KeychainError) {
        try Self.validate(service: service, account: account)
        let label = label ?? "\(service) (\(account))"
        try Self.validateName(label, what: "label", allowEmpty: true)
        guard secret.count <= Self.maximumSecretSize else {
            throw KeychainError(
                KeychainError.Code.secretTooLarge,
                "the secret for service '\(service)' account '\(account)' is \(secret.count) bytes; the limit is \(Self.maximumSecretSize) bytes (64 KiB)")
        }
        if let backend = configuration.store.backend {
            return try backend.set(secret, service: service, account: account, label: label)
        }
        var attributes = Self.attributes(service: service, account: account)
        attributes.append(("xdg:schema", Self.schemaName))
        if !StoredEncoding.isText(secret) {
            attributes.append(("encoding", "base64"))
        }
        try withConnection { connection, deadline throws(KeychainError) in
            let what = "service '\(service)' account '\(account)'"
            let collection = try connection.collectionPath(alias: configuration.collection.alias, deadline: deadline)
            let query = Self.attributes(service: service, account: account)
            let existing: [(path: String, properties: ItemProperties)]
            if case .known(let items) = try quickExisting(query, in: collection, connection, deadline) {
                existing = items
            } else {
                try requireUnlocked(collection, for: what, connection, deadline)
                var found = try connection.search(query, deadline: deadline)
                let locked = found.locked.filter { Self.isInCollection($0, collection) }
                if !locked.isEmpty {
                    // Replacing needs the old item unlocked (KeePassXC: this client approved for it).
                    try unlock(locked, in: collection, for: what, connection, deadline)
                    found = try connection.search(query, deadline: deadline)
                    if found.locked.contains(where: { Self.isInCollection($0, collection) }) {
                        throw Self.itemLockedError(service: service, account: account)
                    }
                }
                var items: [(path: String, properties: ItemProperties)] = []
                for path in found.unlocked where Self.isInCollection(path, collection) {
                    items.append((path, try connection.properties(at: path, deadline: deadline)))
                }
                existing = items
            }
            // The items this one replaces: ours first, then plain ones. One of them is changed in place
            // (its secret, attributes and label), so that no prompt is needed: KeePassXC answers a
            // CreateItem that replaces an entry this process did not make with an approval dialog, even
            // with its access confirmation off, and a dismissed prompt leaves that dialog on screen.
            var replaceable: [(rank: Int, path: String, properties: ItemProperties)] = []
            for (path, properties) in existing where Self.isReplaceable(properties) {
                replaceable.append((properties.attributes["xdg:schema"] == Self.schemaName ? 0 : 1, path, properties))
            }
            replaceable.sort { $0.rank < $1.rank }
            var stored = "/"
            if let target = replaceable.first {
                try update(target.path, target.properties, secret, attributes: attributes, label: label, connection, deadline)
                stored = target.path
            } else {
                let reply = try connection.createItem(
                    collectionPath: collection, label: label, attributes: attributes, secret: secret, deadline: deadline)
                stored = reply.item
                if reply.prompt != "/" {
                    // KeePassXC answers every CreateItem with a prompt; for a new entry it shows no dialog.
                    stored = try complete(reply.prompt, for: what, connection, deadline).first ?? "/"
                }
            }
            // Other items of ours or plain ones for the same names (another client's, or stored before in the
            // other encoding) go only now that the secret is stored (and known); one that carries attributes
            // of another application is that application's, and stays.
            guard stored != "/" else { return }
            for other in replaceable where other.path != stored {
                let prompt = try connection.deleteItem(at: other.path, deadline: deadline)
                _ = try complete(prompt, for: what, connection, deadline)
            }
        }
    }

    /// Changes the existing item at `path` to hold `secret` with `attributes` and `label`. A reader sees the
    /// old secret or the new one at every step: a secret stored as base64 gets its `encoding` attribute
    /// before its new secret; a text secret is stored before the attribute goes.
    private func update(
        _ path: String, _ properties: ItemProperties, _ secret: Secret, attributes: [(String, String)], label: String,
        _ connection: SecretServiceConnection, _ deadline: Deadline
    ) throws(KeychainError) {
        let current = properties.attributes
        let attributesDiffer = attributes.contains { current[$0.0] != $0.1 }
            || (current["encoding"] != nil && !attributes.contains { $0.0 == "encoding" })
        let encoded = !StoredEncoding.isText(secret)
        if attributesDiffer && encoded { try connection.setAttributes(at: path, attributes, deadline: deadline) }
        try connection.setSecret(at: path, secret, deadline: deadline)
        if attributesDiffer && !encoded { try connection.setAttributes(at: path, attributes, deadline: deadline) }
        if properties.label != label { try connection.setLabel(at: path, label, deadline: deadline) }
    }

    /// Stores `data` for (`service`, `account`). See ``set(_:service:account:label:)-(Secret,_,_,_)``.
    public func set(_ data: Data, service: String, account: String, label: String? = nil) throws(KeychainError) {
        try set(Secret(data: data), service: service, account: account, label: label)
    }

    /// Stores the UTF-8 bytes of `string` for (`service`, `account`).
    /// See ``set(_:service:account:label:)-(Secret,_,_,_)``.
    public func set(_ string: String, service: String, account: String, label: String? = nil) throws(KeychainError) {
        try set(Secret(string: string), service: service, account: account, label: label)
    }

    // MARK: - Reading

    /// The secret stored for (`service`, `account`), or nil when there is none: absence is not an error.
    ///
    /// - Throws: ``KeychainError/Code/locked`` when the item exists but its collection is locked, and the
    ///   other connection errors.
    public func secret(service: String, account: String) throws(KeychainError) -> Secret? {
        try Self.validate(service: service, account: account)
        if let backend = configuration.store.backend { return try backend.secret(service: service, account: account) }
        return try withConnection { connection, deadline throws(KeychainError) in
            let collection = try connection.collectionPath(alias: configuration.collection.alias, deadline: deadline)
            let query = Self.attributes(service: service, account: account)
            if case .known(let secret) = try quickSecret(query, in: collection, connection, deadline) { return secret }
            try requireUnlocked(collection, for: "service '\(service)' account '\(account)'", connection, deadline)
            let found = try connection.search(query, deadline: deadline)
            let unlocked = found.unlocked.filter { Self.isInCollection($0, collection) }
            if unlocked.count > 1 {
                // Ours first, then a plain item, then another application's (each kept by set).
                var ranked: [(Int, String)] = []
                for path in unlocked {
                    let attributes = try connection.properties(at: path, deadline: deadline).attributes
                    ranked.append((attributes["xdg:schema"] == Self.schemaName ? 0 : Self.isReplaceable(attributes) ? 1 : 2, path))
                }
                return try connection.secret(at: ranked.min { $0.0 < $1.0 }!.1, deadline: deadline)
            }
            if let path = unlocked.first {
                return try connection.secret(at: path, deadline: deadline)
            }
            guard let path = found.locked.first(where: { Self.isInCollection($0, collection) }) else { return nil }
            try unlock([path], in: collection, for: "service '\(service)' account '\(account)'", connection, deadline)
            return try connection.secret(at: path, deadline: deadline)
        }
    }

    /// The secret stored for (`service`, `account`) as `Data`, or nil when there is none.
    public func data(service: String, account: String) throws(KeychainError) -> Data? {
        try secret(service: service, account: account)?.dataValue()
    }

    /// The secret stored for (`service`, `account`) as a `String`, or nil when there is none.
    ///
    /// - Throws: ``KeychainError/Code/invalidSecret`` when the stored bytes are not UTF-8 text.
    public func string(service: String, account: String) throws(KeychainError) -> String? {
        guard let secret = try secret(service: service, account: account) else { return nil }
        guard let string = secret.stringValue() else {
            throw KeychainError(
                KeychainError.Code.invalidSecret,
                "the secret for service '\(service)' account '\(account)' is binary, not UTF-8 text; read it as Data")
        }
        return string
    }

    /// Whether a secret is stored for (`service`, `account`), locked or not. Reads no secret.
    public func exists(service: String, account: String) throws(KeychainError) -> Bool {
        try Self.validate(service: service, account: account)
        if let backend = configuration.store.backend { return try backend.exists(service: service, account: account) }
        return try withConnection { connection, deadline throws(KeychainError) in
            let collection = try connection.collectionPath(alias: configuration.collection.alias, deadline: deadline)
            try requireUnlocked(collection, for: "service '\(service)' account '\(account)'", connection, deadline)
            let found = try connection.search(Self.attributes(service: service, account: account), deadline: deadline)
            return (found.unlocked + found.locked).contains { Self.isInCollection($0, collection) }
        }
    }

    /// The items stored for `service`, sorted by account: accounts and labels, never secrets.
    public func items(service: String) throws(KeychainError) -> [KeychainItem] {
        try Self.validateName(service, what: "service")
        if let backend = configuration.store.backend {
            return try backend.items(service: service).sorted { ($0.account, $0.label) < ($1.account, $1.label) }
        }
        return try withConnection { connection, deadline throws(KeychainError) in
            let collection = try connection.collectionPath(alias: configuration.collection.alias, deadline: deadline)
            try requireUnlocked(collection, for: "service '\(service)'", connection, deadline)
            var hidden: [String] = []
            for attempt in 1...2 {
                let found = try connection.search([("service", service)], deadline: deadline)
                var items: [KeychainItem] = []
                hidden = []
                for path in found.unlocked + found.locked where Self.isInCollection(path, collection) {
                    let properties = try connection.properties(at: path, deadline: deadline)
                    guard let account = properties.attributes["account"] else {
                        // A locked item whose attributes the service hides (gnome-keyring shows only
                        // hashes until the keyring is unlocked) may well be one of ours: never skip it.
                        // An unlocked item without `account` is another client's (python keyring: `username`).
                        if found.locked.contains(path) && properties.attributes["service"] == nil { hidden.append(path) }
                        continue
                    }
                    items.append(KeychainItem(service: service, account: account, label: properties.label))
                }
                if hidden.isEmpty { return items.sorted { ($0.account, $0.label) < ($1.account, $1.label) } }
                if attempt == 1 { try unlock(hidden, in: collection, for: "service '\(service)'", connection, deadline) }
            }
            throw KeychainError(
                KeychainError.Code.attributesHidden,
                "\(hidden.count) locked item(s) in the keyring collection '\(configuration.collection.alias)' hide their attributes, so the items of service '\(service)' cannot be listed; unlock the collection in your keyring manager and try again")
        }
    }

    /// The accounts that have a secret stored for `service`, sorted.
    public func accounts(service: String) throws(KeychainError) -> [String] {
        try items(service: service).map(\.account)
    }

    // MARK: - Deleting

    /// Deletes the secret stored for (`service`, `account`): this type's item and plain ones, never an
    /// item of another application (see ``set(_:service:account:label:)-(Secret,_,_,_)``), which a later
    /// read then finds.
    ///
    /// - Returns: whether there was one to delete.
    @discardableResult
    public func delete(service: String, account: String) throws(KeychainError) -> Bool {
        try Self.validate(service: service, account: account)
        if let backend = configuration.store.backend { return try backend.delete(service: service, account: account) }
        return try withConnection { connection, deadline throws(KeychainError) in
            let collection = try connection.collectionPath(alias: configuration.collection.alias, deadline: deadline)
            try requireUnlocked(collection, for: "service '\(service)' account '\(account)'", connection, deadline)
            let found = try connection.search(Self.attributes(service: service, account: account), deadline: deadline)
            let locked = found.locked.filter { Self.isInCollection($0, collection) }
            if !locked.isEmpty {
                try unlock(locked, in: collection, for: "service '\(service)' account '\(account)'", connection, deadline)
            }
            var paths: [String] = []
            for path in (found.unlocked + locked) where Self.isInCollection(path, collection) {
                if try Self.isReplaceable(connection.properties(at: path, deadline: deadline)) { paths.append(path) }
            }
            for path in paths {
                let prompt = try connection.deleteItem(at: path, deadline: deadline)
                _ = try complete(prompt, for: "service '\(service)' account '\(account)'", connection, deadline)
            }
            return !paths.isEmpty
        }
    }

    // MARK: - Internals

    /// Runs `body` on the connection, connecting first if needed. When the call fails in a way a
    /// restarted service explains (stale session or object), reconnects once and tries again.
    private func withConnection<Result: Sendable>(
        _ body: (SecretServiceConnection, Deadline) throws(KeychainError) -> Result
    ) throws(KeychainError) -> Result {
        let timeout = configuration.timeout
        let outcome: Swift.Result<Result, KeychainError> = connection.withLock { current in
            var attempt = 0
            while true {
                attempt += 1
                do throws(KeychainError) {
                    return .success(try Deadline.run(timeout: timeout) { deadline throws(KeychainError) in
                        if current == nil { current = try SecretServiceConnection(deadline: deadline) }
                        return try body(current!, deadline)
                    })
                } catch {
                    let retryable = error.code == KeychainError.Code.providerError || error.code == KeychainError.Code.serviceUnavailable
                    current = nil
                    if !retryable || error.isFinal || attempt >= 2 { return .failure(error) }
                }
            }
        }
        return try outcome.get()
    }

    /// How long a prompt that should need nobody may take when prompting is not allowed: KeePassXC
    /// answers every CreateItem and Delete with a prompt, and completes it at once unless it shows a dialog.
    static let silentPromptGrace: Duration = .seconds(1)

    /// What a quick read found: a result that stands, or nothing certain (the careful path decides).
    private enum QuickRead<Value> {
        case known(Value)
        case unsure
    }

    /// The secret for `query` read in two round trips — the collection's own search, then the secret — without
    /// reading the collection's `Locked` property first (issue 33 #7). Nothing here can report a locked
    /// collection as absent: an empty search is never an answer (KeePassXC answers a locked database's search with
    /// nothing); a locked item (in gnome-keyring's locked collection, or one KeePassXC has not approved for this
    /// client) gets no secret or fails with "locked"; each, like any other doubt, is `.unsure`, which sends the
    /// call down the careful path: `Locked` first, the unlock or its prompt, the service's search. The collection's search never prompts, where the service's `SearchItems` would
    /// (KeePassXC with "unlock before search" and no database unlocked holds it for an unlock dialog).
    private func quickSecret(
        _ query: [(String, String)], in collection: String, _ connection: SecretServiceConnection, _ deadline: Deadline
    ) throws(KeychainError) -> QuickRead<Secret?> {
        let paths = try connection.search(in: collection, query, deadline: deadline).filter { Self.isInCollection($0, collection) }
        // Nothing found is never trusted here: the careful path reads `Locked` and asks the service's search.
        guard var path = paths.first else { return .unsure }
        if paths.count > 1 {
            // Ours first, then a plain item, then another application's (each kept by set).
            var ranked: [(Int, String)] = []
            for candidate in paths {
                let properties = try connection.properties(at: candidate, deadline: deadline)
                guard properties.locked == false else { return .unsure }
                let attributes = properties.attributes
                ranked.append((attributes["xdg:schema"] == Self.schemaName ? 0 : Self.isReplaceable(attributes) ? 1 : 2, candidate))
            }
            path = ranked.min { $0.0 < $1.0 }!.1
        }
        do throws(KeychainError) {
            // gnome-keyring leaves a locked item out of its answer: no secret is no answer, not "not found".
            guard let secret = try connection.secret(at: path, deadline: deadline) else { return .unsure }
            return .known(secret)
        } catch where error.code == KeychainError.Code.locked || error.code == KeychainError.Code.itemLocked {
            return .unsure
        }
    }

    /// The unlocked items of the collection that a `set` for `query` would replace, with their properties, in
    /// one search and one properties read per item, without reading `Locked` first (issue 33 #7). It stands only
    /// when something is found and every item found reads unlocked for this client (its own `Locked` property): a
    /// `set` never creates an item on an empty answer that may mean "locked", nor a second item beside a locked one, and
    /// never changes an item it may not read (KeePassXC checks the approval on `SetSecret`, not on `Attributes`
    /// or `Label`). Anything else is `.unsure`: the careful path.
    private func quickExisting(
        _ query: [(String, String)], in collection: String, _ connection: SecretServiceConnection, _ deadline: Deadline
    ) throws(KeychainError) -> QuickRead<[(path: String, properties: ItemProperties)]> {
        let paths = try connection.search(in: collection, query, deadline: deadline).filter { Self.isInCollection($0, collection) }
        if paths.isEmpty { return .unsure }
        var items: [(path: String, properties: ItemProperties)] = []
        for path in paths {
            let properties = try connection.properties(at: path, deadline: deadline)
            guard properties.locked == false else { return .unsure }
            items.append((path, properties))
        }
        return .known(items)
    }

    /// Makes sure the collection at `collection` is unlocked before anything is searched in it: a locked
    /// collection is ``KeychainError/Code/locked`` at once, or (prompts allowed) its unlock prompt is run and waited
    /// for. A search cannot be trusted before this: KeePassXC searches only unlocked databases (a locked one
    /// answers with nothing, which is not "not found") or, with its "unlock before search" on, holds the
    /// search until someone unlocks it in a dialog the caller never asked for.
    private func requireUnlocked(
        _ collection: String, for what: String, _ connection: SecretServiceConnection, _ deadline: Deadline
    ) throws(KeychainError) {
        guard try connection.isCollectionLocked(collection, deadline: deadline) else { return }
        try unlock([], in: collection, for: what, connection, deadline)
    }

    /// Unlocks the locked `items` of the collection at `collection` (and the collection itself when it
    /// is locked), running the service's prompt when ``Configuration/allowsPrompts`` says so.
    /// `what` names the items in messages.
    private func unlock(
        _ items: [String], in collection: String, for what: String, _ connection: SecretServiceConnection,
        _ deadline: Deadline
    ) throws(KeychainError) {
        let collectionLocked = try connection.isCollectionLocked(collection, deadline: deadline)
        if collectionLocked && !configuration.allowsPrompts { throw Self.lockedError(configuration.collection) }
        let targets = collectionLocked ? [collection] + items : items
        let reply = try connection.unlock(targets, deadline: deadline)
        if Set(targets).isSubset(of: reply.unlocked) { return }
        guard reply.prompt != "/" else {
            throw collectionLocked
                ? Self.lockedError(configuration.collection)
                : KeychainError(
                    KeychainError.Code.itemLocked,
                    "the keyring item for \(what) is locked and the Secret Service offers no way to unlock it; unlock it in your keyring manager and try again")
        }
        guard configuration.allowsPrompts else {
            connection.dismissPrompt(reply.prompt)
            throw Self.approvalError(what, waited: nil)
        }
        switch try connection.runPrompt(
            reply.prompt, timeout: configuration.promptTimeout, callTimeout: configuration.timeout, deadline: deadline)
        {
        case .completed: return
        case .dismissed: throw Self.dismissedError(what, unlocking: collectionLocked)
        case .providerStopped: throw Self.providerStoppedError(what)
        case .timedOut:
            if collectionLocked {
                throw KeychainError(
                    KeychainError.Code.locked,
                    "the keyring collection '\(configuration.collection.alias)' is locked and nobody answered its unlock prompt within \(Self.seconds(configuration.promptTimeout)); unlock it and try again")
            }
            throw Self.approvalError(what, waited: configuration.promptTimeout)
        }
    }

    /// Completes a prompt the service returned for a change (KeePassXC: every CreateItem and Delete).
    /// Such a prompt needs nobody unless the service shows a dialog; without permission to prompt it
    /// gets ``silentPromptGrace``, not the person's timeout. Returns the object paths of its result.
    private func complete(
        _ prompt: String, for what: String, _ connection: SecretServiceConnection, _ deadline: Deadline
    ) throws(KeychainError) -> [String] {
        guard prompt != "/" else { return [] }
        let wait = configuration.allowsPrompts ? configuration.promptTimeout : min(Self.silentPromptGrace, configuration.timeout)
        switch try connection.runPrompt(prompt, timeout: wait, callTimeout: configuration.timeout, deadline: deadline) {
        case .completed(let paths): return paths
        case .dismissed: throw Self.dismissedError(what, unlocking: false)
        case .timedOut: throw Self.approvalError(what, waited: configuration.allowsPrompts ? wait : nil)
        case .providerStopped: throw Self.providerStoppedError(what)
        }
    }

    /// The provider left the bus while its prompt was open (stopped, or crashed: KeePassXC 2.7 can crash while
    /// saving after a quick series of writes). Reported as unavailable, at once, never as an unanswered dialog.
    private static func providerStoppedError(_ what: String) -> KeychainError {
        // Not retried here: on a desktop whose bus can activate gnome-keyring, the retry would store the secret there.
        KeychainError(
            KeychainError.Code.serviceUnavailable,
            "the Secret Service provider (e.g. KeePassXC) stopped while its prompt for \(what) was open — it may have crashed; start it again and check the item before you retry",
            isFinal: true)
    }

    private static func approvalError(_ what: String, waited: Duration?) -> KeychainError {
        let reason = waited.map { "nobody answered its dialog within \(seconds($0))" } ?? "this program may not show prompts here"
        return KeychainError(
            KeychainError.Code.approvalRequired,
            "the Secret Service (e.g. KeePassXC) asks you to approve this program's access to the keyring item for \(what), and \(reason); run it again where you can answer the dialog (on a terminal of your desktop session), or allow the access in the provider's settings")
    }

    private static func dismissedError(_ what: String, unlocking: Bool) -> KeychainError {
        KeychainError(
            KeychainError.Code.promptDismissed,
            unlocking
                ? "the prompt to unlock the keyring for \(what) was dismissed; nothing was changed"
                : "the request to access the keyring item for \(what) was denied or dismissed; nothing was changed")
    }

    private static func itemLockedError(service: String, account: String) -> KeychainError {
        KeychainError(
            KeychainError.Code.itemLocked,
            "the keyring item for service '\(service)' account '\(account)' is still locked; unlock it in your keyring manager and try again")
    }

    private static func seconds(_ duration: Duration) -> String {
        "\(duration.components.seconds) s"
    }

    /// Attributes an item may carry and still be one this type replaces or deletes: its own, the generic
    /// schema of secret-tool and libsecret, and those KeePassXC adds to every item it exposes.
    static let replaceableAttributes: Set<String> = [
        "service", "account", "xdg:schema", "encoding",
        "Title", "UserName", "URL", "Notes", "Uuid", "Path", "TOTP",
    ]

    /// Whether the item is ours or a plain (service, account) item, not another application's.
    private static func isReplaceable(_ properties: ItemProperties) -> Bool {
        isReplaceable(properties.attributes)
    }

    private static func isReplaceable(_ attributes: [String: String]) -> Bool {
        if attributes["xdg:schema"] == schemaName { return true }
        if let schema = attributes["xdg:schema"], schema != "org.freedesktop.Secret.Generic" { return false }
        return attributes.keys.allSatisfy { replaceableAttributes.contains($0) }
    }

    private static func attributes(service: String, account: String) -> [(String, String)] {
        [("service", service), ("account", account)]
    }

    private static func isInCollection(_ itemPath: String, _ collectionPath: String) -> Bool {
        itemPath.hasPrefix(collectionPath + "/")
    }

    private static func lockedError(_ collection: Collection) -> KeychainError {
        KeychainError(
            KeychainError.Code.locked,
            "the keyring collection '\(collection.alias)' is locked; unlock it (log in to the desktop session or use your keyring manager, e.g. seahorse) and try again, or run where a prompt can ask you")
    }

    private static func validate(service: String, account: String) throws(KeychainError) {
        try validateName(service, what: "service")
        try validateName(account, what: "account")
    }

    private static func validateName(_ name: String, what: String, allowEmpty: Bool = false) throws(KeychainError) {
        if name.isEmpty && !allowEmpty {
            throw KeychainError(KeychainError.Code.invalidName, "the \(what) name is empty")
        }
        if name.utf8.contains(0) {
            throw KeychainError(KeychainError.Code.invalidName, "the \(what) name contains a NUL byte")
        }
        if name.utf8.count > maximumNameLength {
            throw KeychainError(
                KeychainError.Code.invalidName,
                "the \(what) name is \(name.utf8.count) bytes long; the limit is \(maximumNameLength) bytes")
        }
    }
}

/// What a listing shows of one stored item: never its secret.
public struct KeychainItem: Hashable, Sendable {
    /// The service the item belongs to.
    public let service: String
    /// The account within the service.
    public let account: String
    /// The label desktop keyring managers show.
    public let label: String

    /// An item description.
    public init(service: String, account: String, label: String) {
        self.service = service
        self.account = account
        self.label = label
    }
}
