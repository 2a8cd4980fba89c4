internal import Foundation
internal import Glibc
internal import Keychain
internal import SecureStore
internal import SecureStoreCore

private let labelOption = Option<String>(
    "label", valueName: "TEXT", help: "What keyring managers show (default: '<app> token NAME').")
private let rawFlag = Flag("raw", help: "Keep standard input exactly, including a trailing newline.")

/// `securestore token …`: secrets in the keyring, named within the application's namespace.
let tokenCommand = Command(
    name: "token", abstract: "Store and read tokens in the key store (Secret Service, key file or systemd credentials).",
    discussion: """
        Tokens are stored with the attributes service=<app> account=<NAME>, so
        `secret-tool lookup service securestore account NAME` finds them too.
        A secret is never taken from the command line or the environment.
        """,
    subcommands: [
        Command(
            name: "set", abstract: "Store a token read from standard input (prompted without echo on a terminal).",
            discussion: """
                On a terminal the secret is asked twice, without echo; if the two differ nothing is stored.
                An existing token is replaced only with --force (as with 'token generate'), and keeps its label
                unless --label is given.
                """,
            arguments: [tokenNameArgument],
            options: [labelOption, rawFlag, forceFlag],
            readsSecret: true,
            run: { invocation in
                let context = try Context(invocation)
                let name = try invocation[tokenNameArgument]
                // Checked before the secret is asked for: nobody types a secret that is then refused.
                let existing = try existingLabel(context, name)
                try refuseToReplace(existing, name, invocation)
                // Where it goes, and the key file's passphrase, before the secret: a mistyped passphrase then loses
                // nothing typed.
                if let file = context.keychain.configuration.store.keyFile {
                    if Console.stdinIsTerminal { Console.err("token '\(name)' goes to the key file '\(file.path)'\n") }
                    try file.unlockForWriting()
                }
                let secret = try readSecret(prompt: "Secret for \(name): ", raw: invocation[rawFlag])
                if Console.stdinIsTerminal {
                    let again = try readSecret(prompt: "Retype the secret for \(name): ", raw: invocation[rawFlag])
                    guard again == secret else {
                        throw CLIError(
                            status: ExitStatus.dataError, message: "the two entries differ; nothing was stored")
                    }
                }
                let label = try invocation[labelOption] ?? existing ?? "\(context.paths.app) token \(name)"
                try context.keychain.set(secret, service: context.paths.tokenService, account: name, label: label)
                if invocation.global.json { try Console.json(TokenStoredJSON(name: name)) }
                return ExitStatus.success
            }),
        Command(
            name: "get", abstract: "Print a token, and nothing else (fit for $(…)).",
            arguments: [tokenNameArgument],
            run: { invocation in
                let context = try Context(invocation)
                let name = try invocation[tokenNameArgument]
                guard let secret = try context.keychain.secret(service: context.paths.tokenService, account: name) else {
                    throw CLIError(
                        status: ExitStatus.notFound, message: "no token named \(UsageError.quoted(name))",
                        hint: "'securestore token list' shows the stored names")
                }
                if invocation.global.json {
                    try printJSON(name: name, secret: secret)
                    return ExitStatus.success
                }
                secret.withUnsafeBytes { bytes in Console.write(bytes) }
                if Console.stdoutIsTerminal { Console.out("\n") }
                return ExitStatus.success
            }),
        Command(
            name: "delete", abstract: "Delete a token.",
            arguments: [tokenNameArgument],
            run: { invocation in
                let context = try Context(invocation)
                let name = try invocation[tokenNameArgument]
                guard try context.keychain.delete(service: context.paths.tokenService, account: name) else {
                    throw CLIError(status: ExitStatus.notFound, message: "no token named \(UsageError.quoted(name))")
                }
                if invocation.global.json { try Console.json(TokenDeletedJSON(name: name)) }
                return ExitStatus.success
            }),
        Command(
            name: "generate", abstract: "Store a new random token (from the system's CSPRNG); print it only with --print.",
            discussion: """
                Characters are drawn uniformly from the character set (rejection sampling over the system
                random number generator, getrandom(2)). An existing token is replaced only with --force.
                """,
            arguments: [tokenNameArgument],
            options: [lengthOption, charsetOption, printFlag, forceFlag, labelOption],
            rules: [.exclusive([printFlag, GlobalOption.json])],
            run: { invocation in
                let context = try Context(invocation)
                let name = try invocation[tokenNameArgument]
                let length = try invocation[lengthOption] ?? 32
                let alphabet = try invocation[charsetOption] ?? TokenCharset.alnum
                let existing = try existingLabel(context, name)
                try refuseToReplace(existing, name, invocation)
                let label = try invocation[labelOption] ?? existing
                let secret = TokenCharset.random(length: length, alphabet: alphabet)
                try context.keychain.set(
                    secret, service: context.paths.tokenService, account: name,
                    label: label ?? "\(context.paths.app) token \(name)")
                if invocation.global.json {
                    try Console.json(TokenStoredJSON(name: name))
                } else if invocation[printFlag] {
                    secret.withUnsafeBytes { bytes in Console.write(bytes) }
                    if Console.stdoutIsTerminal { Console.out("\n") }
                }
                return ExitStatus.success
            }),
        Command(
            name: "list", abstract: "List token names and labels (never their values).",
            discussion: "PATTERN is a shell pattern (`gh*`, `*-prod`) matched against whole names.",
            arguments: [patternArgument],
            options: [prefixOption],
            run: { invocation in
                let context = try Context(invocation)
                let pattern = try invocation[patternArgument]
                let prefix = try invocation[prefixOption]
                let items = try context.keychain.items(service: context.paths.tokenService).filter { item in
                    (prefix.map { item.account.hasPrefix($0) } ?? true)
                        && (pattern.map { fnmatch($0, item.account, 0) == 0 } ?? true)
                }
                if invocation.global.json {
                    try Console.json(items.map { TokenJSON(name: $0.account, label: $0.label) })
                } else {
                    // Names and labels may come from other clients: nothing in them may act on the terminal.
                    let rows = items.map { (escapedForTerminal($0.account), escapedForTerminal($0.label)) }
                    let width = rows.map(\.0.count).max() ?? 0
                    for (name, label) in rows {
                        Console.out(name.padding(toLength: max(width, 1), withPad: " ", startingAt: 0) + "  " + label + "\n")
                    }
                }
                return ExitStatus.success
            }),
        tokenImportCommand,
    ])

