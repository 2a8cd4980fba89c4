internal import Foundation
internal import Keychain
internal import PreferenceSecrets
internal import Preferences
internal import SecureStore
internal import SecureStoreCore

/// `securestore prefs …`: the application's size-limited preferences.
let prefsCommand = Command(
    name: "prefs", abstract: "Read, write and audit preferences (small settings, size-limited).",
    subcommands: [
        Command(
            name: "get", abstract: "Print a preference's value.",
            arguments: [keyArgument],
            run: { invocation in
                let key = try invocation[keyArgument]
                let preferences = try openPreferences(invocation, create: false)
                guard let value = preferences.value(forKey: key) else {
                    throw CLIError(status: ExitStatus.notFound, message: "no preference \(UsageError.quoted(key))")
                }
                if invocation.global.json {
                    try Console.json(PreferenceJSON(key: key, type: value.typeName, value: PreferenceValueJSON(value)))
                } else {
                    // Raw for scripts (`$(securestore prefs get KEY)`); escaped when a terminal shows it.
                    Console.out((Console.stdoutIsTerminal ? escapedForTerminal(render(value)) : render(value)) + "\n")
                }
                return ExitStatus.success
            }),
        Command(
            name: "set", abstract: "Set a preference (a string unless a type option is given).",
            discussion: """
                A value that `prefs audit` would flag as a secret (a token prefix, a private key, a password
                under a password-like key…) is refused, naming the rule and never the value: store secrets with
                `securestore token set NAME`, or move one with `securestore prefs move-to-keychain KEY`.
                --force stores it anyway. --stdin reads VALUE from standard input (one trailing newline
                removed), so that it appears in no argument list or shell history.
                """,
            arguments: [keyArgument, valueArgument],
            options: ValueType.allCases.map(\.flag) + [stdinFlag, forceSetFlag],
            rules: [
                .exactlyOne(
                    [.argument(valueArgument), .option(stdinFlag)],
                    missing: "missing VALUE (or --stdin to read it from standard input)",
                    tooMany: "give VALUE or --stdin, not both"),
                .exclusive(ValueType.allCases.map(\.flag)),
            ],
            run: { invocation in
                let key = try invocation[keyArgument]
                // VALUE or --stdin: exactly one (a rule of the command).
                let text = try invocation[valueArgument] ?? readValueFromStandardInput()
                let value = try parseValue(text, invocation, echoes: !invocation[stdinFlag])
                if !invocation[forceSetFlag] {
                    let findings = PreferencesAudit.run(
                        values: [key: value], limits: PreferencesLimits(), path: "").secrets
                    if let finding = findings.first {
                        throw CLIError(
                            status: ExitStatus.dataError,
                            message: "refusing to store preference \(UsageError.quoted(key)): its value looks like a "
                                + "secret (\(finding.rule.summary) [\(finding.rule.id)]); nothing was changed",
                            hint: "keep secrets in the key store (keyring or key file): `securestore token set NAME` reads one from standard "
                                + "input, `securestore prefs move-to-keychain KEY` moves a stored one; --force stores "
                                + "it here anyway")
                    }
                }
                let preferences = try openPreferences(invocation)
                if let warning = try preferences.set(value, forKey: key) {
                    Console.err("securestore: warning: \(warning)\n")
                }
                if invocation.global.json {
                    try Console.json(PreferenceStoredJSON(key: key, type: value.typeName))
                }
                return ExitStatus.success
            }),
        Command(
            name: "delete", abstract: "Remove a preference.",
            arguments: [keyArgument],
            run: { invocation in
                let key = try invocation[keyArgument]
                let preferences = try openPreferences(invocation)
                guard try preferences.remove(key) else {
                    throw CLIError(status: ExitStatus.notFound, message: "no preference \(UsageError.quoted(key))")
                }
                if invocation.global.json { try Console.json(PreferenceDeletedJSON(key: key)) }
                return ExitStatus.success
            }),
        Command(
            name: "list", abstract: "List preferences with their types and values.",
            run: { invocation in
                let preferences = try openPreferences(invocation, create: false)
                let values = preferences.storedValues
                if invocation.global.json {
                    // An array of what `prefs get` prints, in the code-point order of the keys (as every object's
                    // keys): a key is data, never a property name.
                    try Console.json(
                        values.keys.sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }.compactMap { key in
                            values[key].map { PreferenceJSON(key: key, type: $0.typeName, value: PreferenceValueJSON($0)) }
                        })
                } else {
                    for key in values.keys.sorted() {
                        guard let value = values[key] else { continue }
                        // One key, one line: controls, bidi overrides and newlines in keys and values are escaped.
                        Console.out(
                            "\(escapedForTerminal(key)) (\(value.typeName)) = \(escapedForTerminal(render(value)))\n")
                    }
                }
                return ExitStatus.success
            }),
        Command(
            name: "audit",
            abstract: "Report sizes against the limits and values that look like secrets; exit 1 on a problem.",
            run: { invocation in
                let preferences = try openPreferences(invocation, create: false)
                let report = preferences.audit()
                Console.out(invocation.global.json ? report.renderJSON() + "\n" : report.renderText())
                return report.shouldFail ? ExitStatus.checkFailed : ExitStatus.success
            }),
        Command(
            name: "move-to-keychain",
            abstract: "Move a string preference into the keyring as a token, then remove it from preferences.",
            discussion: """
                The keyring write is verified (read back and compared) before the preference is removed,
                so the value is never lost: at worst it is in both places.
                """,
            arguments: [keyArgument, tokenNameArgument],
            run: { invocation in
                let key = try invocation[keyArgument]
                let name = try invocation[tokenNameArgument] ?? key
                let context = try Context(invocation)
                let preferences = try openPreferences(invocation)
                try PreferenceSecretMover(preferences: preferences, keychain: context.keychain, service: context.paths.tokenService)
                    .move(key: key, toAccount: name)
                if invocation.global.json { try Console.json(PreferenceMovedJSON(key: key, token: name)) }
                Console.err("moved preference \(UsageError.quoted(key)) to \(context.keychain.configuration.store) as token \(UsageError.quoted(name))\n")
                return ExitStatus.success
            }),
        Command(
            name: "reset", abstract: "Move a damaged preferences file aside (timestamped) and start fresh.",
            discussion: """
                A damaged file is moved aside at once. A healthy one is moved aside only after a yes on a
                terminal, or with --force; otherwise nothing is changed and the exit status is 65.
                """,
            options: [forceResetFlag],
            run: { invocation in
                let context = try Context(invocation)
                let location = try PreferencesLocation(directory: context.paths.configDirectory)
                if !invocation[forceResetFlag], fileExists(location.fileURL.path, followingLinks: true),
                    let healthy = try? Preferences(location: location)
                {
                    let count = healthy.storedValues.count
                    let what = "the preferences file '\(location.fileURL.path)' is not damaged (\(count) "
                        + (count == 1 ? "key" : "keys") + ")"
                    guard Console.stdinIsTerminal, Console.stderrIsTerminal else {
                        throw CLIError(
                            status: ExitStatus.dataError, message: "\(what); nothing was changed",
                            hint: "--force moves it aside anyway")
                    }
                    Console.err("\(what). Move it aside and start fresh? [y/N] ")
                    let answer = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased()
                    guard answer == "y" || answer == "yes" else {
                        throw CLIError(status: ExitStatus.dataError, message: "not reset; nothing was changed")
                    }
                }
                let moved = try Preferences.reset(location)
                if invocation.global.json {
                    try Console.json(PreferencesResetJSON(path: location.fileURL.path, movedTo: moved?.path))
                }
                if let moved {
                    Console.err("moved \(location.fileURL.path) to \(moved.path)\n")
                }
                return ExitStatus.success
            }),
        prefsExportCommand,
        prefsImportCommand
    ])

