// A small command-line parser in the shape of swift-argument-parser, written by hand because the
// package has no dependencies: a tree of commands, options shared at the root, `--help` at every
// level, usage errors that print the usage. Commands declare their options once as typed values (``Flag``,
// ``Option``) and read them back through those values, never by a name spelled twice.
internal import SecureStoreCore

/// An option a command accepts: a flag (`--json`) or an option with a value (`--limit N`): its name, its
/// placeholder and its help, as the parser and the help text see it.
struct OptionSpec: Sendable {
    let name: String
    var short: Character? = nil
    /// The value's placeholder for options that take one; nil for flags.
    var valueName: String? = nil
    let help: String
}

/// What a command lists in its `options`: a ``Flag`` or an ``Option`` declared once as a value, which its run
/// function then reads back with ``Invocation``'s typed subscripts. A bare ``OptionSpec`` fits too (the fuzz
/// target's tree is made of them), but nothing can read it back but the parser.
protocol CommandOption: Sendable {
    var spec: OptionSpec { get }
    /// Whether `text` is a value the option takes (always for a flag, which takes none, and for a bare spec).
    func accepts(_ text: String) -> Bool
}

extension CommandOption {
    func accepts(_ text: String) -> Bool { true }
}

extension CommandOption {
    var name: String { spec.name }
    var valueName: String? { spec.valueName }
}

extension OptionSpec: CommandOption {
    var spec: OptionSpec { self }
}

/// A flag, read as a `Bool`:
///
/// ```swift
/// let oldestFirst = Flag("oldest-first", help: "Oldest first.")
/// if invocation[oldestFirst] { … }
/// ```
struct Flag: CommandOption {
    let spec: OptionSpec

    init(_ name: String, help: String) {
        spec = OptionSpec(name: name, help: help)
    }
}

/// An option with a value, converted to `Value` when it is read: `invocation[limit]` is an `Int?`, nil when the
/// option was not given, or a usage error naming the option and what it takes.
///
/// ```swift
/// let limit = Option<Int>.wholeNumber("limit", help: "At most N tasks (default 50).")
/// let count = try invocation[limit] ?? 50
/// ```
struct Option<Value: Sendable>: CommandOption {
    let spec: OptionSpec
    /// What a value must be, for the usage error: "a whole number of at least 0".
    let expected: String
    let convert: @Sendable (String) -> Value?

    init(_ name: String, valueName: String, help: String, expected: String, convert: @escaping @Sendable (String) -> Value?) {
        spec = OptionSpec(name: name, valueName: valueName, help: help)
        self.expected = expected
        self.convert = convert
    }

    func accepts(_ text: String) -> Bool { convert(text) != nil }
}

extension Option where Value == String {
    /// An option whose value is any text.
    init(_ name: String, valueName: String, help: String) {
        self.init(name, valueName: valueName, help: help, expected: "any text") { $0 }
    }
}

extension Option where Value == Int {
    /// An option whose value is a whole number of at least `minimum`.
    static func wholeNumber(_ name: String, valueName: String = "N", help: String, minimum: Int = 0) -> Self {
        Self(name, valueName: valueName, help: help, expected: "a whole number of at least \(minimum)") { text in
            guard let number = Int(text), number >= minimum else { return nil }
            return number
        }
    }
}

/// A positional argument.
struct ArgumentSpec: Sendable {
    let name: String
    let help: String
    var optional = false
    /// The last argument may take every remaining word (`tasks add Buy milk`); the command joins them.
    var variadic = false
}

/// What a command's run function receives. Options are read with the typed subscripts, by the ``Flag`` or
/// ``Option`` the command declared.
struct Invocation: Sendable {
    /// The command's path, e.g. ["tasks", "list"].
    let path: [String]
    /// The names of the flags given: what the parser found (the fuzz target checks it). Commands read
    /// `invocation[flag]`.
    let flags: Set<String>
    /// The text of each option given, by name: what the parser found. Commands read `invocation[option]`.
    let values: [String: String]
    let arguments: [String]
    let global: GlobalOptions

    /// Whether `flag` was given.
    subscript(flag: Flag) -> Bool { flags.contains(flag.spec.name) }

