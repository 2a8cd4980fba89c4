// libFuzzer entry point for the command-line parser.
//
// run-fuzz.sh compiles this file together with Sources/SecureStoreCommands/ArgumentSpecs.swift and ArgumentParser.swift only (pure Swift,
// standard library). The input is split on NUL bytes into arguments (each decoded as UTF-8 with repair,
// as a shell could never pass a NUL inside an argument) and parsed against a representative command
// tree. Properties checked (a violation traps, and libFuzzer saves the input):
//   1. parsing never crashes and throws nothing but UsageError;
//   2. .run: the path names a runnable command of the tree and the parser hands back that command;
//      the positional count lies between the required and the declared arguments and none is empty;
//      every flag is a declared flag of that command, every value a declared option with a value;
//   3. .help: the path names a command of the tree; .version: only at the root, when --version was given;
//   4. a UsageError names a path of the tree and a message that is one line of printable text (the tool
//      prints it as one line on stderr, so an argument it quotes must not bring a newline or a terminal
//      escape with it);
//   5. help and usage are produced for every path the parser returns (success or error), and name it.

private let run: @Sendable (Invocation) throws -> Int32 = { _ in 0 }

/// A tree shaped like the real one, with every feature the parser has: nested subcommands three deep,
/// a command that runs and has subcommands, flags, options with values, short options, optional
/// arguments, options that shadow nothing and options named like global ones.
let fuzzRoot = Command(
    name: "securestore", abstract: "fuzz tree.",
    subcommands: [
        Command(
            name: "token", abstract: "Tokens.",
            subcommands: [
                Command(
                    name: "set", abstract: "Set.", arguments: [ArgumentSpec(name: "NAME", help: "n")],
                    options: [
                        OptionSpec(name: "raw", short: "r", help: "keep newline"),
                        OptionSpec(name: "label", short: "l", valueName: "TEXT", help: "label"),
                    ], run: run),
                Command(name: "get", abstract: "Get.", arguments: [ArgumentSpec(name: "NAME", help: "n")], run: run),
                Command(
                    name: "list", abstract: "List.",
                    options: [OptionSpec(name: "limit", short: "n", valueName: "N", help: "at most N")], run: run),
                Command(
                    name: "copy", abstract: "Copy.",
                    arguments: [
                        ArgumentSpec(name: "SOURCE", help: "s"),
                        ArgumentSpec(name: "DEST", help: "d", optional: true),
                    ], run: run),
            ]),
        Command(
            name: "prefs", abstract: "Preferences.",
            subcommands: [
                Command(
                    name: "set", abstract: "Set.",
                    arguments: [ArgumentSpec(name: "KEY", help: "k"), ArgumentSpec(name: "VALUE", help: "v")],
                    options: [
                        OptionSpec(name: "int", help: "int"), OptionSpec(name: "bool", help: "bool"),
                        OptionSpec(name: "date", help: "date"), OptionSpec(name: "data", help: "data"),
                    ], run: run),
                Command(name: "list", abstract: "List.", run: run),
                Command(
                    name: "domain", abstract: "Domains.",
                    subcommands: [
                        Command(
                            name: "list", abstract: "List domains.",
                            options: [OptionSpec(name: "all", short: "a", help: "all")], run: run),
                        Command(
                            name: "rename", abstract: "Rename.",
                            arguments: [ArgumentSpec(name: "OLD", help: "o"), ArgumentSpec(name: "NEW", help: "n")],
                            run: run),
                    ]),
            ]),
        Command(
            name: "db", abstract: "Database: runs by itself, or a subcommand.",
            options: [OptionSpec(name: "verbose", short: "v", help: "more")],
            subcommands: [
                Command(
                    name: "rotate", abstract: "Rotate.",
                    options: [OptionSpec(name: "iterations", valueName: "N", help: "n")], run: run),
            ], run: run),
        Command(
            name: "git-credential", abstract: "Helper.",
            arguments: [ArgumentSpec(name: "OPERATION", help: "op", optional: true)], run: run),
        Command(
            name: "all-optional", abstract: "Only optional arguments.",
            arguments: [ArgumentSpec(name: "A", help: "a", optional: true), ArgumentSpec(name: "B", help: "b", optional: true)],
            run: run),
    ])

