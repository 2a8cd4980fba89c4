// The declarations of the command-line parser (ArgumentParser.swift): what a command lists — options, flags,
// typed positional arguments, the rules between them — and what each word completes to. The parser reads them;
// commands read their values back through them.
internal import SecureStoreCore

/// What a word of the command line completes to in the shell scripts (Completion.swift). It is part of the spec of
/// the option or argument that takes the word, never guessed from its name.
enum CompletionKind: Sendable, Equatable {
    /// File names, from the shell (`--output FILE`, `db backup PATH`).
    case files
    /// Directory names, from the shell (`--data-dir DIR`).
    case directories
    /// One of these words (`--format jsonl|csv|json`, `completion bash|zsh|fish`).
    case words([String])
    /// Words the scripts ask the tool for (`securestore __complete task-ids`).
    case asked(AskedWords)

    /// The word the scripts' tables use: `files`, `directories`, `words W1 W2…` or the asked kind (`task-ids`).
    var scriptWord: String {
        switch self {
        case .files: "files"
        case .directories: "directories"
        case .words(let words): (["words"] + words).joined(separator: " ")
        case .asked(let kind): kind.rawValue
        }
    }
}

/// The words the completion scripts ask the tool for, through the hidden `__complete KIND`: never a secret.
enum AskedWords: String, CaseIterable, Sendable {
    /// Task ID prefixes.
    case taskIDs = "task-ids"
    /// Token names.
    case tokenNames = "token-names"
    /// Attachment ID prefixes.
    case attachmentIDs = "attachment-ids"
    /// Preference keys (never a value).
    case preferenceKeys = "preference-keys"
}

/// An option a command accepts: a flag (`--json`) or an option with a value (`--limit N`): its name, its
/// placeholder, its help and what its value completes to, as the parser, the help text and the scripts see it.
struct OptionSpec: Sendable {
    let name: String
    var short: Character? = nil
    /// The value's placeholder for options that take one; nil for flags.
    var valueName: String? = nil
    let help: String
    /// What the value completes to; nil for free text (and for flags).
    var completion: CompletionKind? = nil
}

/// An option or argument whose words the parser checks in its validation phase.
protocol ChecksItsWords: Sendable {
    /// Nil when `text` is a value it takes (always, unless it says otherwise: a flag takes none, a bare spec any),
    /// else the usage error that refuses it.
    func refusal(of text: String) -> String?
}

extension ChecksItsWords {
    func refusal(of text: String) -> String? { nil }
}

/// What a command lists in its `options`: a ``Flag`` or an ``Option`` declared once as a value, which its run
/// function then reads back with ``Invocation``'s typed subscripts. A bare ``OptionSpec`` fits too (the fuzz
/// target's tree is made of them), but nothing can read it back but the parser.
protocol CommandOption: ChecksItsWords {
    var spec: OptionSpec { get }
}

extension CommandOption {
    /// Whether `text` is a value the option takes.
    func accepts(_ text: String) -> Bool { refusal(of: text) == nil }
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

    init(_ name: String, short: Character? = nil, help: String) {
        spec = OptionSpec(name: name, short: short, help: help)
    }
}

/// An option with a value, converted to `Value` when it is read: `invocation[limit]` is an `Int?`, nil when the
/// option was not given. A text that is not a value is refused by the parser before the command runs, with a
/// usage error naming the option and what it takes.
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
    /// The usage error for a text that is not a value, when it is not "--NAME takes EXPECTED, not 'TEXT'".
    var refusing: (@Sendable (String) -> String)? = nil

    init(
        _ name: String, valueName: String, help: String, completion: CompletionKind? = nil, expected: String,
        refusing: (@Sendable (String) -> String)? = nil, convert: @escaping @Sendable (String) -> Value?
    ) {
        spec = OptionSpec(name: name, valueName: valueName, help: help, completion: completion)
        self.expected = expected
        self.refusing = refusing
        self.convert = convert
    }

    func refusal(of text: String) -> String? {
        guard convert(text) == nil else { return nil }
        return refusing?(text) ?? "--\(spec.name) takes \(expected), not \(UsageError.quoted(text))"
    }
}

extension Option where Value == String {
    /// An option whose value is any text.
    init(_ name: String, valueName: String, help: String, completion: CompletionKind? = nil) {
        self.init(name, valueName: valueName, help: help, completion: completion, expected: "any text") { $0 }
    }

    /// An option whose value is one of `words`, which it completes to.
    static func oneOf(
        _ name: String, valueName: String, help: String, _ words: [String], refusing: (@Sendable (String) -> String)? = nil
    ) -> Self {
        Self(
            name, valueName: valueName, help: help, completion: .words(words),
            expected: "one of " + words.joined(separator: ", "), refusing: refusing
        ) { words.contains($0) ? $0 : nil }
    }
}