    /// The value of `option`, or nil when it was not given; a usage error naming it when its text is not a value.
    subscript<Value>(option: Option<Value>) -> Value? {
        get throws {
            guard let text = values[option.spec.name] else { return nil }
            guard let value = option.convert(text) else {
                throw UsageError("--\(option.spec.name) takes \(option.expected), not \(UsageError.quoted(text))", path: path)
            }
            return value
        }
    }

    func argument(_ index: Int) -> String? { index < arguments.count ? arguments[index] : nil }
}

/// Options that every command accepts.
struct GlobalOptions: Sendable {
    var app = "securestore"
    var dataDirectory: String?
    var json = false
    /// `--keystore`: secret-service, file or systemd (nil: SECURESTORE_KEYSTORE, else automatic).
    var keystore: String?
    /// `--passphrase-fd`: the key file's passphrase comes from this descriptor (nil: SECURESTORE_PASSPHRASE_FD).
    var passphraseFD: String?
}

/// A node of the command tree.
struct Command: Sendable {
    let name: String
    let abstract: String
    var discussion: String? = nil
    var arguments: [ArgumentSpec] = []
    var options: [any CommandOption] = []
    var subcommands: [Command] = []
    /// Whether the command reads a secret (from standard input or a prompt): only then does a usage error
    /// talk about secrets.
    var readsSecret = false
    /// Left out of help, man pages and completion: the completion scripts' own helper (`__complete`).
    var hidden = false
    var run: (@Sendable (Invocation) throws -> Int32)? = nil

    func subcommand(named name: String) -> Command? { subcommands.first { $0.name == name } }
}

/// A mistake in how the tool was called: printed with the usage, exit status 64.
struct UsageError: Error {
    let message: String
    let path: [String]
    init(_ message: String, path: [String]) {
        self.message = message
        self.path = path
    }

    /// `text` in single quotes, for a message that repeats what the user typed. The tool prints a usage
    /// error as one line on a terminal, so every scalar a terminal would act on or that would break the
    /// line is written as `\u{…}` (``escapedForTerminal(_:limit:)``).
    static func quoted(_ text: String) -> String {
        "'" + escapedForTerminal(text) + "'"
    }
}

/// The outcome of parsing: run a command, or print help or the version.
enum ParseResult {
    case run(Command, Invocation)
    case help([String])
    case version
}

let globalOptionSpecs: [OptionSpec] = [
    OptionSpec(name: "app", valueName: "NAME", help: "Namespace for keychain items and data/config directories (default: securestore)."),
    OptionSpec(name: "data-dir", valueName: "DIR", help: "Directory for databases instead of $XDG_DATA_HOME/<app>."),
    OptionSpec(name: "json", help: "Print data as JSON."),
    OptionSpec(
        name: "keystore", valueName: "STORE",
        help: "Where keys and tokens live: secret-service, file or systemd (default: SECURESTORE_KEYSTORE, else the Secret Service when there is a session bus, else the key file)."),
    OptionSpec(
        name: "passphrase-fd", valueName: "N",
        help: "Read the key file's passphrase from file descriptor N, not the terminal (SECURESTORE_PASSPHRASE_FD)."),
    OptionSpec(name: "help", short: "h", help: "Show help for the command."),
    OptionSpec(name: "version", help: "Show the version."),
]

struct Parser: Sendable {
    let root: Command