let fuzzParser = Parser(root: fuzzRoot)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = count == 0 ? [] : Array(UnsafeRawBufferPointer(start: start, count: count))
    let arguments = count == 0 ? [] : bytes.split(separator: 0, omittingEmptySubsequences: false).map {
        String(decoding: $0, as: UTF8.self)
    }
    checkArguments(arguments)
    return 0
}

/// The command at `path`, walking strictly: nil when a name is not a subcommand.
func resolve(_ path: [String]) -> Command? {
    var command = fuzzRoot
    for name in path {
        guard let next = command.subcommand(named: name) else { return nil }
        command = next
    }
    return command
}

func checkArguments(_ arguments: [String]) {
    let outcome: Result<ParseResult, UsageError>
    do {
        outcome = .success(try fuzzParser.parse(arguments))
    } catch let error as UsageError {
        outcome = .failure(error)
    } catch {
        fatalError("parse threw \(type(of: error)), not a UsageError")
    }

    let path: [String]
    switch outcome {
    case .success(.run(let command, let invocation)):
        path = invocation.path
        guard let resolved = resolve(path) else { fatalError(".run with a path outside the tree: \(path)") }
        guard resolved.name == command.name, command.run != nil else {
            fatalError(".run of \(command.name) for the path \(path)")
        }
        let declared = command.arguments.count
        let required = command.arguments.filter { !$0.optional }.count
        guard invocation.arguments.count >= required, invocation.arguments.count <= declared else {
            fatalError(".run with \(invocation.arguments.count) arguments; \(path) takes \(required)...\(declared)")
        }
        guard !invocation.arguments.contains(where: \.isEmpty) else { fatalError(".run with an empty argument") }
        for flag in invocation.flags {
            guard command.options.contains(where: { $0.name == flag && $0.valueName == nil }) else {
                fatalError(".run with the flag \(flag), not a flag of \(path)")
            }
        }
        for name in invocation.values.keys {
            guard command.options.contains(where: { $0.name == name && $0.valueName != nil }) else {
                fatalError(".run with a value for \(name), not an option of \(path)")
            }
        }
    case .success(.help(let helpPath)):
        path = helpPath
        guard resolve(path) != nil else { fatalError(".help with a path outside the tree: \(path)") }
    case .success(.version):
        path = []
        guard arguments.contains("--version") || arguments.contains(where: { $0.hasPrefix("--version=") }) else {
            fatalError(".version without --version")
        }
    case .failure(let error):
        path = error.path
        guard resolve(path) != nil else { fatalError("UsageError with a path outside the tree: \(path)") }
        guard !error.message.isEmpty else { fatalError("UsageError with an empty message") }
        if let bad = error.message.unicodeScalars.first(where: isUnprintable) {
            fatalError("UsageError message with the unprintable U+\(String(bad.value, radix: 16, uppercase: true))")
        }
    }

    // Help and usage for the path, as the tool prints them.
    let usage = fuzzParser.usage(path)
    guard usage.hasPrefix((["usage: securestore"] + path).joined(separator: " ")) else {
        fatalError("usage for \(path) does not name it: \(usage)")
    }
    let help = fuzzParser.help(path)
    guard help.contains(usage + "\n"), help.hasSuffix("\n") else { fatalError("help for \(path) lacks its usage") }
}

/// A scalar that must not reach a terminal raw: controls (C0, DEL, C1), format characters (bidi
/// overrides, zero-width), and line or paragraph separators.
/// Core's terminal rule (`isTerminalControl`, TerminalText.swift): controls, separators and format characters but
/// the zero-width joiner and non-joiner, which emoji sequences and several scripts need and which move nothing.
func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
    if scalar.value == 0x200C || scalar.value == 0x200D { return false }
    return switch scalar.properties.generalCategory {
    case .control, .format, .lineSeparator, .paragraphSeparator: true
    default: false
    }
}
