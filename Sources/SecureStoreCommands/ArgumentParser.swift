// A small command-line parser in the shape of swift-argument-parser, written by hand because the
// package has no dependencies: a tree of commands, options shared at the root, `--help` at every
// level, usage errors that print the usage. Commands declare their options and arguments once as typed values
// (``Flag``, ``Option``, ``Argument``, ``OptionalArgument``, ``VariadicArgument``) that carry their completion kind,
// and read them back through those values, never by a name spelled twice or a position. After parsing, a
// validation phase checks every value against its spec and the command's ``ArgumentRule``s, so that a command runs
// only on a line it can take: a usage error comes before anything is opened or changed.
internal import SecureStoreCore

/// What a command's run function receives. Options and arguments are read with the typed subscripts, by the
/// ``Flag``, ``Option`` or argument the command declared.
struct Invocation: Sendable {
    /// The command's path, e.g. ["tasks", "list"].
    let path: [String]
    /// The names of the flags given: what the parser found (the fuzz target checks it). Commands read
    /// `invocation[flag]`.
    let flags: Set<String>
    /// The text of each option given, by name: what the parser found. Commands read `invocation[option]`.
    let values: [String: String]
    /// The positional words, in order. Commands read `invocation[argument]`.
    let arguments: [String]
    let global: GlobalOptions
    /// The names of the command's arguments, in order: where each one's words are in ``arguments``.
    var argumentNames: [String] = []

    /// Whether `flag` was given.
    subscript(flag: Flag) -> Bool { flags.contains(flag.spec.name) }

    /// The value of `option`, or nil when it was not given; a usage error naming it when its text is not a value.
    subscript<Value>(option: Option<Value>) -> Value? {
        get throws {
            guard let text = values[option.spec.name] else { return nil }
            guard let value = option.convert(text) else {
                throw UsageError(option.refusal(of: text) ?? "--\(option.spec.name) takes \(option.expected)", path: path)
            }
            return value
        }
    }

    /// The value of `option`, which a rule of the command requires; a usage error when it was not given.
    func required<Value>(_ option: Option<Value>) throws -> Value {
        guard let value = try self[option] else { throw UsageError("give " + RuleItem.option(option).wanted, path: path) }
        return value
    }

    /// The words given for `argument`: its own, or every word from its position on when it takes the rest.
    private func words(_ argument: some TypedArgument) -> ArraySlice<String> {
        guard let index = argumentNames.firstIndex(of: argument.spec.name), index < arguments.count else { return [] }
        return argument.spec.variadic ? arguments[index...] : arguments[index...index]
    }

    /// The value of a required argument.
    subscript<Value>(argument: Argument<Value>) -> Value {
        get throws {
            guard let value = try argument.values(words(argument), path: path).first else {
                throw UsageError("missing argument \(argument.spec.name)", path: path)
            }
            return value
        }
    }

    /// The value of an optional argument, nil when it was left out.
    subscript<Value>(argument: OptionalArgument<Value>) -> Value? {
        get throws { try argument.values(words(argument), path: path).first }
    }

    /// The values of the last argument, one per word.
    subscript<Value>(argument: VariadicArgument<Value>) -> [Value] {
        get throws { try argument.values(words(argument), path: path) }
    }
}

/// The options every command accepts, declared as every other option is; the parser keeps their values in
/// ``GlobalOptions``.
enum GlobalOption {
    /// The stores `--keystore` names.
    static let keystoreNames = ["secret-service", "file", "systemd"]

    static let app = Option<String>(
        "app", valueName: "NAME", help: "Namespace for keychain items and data/config directories (default: securestore).")
    static let dataDirectory = Option<String>(
        "data-dir", valueName: "DIR", help: "Directory for databases instead of $XDG_DATA_HOME/<app>.", completion: .directories)
    static let json = Flag("json", help: "Print data as JSON.")
    static let keystore = Option<String>(
        "keystore", valueName: "STORE",
        help: "Where keys and tokens live: secret-service, file or systemd (default: SECURESTORE_KEYSTORE, else the Secret Service when there is a session bus, else the key file).",
        completion: .words(keystoreNames))
    static let passphraseFD = Option<String>(
        "passphrase-fd", valueName: "N",
        help: "Read the key file's passphrase from file descriptor N, not the terminal (SECURESTORE_PASSPHRASE_FD).")
    static let help = Flag("help", short: "h", help: "Show help for the command.")
    static let version = Flag("version", help: "Show the version.")

    /// Every global option, in the order help lists them.
    static let all: [any CommandOption] = [app, dataDirectory, json, keystore, passphraseFD, help, version]
}

/// The specs of the global options (help, man pages, completion).
let globalOptionSpecs: [OptionSpec] = GlobalOption.all.map(\.spec)

/// The values of the global options of an invocation.
struct GlobalOptions: Sendable {
    var app = "securestore"
    var dataDirectory: String?
    var json = false
    /// `--keystore`: secret-service, file or systemd (nil: SECURESTORE_KEYSTORE, else automatic).
    var keystore: String?
    /// `--passphrase-fd`: the key file's passphrase comes from this descriptor (nil: SECURESTORE_PASSPHRASE_FD).
    var passphraseFD: String?
}