    /// Parses `arguments` (without the program name).
    func parse(_ arguments: [String]) throws -> ParseResult {
        var path: [String] = []
        var command = root
        var flags: Set<String> = []
        var values: [String: String] = [:]
        var positionals: [String] = []
        var global = GlobalOptions()
        var wantsHelp = false
        var wantsVersion = false
        var onlyPositionals = false
        var index = 0

        func spec(named name: String) -> OptionSpec? {
            globalOptionSpecs.first { $0.name == name } ?? command.options.first { $0.name == name }?.spec
        }
        func spec(short: Character) -> OptionSpec? {
            globalOptionSpecs.first { $0.short == short } ?? command.options.first { $0.spec.short == short }?.spec
        }

        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if !onlyPositionals && argument == "--" {
                onlyPositionals = true
                continue
            }
            if !onlyPositionals && argument.hasPrefix("-") && argument != "-" {
                var name: String
                var inlineValue: String? = nil
                let option: OptionSpec?
                if argument.hasPrefix("--") {
                    name = String(argument.dropFirst(2))
                    if let equals = name.firstIndex(of: "=") {
                        inlineValue = String(name[name.index(after: equals)...])
                        name = String(name[..<equals])
                    }
                    option = spec(named: name)
                } else {
                    guard argument.count == 2, let short = argument.last, let found = spec(short: short) else {
                        throw UsageError("unknown option \(UsageError.quoted(argument))", path: path)
                    }
                    option = found
                    name = found.name
                }
                guard let option else {
                    let known = globalOptionSpecs.map(\.name) + command.options.map(\.name)
                    throw UsageError(
                        "unknown option \(UsageError.quoted("--" + name))"
                            + didYouMean(name, among: known).map { " (did you mean \($0.map { "'--\($0)'" }.joined(separator: " or "))?)" }.orEmpty,
                        path: path)
                }
                var value: String? = nil
                if option.valueName != nil {
                    if let inlineValue {
                        value = inlineValue
                    } else if index < arguments.count {
                        value = arguments[index]
                        index += 1
                    } else {
                        throw UsageError("--\(name) needs a value (\(option.valueName ?? "VALUE"))", path: path)
                    }
                } else if inlineValue != nil {
                    throw UsageError("--\(name) takes no value", path: path)
                }
                switch name {
                case "help": wantsHelp = true
                case "version": wantsVersion = true
                case "json": global.json = true
                case "app": global.app = value ?? global.app
                case "data-dir": global.dataDirectory = value
                case "keystore": global.keystore = value
                case "passphrase-fd": global.passphraseFD = value
                default:
                    if let value { values[name] = value } else { flags.insert(name) }
                }
                continue
            }
            if !command.subcommands.isEmpty && positionals.isEmpty {
                guard let next = command.subcommand(named: argument) else {
                    if wantsHelp { break }
                    let known = command.subcommands.filter { !$0.hidden }.map(\.name)
                    // `tasks lst`: the nearest command by edit distance, as git says "The most similar command is".
                    let hint = didYouMean(argument, among: known).map { "did you mean \($0.map { "'\($0)'" }.joined(separator: " or "))? " }
                    throw UsageError(
                        "unknown command \(UsageError.quoted(argument)) (\(hint.orEmpty)expected one of: \(known.joined(separator: ", ")))",
                        path: path)
                }
                // Options given before the subcommand belong to the parent: only global ones are allowed.
                if let stray = values.keys.first ?? flags.first {
                    throw UsageError("unknown option '--\(stray)'", path: path)
                }
                command = next
                path.append(argument)
                continue
            }
            positionals.append(argument)
        }