/// `KEY`: a preference's key; completed to the stored keys (never a value).
private let keyArgument = Argument("KEY", help: "The preference's key.", completion: .asked(.preferenceKeys))
private let valueArgument = OptionalArgument("VALUE", help: "The value, read according to the type option (not with --stdin).")
private let tokenNameArgument = OptionalArgument("NAME", help: "The token name to store it under (default: KEY).")
private let stdinFlag = Flag("stdin", help: "Read VALUE from standard input (one trailing newline removed).")
private let forceSetFlag = Flag("force", help: "Store a value even if it looks like a secret.")
private let forceResetFlag = Flag("force", help: "Reset a file that is not damaged, without asking.")

/// The value of `prefs set --stdin`: all of standard input, one trailing newline removed, UTF-8.
private func readValueFromStandardInput() throws -> String {
    // Far above any preference limit: the preferences refuse what is over theirs, with the usual message.
    let cap = 4 << 20
    var data = Data()
    while data.count <= cap {
        let chunk = FileHandle.standardInput.readData(ofLength: 64 << 10)
        if chunk.isEmpty { break }
        data.append(chunk)
    }
    guard data.count <= cap else {
        throw CLIError(status: ExitStatus.dataError, message: "standard input is more than 4 MiB; nothing was changed")
    }
    if data.last == UInt8(ascii: "\n") {
        data.removeLast()
        if data.last == UInt8(ascii: "\r") { data.removeLast() }
    }
    guard let text = String(data: data, encoding: .utf8) else {
        throw CLIError(status: ExitStatus.dataError, message: "standard input is not UTF-8; nothing was changed")
    }
    return text
}