extension GlobalOptions {
    /// The global options the parser found: `flags` given, `values` by name.
    init(flags: Set<String>, values: [String: String]) {
        app = values[GlobalOption.app.name] ?? app
        dataDirectory = values[GlobalOption.dataDirectory.name]
        json = flags.contains(GlobalOption.json.name)
        keystore = values[GlobalOption.keystore.name]
        passphraseFD = values[GlobalOption.passphraseFD.name]
    }
}

/// A node of the command tree.
struct Command: Sendable {
    let name: String
    let abstract: String
    var discussion: String? = nil
    var arguments: [any CommandArgument] = []
    var options: [any CommandOption] = []
    /// Checked by the parser before `run`: exclusive options, required ones, one that needs another.
    var rules: [ArgumentRule] = []
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

struct Parser: Sendable {
    let root: Command

    /// Parses `arguments` (without the program name), then checks what was given against the command's specs
    /// (option values, argument values, rules) before anything runs.
    func parse(_ arguments: [String]) throws -> ParseResult {
        var path: [String] = []
        var command = root
        var flags: Set<String> = []
        var values: [String: String] = [:]
        var globalFlags: Set<String> = []
        var globalValues: [String: String] = [:]
        var positionals: [String] = []
        var onlyPositionals = false
        var index = 0

        /// The option named `name` (or with the short name), global ones first, and whether it is global.
        func option(where matches: (OptionSpec) -> Bool) -> (option: any CommandOption, global: Bool)? {
            if let global = GlobalOption.all.first(where: { matches($0.spec) }) { return (global, true) }
            return command.options.first { matches($0.spec) }.map { ($0, false) }
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
                let found: (option: any CommandOption, global: Bool)?
                if argument.hasPrefix("--") {
                    name = String(argument.dropFirst(2))
                    if let equals = name.firstIndex(of: "=") {
                        inlineValue = String(name[name.index(after: equals)...])
                        name = String(name[..<equals])
                    }
                    let long = name
                    found = option { $0.name == long }
                } else {
                    guard argument.count == 2, let short = argument.last, let shortOption = option(where: { $0.short == short }) else {
                        throw UsageError("unknown option \(UsageError.quoted(argument))", path: path)
                    }
                    found = shortOption
                    name = shortOption.option.name
                }
                guard let (option, isGlobal) = found else {
                    let known = GlobalOption.all.map(\.name) + command.options.map(\.name)
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
                if isGlobal {
                    if let value { globalValues[name] = value } else { globalFlags.insert(name) }
                } else {
                    if let value { values[name] = value } else { flags.insert(name) }
                }
                continue
            }
            if !command.subcommands.isEmpty && positionals.isEmpty {
                guard let next = command.subcommand(named: argument) else {
                    if globalFlags.contains(GlobalOption.help.name) { break }
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

        if globalFlags.contains(GlobalOption.help.name) { return .help(path) }
        // Global options work anywhere, as Docs/cli.md says: `securestore tasks --version` too.
        if globalFlags.contains(GlobalOption.version.name) { return .version }
        guard command.run != nil else {
            // A bare command group prints its help, as bare `securestore` does, with the same status.
            if positionals.isEmpty { return .help(path) }
            throw UsageError("missing subcommand", path: path)
        }
        try checkCount(positionals, of: command, path: path)
        try validate(
            command, flags: flags.union(globalFlags), values: values.merging(globalValues) { command, _ in command },
            positionals: positionals, path: path)
        let invocation = Invocation(
            path: path, flags: flags, values: values, arguments: positionals,
            global: GlobalOptions(flags: globalFlags, values: globalValues), argumentNames: command.arguments.map(\.name))
        return .run(command, invocation)
    }

    /// As many positional words as `command` takes, none empty.
    private func checkCount(_ positionals: [String], of command: Command, path: [String]) throws {
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
    }

    /// The validation phase: every option's value and every argument's word is one it takes, and the command's
    /// rules hold. `flags` and `values` include the global ones.
    private func validate(
        _ command: Command, flags: Set<String>, values: [String: String], positionals: [String], path: [String]
    ) throws {
        for option in GlobalOption.all + command.options {
            if let text = values[option.name], let refusal = option.refusal(of: text) { throw UsageError(refusal, path: path) }
        }
        for (position, word) in positionals.enumerated() {
            let argument = command.arguments[min(position, command.arguments.count - 1)]
            if let refusal = argument.refusal(of: word) { throw UsageError(refusal, path: path) }
        }
        for rule in command.rules {
            let violation = rule.violation { item in
                guard item.isArgument else { return flags.contains(item.name) || values[item.name] != nil }
                guard let position = command.arguments.firstIndex(where: { $0.name == item.name }) else { return false }
                return position < positionals.count
            }
            if let violation { throw UsageError(violation, path: path) }
        }
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
