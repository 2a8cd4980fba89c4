// Which key store the tool uses (--keystore, SECURESTORE_KEYSTORE, automatic), and `keystore status|move` and
// `lock`. The stores themselves are the Keychain module's (Secret Service, key file, systemd credentials).
internal import Foundation
internal import Glibc
internal import Keychain
internal import SecureStore
internal import SecureStoreCore

/// The store a command uses.
enum KeyStoreChoice {
    static let names = GlobalOption.keystoreNames

    /// `--keystore`, else SECURESTORE_KEYSTORE, else automatic: the Secret Service when there is a session bus
    /// (`DBUS_SESSION_BUS_ADDRESS`) and a provider answers on it (the name `org.freedesktop.secrets` is owned or
    /// activatable), else the key file (said once on stderr, when the key file is made).
    static func store(_ invocation: Invocation, allowsPrompts: Bool = Context.allowsPrompts()) throws -> Keychain.Store {
        try store(invocation.global, path: invocation.path, allowsPrompts: allowsPrompts)
    }

    /// The store that `global` names (see ``store(_:)``); `path` is the command, for usage errors.
    static func store(
        _ global: GlobalOptions, path: [String], allowsPrompts: Bool = Context.allowsPrompts()
    ) throws -> Keychain.Store {
        let environment = ProcessInfo.processInfo.environment
        let named = global.keystore ?? environment["SECURESTORE_KEYSTORE"].flatMap { $0.isEmpty ? nil : $0 }
        switch named {
        case "secret-service":
            return .secretService
        case "file":
            return .keyFile(try keyFile(global, path: path, automatic: false, allowsPrompts: allowsPrompts))
        case "systemd":
            guard let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else {
                throw CLIError(
                    status: ExitStatus.unavailable,
                    message: "--keystore systemd reads the credentials systemd gives a service, but CREDENTIALS_DIRECTORY is not "
                        + "set: run it from a unit with LoadCredential= or LoadCredentialEncrypted= (Docs/keystores.md)")
            }
            return .systemdCredentials(directory: directory)
        case nil, "auto":
            guard hasSessionBus(environment) else {
                return .keyFile(try keyFile(global, path: path, automatic: true, allowsPrompts: allowsPrompts))
            }
            if Keychain.Store.secretServiceIsReachable() { return .secretService }
            return .keyFile(
                try keyFile(
                    global, path: path, automatic: true, allowsPrompts: allowsPrompts,
                    why: "no Secret Service (such as gnome-keyring or KeePassXC) answers on the session bus here"))
        case let other?:
            throw UsageError(
                "--keystore must be one of \(names.joined(separator: ", ")) (not \(UsageError.quoted(other)))",
                path: path)
        }
    }

    /// The kinds of item an app keeps, with their services: what `keystore status` lists and `keystore move` moves.
    static func itemKinds(_ paths: AppPaths) -> [(kind: String, service: String)] {
        [("database key", paths.databaseKeyService), ("token", paths.tokenService), ("git credential", paths.gitCredentialService)]
    }

    /// Whether a session bus can be found as libsecret finds one: `DBUS_SESSION_BUS_ADDRESS`, or the user bus
    /// socket `$XDG_RUNTIME_DIR/bus` that systemd's user manager makes.
    static func hasSessionBus(_ environment: [String: String]) -> Bool {
        if let bus = environment["DBUS_SESSION_BUS_ADDRESS"], !bus.isEmpty { return true }
        guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else { return false }
        return (try? fileStatus(runtime + "/bus"))?.isSocket ?? false
    }