/// Opens the preferences of an invocation. Commands that only read (`create: false`) on an application
/// that has no preferences file create nothing — no file, no directory — and exit 66 with a hint.
private func openPreferences(_ invocation: Invocation, create: Bool = true) throws -> Preferences {
    let context = try Context(invocation)
    let location = try PreferencesLocation(directory: context.paths.configDirectory)
    if !create, !fileExists(location.fileURL.path, followingLinks: true) {
        throw CLIError(
            status: ExitStatus.notFound,
            message: "there are no preferences for application '\(context.paths.app)' (no file '\(location.fileURL.path)')",
            hint: "check --app; 'securestore prefs set KEY VALUE' creates them")
    }
    return try Preferences(location: location)
}

/// The type options of `prefs set`: at most one, `string` when none is given.
private enum ValueType: String, CaseIterable {
    case string, int, double, bool, date, data

    var flag: Flag {
        switch self {
        case .string: Flag("string", help: "VALUE is a string (the default).")
        case .int: Flag("int", help: "VALUE is an integer.")
        case .double: Flag("double", help: "VALUE is a floating-point number.")
        case .bool: Flag("bool", help: "VALUE is true or false (also yes/no, 1/0).")
        case .date: Flag("date", help: "VALUE is a date: 2026-11-21 (midnight UTC) or 2026-11-21T10:00:00Z.")
        case .data: Flag("data", help: "VALUE is base64-encoded bytes.")
        }
    }
}

/// `text` as the type its option names (at most one: a rule of `prefs set`), `string` when none is given.
private func parseValue(_ text: String, _ invocation: Invocation, echoes: Bool = true) throws -> PreferenceValue {
    func bad(_ type: String) -> UsageError {
        // A value read from standard input is never repeated: it may be a secret.
        UsageError(
            echoes ? "VALUE is not \(type): \(UsageError.quoted(String(text.prefix(40))))" : "VALUE is not \(type)",
            path: invocation.path)
    }
    switch ValueType.allCases.first(where: { invocation[$0.flag] }) ?? .string {
    case .int:
        guard let value = Int(text) else { throw bad("an integer") }
        return .int(value)
    case .double:
        guard let value = Double(text), value.isFinite else { throw bad("a finite number") }
        return .double(value)
    case .bool:
        switch text.lowercased() {
        case "true", "yes", "1", "on": return .bool(true)
        case "false", "no", "0", "off": return .bool(false)
        default: throw bad("true or false")
        }
    case .date:
        // The same grammar as every date option (`db keys prune --before`).
        guard let value = parseDate(text) else { throw bad(dateGrammar) }
        return .date(value)
    case .data:
        guard let value = Data(base64Encoded: text) else { throw bad("base64") }
        return .data(value)
    case .string:
        return .string(text)
    }
}

/// The encoder of arrays and dictionaries in text output (not `--json`, whose encoder is Console's): slashes
/// escaped, as this text has always shown them.
private let textEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()

/// A value as one line of text.
private func render(_ value: PreferenceValue) -> String {
    switch value {
    case .string(let string): return string
    case .bool(let bool): return bool ? "true" : "false"
    case .int(let int): return String(int)
    case .double(let double): return String(double)
    case .date(let date): return timestampTextInSeconds(date)
    case .data(let data): return data.base64EncodedString()
    case .array, .dictionary:
        let data = (try? textEncoder.encode(PreferenceValueJSON(value))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