/// `NAME`: a token's name, at most 256 bytes on one line; completed to the stored names.
private let tokenNameArgument = Argument(
    "NAME", help: "The token's name.", completion: .asked(.tokenNames),
    value: ArgumentValue(
        convert: { name in name.utf8.count <= 256 && !name.contains(where: \.isNewline) ? name : nil },
        refusing: { _ in "NAME must be at most 256 bytes on one line" }))
private let patternArgument = OptionalArgument("PATTERN", help: "Only names matching this pattern.")
private let lengthOption = Option<Int>.wholeNumber(
    "length", help: "How many characters (default 32, at most 4096).", minimum: 1, maximum: 4096)
/// `--charset SET`: read as the set's characters.
private let charsetOption = Option<[UInt8]>(
    "charset", valueName: "SET", help: "alnum (default), alpha, digits, hex, base64url or graph (printable ASCII).",
    completion: .words(TokenCharset.names), expected: "one of " + TokenCharset.names.joined(separator: ", "),
    refusing: { name in "unknown --charset \(UsageError.quoted(name)) (one of: \(TokenCharset.names.joined(separator: ", ")))" },
    convert: { TokenCharset.alphabets[$0] })
private let printFlag = Flag("print", help: "Print the new token (it is never printed otherwise).")
private let forceFlag = Flag("force", help: "Replace an existing token of that name.")
private let prefixOption = Option<String>("prefix", valueName: "TEXT", help: "Only names starting with TEXT.")

/// The one rule of `token set` and `token generate` for a name that is taken: the token is replaced only with
/// `--force`; otherwise exit 73 and nothing changes. `existing` is the stored token's label, nil when there is none.
private func refuseToReplace(_ existing: String?, _ name: String, _ invocation: Invocation) throws {
    guard existing != nil, !invocation[forceFlag] else { return }
    throw CLIError(
        status: ExitStatus.cannotCreate, message: "a token named \(UsageError.quoted(name)) exists; nothing was changed",
        hint: "--force replaces it")
}

/// The label of the stored token `name`, or nil when there is none.
private func existingLabel(_ context: Context, _ name: String) throws -> String? {
    try context.keychain.items(service: context.paths.tokenService).first { $0.account == name }?.label
}

/// The character sets of `token generate`, and an unbiased draw from one.
enum TokenCharset {
    private static let lower = Array("abcdefghijklmnopqrstuvwxyz".utf8)
    private static let upper = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    private static let digits = Array("0123456789".utf8)
    /// The default set: letters and digits.
    static let alnum = upper + lower + digits
    static let alphabets: [String: [UInt8]] = [
        "alnum": alnum,
        "alpha": upper + lower,
        "digits": digits,
        "hex": digits + Array("abcdef".utf8),
        "base64url": upper + lower + digits + Array("-_".utf8),
        "graph": Array(UInt8(0x21)...UInt8(0x7E)),
    ]
    static let names = ["alnum", "alpha", "digits", "hex", "base64url", "graph"]