    /// The key file, its passphrase from `--passphrase-fd`/SECURESTORE_PASSPHRASE_FD or the terminal.
    static func keyFile(
        _ global: GlobalOptions, path: [String], automatic: Bool, allowsPrompts: Bool = Context.allowsPrompts(),
        why: String = "no D-Bus session bus here"
    ) throws -> KeyFile {
        let environment = ProcessInfo.processInfo.environment
        var passphrase = Passphrase.terminal
        var fromDescriptor = false
        if let text = global.passphraseFD ?? environment["SECURESTORE_PASSPHRASE_FD"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let fd = Int32(text), FileDescriptor.isOpen(fd) else {
                throw UsageError(
                    "--passphrase-fd must name an open file descriptor (\(UsageError.quoted(text)) is not one)", path: path)
            }
            passphrase = .fileDescriptor(fd)
            fromDescriptor = true
        }
        var timeout = Duration.seconds(600)
        if let text = environment["SECURESTORE_CACHE_TIMEOUT"], !text.isEmpty {
            guard let seconds = UInt32(text) else {
                throw UsageError(
                    "SECURESTORE_CACHE_TIMEOUT must be a whole number of seconds from 0 (no cache) to 4294967295, not "
                        + UsageError.quoted(text), path: path)
            }
            timeout = .seconds(Int(seconds))
        }
        var maximum = Duration.seconds(7200)
        if let text = environment["SECURESTORE_CACHE_MAX_TIMEOUT"], !text.isEmpty {
            guard let seconds = UInt32(text), seconds > 0 else {
                throw UsageError(
                    "SECURESTORE_CACHE_MAX_TIMEOUT must be a whole number of seconds from 1 to 4294967295, not "
                        + UsageError.quoted(text), path: path)
            }
            maximum = .seconds(Int(seconds))
        }
        var scope = KeyFile.SessionCacheScope.loginSession
        switch environment["SECURESTORE_CACHE"] ?? "" {
        case "", "session": break
        case "user": scope = .user
        case "off": timeout = .zero
        case let other:
            throw UsageError(
                "SECURESTORE_CACHE must be session (the default: only a login session keyring), user (also the "
                    + "user's keyring, shared by every process of this uid) or off, not " + UsageError.quoted(other),
                path: path)
        }
        // A prompt only where a person can answer it (SECURESTORE_PROMPT, a terminal on stderr); the file descriptor
        // always; otherwise only the session cache.
        if !fromDescriptor && !allowsPrompts { passphrase = .none }
        // Said once, when the file is made: where keys and tokens now go (chosen or not).
        let notice: @Sendable (String) -> Void
        if automatic {
            notice = { path in
                Console.err(
                    "securestore: \(why), so keys and tokens go to the key file '\(path)', sealed "
                        + "with a passphrase (choose with --keystore or SECURESTORE_KEYSTORE)\n")
            }
        } else {
            notice = { path in
                Console.err("securestore: made the key file '\(path)'; keys and tokens go there, sealed with the passphrase\n")
            }
        }
        return KeyFile(
            passphrase: passphrase, sessionCacheTimeout: timeout == .zero ? nil : timeout,
            sessionCacheMaximum: maximum, sessionCacheScope: scope, willCreate: notice)
    }
}

private let toOption = Option<String>.oneOf(
    "to", valueName: "STORE", help: "The store to move to: file or secret-service.", ["file", "secret-service"]
) { _ in "--to must be file or secret-service" }

let keystoreCommand = Command(
    name: "keystore", abstract: "See and change where keys and tokens are kept.",
    discussion: """
        SecureStore keeps database keys, tokens and git credentials in one of three stores: the Secret Service \
        (gnome-keyring, KeePassXC, KWallet), an encrypted key file (a passphrase, for machines without a desktop \
        keyring), or systemd's credentials of a service (read-only). See Docs/keystores.md.
        """,
    subcommands: [
        Command(
            name: "status", abstract: "Say which store is used and what it holds for this app.",
            run: { invocation in
                let context = try Context(invocation)
                var rows: [KeyStoreItemJSON] = []
                for (kind, service) in KeyStoreChoice.itemKinds(context.paths) {
                    for item in try context.keychain.items(service: service) {
                        rows.append(KeyStoreItemJSON(kind: kind, service: service, account: item.account))
                    }
                }
                let store = context.keychain.configuration.store
                var cache: String? = nil
                if let file = store.keyFile {
                    cache = file.sessionCacheLocation ?? (file.sessionCacheTimeout == nil
                        ? "off (SECURESTORE_CACHE=off or SECURESTORE_CACHE_TIMEOUT=0)"
                        : file.sessionCacheUnavailableReason.map { "off: \($0)" }
                            ?? "off: no login session keyring here (SECURESTORE_CACHE=user caches in the user's keyring)")
                }
                if invocation.global.json {
                    try Console.json(
                        KeyStoreStatusJSON(store: store.name, location: store.description, cache: cache, items: rows))
                } else {
                    Console.out("store: \(store.name) (\(store.description))\n")
                    if let cache { Console.out("unlocked key cached in: \(cache)\n") }
                    for row in rows { Console.out("\(row.kind): \(row.account) (service '\(row.service)')\n") }
                    if rows.isEmpty { Console.out("no keys or tokens of app '\(context.paths.app)' there\n") }
                }
                return ExitStatus.success
            }),
        Command(
            name: "move", abstract: "Move this app's keys and tokens to another store.",
            discussion: """
                Each item is written to the new store, read back and compared, and only then deleted from the old \
                one: interrupted at any point, every item is readable from one store or both, never neither. Run it \
                again to finish.
                """,
            options: [toOption],
            rules: [.required(toOption, message: "--to is required (file or secret-service)")],
            run: { invocation in
                let target = try invocation.required(toOption)
                let context = try Context(invocation)
                let source = context.keychain
                var targetGlobal = invocation.global
                targetGlobal.keystore = target
                let destination = Keychain(
                    configuration: Keychain.Configuration(
                        allowsPrompts: source.configuration.allowsPrompts, store: try KeyStoreChoice.store(targetGlobal, path: invocation.path)))
                guard destination.configuration.store.name != source.configuration.store.name else {
                    throw UsageError("the keys are in \(source.configuration.store.description) already", path: invocation.path)
                }
                let outcome = try KeyStoreMove(from: source, to: destination).run(services: KeyStoreChoice.itemKinds(context.paths))
                let from = source.configuration.store.description, to = destination.configuration.store.description
                for item in outcome.skipped {
                    let hint =
                        item.kind == "database key"
                        ? "a database key is never replaced by another; 'securestore --keystore \(destination.configuration.store.name) "
                            + "db keys list' shows the keys the database has (a rotation made there after an interrupted move leaves "
                            + "the older key in \(from)); once the database opens, delete the old copy from \(from) and move again"
                        : "compare the two with '--keystore \(source.configuration.store.name)' and '--keystore "
                            + "\(destination.configuration.store.name)', delete the one you do not want, then move again"
                    Console.err(
                        "securestore: kept both copies of \(item.kind) '\(item.account)' (service '\(item.service)'): the one in "
                            + "\(to) differs from the one in \(from), and a move never replaces a value (hint: \(hint))\n")
                }
                if invocation.global.json {
                    try Console.json(
                        KeyStoreMovedJSON(
                            moved: outcome.moved, to: destination.configuration.store.name,
                            skipped: outcome.skipped.map { KeyStoreItemJSON(kind: $0.kind, service: $0.service, account: $0.account) }))
                } else {
                    Console.out("moved \(outcome.moved) item(s) to \(to)\n")
                    if !outcome.skipped.isEmpty {
                        Console.out("kept \(outcome.skipped.count) item(s) in both stores: their values differ (see above)\n")
                    }
                }
                if !outcome.skipped.isEmpty { return ExitStatus.dataError }
                return ExitStatus.success
            }),
        keystorePassphraseCommand,
        keystoreCredentialCommand,
    ])