        if wantsHelp { return .help(path) }
        // Global options work anywhere, as Docs/cli.md says: `securestore tasks --version` too.
        if wantsVersion { return .version }
        guard command.run != nil else {
            // A bare command group prints its help, as bare `securestore` does, with the same status.
            if positionals.isEmpty { return .help(path) }
            throw UsageError("missing subcommand", path: path)
        }
        let required = command.arguments.filter { !$0.optional }.count
        if positionals.count < required {
            let missing = command.arguments[positionals.count]
            throw UsageError("missing argument \(missing.name)", path: path)
        }
        if positionals.count > command.arguments.count, command.arguments.last?.variadic != true {
            // The extra argument is not repeated: it may be a secret typed where none is taken (`token set NAME
            // SECRET`), and stderr ends up in logs.
            throw UsageError(
                "unexpected argument: this command takes \(command.arguments.count), not \(positionals.count) "
                    + (command.readsSecret
                        ? "(the extra one is not shown; secrets are read from standard input, never from arguments)"
                        : "(the extra one is not shown)"),
                path: path)
        }
        for (position, value) in positionals.enumerated() where value.isEmpty {
            // Words past the last argument belong to it when it is variadic (`tasks add Buy ''`).
            let argument = command.arguments[min(position, command.arguments.count - 1)]
            throw UsageError("\(argument.name) must not be empty", path: path)
        }
        let invocation = Invocation(path: path, flags: flags, values: values, arguments: positionals, global: global)
        return .run(command, invocation)
    }

    /// The command at `path`.
    func command(at path: [String]) -> Command {
        var command = root
        for name in path {
            guard let next = command.subcommand(named: name) else { break }
            command = next
        }
        return command
    }

    /// The one-line usage of the command at `path`.
    func usage(_ path: [String]) -> String {
        let command = command(at: path)
        var parts = ["securestore"] + path
        if !command.subcommands.isEmpty {
            parts.append("<command>")
        } else {
            if !command.options.isEmpty { parts.append("[options]") }
            for argument in command.arguments {
                parts.append(argument.optional ? "[\(argument.name)]" : argument.name)
            }
        }
        return "usage: " + parts.joined(separator: " ")
    }

    /// The help text of the command at `path`.
    func help(_ path: [String]) -> String {
        let command = command(at: path)
        var lines = [path.isEmpty ? "securestore — \(command.abstract)" : command.abstract, "", usage(path)]
        if let discussion = command.discussion {
            lines += ["", discussion]
        }
        func table(_ rows: [(String, String)]) -> [String] {
            let width = min(28, rows.map(\.0.count).max() ?? 0)
            return rows.map { left, right in
                let padded = left.count < width ? left + String(repeating: " ", count: width - left.count) : left
                return "  \(padded)  \(right)"
            }
        }
        if !command.subcommands.isEmpty {
            lines += ["", "Commands:"] + table(command.subcommands.filter { !$0.hidden }.map { ($0.name, $0.abstract) })
        }
        if !command.arguments.isEmpty {
            lines += ["", "Arguments:"] + table(command.arguments.map { ($0.name, $0.help) })
        }
        func optionRows(_ specs: [OptionSpec]) -> [(String, String)] {
            specs.map { spec in
                var left = spec.short.map { "-\($0), " } ?? ""
                left += "--\(spec.name)"
                if let valueName = spec.valueName { left += " \(valueName)" }
                return (left, spec.help)
            }
        }
        if !command.options.isEmpty {
            lines += ["", "Options:"] + table(optionRows(command.options.map(\.spec)))
        }
        lines += ["", "Global options:"] + table(optionRows(globalOptionSpecs))
        if !command.subcommands.isEmpty {
            lines += ["", "See 'securestore \((path + ["<command>"]).joined(separator: " ")) --help' for a command's details."]
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension Optional where Wrapped == String {
    /// The text, or "" for nil.
    var orEmpty: String { self ?? "" }
}

/// The names among `candidates` nearest to `word` that a mistyped word plausibly meant: at the smallest edit distance
/// (insertions, deletions, substitutions, and swaps of two neighbours, each counting 1) when it is at most 1 for
/// words of up to 3 characters and at most 2 otherwise, else the one name `word` is a prefix of. Nil when none.
func didYouMean(_ word: String, among candidates: [String]) -> [String]? {
    let typed = Array(word.lowercased().unicodeScalars)
    guard !typed.isEmpty, typed.count <= 64 else { return nil }
    let limit = typed.count <= 3 ? 1 : 2
    var best: [String] = []
    var bestDistance = limit + 1
    for candidate in candidates {
        let distance = editDistance(typed, Array(candidate.lowercased().unicodeScalars))
        if distance < bestDistance {
            best = [candidate]
            bestDistance = distance
        } else if distance == bestDistance, !best.contains(candidate) {
            best.append(candidate)
        }
    }
    if !best.isEmpty { return Array(best.prefix(3)) }
    let extending = candidates.filter { $0.lowercased().hasPrefix(word.lowercased()) }
    return typed.count >= 2 && extending.count == 1 ? extending : nil
}

/// The optimal string alignment distance between `a` and `b`: the Levenshtein distance, with a swap of two
/// neighbouring characters counting as one edit (`serach` → `search`).
func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var before = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                current[j] = min(current[j], before[j - 2] + 1)
            }
        }
        (before, previous, current) = (previous, current, before)
    }
    return previous[b.count]
}