extension Option where Value: RawRepresentable, Value.RawValue == String {
    /// An option whose value is one of `cases`, by their raw values, which it completes to.
    static func oneOf(_ name: String, valueName: String, help: String, _ cases: [Value]) -> Self {
        let words = cases.map(\.rawValue)
        return Self(name, valueName: valueName, help: help, completion: .words(words), expected: "one of " + words.joined(separator: ", ")) {
            text in cases.first { $0.rawValue == text }
        }
    }
}

extension Option where Value == Int {
    /// An option whose value is a whole number of at least `minimum` (and at most `maximum`, when given).
    static func wholeNumber(_ name: String, valueName: String = "N", help: String, minimum: Int = 0, maximum: Int? = nil) -> Self {
        let expected = maximum.map { "a whole number from \(minimum) to \($0)" } ?? "a whole number of at least \(minimum)"
        return Self(name, valueName: valueName, help: help, expected: expected) { text in
            guard let number = Int(text), number >= minimum, number <= maximum ?? Int.max else { return nil }
            return number
        }
    }
}

/// A positional argument, as the parser, the help and the completion scripts see it.
struct ArgumentSpec: Sendable {
    let name: String
    let help: String
    var optional = false
    /// The last argument may take every remaining word (`tasks add Buy milk`).
    var variadic = false
    /// What the argument completes to; nil for free text.
    var completion: CompletionKind? = nil
}

/// What a command lists in its `arguments`: an ``Argument``, an ``OptionalArgument`` or a ``VariadicArgument``,
/// read back typed with ``Invocation``'s subscripts; a bare ``ArgumentSpec`` fits too (the fuzz target's tree).
protocol CommandArgument: ChecksItsWords {
    var spec: ArgumentSpec { get }
}

extension CommandArgument {
    var name: String { spec.name }
    var help: String { spec.help }
    var optional: Bool { spec.optional }
    var variadic: Bool { spec.variadic }
}

extension ArgumentSpec: CommandArgument {
    var spec: ArgumentSpec { self }
}

/// How the text of a positional argument becomes its value: `convert` gives nil for a text the argument does not
/// take, and `refusing` the usage error that says so ("ID must be a conflict number from 'securestore sync
/// conflicts'"). The parser checks every word before the command runs.
struct ArgumentValue<Value: Sendable>: Sendable {
    let convert: @Sendable (String) -> Value?
    let refusing: @Sendable (String) -> String
}

extension ArgumentValue where Value == String {
    /// Any text (the parser already refuses an empty one).
    static var text: Self { Self(convert: { $0 }, refusing: { _ in "" }) }
}

extension ArgumentValue where Value: RawRepresentable, Value.RawValue == String {
    /// One of `cases`, by their raw values, refused with `refusing`.
    static func oneOf(_ cases: [Value], refusing: @escaping @Sendable (String) -> String) -> Self {
        Self(convert: { text in cases.first { $0.rawValue == text } }, refusing: refusing)
    }
}

/// A positional argument declared once with its type, its completion and its check, read back typed. Its three
/// shapes: ``Argument`` (one word), ``OptionalArgument`` (one or none), ``VariadicArgument`` (every word left).
protocol TypedArgument: CommandArgument {
    associatedtype Value: Sendable
    var value: ArgumentValue<Value> { get }
    init(spec: ArgumentSpec, value: ArgumentValue<Value>)
    /// Whether the argument may be left out (an ``OptionalArgument``, a ``VariadicArgument`` made so).
    static var mayBeOmitted: Bool { get }
    /// Whether it takes every word left.
    static var takesTheRest: Bool { get }
}

extension TypedArgument {
    /// `name` in the usage line and the help, `help` beside it; `completion` in the shell scripts.
    init(_ name: String, help: String, completion: CompletionKind? = nil, value: ArgumentValue<Value>) {
        self.init(
            spec: ArgumentSpec(
                name: name, help: help, optional: Self.mayBeOmitted, variadic: Self.takesTheRest, completion: completion),
            value: value)
    }

    func refusal(of text: String) -> String? { value.convert(text) == nil ? value.refusing(text) : nil }

    /// Its words converted (the parser has checked each); a usage error naming it otherwise.
    func values(_ words: ArraySlice<String>, path: [String]) throws -> [Value] {
        try words.map { word in
            guard let converted = value.convert(word) else { throw UsageError(value.refusing(word), path: path) }
            return converted
        }
    }
}

extension TypedArgument where Value == String {
    /// An argument of any text.
    init(_ name: String, help: String, completion: CompletionKind? = nil) {
        self.init(name, help: help, completion: completion, value: .text)
    }
}