private let credentialTokenOption = Option<String>("token", valueName: "NAME", help: "The token to write as a credential.")
private let credentialDatabaseOption = Option<String>(
    "database", valueName: "NAME", help: "The database whose current key to write as a credential (tasks: the task list).")
private let nameOnlyFlag = Flag("name-only", help: "Print only the credential's name (for --name= and LoadCredentialEncrypted=).")

/// `keystore credential`: one item as systemd credential material, for `systemd-creds encrypt` (Docs/keystores.md).
let keystoreCredentialCommand = Command(
    name: "credential", abstract: "Print a token or a database key as a systemd credential, for systemd-creds encrypt.",
    discussion: """
        Prints the item's value exactly as '--keystore systemd' reads it back (no newline), for a pipe into \
        'systemd-creds encrypt --name=NAME - FILE'; --name-only prints NAME, the credential name the unit's \
        LoadCredentialEncrypted= must use. A database key is checked against the database first: the value printed \
        is the key that opens it. The value is the secret: send it to a pipe, never to a terminal or a file others read.
        """,
    options: [credentialTokenOption, credentialDatabaseOption, nameOnlyFlag],
    rules: [
        .exactlyOne(
            [.option(credentialTokenOption), .option(credentialDatabaseOption)],
            missing: "give one of --token NAME and --database NAME")
    ],
    run: { invocation in
        let context = try Context(invocation)
        let item: (service: String, account: String, value: Secret)
        if let token = try invocation[credentialTokenOption] {
            guard let value = try context.keychain.secret(service: context.paths.tokenService, account: token) else {
                throw CLIError(status: ExitStatus.notFound, message: "there is no token '\(token)' in \(context.keychain.configuration.store.description)")
            }
            item = (context.paths.tokenService, token, value)
        } else {
            let name = try invocation.required(credentialDatabaseOption)
            let database = try KeyedDatabase(paths: context.paths, name: name, keychain: context.keychain, createIfMissing: false)
            defer { try? database.close() }
            item = try database.currentKeyItem()
        }
        let name = Keychain.Store.systemdCredentialName(service: item.service, account: item.account)
        if invocation[nameOnlyFlag] {
            Console.out(name + "\n")
            return ExitStatus.success
        }
        if Console.stdoutIsTerminal {
            Console.err("securestore: not printed on a terminal: this is the secret itself; pipe it into 'systemd-creds encrypt --name=\(name) - FILE'\n")
            return ExitStatus.usage
        }
        item.value.withUnsafeBytes { Console.write($0) }
        return ExitStatus.success
    })

private let newPassphraseFDOption = Option<Int32>(
    "new-passphrase-fd", valueName: "N", help: "Read the new passphrase from file descriptor N, not the terminal.",
    expected: "a file descriptor number", convert: { Int32($0) })