    /// `length` characters drawn uniformly from `alphabet` (at most 256 characters) with
    /// `SystemRandomNumberGenerator`: a random byte is kept only below the largest multiple of the alphabet's
    /// size, so no character is more likely than another. The bytes go straight into the ``Secret``.
    static func random(length: Int, alphabet: [UInt8]) -> Secret {
        var generator = SystemRandomNumberGenerator()
        let size = alphabet.count
        let limit = 256 - 256 % size  // bytes at or above it are drawn again
        return Secret(count: length) { buffer in
            var filled = 0
            while filled < length {
                var word = generator.next() as UInt64
                for _ in 0..<8 where filled < length {
                    let byte = Int(word & 0xFF)
                    word >>= 8
                    guard byte < limit else { continue }
                    buffer[filled] = alphabet[byte % size]
                    filled += 1
                }
                word = 0
            }
        }
    }
}

/// `token get --json`: `{"name":…,"secret":…}`, the secret escaped byte by byte from its own buffer into one
/// that is wiped (never a String). A secret that is not UTF-8 cannot be a JSON string: exit 65.
private func printJSON(name: String, secret: Secret) throws {
    let valid = secret.withUnsafeBytes { isValidUTF8($0) }
    guard valid else {
        throw CLIError(
            status: ExitStatus.dataError, message: "token \(UsageError.quoted(name)) is not UTF-8 text, so --json cannot show it",
            hint: "run 'securestore token get NAME' without --json for the bytes")
    }
    let head = try JSONEncoder().encode(["name": name])  // {"name":"…"}
    var output = [UInt8](head.dropLast()) + Array(",\"secret\":\"".utf8)
    defer { output.withUnsafeMutableBytes { secureZero($0) } }
    output.reserveCapacity(output.count + secret.count * 6 + 3)
    secret.withUnsafeBytes { bytes in appendJSONEscaped(bytes, to: &output) }
    output += Array("\"}\n".utf8)
    output.withUnsafeBytes { Console.write($0) }
}

/// What every command needs: the application's paths and its keychain.
struct Context {
    let paths: AppPaths
    let keychain: Keychain

    init(_ invocation: Invocation, allowsPrompts: Bool = Context.allowsPrompts()) throws {
        let dataDirectory = invocation.global.dataDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
        paths = try AppPaths(app: invocation.global.app, dataDirectory: dataDirectory)
        let store = try KeyStoreChoice.store(invocation, allowsPrompts: allowsPrompts)
        keychain = Keychain(
            configuration: Keychain.Configuration(
                timeout: try Context.keychainTimeout(invocation.path), allowsPrompts: allowsPrompts, store: store))
    }

    /// How long a keyring call may take before it fails with exit 75: SECURESTORE_TIMEOUT seconds (0.1 to 3600,
    /// decimals allowed), 5 by default. A prompt a person answers is not counted (it has its own 2 minutes).
    static func keychainTimeout(_ path: [String]) throws -> Duration {
        guard let text = ProcessInfo.processInfo.environment["SECURESTORE_TIMEOUT"] else { return .seconds(5) }
        guard let seconds = Double(text), seconds.isFinite, (0.1...3600).contains(seconds) else {
            throw UsageError(
                "SECURESTORE_TIMEOUT must be a number of seconds from 0.1 to 3600, not \(UsageError.quoted(text))",
                path: path)
        }
        return .milliseconds(Int((seconds * 1000).rounded()))
    }

    /// A person on a terminal can answer the keyring's unlock or approval dialog; a pipe (git, a script,
    /// a service) cannot, so it gets the locked or approval error at once. SECURESTORE_PROMPT=always or
    /// never overrides that (a desktop launcher with no terminal; a script on one).
    static func allowsPrompts() -> Bool {
        switch ProcessInfo.processInfo.environment["SECURESTORE_PROMPT"] {
        case "always": true
        case "never": false
        // As ssh and pinentry: where a person is, even with stderr redirected (`T=$(securestore token get gh
        // 2>/dev/null)`): stderr is a terminal, or this process has a controlling terminal to ask on.
        default: isatty(STDERR_FILENO) == 1 || hasControllingTerminal()
        }
    }

    /// Whether `/dev/tty` opens: the process has a controlling terminal.
    static func hasControllingTerminal() -> Bool {
        guard let tty = try? FileDescriptor.open("/dev/tty", [.readWrite, .noControllingTerminal]) else { return false }
        tty.close()
        return true
    }
}
