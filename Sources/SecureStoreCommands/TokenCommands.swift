import Foundation
import Keychain
import SecureStore
import SecureStoreCore

private let labelOption = Option<String>(
    "label", valueName: "TEXT", help: "What keyring managers show (default: '<app> token NAME').")
private let rawFlag = Flag("raw", help: "Keep standard input exactly, including a trailing newline.")

/// `securestore token …`: secrets in the keyring, named within the application's namespace.
let tokenCommand = Command(
    name: "token", abstract: "Store and read tokens in the keyring (Secret Service).",
    discussion: """
        Tokens are stored with the attributes service=<app> account=<NAME>, so
        `secret-tool lookup service securestore account NAME` finds them too.
        A secret is never taken from the command line or the environment.
        """,
    subcommands: [
        Command(
            name: "set", abstract: "Store a token read from standard input (prompted without echo on a terminal).",
            arguments: [ArgumentSpec(name: "NAME", help: "The token's name.")],
            options: [labelOption, rawFlag],
            readsSecret: true,
            run: { invocation in
                let context = try Context(invocation)
                let name = try tokenName(invocation)
                let secret = try readSecret(prompt: "Secret for \(name): ", raw: invocation[rawFlag])
                let label = try invocation[labelOption] ?? "\(context.paths.app) token \(name)"
                try context.keychain.set(secret, service: context.paths.tokenService, account: name, label: label)
                if invocation.global.json { try Console.json(TokenStoredJSON(name: name, stored: true)) }
                return ExitStatus.success
            }),
        Command(
            name: "get", abstract: "Print a token, and nothing else (fit for $(…)).",
            arguments: [ArgumentSpec(name: "NAME", help: "The token's name.")],
            run: { invocation in
                let context = try Context(invocation)
                let name = try tokenName(invocation)
                guard let secret = try context.keychain.secret(service: context.paths.tokenService, account: name) else {
                    throw CLIError(
                        status: ExitStatus.notFound, message: "no token named \(UsageError.quoted(name))",
                        hint: "'securestore token list' shows the stored names")
                }
                secret.withUnsafeBytes { bytes in FileHandle.standardOutput.write(Data(bytes)) }
                if Console.stdoutIsTerminal { Console.out("\n") }
                return ExitStatus.success
            }),
        Command(
            name: "delete", abstract: "Delete a token.",
            arguments: [ArgumentSpec(name: "NAME", help: "The token's name.")],
            run: { invocation in
                let context = try Context(invocation)
                let name = try tokenName(invocation)
                guard try context.keychain.delete(service: context.paths.tokenService, account: name) else {
                    throw CLIError(status: ExitStatus.notFound, message: "no token named \(UsageError.quoted(name))")
                }
                return ExitStatus.success
            }),
        Command(
            name: "list", abstract: "List token names and labels (never their values).",
            run: { invocation in
                let context = try Context(invocation)
                let items = try context.keychain.items(service: context.paths.tokenService)
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
    ])

private func tokenName(_ invocation: Invocation) throws -> String {
    let name = invocation.argument(0) ?? ""
    guard name.utf8.count <= 256, !name.contains(where: { $0.isNewline }) else {
        throw UsageError("NAME must be at most 256 bytes on one line", path: invocation.path)
    }
    return name
}

/// What every command needs: the application's paths and its keychain.
struct Context {
    let paths: AppPaths
    let keychain: Keychain

    init(_ invocation: Invocation, allowsPrompts: Bool = Context.allowsPrompts()) throws {
        let dataDirectory = invocation.global.dataDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) }
        paths = try AppPaths(app: invocation.global.app, dataDirectory: dataDirectory)
        keychain = Keychain(configuration: Keychain.Configuration(allowsPrompts: allowsPrompts))
    }

    /// A person on a terminal can answer the keyring's unlock or approval dialog; a pipe (git, a script,
    /// a service) cannot, so it gets the locked or approval error at once. SECURESTORE_PROMPT=always or
    /// never overrides that (a desktop launcher with no terminal; a script on one).
    static func allowsPrompts() -> Bool {
        switch ProcessInfo.processInfo.environment["SECURESTORE_PROMPT"] {
        case "always": true
        case "never": false
        default: isatty(STDERR_FILENO) == 1
        }
    }
}