let keystorePassphraseCommand = Command(
    name: "passphrase", abstract: "Change the key file's passphrase.",
    discussion: """
        The current passphrase comes as for any command (the terminal, --passphrase-fd); the new one from the         terminal (asked twice) or --new-passphrase-fd. The file is sealed again under a new salt, written whole and         renamed over the old one: a crash leaves the old file (old passphrase) or the new one (new passphrase).
        """,
    options: [newPassphraseFDOption],
    run: { invocation in
        let file = try KeyStoreChoice.keyFile(invocation.global, path: invocation.path, automatic: false)
        guard file.exists else {
            throw CLIError(status: ExitStatus.notFound, message: "there is no key file at '\(file.path)' yet")
        }
        let newPassphrase: Secret
        if let fd = try invocation[newPassphraseFDOption] {
            guard FileDescriptor.isOpen(fd) else {
                throw UsageError("--new-passphrase-fd must name an open file descriptor", path: invocation.path)
            }
            newPassphrase = try KeyFile.readPassphraseLine(from: fd)
        } else {
            newPassphrase = try KeyFile.askNewPassphrase(for: file.path)
        }
        try file.changePassphrase(to: newPassphrase)
        if invocation.global.json {
            try Console.json(KeyFileChangedJSON(path: file.path))
        } else {
            Console.out("changed the passphrase of the key file '\(file.path)'\n")
        }
        return ExitStatus.success
    })

let lockCommand = Command(
    name: "lock", abstract: "Forget the key file's unlocked key (this session's cache): the next use asks again.",
    run: { invocation in
        let file = try KeyStoreChoice.keyFile(invocation.global, path: invocation.path, automatic: false)
        let dropped = file.lock()
        if invocation.global.json {
            try Console.json(KeyStoreLockedJSON(path: file.path, wasCached: dropped))
        } else {
            Console.out(dropped ? "locked the key file '\(file.path)'\n" : "the key file '\(file.path)' was not unlocked in this session\n")
        }
        return ExitStatus.success
    })

/// One item of `keystore status`.
struct KeyStoreItemJSON: Encodable {
    let kind: String
    let service: String
    let account: String
}

/// `keystore status`.
struct KeyStoreStatusJSON: Encodable {
    let store: String
    let location: String
    /// For the key file: where its unlocked key is cached, or why it is not; null for the other stores.
    @Nullable var cache: String?
    let items: [KeyStoreItemJSON]
}

/// `keystore move`: `moved` is how many items were moved (or found already moved: the same value in both stores);
/// `skipped` the items whose value in the destination differs from the source's, left in both stores.
struct KeyStoreMovedJSON: Encodable {
    let moved: Int
    let to: String
    let skipped: [KeyStoreItemJSON]
}

/// `keystore move`'s work: each item of the source is written to the destination, read back and compared, and only
/// then deleted from the source. An item the destination already holds is never replaced: with the same value it
/// only leaves the source (a rerun finishing an interrupted move); with another value (changed there since, a database
/// key rotated there) both copies stay and the item is reported. So a rerun can never put an older value over a newer.
struct KeyStoreMove {
    /// An item left in both stores because their values differ.
    struct Skipped {
        let kind: String
        let service: String
        let account: String
    }

    let source: Keychain
    let destination: Keychain

    init(from source: Keychain, to destination: Keychain) {
        self.source = source
        self.destination = destination
    }

    /// Moves every item of the given (kind, service) pairs; returns how many moved and which were skipped.
    func run(services: [(kind: String, service: String)]) throws -> (moved: Int, skipped: [Skipped]) {
        var moved = 0
        var skipped: [Skipped] = []
        for (kind, service) in services {
            for item in try source.items(service: service) {
                guard let secret = try source.secret(service: service, account: item.account) else { continue }
                if let existing = try destination.secret(service: service, account: item.account) {
                    guard existing == secret else {
                        skipped.append(Skipped(kind: kind, service: service, account: item.account))
                        continue
                    }
                } else {
                    try destination.set(secret, service: service, account: item.account, label: item.label)
                    guard try destination.secret(service: service, account: item.account) == secret else {
                        throw CLIError(
                            status: ExitStatus.ioError,
                            message: "the copy of '\(item.account)' (service '\(service)') in \(destination.configuration.store.description) "
                                + "does not read back the same; it was left in \(source.configuration.store.description)")
                    }
                }
                try source.delete(service: service, account: item.account)
                moved += 1
            }
        }
        return (moved, skipped)
    }
}

/// `lock`: the key file, and whether its key was unlocked (cached) in this session until now.
struct KeyStoreLockedJSON: Encodable {
    let path: String
    let wasCached: Bool
}

/// `keystore passphrase`: the key file, and `changed` how many passphrases were changed (1).
struct KeyFileChangedJSON: Encodable {
    let path: String
    var changed = 1
}