/// A positional argument the command needs: `invocation[id]` is its value.
///
/// ```swift
/// let id = Argument("ID", help: "The task's ID or a unique prefix of it.", completion: .asked(.taskIDs))
/// let task = try tasks.resolve(prefix: try invocation[id])
/// ```
struct Argument<Value: Sendable>: TypedArgument {
    let spec: ArgumentSpec
    let value: ArgumentValue<Value>
    static var mayBeOmitted: Bool { false }
    static var takesTheRest: Bool { false }
}

/// A positional argument that may be left out: `invocation[file]` is nil then.
struct OptionalArgument<Value: Sendable>: TypedArgument {
    let spec: ArgumentSpec
    let value: ArgumentValue<Value>
    static var mayBeOmitted: Bool { true }
    static var takesTheRest: Bool { false }
}

/// The last positional argument, taking every word left: `invocation[titleWords]` is an array, of at least one word
/// unless the argument was made ``allowingNone()`` (`tasks attach ID [FILE…]`).
struct VariadicArgument<Value: Sendable>: TypedArgument {
    let spec: ArgumentSpec
    let value: ArgumentValue<Value>
    static var mayBeOmitted: Bool { false }
    static var takesTheRest: Bool { true }

    /// Zero or more words instead of one or more.
    func allowingNone() -> Self {
        var spec = spec
        spec.optional = true
        return Self(spec: spec, value: value)
    }
}

/// One option or positional argument in an ``ArgumentRule``.
struct RuleItem: Sendable {
    let name: String
    let isArgument: Bool
    /// How a message names it: `--git`, `VALUE`.
    let label: String
    /// How a message asks for it: `--git URL`, `VALUE`.
    let wanted: String

    static func option(_ option: any CommandOption) -> Self {
        let label = "--" + option.spec.name
        return Self(name: option.spec.name, isArgument: false, label: label, wanted: label + (option.spec.valueName.map { " " + $0 } ?? ""))
    }

    static func argument(_ argument: any CommandArgument) -> Self {
        Self(name: argument.spec.name, isArgument: true, label: argument.spec.name, wanted: argument.spec.name)
    }
}

/// A rule between a command's options and arguments, declared with the command and checked by the parser after
/// parsing, before the command runs (swift-argument-parser's `validate()`): a broken rule is a usage error.
struct ArgumentRule: Sendable {
    enum Kind: Sendable {
        /// At most one of the items.
        case atMostOne
        /// Exactly one of the items (with one item: it is required).
        case exactlyOne
        /// The first item needs the second.
        case requires
    }

    let kind: Kind
    let items: [RuleItem]
    /// The message when more than one is given (`atMostOne`, `exactlyOne`) or the first lacks the second (`requires`).
    var message: String? = nil
    /// The message when none is given (`exactlyOne`).
    var missingMessage: String? = nil

    /// At most one of `options`: "--from and --format cannot be combined", "give at most one of --all, --done, --open
    /// (got --all --done)".
    static func exclusive(_ options: [any CommandOption], message: String? = nil) -> Self {
        Self(kind: .atMostOne, items: options.map(RuleItem.option), message: message)
    }

    /// Exactly one of `items`: "give one of --git URL and --folder PATH" when none is given, and as ``exclusive(_:message:)``
    /// when more than one is.
    static func exactlyOne(_ items: [RuleItem], missing: String? = nil, tooMany: String? = nil) -> Self {
        Self(kind: .exactlyOne, items: items, message: tooMany, missingMessage: missing)
    }

    /// `option` must be given: "give --before DATE" unless `message` says otherwise.
    static func required(_ option: any CommandOption, message: String? = nil) -> Self {
        Self(kind: .exactlyOne, items: [.option(option)], missingMessage: message)
    }

    /// `option` needs `other`: "--json needs --output FILE" unless `message` says otherwise.
    static func requires(_ option: any CommandOption, _ other: any CommandOption, message: String? = nil) -> Self {
        Self(kind: .requires, items: [.option(option), .option(other)], message: message)
    }

    /// The usage error's message when the items given (`isGiven`) break the rule, else nil.
    func violation(_ isGiven: (RuleItem) -> Bool) -> String? {
        let given = items.filter(isGiven)
        switch kind {
        case .atMostOne, .exactlyOne:
            if given.count > 1 {
                return message
                    ?? (items.count == 2
                        ? "\(items[0].label) and \(items[1].label) cannot be combined"
                        : "give at most one of \(items.map(\.label).joined(separator: ", ")) (got \(given.map(\.label).joined(separator: " ")))")
            }
            if kind == .exactlyOne && given.isEmpty {
                let wanted = items.map(\.wanted)
                return missingMessage
                    ?? "give " + (wanted.count == 1 ? wanted[0] : "one of \(wanted.dropLast().joined(separator: ", ")) and \(wanted[wanted.count - 1])")
            }
            return nil
        case .requires:
            guard items.count == 2, isGiven(items[0]), !isGiven(items[1]) else { return nil }
            return message ?? "\(items[0].label) needs \(items[1].wanted)"
        }
    }
}
